"""SQLite write-path choices, measured on the real schema: the figures behind the dialect.

Run from the repository root::

    PYTHONPATH=core python -m bench.writes

Each line is the median of 7 runs into a fresh WAL file with the current migrations, in
one transaction, commit excluded:

* 10,000 item rows (the bench.memory corpus) through the FTS5 trigger, one INSERT per row
  (``executemany``) against the dialect's JSON statement (``_PUT_ITEMS``) with payloads
  of 256 and 4,096 rows, and the JSON statement without the FTS5 trigger;
* 10,000 vectors (1 KiB blobs) in arrival order against hash (primary-key) order.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from engramdb._sqlite_dialect import _PUT_ITEMS, _PUT_VECTOR, MIGRATIONS

_ITEM_INSERT = _PUT_ITEMS.split(" SELECT ")[0] + " VALUES (" + ", ".join("?" * 11) + ")"


def _texts(n: int) -> list[str]:
    rng = random.Random(11)
    words = [
        "".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 9))) for _ in range(3000)
    ]
    return [
        f"{i} " + " ".join(rng.choice(words) for _ in range(rng.randint(8, 14))) for i in range(n)
    ]


def _timed(work: Callable[[sqlite3.Connection], None], *, fts: bool = True) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "w.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        for step in MIGRATIONS:
            for sql in step.statements:
                if fts or not sql.startswith("CREATE TRIGGER items_after_insert"):
                    conn.execute(sql)
        conn.execute("BEGIN")
        start = time.perf_counter()
        work(conn)
        elapsed = time.perf_counter() - start
        conn.execute("COMMIT")
        conn.close()
    return elapsed


def _median_ms(work: Callable[[sqlite3.Connection], None], *, fts: bool = True) -> float:
    return statistics.median(_timed(work, fts=fts) for _ in range(7)) * 1000


def _json_rows(rows: Sequence[list[object]], per: int) -> Callable[[sqlite3.Connection], None]:
    payloads = [json.dumps(rows[i : i + per]) for i in range(0, len(rows), per)]

    def work(conn: sqlite3.Connection) -> None:
        for payload in payloads:
            conn.execute(_PUT_ITEMS, (payload,))

    return work


def main() -> int:
    print(f"# SQLite {sqlite3.sqlite_version}, 10,000 rows, median of 7, commit excluded")
    rows: list[list[object]] = [
        [f"id{i:024d}", '["bench","user","u1"]', text, "{}", "{}", 0.5, 1, 1, None, 1,
         hashlib.sha256(text.encode()).hexdigest()]
        for i, text in enumerate(_texts(10_000))
    ]  # fmt: skip
    per_row = _median_ms(lambda conn: conn.executemany(_ITEM_INSERT, rows) and None)
    print(f"items, one INSERT per row:          {per_row:7.1f} ms")
    for per in (256, 4096):
        print(f"items, JSON statement, {per:>4} rows:  {_median_ms(_json_rows(rows, per)):7.1f} ms")
    no_fts = _median_ms(_json_rows(rows, 4096), fts=False)
    print(f"items, JSON statement, no FTS5:     {no_fts:7.1f} ms")
    vectors = [("hash/bow@256", row[10], 256, 1, os.urandom(1024)) for row in rows]
    arrival = _median_ms(lambda conn: conn.executemany(_PUT_VECTOR, vectors) and None)
    ordered = sorted(vectors, key=lambda v: v[1])
    in_key = _median_ms(lambda conn: conn.executemany(_PUT_VECTOR, ordered) and None)
    print(f"vectors, arrival order:             {arrival:7.1f} ms")
    print(f"vectors, hash (primary-key) order:  {in_key:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
