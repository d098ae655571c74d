"""What a warm hybrid recall of a small scope spends per candidate, and what it spends
whatever the candidates: a bound for issue 50's small-scope goals.

A hybrid recall fuses each leg's first ``DEPTH`` (100) candidates: the store reads and
decodes their records, fusion scales, scores and orders them. This runs
``bench.versus``'s warm hybrid recall (its data, embedder, scope and queries) with the
ranking's ``DEPTH`` as shipped and cut to 10, and the peer's hybrid search, interleaved
query by query in one process (CPU time, medians, ratios to the peer measured in the
same run). Cutting ``DEPTH`` to 10 removes nine tenths of every cost that grows with the
candidates at once (records read, decoded, scaled, fused, ordered), more than any
change that keeps ``DEPTH`` candidates in fusion can remove (legs that carry only ids
and scores still fuse them all), so its ratio is a floor under what such a change can
reach; the rest (statements, the vector kernel's head of ``FEWEST``, embedding the
query, the flow) is paid whatever the candidates. The answers at 10 are not
engramdb's (the noise floor and fusion see fewer candidates): this measures cost only.

Each round also times the same recalls with the store's answers replayed (each query's
batch answered from a copy taken at that depth, no SQL, no decoding): what the flow and
the ranking cost, so that the part that grows with the candidates splits into the
store's (reading and decoding records) and the ranking's.

    PYTHONPATH=core:drivers python -m bench.depth                  # 1k and 10k, 3 rounds
    PYTHONPATH=core:drivers python -m bench.depth --sizes 1000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench.memory import SCOPE, corpus
from bench.peer import Peer
from bench.versus import PEER_SCOPE, CachedEmbedder, K, growing, interleaved
from engramdb import Memory
from engramdb.ranking import _hits
from engramdb.sqlite import SqliteStore

SHIPPED = _hits.DEPTH
CUT = 10
REMOVED = 1 - CUT / SHIPPED
"""The share of each per-candidate cost that the cut removes."""


@contextmanager
def depth(value: int) -> Iterator[None]:
    """The ranking's ``DEPTH`` set to ``value`` (read at each recall) for the block."""
    kept = _hits.DEPTH
    _hits.DEPTH = value  # type: ignore[misc]  # a measurement, undone below
    try:
        yield
    finally:
        _hits.DEPTH = kept  # type: ignore[misc]


def at_depth(value: int, recall: Callable[[str], object]) -> Callable[[str], object]:
    def run(query: str) -> object:
        with depth(value):
            return recall(query)

    return run


def replaying(
    store: SqliteStore, recall: Callable[[str], object], asked: Sequence[str]
) -> Callable[[str], object]:
    """``recall`` with ``store.batch`` replaying, for each query of ``asked``, the
    answers the store gave when ``recall`` ran it once here, in the order given."""
    answers: dict[str, list[object]] = {}
    batch = store.batch
    for query in asked:
        taken: list[object] = []

        def keep(ops, taken=taken):  # type: ignore[no-untyped-def]
            taken.append(batch(ops))
            return taken[-1]

        store.batch = keep  # type: ignore[method-assign]
        recall(query)
        answers[query] = taken
    store.batch = batch  # type: ignore[method-assign]

    def run(query: str) -> object:
        replies = iter(answers[query])
        store.batch = lambda ops: next(replies)  # type: ignore[method-assign]
        try:
            return recall(query)
        finally:
            store.batch = batch  # type: ignore[method-assign]

    return run


def measure(sizes: Sequence[int], queries: int, rounds: int) -> list[dict[str, float]]:
    texts = corpus(max(sizes))
    embedder = CachedEmbedder(texts)
    rows: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "engramdb.db")
        memory = Memory(store, embedder)
        peer = Peer(str(Path(tmp) / "peer.db"), embedder)
        for size, asked in growing(memory, peer, texts, sizes, queries):
            hybrid = lambda q: memory.recall(q, scopes=[SCOPE], top_k=K)  # noqa: E731
            for round_ in range(1, rounds + 1):
                times = interleaved(
                    {
                        "shipped": at_depth(SHIPPED, hybrid),
                        "cut": at_depth(CUT, hybrid),
                        "peer": lambda q: peer.search(q, PEER_SCOPE, K),
                        "shipped_flow": at_depth(SHIPPED, replaying(store, hybrid, asked)),
                        "cut_flow": at_depth(CUT, replaying(store, at_depth(CUT, hybrid), asked)),
                    },
                    asked,
                )
                ms = {name: statistics.median(values) * 1000 for name, values in times.items()}
                row = {
                    "n": size,
                    "round": round_,
                    **{f"{name}_ms": value for name, value in ms.items()},
                    "shipped_ratio": ms["shipped"] / ms["peer"],
                    "cut_ratio": ms["cut"] / ms["peer"],
                }
                rows.append(row)
                print(
                    f"  {size:>7,} round {round_}: DEPTH {SHIPPED} {ms['shipped']:.2f} ms "
                    f"({row['shipped_ratio']:.2f}x), DEPTH {CUT} {ms['cut']:.2f} ms "
                    f"({row['cut_ratio']:.2f}x), peer {ms['peer']:.2f} ms; "
                    f"cut/shipped {ms['cut'] / ms['shipped']:.2f}; with the store's answers "
                    f"replayed {ms['shipped_flow']:.2f} / {ms['cut_flow']:.2f} ms",
                    flush=True,
                )
        memory.close()
        peer.close()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.depth", description=__doc__)
    parser.add_argument("--sizes", default="1000,10000", help="memories, e.g. 1000,10000")
    parser.add_argument("--queries", type=int, default=50, help="queries per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per size")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rows = measure(sizes, args.queries, args.rounds)
    print("median over rounds:")
    for size in sizes:
        mine = [row for row in rows if row["n"] == size]
        shipped = statistics.median(row["shipped_ratio"] for row in mine)
        cut = statistics.median(row["cut_ratio"] for row in mine)
        share = statistics.median(row["cut_ms"] / row["shipped_ms"] for row in mine)
        print(
            f"  {size:>7,}: DEPTH {SHIPPED} {shipped:.2f}x the peer, DEPTH {CUT} {cut:.2f}x; "
            f"the recall at DEPTH {CUT} costs {share:.2f} of the shipped one"
        )
        grows = statistics.median((row["shipped_ms"] - row["cut_ms"]) / REMOVED for row in mine)
        ranking = statistics.median(
            (row["shipped_flow_ms"] - row["cut_flow_ms"]) / REMOVED for row in mine
        )
        peer = statistics.median(row["peer_ms"] for row in mine)
        print(
            f"           what grows with the candidates: {grows:.2f} ms at DEPTH {SHIPPED} "
            f"({grows / peer:.2f}x the peer's recall), of which the ranking's "
            f"{ranking:.2f} ms and the store's {grows - ranking:.2f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
