"""Index data: ``index_data_many`` on the write path, ``VectorIndex.load`` on open.

Run from the repository root::

    PYTHONPATH=core python -m bench.index_data [--without] [--load-only]

``--without`` also loads the 100k rows with no index data (everything computed, as for
a vector written before schema 2); ``--load-only`` skips the write-path section.

Every figure is a median of repeated runs (wall clock, time.perf_counter). The quantiser
strategies are forced by clearing or pre-building the per-dimension lookup table:
  * per component (list comprehension): what a batch below _BULK_TABLE_MIN uses
  * table built in the call: the 2**24 lookup table built inside the timed call (the
    first big batch of a process)
  * table already built: later batches
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable

from engramdb._vectors import index_data as _index_data
from engramdb._vectors.index import VectorIndex, unit_f32
from engramdb._vectors.index_data import index_data, index_data_many


def median_time(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def unit_blobs(n: int, d: int, seed: int) -> list[bytes]:
    """n distinct unit vectors: 500 Gaussian ones, reused with random sign flips."""
    rng = random.Random(seed)
    base = [unit_f32([rng.gauss(0.0, 1.0) for _ in range(d)]) for _ in range(min(n, 500))]
    flip = bytes(0x80 if b & 1 else 0 for b in range(256))  # a random byte -> sign bit
    out = []
    for i in range(n):
        blob = base[i % len(base)]
        mask = bytearray(4 * d)
        mask[3::4] = rng.randbytes(d).translate(flip)
        flipped = int.from_bytes(blob, "little") ^ int.from_bytes(mask, "little")
        out.append(flipped.to_bytes(4 * d, "little"))
    return out


def bench_index_data() -> None:
    print("index_data_many (write path), per vector, median:")
    saved = _index_data._BULK_TABLE_MIN
    start = time.perf_counter()
    _index_data.quantiser(256).table()
    first = time.perf_counter() - start
    print(f"  first table build in this process (d=256): {first * 1e3:.1f} ms")
    for d in (256, 384):
        blobs = unit_blobs(10_000, d, seed=d)
        n = len(blobs)

        def per_component(blobs: list[bytes] = blobs, d: int = d) -> None:
            _index_data._bulk_tables.clear()
            _index_data._BULK_TABLE_MIN = 1 << 62
            try:
                index_data_many(blobs, d)
            finally:
                _index_data._BULK_TABLE_MIN = saved

        def cold(blobs: list[bytes] = blobs, d: int = d) -> None:
            _index_data._bulk_tables.clear()
            index_data_many(blobs, d)

        def warm(blobs: list[bytes] = blobs, d: int = d) -> None:
            index_data_many(blobs, d)

        t_one = median_time(per_component, 7)
        t_cold = median_time(cold, 7)
        index_data_many(blobs, d)  # builds the table
        t_warm = median_time(warm, 7)
        t_build = median_time(lambda d=d: _index_data.quantiser(d).table(), 9)
        _index_data._bulk_tables.clear()
        t_single_cold = median_time(lambda b=blobs[0], d=d: index_data(b, d), 501)
        index_data_many(blobs, d)  # a big batch: the table exists
        t_single_warm = median_time(lambda b=blobs[0], d=d: index_data(b, d), 501)
        us = 1e6
        print(
            f"  d={d}, {n} vectors: per component {t_one / n * us:.1f} us "
            f"({t_one * 1e3:.0f} ms), table built in the call {t_cold / n * us:.1f} us "
            f"({t_cold * 1e3:.0f} ms), table already built {t_warm / n * us:.1f} us "
            f"({t_warm * 1e3:.0f} ms); table build alone {t_build * 1e3:.1f} ms"
        )
        print(
            f"  d={d}, 1 vector: {t_single_cold * us:.1f} us (no table), "
            f"{t_single_warm * us:.1f} us (table built)"
        )
    # Where the table starts to pay for its build: per component against table built in
    # the call, by batch size; the two alternate, 9 times each.
    print("  break-even (ms, median of 9, alternating):")
    print("    d, vectors, per component, table built in the call")
    for d in (256, 384):
        blobs = unit_blobs(4000, d, seed=7)
        for n in (250, 500, 1000, 2000, 4000):
            one, table = [], []
            for _ in range(9):
                _index_data._bulk_tables.clear()
                _index_data._BULK_TABLE_MIN = 1 << 62
                one.append(median_time(lambda b=blobs[:n], d=d: index_data_many(b, d), 1))
                _index_data._BULK_TABLE_MIN = 0
                table.append(median_time(lambda b=blobs[:n], d=d: index_data_many(b, d), 1))
            _index_data._BULK_TABLE_MIN = saved
            print(
                f"    {d}  {n:5d}  {statistics.median(one) * 1e3:6.1f}"
                f"  {statistics.median(table) * 1e3:6.1f}"
            )
    _index_data._bulk_tables.clear()


def bench_load() -> None:
    n, d = 100_000, 384
    print(f"VectorIndex.load, n={n}, d={d} (median of 3, a new index each run):")
    t0 = time.perf_counter()
    blobs = unit_blobs(n, d, seed=42)
    records = index_data_many(blobs, d)
    setup = time.perf_counter() - t0
    print(f"  (setup: {setup:.1f} s to make the vectors and their index data)")
    rows = [
        (f"m{i:06d}", blob, record)
        for i, (blob, record) in enumerate(zip(blobs, records, strict=True))
    ]
    del blobs, records
    fresh = [(key, blob, None) for key, blob, _ in rows]
    q = list(memoryview(rows[123][1]).cast("f")) if sys.byteorder == "little" else None

    def load(given: list[tuple[str, bytes, bytes | None]]) -> VectorIndex:
        index = VectorIndex(d)
        errors = index.load(given)
        assert not errors and len(index) == n
        return index

    timings = []
    for _ in range(3):
        start = time.perf_counter()
        index = load(rows)
        timings.append(time.perf_counter() - start)
        del index
    print(
        f"  with index data: {statistics.median(timings) * 1e3:.0f} ms "
        f"(runs: {', '.join(f'{t * 1e3:.0f}' for t in timings)} ms)"
    )
    index = load(rows)
    if q is not None:
        start = time.perf_counter()
        hits = index.search(q, 10)
        took = time.perf_counter() - start
        print(f"  first search after it: {took * 1e3:.1f} ms, top hit {hits[0][0]}")
    del index
    if "--without" in sys.argv:
        start = time.perf_counter()
        load(fresh)
        took = time.perf_counter() - start
        print(f"  without index data (all computed, like add_many): {took:.2f} s")


if __name__ == "__main__":
    print(f"Python {sys.version.split()[0]}")
    if "--load-only" not in sys.argv:
        bench_index_data()
    bench_load()
