"""VectorIndex search and load CPU time, made to run inside Pyodide (and CPython).

Inside Pyodide (Node, offline, from the repository root)::

    node --experimental-wasm-stack-switching tests/pyodide/run_pytest.mjs \\
        node_modules/pyodide-0-28 <site-dir> bench/pyodide_vectors.py -s -q

(``<site-dir>``: the unpacked test wheels of ``tests/pyodide/fetch_wheels.py``, e.g.
``.tox/.pyodide/py3.13/site``.) pytest collects :func:`test_print_table`, which only
prints; nothing is asserted about time. On CPython: ``PYTHONPATH=core python -m
bench.pyodide_vectors``.

For d = 384 and 768 and n = 1,000 and 10,000 clustered unit vectors (20 centres, each
point ``normalize(centre + uniform noise of variance 1/d)``, each query a stored point
plus half that noise), it prints the CPU time (``time.process_time``) of
``VectorIndex.search(q, k)`` for k = 10, 50 and 100 (100 is the per-leg depth a
recall asks for, ``DEPTH`` in ``ranking/_hits.py``; median over 3 passes of 20 queries), of
``load`` from float32 blobs with their stored index data (the SQLite/D1 cache's path) and
of ``add_many`` from the blobs alone (medians of 3), and the first search after that load
(k = 50; it may build what the index builds lazily), and the recall@k of the exact top k
(``exact=True``) for each k. A ``gc.collect()`` runs before each timed phase. A second
table gives the per-vector cost of each scoring stage (:func:`kernels`). "random"
repeats the recall on iid uniform unit vectors, the worst case for sign-bit codes.
"""

from __future__ import annotations

import functools
import gc
import math
import random
import statistics
import sys
import time
from collections.abc import Callable

from engramdb._vectors.index import VectorIndex, normalize, unit_f32
from engramdb._vectors.index_data import index_data_many, quantiser
from engramdb._vectors.rules import candidates_for, use_exact

K = 50
KS = (10, 50, 100)  # search p50 is printed for each; recall@k for each (K for the builds)
QUERIES = 20
PASSES = 3
BUILDS = 3
CENTRES = 20


def _noise_table(d: int) -> tuple[float, ...]:
    half = math.sqrt(3.0 / d)  # uniform on [-half, half] has variance 1/d
    return tuple(half * (b - 127.5) / 127.5 for b in range(256))


def clustered(n: int, d: int, seed: int) -> tuple[list[bytes], list[list[float]]]:
    rng = random.Random(seed)
    noise = _noise_table(d)
    centres = [normalize([rng.gauss(0.0, 1.0) for _ in range(d)]) for _ in range(CENTRES)]
    points = [
        normalize(map(float.__add__, rng.choice(centres), map(noise.__getitem__, rng.randbytes(d))))
        for _ in range(n)
    ]
    queries = [
        normalize(
            [x + 0.5 * noise[b] for x, b in zip(rng.choice(points), rng.randbytes(d), strict=True)]
        )
        for _ in range(QUERIES)
    ]
    return [unit_f32(p) for p in points], queries


def uniform(n: int, d: int, seed: int) -> tuple[list[bytes], list[list[float]]]:
    rng = random.Random(seed)
    noise = _noise_table(d)
    blobs = [unit_f32(list(map(noise.__getitem__, rng.randbytes(d)))) for _ in range(n)]
    queries = [normalize(list(map(noise.__getitem__, rng.randbytes(d)))) for _ in range(QUERIES)]
    return blobs, queries


