"""Vector search latency: engramdb's pure-Python index against numpy and sqlite-vec.

Run from the repository root::

    PYTHONPATH=core python -m bench.vectors            # full grid (a few minutes)
    PYTHONPATH=core python -m bench.vectors --quick    # smoke run
    PYTHONPATH=core python -m bench.vectors --n 100000 --d 384 --queries 50

The baseline is single-threaded numpy, like the pure-Python index: unless numpy was
already imported, the bench sets ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS`` and
``MKL_NUM_THREADS`` to 1 before importing it (and prints the BLAS thread count via
threadpoolctl when importable). ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` set in the
environment can slow OpenBLAS down; run with ``env -u OPENBLAS_CORETYPE -u
OPENBLAS_L2_SIZE`` to measure numpy at its best.

Data is clustered and synthetic (seeded): 100 random unit centres; each point is
``normalize(centre + N(0, I/d))`` and each query ``normalize(point + 0.5 N(0, I/d))``.
numpy (when importable) generates it fast; otherwise a pure-Python generator with
uniform noise of the same variance is used. Latency is the median per-query time over
all queries and repeats; the ratio columns are measured in the same run. Recall@10 is
against the exact top-10. For honesty a second, unclustered set (iid Gaussian unit
vectors and queries, the worst case for sign-bit codes) reports recall only.

The sqlite-vec column needs ``sqlite_vec`` and an ``sqlite3`` with
``enable_load_extension`` (Debian's ``/usr/bin/python3.11`` has it, pyenv builds do not);
otherwise it prints why it was skipped and shows ``n/a``. The vec0 query asks for
``k = ?`` rather than ``LIMIT``, which vec0 honours only on SQLite 3.41 and later.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from engramdb._vectors.codec import encode_f32
from engramdb._vectors.index import VectorIndex, normalize
from engramdb._vectors.rules import candidates_for, rerank_for

THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
if "numpy" not in sys.modules:  # single-threaded baseline, like our Python
    for _var in THREAD_VARS:
        os.environ[_var] = "1"

try:
    import numpy as np
except ImportError:  # pragma: no cover - the bench runs without numpy too
    np = None

K = 10
CLUSTERS = 100


def _data_numpy(n: int, d: int, queries: int, seed: int) -> tuple[bytes, list[list[float]]]:
    assert np is not None
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CLUSTERS, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    points = centres[rng.integers(0, CLUSTERS, n)] + rng.standard_normal((n, d)) / math.sqrt(d)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    points32 = points.astype("<f4")
    picks = rng.integers(0, n, queries)
    qs = points32[picks].astype(np.float64) + 0.5 * rng.standard_normal((queries, d)) / math.sqrt(d)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    return points32.tobytes(), [list(map(float, q)) for q in qs]


def _random_numpy(n: int, d: int, queries: int, seed: int) -> tuple[bytes, list[list[float]]]:
    assert np is not None
    rng = np.random.default_rng(seed + 1)
    points = rng.standard_normal((n, d))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    qs = rng.standard_normal((queries, d))
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    return points.astype("<f4").tobytes(), [list(map(float, q)) for q in qs]


def _random_python(n: int, d: int, queries: int, seed: int) -> tuple[bytes, list[list[float]]]:
    rng = random.Random(seed + 1)
    blob = b"".join(
        encode_f32(normalize([rng.gauss(0.0, 1.0) for _ in range(d)])) for _ in range(n)
    )
    return blob, [normalize([rng.gauss(0.0, 1.0) for _ in range(d)]) for _ in range(queries)]


def _build(blob: bytes, n: int, d: int) -> VectorIndex:
    step = 4 * d
    index = VectorIndex(d)
    for i in range(n):
        index.add(f"m{i:07d}", blob[i * step : (i + 1) * step])
    return index


def _truth(
    index: VectorIndex, blob: bytes, n: int, d: int, qs: list[list[float]]
) -> list[set[str]]:
    """The exact top-K keys per query (numpy float64 when importable, else ``exact=True``)."""
    if np is None:
        return [{key for key, _ in index.search(q, K, exact=True)} for q in qs]
    matrix = np.frombuffer(blob, dtype="<f4").reshape(n, d).astype(np.float64)
    truth = []
    for q in qs:
        scores = matrix @ np.asarray(q)
        truth.append({f"m{i:07d}" for i in np.argpartition(-scores, K)[:K]})
    return truth


def _recall(
    search: Callable[[list[float]], set[str]], qs: list[list[float]], truth: list[set[str]]
) -> float:
    """Mean recall@K of ``search`` (query -> its top-K keys) against ``truth``."""
    return statistics.fmean(len(search(q) & t) / K for q, t in zip(qs, truth, strict=True))


def _index_recall(index: VectorIndex, blob: bytes, n: int, d: int, qs: list[list[float]]) -> float:
    """Mean recall@K of the index's default search against the exact top-K."""
    truth = _truth(index, blob, n, d, qs)
    return _recall(lambda q: {key for key, _ in index.search(q, K)}, qs, truth)


