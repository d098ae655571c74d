"""EngramStore search: from the nearest vectors against reading every item.

Run from the repository root (needs the ``langgraph`` extra)::

    PYTHONPATH=core:drivers python -m bench.langgraph_search

For 100, 1,000 and 10,000 items (unique texts, ``HashEmbedder(256)``, ``SqliteStore`` in
a temporary file) it times ``search(("acme",), query=..., limit=10)`` as it runs, then
with the full ranking forced (every item under the prefix read), medians of 7 runs.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from langgraph.store.base import PutOp

from engramdb import HashEmbedder
from engramdb.langgraph import EngramStore, _batch
from engramdb.sqlite import SqliteStore

WORDS = "deploy window lunch order cello budget review train paris berlin meeting notes"
RARE = [f"w{j}" for j in range(3000)]


def median_ms(call: Callable[[], object], runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


@contextmanager
def full_ranking() -> Iterator[None]:
    """Make every search read every item under its prefix."""
    original = _batch._top_scored
    _batch._top_scored = lambda *args: (yield from ()) or None  # type: ignore[assignment]
    try:
        yield
    finally:
        _batch._top_scored = original


def main() -> None:
    rng = random.Random(1)
    print("| items under the prefix | from the nearest vectors | reading every item | ratio |")
    print("|---|---|---|---|")
    for n in (100, 1000, 10000):
        with tempfile.TemporaryDirectory() as scratch:
            index = {"embed": HashEmbedder(256), "fields": ["text"]}
            store = EngramStore(SqliteStore(Path(scratch) / "m.db"), index=index)
            for start in range(0, n, 500):
                store.batch(
                    [
                        PutOp(
                            ("acme", "notes"),
                            f"k{i}",
                            {
                                "text": f"{' '.join(rng.sample(WORDS.split(), 5))} item {i} "
                                + " ".join(rng.sample(RARE, 3))
                            },
                        )
                        for i in range(start, min(n, start + 500))
                    ]
                )

            search = partial(store.search, ("acme",), query="deploy window meeting", limit=10)
            fast = median_ms(search)
            with full_ranking():
                full = median_ms(search)
            store.store.close()
        print(f"| {n:,} | {fast:.1f} ms | {full:.1f} ms | {full / fast:.1f} |")


if __name__ == "__main__":
    main()