def _cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def _recall(index: VectorIndex, queries: list[list[float]]) -> list[float]:
    """recall@k of ``search(q, k)`` against the exact top k, for each k in KS."""
    out = []
    for k in KS:
        atk = []
        for q in queries:
            exact = [key for key, _ in index.search(q, k, exact=True)]
            got = [key for key, _ in index.search(q, k)]
            atk.append(len(set(exact) & set(got)) / k)
        out.append(statistics.fmean(atk))
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def rows() -> list[str]:
    out = [
        f"# {sys.implementation.name} {sys.version.split()[0]} on {sys.platform}; "
        f"search(q, k): median CPU of {PASSES} x {QUERIES} queries; builds (first search: "
        f"k={K}): median of {BUILDS}",
        "| d | n | path (k=100) | search p50 k=" + " / ".join(map(str, KS)) + " | load (index "
        "data) | first search | add_many | recall@" + " / @".join(map(str, KS)) + " | random "
        "recall@" + " / @".join(map(str, KS)) + " |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in (384, 768):
        for n in (1000, 10_000):
            blobs, queries = clustered(n, d, seed=7)
            keys = [f"m{i}" for i in range(n)]
            data = index_data_many(blobs, d)
            rows_ = list(zip(keys, blobs, data, strict=True))
            loads, firsts, adds = [], [], []
            pairs = list(zip(keys, blobs, strict=True))
            index = VectorIndex(d)
            for b in range(BUILDS):
                gc.collect()
                index = VectorIndex(d)
                loads.append(_cpu(functools.partial(index.load, rows_)))
                firsts.append(_cpu(functools.partial(index.search, queries[b], K)))
                adds.append(_cpu(functools.partial(VectorIndex(d).add_many, pairs)))
            p50s = []
            for k in KS:
                gc.collect()
                times = [
                    _cpu(functools.partial(index.search, q, k))
                    for _ in range(PASSES)
                    for q in queries
                ]
                p50s.append(_ms(statistics.median(times)))
            recalls = _recall(index, queries)
            rblobs, rqueries = uniform(n, d, seed=8)
            rindex = VectorIndex(d)
            rindex.load(zip(keys, rblobs, index_data_many(rblobs, d), strict=True))
            randoms = _recall(rindex, rqueries)
            c = candidates_for(n, 100)
            try:
                exact = use_exact(n, c, 100)
            except TypeError:  # the rule before "Vectors inside Pyodide" took (n, c)
                exact = use_exact(n, c)  # type: ignore[call-arg]
            path = "exact" if exact else "approximate"
            out.append(
                f"| {d} | {n:,} | {path} | {' / '.join(p50s)} "
                f"| {_ms(statistics.median(loads))} | {_ms(statistics.median(firsts))} "
                f"| {_ms(statistics.median(adds))} "
                f"| {' / '.join(f'{r:.3f}' for r in recalls)} "
                f"| {' / '.join(f'{r:.3f}' for r in randoms)} |"
            )
    return out


def kernels() -> list[str]:
    """Per-vector CPU cost of each way the index scores a vector, over 1,000 clustered
    vectors (median of 7 passes): what the stage choices rest on."""
    out = [
        "| d | Hamming (sign codes) | 4-bit planes | uint8 `math.dist` | "
        "exact float32 (`_score`) | exact, `memoryview` slices (`_score_view`) |",
        "|---|---|---|---|---|---|",
    ]
    n = 1000
    for d in (384, 768):
        blobs, queries = clustered(n, d, seed=9)
        index = VectorIndex(d)
        keys = [f"m{i}" for i in range(n)]
        index.load(zip(keys, blobs, index_data_many(blobs, d), strict=True))
        q = normalize(queries[0])
        if not hasattr(index, "_nibble_scores"):  # an index from before the 4-bit stage
            return out
        index._nibble_scores(q, None)  # build every 4-bit copy first
        qcode = index._codes[0]
        codes = index._codes
        u8 = bytearray(quantiser(d).one(index._flat))  # the uint8 copies, as stored
        qs = tuple(x * quantiser(d).scale + 128.0 for x in q)
        everyone = list(range(n))

        def hamming(codes: list[int] = codes, qcode: int = qcode) -> object:
            return [(x ^ qcode).bit_count() for x in codes]

        def uint8(u8: bytearray = u8, qs: tuple[float, ...] = qs, d: int = d) -> object:
            return [math.dist(qs, u8[o : o + d]) for o in range(0, n * d, d)]

        cells = []
        for fn in (
            hamming,
            functools.partial(index._nibble_scores, q, None),
            uint8,
            functools.partial(index._score, q, everyone, 10),  # Pyodide: decoded tuples
            functools.partial(getattr(index, "_score_view", index._score), q, everyone, 10),
        ):
            gc.collect()
            cells.append(statistics.median(_cpu(fn) for _ in range(7)) / n)
        out.append(f"| {d} | " + " | ".join(f"{c * 1e6:.2f} µs" for c in cells) + " |")
    return out


def test_print_table() -> None:
    print()
    for line in rows():
        print(line, flush=True)
    print()
    for line in kernels():
        print(line, flush=True)


if __name__ == "__main__":
    test_print_table()