def _data_python(n: int, d: int, queries: int, seed: int) -> tuple[bytes, list[list[float]]]:
    rng = random.Random(seed)
    half = math.sqrt(3.0 / d)  # uniform on [-half, half] has variance 1/d
    noise = tuple(half * (b - 127.5) / 127.5 for b in range(256))
    centres = [normalize([rng.gauss(0.0, 1.0) for _ in range(d)]) for _ in range(CLUSTERS)]
    chunks = []
    points: list[list[float]] = []
    for _ in range(n):
        centre = centres[rng.randrange(CLUSTERS)]
        vec = normalize(map(float.__add__, centre, map(noise.__getitem__, rng.randbytes(d))))
        chunks.append(encode_f32(vec))
        if len(points) < 10 * queries:
            points.append(vec)
    qs = []
    for _ in range(queries):
        base = points[rng.randrange(len(points))]
        q = [x + 0.5 * noise[b] for x, b in zip(base, rng.randbytes(d), strict=True)]
        qs.append(normalize(q))
    return b"".join(chunks), qs


def _median_latency(
    fn: Callable[[list[float]], object], qs: list[list[float]], repeats: int
) -> float:
    times = []
    for _ in range(repeats):
        for q in qs:
            t0 = time.perf_counter()
            fn(q)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.0f} µs"


def _ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}x"


