"""Where an ingest's CPU goes, and what it could reach with its SQL free: a bound for
issue 50's ingest goal.

``bench.versus``'s ingest (``remember_many`` of 10,000 texts with its defaults,
``HashEmbedder``, a new SQLite file) with timers around the ``sqlite3`` driver's
statements and around the embedder, against the peer's ``remember_many`` of the same
texts, alternately, in one process (CPU time, medians over rounds). What is left of
engramdb's time once the SQL is taken out (checks, redaction, ids, token counts, the
vectors' index data, the plans' JSON, the flow) is paid whatever the storage does, so
the peer's time over it bounds the ratio any storage change could reach.

    PYTHONPATH=core:drivers python -m bench.ingest_floor            # 10,000 texts, 3 rounds
    PYTHONPATH=core:drivers python -m bench.ingest_floor --texts 2000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import engramdb.sqlite as sqlite_driver
from bench.memory import SCOPE, corpus
from bench.peer import Peer
from bench.versus import PEER_SCOPE
from engramdb import HashEmbedder, Memory
from engramdb.sqlite import SqliteStore


@contextmanager
def timed(owner: Any, name: str, spent: list[float]) -> Iterator[None]:
    """``owner.name`` (a function of a module or a class) timed into ``spent[0]`` (CPU
    seconds) for the block."""
    inner: Callable[..., Any] = getattr(owner, name)

    def timer(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.process_time() - start

    setattr(owner, name, timer)
    try:
        yield
    finally:
        setattr(owner, name, inner)


def engramdb_run(directory: Path, items: Sequence[dict[str, Any]]) -> dict[str, float]:
    """One ``remember_many`` into a new file: its CPU seconds, in all and by part."""
    sql, embedding = [0.0], [0.0]
    path = directory / "engramdb.db"
    embedder = HashEmbedder()
    with (
        Memory(SqliteStore(path), embedder) as memory,
        timed(sqlite_driver, "_execute", sql),
        timed(HashEmbedder, "embed", embedding),
    ):
        start = time.process_time()
        memory.remember_many(items)
        total = time.process_time() - start
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return {"total": total, "sql": sql[0], "embedder": embedding[0]}


def peer_run(directory: Path, texts: Sequence[str]) -> float:
    path = directory / "peer.db"
    peer = Peer(str(path), HashEmbedder())
    start = time.process_time()
    peer.remember_many(texts, PEER_SCOPE)
    spent = time.process_time() - start
    peer.close()
    path.unlink()
    return spent


def measure(n: int, rounds: int) -> list[dict[str, float]]:
    texts = corpus(n, seed=11)
    items = [{"text": t, "scope": SCOPE} for t in texts]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for round_ in range(1, rounds + 1):
            if round_ % 2:  # who goes first alternates
                mine, peer = engramdb_run(directory, items), peer_run(directory, texts)
            else:
                peer, mine = peer_run(directory, texts), engramdb_run(directory, items)
            rest = mine["total"] - mine["sql"]
            rows.append({**mine, "peer": peer, "ratio": peer / mine["total"], "bound": peer / rest})
            print(
                f"  round {round_}: engramdb {mine['total']:.3f} s (SQL {mine['sql']:.3f}, "
                f"embedder {mine['embedder']:.3f}, the rest {rest - mine['embedder']:.3f}), "
                f"peer {peer:.3f} s: {rows[-1]['ratio']:.3f}x the peer's items per "
                f"CPU-second; with the SQL free {rows[-1]['bound']:.3f}x",
                flush=True,
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_floor", description=__doc__)
    parser.add_argument("--texts", type=int, default=10_000, help="texts ingested")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side")
    args = parser.parse_args(argv)
    rows = measure(args.texts, args.rounds)
    median = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
    print(
        f"median: engramdb {median['total']:.3f} s, SQL {median['sql']:.3f} s, embedder "
        f"{median['embedder']:.3f} s, peer {median['peer']:.3f} s; {median['ratio']:.3f}x "
        f"the peer, {median['bound']:.3f}x with the SQL free"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
