"""When the vector index scans exactly: the exact scan against the approximate path.

Run from the repository root::

    PYTHONPATH=core python -m bench.exact_rule [--d 768] [--sizes 200,1000]
    PYTHONPATH=core:drivers python -m bench.exact_rule --store --sizes 300,1000

For n = 200 to 10,000 clustered vectors (``bench.vectors``' pure-Python data, d=384 or
``--d``, 20 queries) and k = 10 and 100, the median time of an exact scan and of the
approximate path with ``candidates_for(n, k)`` candidates, and the approximate path's
recall of the exact top 10 and top k. ``use_exact`` (n <= ``rerank_for(k, n)``, on
CPython and in Pyodide; on CPython n <= max(C, 1000) until 2026-12-04) is chosen from
these figures and those of ``bench.pyodide_vectors`` (docs/performance-history.md, "Small
scopes without numpy").

With ``--store``: recalls through ``SqliteStore(vector_kernel="python")`` (the default
install's store) of scopes of ``--sizes`` memories (``bench.memory``'s corpus through
its ``ProjectionEmbedder``, d=384, and through ``HashEmbedder(768)``), 50 queries each,
the rule of today and CPython's rule until 2026-12-04 (exact up to 1,000 vectors)
taking turns query by query: median CPU per hybrid and per vector recall (``top_k`` 10)
and how many queries got the same top 10 under both.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engramdb import HashEmbedder, Memory
from engramdb._vectors import rules as rules
from engramdb._vectors.rules import candidates_for, use_exact

from .vectors import _build, _data_python

D = 384
QUERIES = 20


def _approximate(
    index: Any, q: list[float], positions: list[int] | None, k: int, c: int
) -> list[tuple[str, float]]:
    """The approximate path with ``c`` candidates, forced, scored as a search scores it."""
    return index._score(q, index._approximate(q, positions, k, c), k)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.exact_rule", description=__doc__)
    parser.add_argument("--d", type=int, default=D, help=f"dimensions (default {D})")
    parser.add_argument(
        "--sizes", default="200,500,1000,2000,5000,10000", help="vectors in the index"
    )
    parser.add_argument("--store", action="store_true", help="recalls through SqliteStore")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.store:
        return _stores(sizes)
    d = args.d
    print(f"# d={d}, {QUERIES} queries, medians; recall of the approximate path vs exact")
    print("| n | k | C | exact scan | approximate | recall@10 | recall@k | use_exact |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        blob, queries = _data_python(n, d, QUERIES, seed=2)
        index = _build(blob, n, d)
        for k in (10, 100):
            c = candidates_for(n, k)
            exact_times, approx_times, top10, topk = [], [], [], []
            for q in queries:
                start = time.perf_counter()
                exact = index.search(q, k, exact=True)
                exact_times.append(time.perf_counter() - start)
                start = time.perf_counter()
                approx = _approximate(index, list(q), None, k, c)  # the path, forced
                approx_times.append(time.perf_counter() - start)
                top10.append(len({a for a, _ in exact[:10]} & {a for a, _ in approx[:10]}) / 10)
                topk.append(len({a for a, _ in exact} & {a for a, _ in approx}) / k)
            print(
                f"| {n:,} | {k} | {c:,} | {statistics.median(exact_times) * 1e3:.1f} ms "
                f"| {statistics.median(approx_times) * 1e3:.1f} ms "
                f"| {statistics.fmean(top10):.3f} | {statistics.fmean(topk):.3f} "
                f"| {use_exact(n, c, k)} |"
            )
    return 0


def _exact_up_to_1000(n: int, c: int, k: int) -> bool:
    """CPython's ``use_exact`` until 2026-12-04."""
    return n <= max(c, rules.ALL_CANDIDATES)


def _stores(sizes: Sequence[int]) -> int:
    from bench.memory import SCOPE, ProjectionEmbedder, corpus, queries_for
    from engramdb.sqlite import SqliteStore

    print("# SqliteStore(vector_kernel='python'), 50 queries, top_k=10, medians of CPU")
    print(
        "| memories | embedder | hybrid, old / new rule | vector, old / new | same hybrid top 10 |"
    )
    print("|---|---|---|---|---|")
    today = rules.use_exact
    for n in sizes:
        texts = corpus(n)
        asked = queries_for(texts, 50)
        for name, embedder in (
            ("projection d=384", ProjectionEmbedder()),
            ("hash d=768", HashEmbedder(768)),
        ):
            with tempfile.TemporaryDirectory() as tmp:
                memory = Memory(SqliteStore(Path(tmp) / "m.db", vector_kernel="python"), embedder)
                memory.remember_many({"text": t, "scope": SCOPE} for t in texts)
                cells, same = [], 0
                for mode in ("hybrid", "vector"):
                    times: dict[str, list[float]] = {"old": [], "new": []}
                    for query in asked:
                        hits = {}
                        for rule_name, rule in (("old", _exact_up_to_1000), ("new", today)):
                            rules.use_exact = rule
                            memory.recall(query, [SCOPE], top_k=10, mode=mode)  # warm
                            started = time.process_time()
                            found = memory.recall(query, [SCOPE], top_k=10, mode=mode)
                            times[rule_name].append(time.process_time() - started)
                            hits[rule_name] = [hit.memory.id for hit in found]
                        same += mode == "hybrid" and hits["old"] == hits["new"]
                    rules.use_exact = today
                    old, new = (statistics.median(times[r]) * 1e3 for r in ("old", "new"))
                    cells.append(f"{old:.2f} / {new:.2f} ms ({new / old:.2f}x)")
                memory.close()
            print(f"| {n:,} | {name} | {cells[0]} | {cells[1]} | {same} of {len(asked)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