def _sqlite_vec(
    blob: bytes, n: int, d: int, probe: list[float]
) -> Callable[[list[float]], list[tuple[int, float]]] | None:
    """A vec0 KNN search over the vectors (rowid i = key ``m{i:07d}``), or None, with the
    reason printed, where sqlite-vec cannot load or answer ``probe``."""
    try:
        import sqlite_vec  # type: ignore[import-not-found]

        db = sqlite3.connect(":memory:")
        db.enable_load_extension(True)
        sqlite_vec.load(db)
        db.enable_load_extension(False)
    except Exception as exc:  # ImportError, AttributeError (no load_extension), ...
        print(f"  sqlite-vec skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{d}])")
    step = 4 * d
    db.executemany(
        "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
        ((i, blob[i * step : (i + 1) * step]) for i in range(n)),
    )

    def search(q: list[float]) -> list[tuple[int, float]]:
        # ``k = ?``, not LIMIT: vec0 sees a LIMIT only on SQLite >= 3.41 (Debian 12 has 3.40.1).
        return db.execute(
            "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (encode_f32(q), K),
        ).fetchall()

    try:
        search(probe)
    except sqlite3.Error as exc:
        print(f"  sqlite-vec skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    return search


def run_cell(
    n: int, d: int, queries: int, repeats: int, seed: int, with_random: bool = True
) -> dict[str, Any]:
    t0 = time.perf_counter()
    blob, qs = (_data_numpy if np is not None else _data_python)(n, d, queries, seed)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    index = _build(blob, n, d)
    build_s = time.perf_counter() - t0
    truth = _truth(index, blob, n, d, qs)
    recall = _recall(lambda q: {key for key, _ in index.search(q, K)}, qs, truth)

    exact_reps = 1 if n >= 100_000 else repeats
    exact_qs = qs[: max(3, len(qs) // 4)] if n >= 100_000 else qs
    row: dict[str, Any] = {
        "n": n,
        "d": d,
        "C": candidates_for(n, K),
        "C2": rerank_for(K),
        "recall": recall,
        "random_recall": None,
        "gen_s": gen_s,
        "build_s": build_s,
        "exact": _median_latency(lambda q: index.search(q, K, exact=True), exact_qs, exact_reps),
        "approx": _median_latency(lambda q: index.search(q, K), qs, repeats),
        "numpy": None,
        "sqlite_vec": None,
        "sqlite_vec_recall": None,
    }
    if np is not None:
        matrix = np.frombuffer(blob, dtype="<f4").reshape(n, d)

        def np_search(q: list[float]) -> object:
            scores = matrix @ np.asarray(q, dtype=np.float32)
            top = np.argpartition(-scores, K)[:K]
            return top[np.argsort(-scores[top])]

        row["numpy"] = _median_latency(np_search, qs, repeats)
    vec = _sqlite_vec(blob, n, d, qs[0])
    if vec is not None:
        row["sqlite_vec"] = _median_latency(vec, qs, repeats)
        row["sqlite_vec_recall"] = _recall(
            lambda q: {f"m{rowid:07d}" for rowid, _ in vec(q)}, qs, truth
        )
    if with_random:
        del index, blob
        rblob, rqs = (_random_numpy if np is not None else _random_python)(n, d, queries, seed)
        row["random_recall"] = _index_recall(_build(rblob, n, d), rblob, n, d, rqs)
    return row


def _blas_threads() -> str:
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-not-found]
    except ImportError:
        return "threadpoolctl not importable"
    pools = threadpool_info()
    if not pools:
        return "no BLAS/OpenMP pool loaded"
    return ", ".join(f"{p.get('internal_api')}={p.get('num_threads')}" for p in pools)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vectors", description=__doc__)
    parser.add_argument("--n", type=int, action="append", help="corpus size (repeatable)")
    parser.add_argument("--d", type=int, action="append", help="dimensions (repeatable)")
    parser.add_argument("--queries", type=int, default=30, help="queries per cell")
    parser.add_argument("--repeats", type=int, default=3, help="passes over the queries")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--quick", action="store_true", help="smoke run: small grid")
    parser.add_argument(
        "--no-random", action="store_true", help="skip the unclustered recall column"
    )
    args = parser.parse_args(argv)
    sizes = args.n or ([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])
    dims = args.d or ([384] if args.quick else [384, 768])
    queries = min(args.queries, 10) if args.quick else args.queries
    repeats = 1 if args.quick else args.repeats

    numpy_note = f"numpy {np.__version__}" if np is not None else "numpy not importable"
    print(
        f"# Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{numpy_note}, {queries} queries x {repeats} repeats, k={K}, clustered data"
    )
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", *THREAD_VARS):
        print(f"# {var}={os.environ.get(var, '(unset)')}")
    print(f"# BLAS threads: {_blas_threads()}")
    if hasattr(os, "getloadavg"):
        print("# load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print()
    print(
        "| N | d | C | C2 | PY exact | PY prefilter+rerank | recall@10 | random recall@10 "
        "| numpy exact | sqlite-vec vec0 | sqlite-vec recall@10 | exact / numpy "
        "| prefilter / numpy | prefilter / sqlite-vec | numpy / sqlite-vec | build |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for d in dims:
        for n in sizes:
            r = run_cell(n, d, queries, repeats, args.seed, not args.no_random)
            random_recall = "n/a" if r["random_recall"] is None else f"{r['random_recall']:.3f}"
            vec_recall = (
                "n/a" if r["sqlite_vec_recall"] is None else f"{r['sqlite_vec_recall']:.3f}"
            )
            print(
                f"| {n} | {d} | {r['C']} | {r['C2']} | {_fmt(r['exact'])} "
                f"| {_fmt(r['approx'])} | {r['recall']:.3f} | {random_recall} "
                f"| {_fmt(r['numpy'])} | {_fmt(r['sqlite_vec'])} | {vec_recall} "
                f"| {_ratio(r['exact'], r['numpy'])} | {_ratio(r['approx'], r['numpy'])} "
                f"| {_ratio(r['approx'], r['sqlite_vec'])} | {_ratio(r['numpy'], r['sqlite_vec'])} "
                f"| {r['build_s']:.1f} s |",
                flush=True,
            )
    if hasattr(os, "getloadavg"):
        print("\n# load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
