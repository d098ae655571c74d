"""What redaction on by default costs a remember and a recall.

Run from the repository root::

    PYTHONPATH=core:drivers python -m bench.redaction

One process, ``InMemoryStore`` + ``HashEmbedder``: per run, 2,000 ``remember`` calls of
84-character texts and 300 hybrid recalls, with ``redact=redact_secrets`` (the default)
and ``redact=None``, alternating which goes first over 5 runs; the medians per call,
and the cost of ``redact_secrets`` alone on one text (``timeit``).
"""

from __future__ import annotations

import statistics
import time
import timeit

from engramdb import HashEmbedder, InMemoryStore, Memory, redact_secrets

TEXTS = [
    f"Sam note {i}: prefers aisle seats on long flights and books the window on trains"
    for i in range(2000)
]


def run(redact: object) -> tuple[float, float]:
    """µs per remember, µs per recall."""
    memory = Memory(InMemoryStore(), HashEmbedder(), redact=redact)  # type: ignore[arg-type]
    start = time.perf_counter()
    for text in TEXTS:
        memory.remember(text, ("s",))
    remember = (time.perf_counter() - start) / len(TEXTS) * 1e6
    start = time.perf_counter()
    for text in TEXTS[:300]:
        memory.recall(text[:30], [("s",)])
    return remember, (time.perf_counter() - start) / 300 * 1e6


def main() -> None:
    results: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    for round_ in range(5):
        for name in ("on", "off") if round_ % 2 == 0 else ("off", "on"):
            results[name].append(run(redact_secrets if name == "on" else None))
    for name, runs in results.items():
        remember = statistics.median(r for r, _ in runs)
        recall = statistics.median(r for _, r in runs)
        print(f"redaction {name}: remember {remember:.1f} µs, hybrid recall {recall:.0f} µs")
    text = TEXTS[0][:84]
    alone = min(timeit.repeat(lambda: redact_secrets(text), number=20_000, repeat=5))
    print(f"redact_secrets on {len(text)} characters: {alone / 20_000 * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
