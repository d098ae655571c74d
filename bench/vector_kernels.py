"""SqliteStore's two vector kernels side by side: load and search, interleaved.

Run from the repository root (numpy needed)::

    PYTHONPATH=core:drivers python -m bench.vector_kernels            # 10k and 100k, d=384
    PYTHONPATH=core:drivers python -m bench.vector_kernels --quick    # 2k and 10k
    PYTHONPATH=core:drivers python -m bench.vector_kernels --wider 1,2,4,8 --sizes 10000,100000

Data: clustered unit vectors (100 centres, cosine about 0.7 inside a cluster), d=384,
or with ``--data projection`` ``bench.memory``'s texts through its ``ProjectionEmbedder``
(what ``bench.memory`` and ``bench.versus`` store; their queries), as float32 blobs with
their index data, as a cold load reads them. For each size:

* load: ``VectorIndex.load`` and ``NumpyVectorIndex.load`` of every row (the numpy one
  into a matrix reserved for them first, as a cold load reserves the scope's item
  count), in pages of 2,083 rows as ``SqliteStore``
  reads them, taking turns, median of ``--loads``;
* search, k=100 (a recall's depth per leg) and k=10, the methods taking turns query by
  query, medians: the pure-Python default (approximate above 1,000 vectors), the
  pure-Python ``exact=True`` scan (only up to 10k: about 0.6 s a query at 100k), the
  numpy kernel's default (approximate where the pure-Python one is, with its own
  candidates) and its ``exact=True``, and a bare numpy scan (einsum + argpartition +
  sort of the best k, no ties, no re-scoring: what a user would write), after one
  warm-up pass. recall@10 of both defaults against the exact answer (the numpy
  kernel's ``exact=True``, checked equal to the pure-Python one wherever that is
  computed).
* with ``--wider M,...``: the numpy kernel's approximate search with ``M`` times the
  pure-Python rule's candidates (``vector_candidates_for``; the kernel's default is
  ``_WIDER`` times), for k=100, with the rule that scans exactly when those exceed
  ``_SHARE`` of the scope lifted: wall-clock medians and recall@10, against its
  exact scan. This is the measurement behind ``_WIDER`` and ``_SHARE``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import engramdb._numpy_kernel as kernel_module
from engramdb._numpy_kernel import NumpyVectorIndex
from engramdb._vectors.index import VectorIndex
from engramdb._vectors.index_data import index_data_many
from engramdb.driver import vector_candidates_for

from .memory import ProjectionEmbedder, corpus, queries_for

D = 384
PAGE = 2083  # SqliteVectorCache.page_rows(384)


def dataset(
    n: int, queries: int, data: str = "clustered", seed: int = 7
) -> tuple[list[tuple[str, bytes, bytes]], Any]:
    if data == "projection":
        texts = corpus(n)
        embedder = ProjectionEmbedder()
        points = np.asarray(embedder.embed(texts, "document"))
        points /= np.linalg.norm(points, axis=1, keepdims=True)
        asked = np.asarray(embedder.embed(queries_for(texts, queries), "query"))
    else:
        rng = np.random.default_rng(seed)
        centres = rng.standard_normal((100, D))
        points = centres[rng.integers(0, 100, n)] + rng.standard_normal((n, D))
        points /= np.linalg.norm(points, axis=1, keepdims=True)
        asked = points[rng.integers(0, n, queries)]
        asked += 0.5 * rng.standard_normal((queries, D)) / D**0.5
    matrix = points.astype("<f4")
    blobs = [row.tobytes() for row in matrix]
    keys = [f"m{i:07d}" for i in range(n)]
    rows = list(zip(keys, blobs, index_data_many(blobs, D), strict=True))
    return rows, asked


def timed(fn: Callable[..., Any], *args: Any, **options: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn(*args, **options)
    return time.perf_counter() - start, out


def load(factory: Callable[[int], Any], rows: Sequence[tuple[str, bytes, bytes]]) -> Any:
    index = factory(D)
    if hasattr(index, "reserve"):  # as a cold load does: the scope's item count first
        index.reserve(len(rows))
    for start in range(0, len(rows), PAGE):
        index.load(list(rows[start : start + PAGE]))
    return index


def bare_numpy(matrix: Any, q: Any, k: int) -> list[int]:
    scores = np.einsum("ij,j->i", matrix, q)
    top = np.argpartition(scores, len(scores) - k)[len(scores) - k :]
    return top[np.argsort(-scores[top])].tolist()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vector_kernels", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2k and 10k vectors")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--loads", type=int, default=3, help="loads of each kernel (median)")
    parser.add_argument("--sizes", help="vector counts, comma-separated (default 10000,100000)")
    parser.add_argument("--data", choices=["clustered", "projection"], default="clustered")
    parser.add_argument("--wider", help="multiples of the candidate rule to sweep (k=100)")
    args = parser.parse_args(argv)
    sizes = [2_000, 10_000] if args.quick else [10_000, 100_000]
    if args.sizes:
        sizes = [int(size) for size in args.sizes.split(",")]
    print(f"# numpy {np.__version__}, d={D}, {args.queries} queries, {args.data} data")
    print(
        "| n | load python | load numpy | k | python default | python exact | numpy default "
        "| numpy exact | bare numpy | recall@10 python default | recall@10 numpy default |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    sweeps: list[str] = []
    for n in sizes:
        rows, asked = dataset(n, args.queries, args.data)
        loads: dict[str, list[float]] = {"python": [], "numpy": []}
        indexes: dict[str, Any] = {}
        for _ in range(args.loads):
            for name, factory in (("python", VectorIndex), ("numpy", NumpyVectorIndex)):
                indexes[name] = None
                seconds, indexes[name] = timed(load, factory, rows)
                loads[name].append(seconds)
        matrix = np.frombuffer(b"".join(blob for _, blob, _ in rows), dtype="<f4").reshape(n, D)
        del rows
        for query in asked:  # warm-up: the pure-Python default builds 4-bit copies lazily
            indexes["python"].search(query.tolist(), 100)
        for k in (100, 10):
            times: dict[str, list[float]] = {
                "default": [],
                "exact": [],
                "numpy": [],
                "numpy_exact": [],
                "bare": [],
            }
            recalls: dict[str, list[float]] = {"python": [], "numpy": []}
            python, kernel = indexes["python"], indexes["numpy"]
            for query in asked:
                q = query.tolist()
                q32 = (query / np.linalg.norm(query)).astype(np.float32)
                seconds, default = timed(python.search, q, k)
                times["default"].append(seconds)
                exact = None
                if n <= 10_000:
                    seconds, exact = timed(python.search, q, k, exact=True)
                    times["exact"].append(seconds)
                seconds, ours = timed(kernel.search, q, k)
                times["numpy"].append(seconds)
                seconds, ours_exact = timed(kernel.search, q, k, exact=True)
                times["numpy_exact"].append(seconds)
                seconds, _ = timed(bare_numpy, matrix, q32, k)
                times["bare"].append(seconds)
                if exact is not None and ours_exact != exact:
                    raise AssertionError("the numpy kernel differs from the exact search")
                truth = {key for key, _ in ours_exact[:10]}
                recalls["python"].append(len(truth & {key for key, _ in default[:10]}) / 10)
                recalls["numpy"].append(len(truth & {key for key, _ in ours[:10]}) / 10)
            p50 = {name: statistics.median(v) * 1000 if v else None for name, v in times.items()}
            cells = [f"{p50[name]:.2f} ms" if p50[name] else "—" for name in times]
            print(
                f"| {n:,} | {statistics.median(loads['python']):.3f} s "
                f"| {statistics.median(loads['numpy']):.3f} s | {k} | {' | '.join(cells)} "
                f"| {statistics.fmean(recalls['python']):.3f} "
                f"| {statistics.fmean(recalls['numpy']):.3f} |"
            )
        if args.wider:
            sweeps += sweep(indexes["numpy"], asked, [int(m) for m in args.wider.split(",")])
    if sweeps:
        print(
            "\n| n | candidates (x the rule) | numpy approximate, k=100 | numpy exact | recall@10 |"
        )
        print("|---|---|---|---|---|")
        print("\n".join(sweeps))
    return 0


def sweep(kernel: NumpyVectorIndex, asked: Any, multiples: Sequence[int]) -> list[str]:
    """Rows of the ``--wider`` table for one index: each multiple's candidates and the
    exact scan taking turns query by query, ``_SHARE`` lifted so that every multiple
    searches approximately."""
    n = len(kernel)
    queries = [query.tolist() for query in asked]
    truths = [{key for key, _ in kernel.search(q, 10, exact=True)} for q in queries]
    rows = []
    share, kernel_module._SHARE = kernel_module._SHARE, 1.0
    try:
        for multiple in multiples:
            c = min(n, multiple * vector_candidates_for(n, 100))
            approximate, exact, recalls = [], [], []
            for q, truth in zip(queries, truths, strict=True):
                seconds, found = timed(kernel.search, q, 100, candidates=c)
                approximate.append(seconds)
                exact.append(timed(kernel.search, q, 100, exact=True)[0])
                recalls.append(len(truth & {key for key, _ in found[:10]}) / 10)
            rows.append(
                f"| {n:,} | {c:,} ({multiple}x) | {statistics.median(approximate) * 1000:.2f} ms "
                f"| {statistics.median(exact) * 1000:.2f} ms | {statistics.fmean(recalls):.3f} |"
            )
    finally:
        kernel_module._SHARE = share
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
