"""SqliteStore's two vector kernels side by side: load and search, interleaved.

Run from the repository root (numpy needed)::

    PYTHONPATH=core:drivers python -m bench.vector_kernels            # 10k and 100k, d=384
    PYTHONPATH=core:drivers python -m bench.vector_kernels --quick    # 2k and 10k

Data: clustered unit vectors (100 centres, cosine about 0.7 inside a cluster), d=384,
as float32 blobs with their index data, as a cold load reads them. For each size:

* load: ``VectorIndex.load`` and ``NumpyVectorIndex.load`` of every row (the numpy one
  into a matrix reserved for them first, as a cold load reserves the scope's item
  count), in pages of 2,083 rows as ``SqliteStore``
  reads them, taking turns, median of ``--loads``;
* search, k=100 (a recall's depth per leg) and k=10, the methods taking turns query by
  query, medians: the pure-Python default (approximate above 1,000 vectors), the
  pure-Python ``exact=True`` scan (only up to 10k: about 0.6 s a query at 100k), the
  numpy kernel, and a bare numpy scan (einsum + argpartition + sort of the best k, no
  ties, no re-scoring: what a user would write), after one warm-up pass. recall@10 of
  the pure-Python default against the exact answer; the numpy kernel's answers are
  checked equal to the exact ones wherever those are computed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engramdb._index_data import index_data_many
from engramdb._numpy_kernel import NumpyVectorIndex
from engramdb._vectors import VectorIndex

D = 384
PAGE = 2083  # SqliteVectorCache.page_rows(384)


def dataset(n: int, queries: int, seed: int = 7) -> tuple[list[tuple[str, bytes, bytes]], Any]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((100, D))
    points = centres[rng.integers(0, 100, n)] + rng.standard_normal((n, D))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    matrix = points.astype("<f4")
    blobs = [row.tobytes() for row in matrix]
    keys = [f"m{i:07d}" for i in range(n)]
    rows = list(zip(keys, blobs, index_data_many(blobs, D), strict=True))
    asked = points[rng.integers(0, n, queries)] + 0.5 * rng.standard_normal((queries, D)) / D**0.5
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
    args = parser.parse_args(argv)
    sizes = [2_000, 10_000] if args.quick else [10_000, 100_000]
    print(f"# numpy {np.__version__}, d={D}, {args.queries} queries, clustered data")
    print(
        "| n | load python | load numpy | k | python default | python exact | numpy kernel "
        "| bare numpy | recall@10 default |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        rows, asked = dataset(n, args.queries)
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
            times: dict[str, list[float]] = {"default": [], "exact": [], "numpy": [], "bare": []}
            recalls = []
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
                seconds, _ = timed(bare_numpy, matrix, q32, k)
                times["bare"].append(seconds)
                if exact is not None and ours != exact:
                    raise AssertionError("the numpy kernel differs from the exact search")
                truth = {key for key, _ in (exact or ours)[:10]}
                recalls.append(len(truth & {key for key, _ in default[:10]}) / 10)
            p50 = {name: statistics.median(v) * 1000 if v else None for name, v in times.items()}
            cells = [f"{p50[name]:.2f} ms" if p50[name] else "—" for name in times]
            print(
                f"| {n:,} | {statistics.median(loads['python']):.3f} s "
                f"| {statistics.median(loads['numpy']):.3f} s | {k} | {' | '.join(cells)} "
                f"| {statistics.fmean(recalls):.3f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
