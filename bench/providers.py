"""Benchmark: decoding an embeddings response, base64 float32 vs JSON float lists.

Run from the repository root: ``PYTHONPATH=core:drivers python -m bench.providers``.
Builds one OpenAI-style response of 96 vectors x 1536 dimensions in both encodings
(floats written with 9 significant digits, as OpenAI does) and times JSON parsing plus
turning it into float32 vectors with the provider's own parser. Not a timed test: the
figures go to docs/performance-history.md.
"""

from __future__ import annotations

import base64
import json
import platform
import random
import statistics
import sys
import time
from array import array
from collections.abc import Callable

from engramdb.providers._openai import parse_openai_data

VECTORS = 96
DIMENSIONS = 1536
REPEATS = 15


def responses() -> tuple[bytes, bytes]:
    rng = random.Random(1536)
    vectors = [
        array("f", (rng.gauss(0.0, 1.0 / DIMENSIONS**0.5) for _ in range(DIMENSIONS)))
        for _ in range(VECTORS)
    ]
    as_floats = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": [float(f"{x:.9g}") for x in v]}
            for i, v in enumerate(vectors)
        ],
        "model": "text-embedding-3-small",
    }
    as_base64 = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": base64.b64encode(v.tobytes()).decode()}
            for i, v in enumerate(vectors)
        ],
        "model": "text-embedding-3-small",
    }
    return json.dumps(as_floats).encode(), json.dumps(as_base64).encode()


def best_ms(work: Callable[[], object]) -> tuple[float, float]:
    """Median and best wall time of ``work`` in milliseconds over REPEATS runs."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def main() -> None:
    floats_body, base64_body = responses()
    rows = []
    for name, body in (("JSON float lists", floats_body), ("base64 float32", base64_body)):

        def decode(body: bytes = body) -> object:
            return parse_openai_data(json.loads(body), "bench")

        assert len(decode()) == VECTORS  # type: ignore[arg-type]
        median, best = best_ms(decode)
        rows.append((name, len(body), median, best))
    print(
        f"Decoding one response of {VECTORS} x {DIMENSIONS} (json.loads + parse to "
        f"array('f')), {REPEATS} runs; Python {platform.python_version()} on "
        f"{platform.machine()} ({sys.platform}):\n"
    )
    print("| encoding | body size | median | best |")
    print("|---|---:|---:|---:|")
    for name, size, median, best in rows:
        print(f"| {name} | {size / 1024:,.0f} KiB | {median:.1f} ms | {best:.1f} ms |")
    speedup = rows[0][2] / rows[1][2]
    shrink = rows[0][1] / rows[1][1]
    print(f"\nbase64 is {speedup:.1f}x faster to decode and {shrink:.1f}x smaller on the wire.")


if __name__ == "__main__":
    main()
