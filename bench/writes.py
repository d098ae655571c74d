"""SQLite write-path choices, measured on the real schema: the figures behind the dialect.

Run from the repository root::

    PYTHONPATH=core python -m bench.writes

Each line is the median of 7 runs into a fresh WAL file with the current migrations, in
one transaction, commit excluded:

* 10,000 item rows (the bench.memory corpus) through the FTS5 trigger, one INSERT per row
  (``executemany``) against the dialect's JSON upsert with payloads of 256 and 4,096
  rows, the JSON upsert without the FTS5 trigger, and the whole plan of 10,000
  ``PutItem`` ops (guards, history, upserts, scope paths: what ``SqliteStore`` runs);
* 10,000 vectors (256 dimensions, with their derived index data) in arrival order
  against hash (primary-key) order.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from engramdb._base.types import EmbeddingSpace, MemoryRecord
from engramdb._embedders.hash_embedder import HashEmbedder
from engramdb._lexical.bm25 import token_count
from engramdb._vectors.index import unit_f32
from engramdb.store import PutItem, PutVector, RegisterSpace
from engramdb.store._sqlite.rows import Statement, live
from engramdb.store._sqlite.schema import MIGRATIONS
from engramdb.store._sqlite.writes import _upsert, put_items, put_vectors, register_space
from engramdb.store.rows import ITEM_COLUMNS

NOW = datetime(2026, 1, 1, tzinfo=UTC)
_PUT_ITEMS = _upsert(live(NOW))
_STORED = (*ITEM_COLUMNS, "tokens")  # the item row and its token count, as the plans write
_ITEM_INSERT = f"INSERT INTO items ({', '.join(_STORED)}) VALUES ({', '.join('?' * len(_STORED))})"


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
            conn.execute(_PUT_ITEMS, (payload,)).fetchall()

    return work


def _statements(statements: list[Statement]) -> Callable[[sqlite3.Connection], None]:
    def work(conn: sqlite3.Connection) -> None:
        for statement in statements:
            conn.execute(statement.sql, statement.params).fetchall()

    return work


def _vector_rows(
    statements: list[Statement], space: EmbeddingSpace
) -> Callable[[sqlite3.Connection], None]:
    guard, *inserts = statements  # the driver runs a run of inserts as one executemany
    ((register,), _) = register_space(RegisterSpace(space, NOW))  # the guard needs it

    def work(conn: sqlite3.Connection) -> None:
        conn.execute(register.sql, register.params)
        conn.execute(guard.sql, guard.params)
        conn.executemany(inserts[0].sql, [s.params for s in inserts])

    return work


def main() -> int:
    print(f"# SQLite {sqlite3.sqlite_version}, 10,000 rows, median of 7, commit excluded")
    rows: list[list[object]] = [
        [f"id{i:024d}", '["bench","user","u1"]', text, "{}", "{}", 0.5, 1, 1, None, 1,
         hashlib.sha256(text.encode()).hexdigest(), token_count(text)]
        for i, text in enumerate(_texts(10_000))
    ]  # fmt: skip
    per_row = _median_ms(lambda conn: conn.executemany(_ITEM_INSERT, rows) and None)
    print(f"items, one INSERT per row:          {per_row:7.1f} ms")
    for per in (256, 4096):
        print(f"items, JSON statement, {per:>4} rows:  {_median_ms(_json_rows(rows, per)):7.1f} ms")
    no_fts = _median_ms(_json_rows(rows, 4096), fts=False)
    print(f"items, JSON statement, no FTS5:     {no_fts:7.1f} ms")
    puts = [
        PutItem(
            MemoryRecord(
                id=str(row[0]), scope=("bench", "user", "u1"), text=str(row[2]),
                created_at=NOW, updated_at=NOW, content_sha256=str(row[10]),
            ),
            NOW,
        )
        for row in rows
    ]  # fmt: skip
    plan, _ = put_items(puts)
    print(f"items, the whole PutItem plan:      {_median_ms(_statements(plan)):7.1f} ms")
    embedder = HashEmbedder(dimensions=256)
    texts = [str(row[2]) for row in rows]
    blobs = [
        unit_f32(v) for i in range(0, len(texts), 256) for v in embedder.embed(texts[i : i + 256])
    ]
    vectors = [
        PutVector(embedder.space.id, str(row[10]), blob, NOW)
        for row, blob in zip(rows, blobs, strict=True)
    ]
    arrival = _median_ms(_vector_rows(put_vectors(vectors)[0], embedder.space))
    ordered = sorted(vectors, key=lambda v: v.content_sha256)
    in_key = _median_ms(_vector_rows(put_vectors(ordered)[0], embedder.space))
    print(f"vectors, arrival order:             {arrival:7.1f} ms")
    print(f"vectors, hash (primary-key) order:  {in_key:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
