"""StaticEmbedder inside Pyodide (and CPython): table load, memory, per-query CPU.

Inside Pyodide (Node, offline, from the repository root)::

    node --experimental-wasm-stack-switching tests/pyodide/run_pytest.mjs \\
        node_modules/pyodide-0-28 <site-dir> bench/pyodide_static.py -s -q

(``<site-dir>``: the unpacked test wheels of ``tests/pyodide/fetch_wheels.py``, e.g.
``.tox/.pyodide/py3.13/site``.) pytest collects :func:`test_print_table`, which only
prints; nothing is asserted about time. On CPython: ``PYTHONPATH=core python -m
bench.pyodide_static``.

It prints, as JSON, medians over ``RUNS`` runs of CPU time (``time.process_time``):

* ``load_ms``: ``StaticEmbedder.from_bytes`` of the shipped table (bytes already read);
  ``table_mib``: what tracemalloc sees held after a second, traced load;
* ``query_cold_ms`` / ``query_warm_ms``: one query embedded alone (``embed([q],
  "query")``), the median over 200 distinct questions, on a fresh embedder (its word
  and row caches empty) and again on the same embedder (warm);
* ``texts_per_s``: 2,000 short sentences embedded in batches of 256 on a fresh embedder.

The questions and sentences are made from templates here (the LoCoMo data is not
mounted inside Pyodide), with names, foods, places and times varied so that each text
brings new words.
"""

from __future__ import annotations

import gc
import json
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from engramdb import StaticEmbedder

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "core" / "engramdb" / StaticEmbedder.SHIPPED_FILE
RUNS = 5

_NAMES = ["Sam", "Ana", "Mia", "Omar", "Lena", "Ravi", "Chloe", "Tomas", "Yuki", "Pedro"]
_THINGS = [
    "mushroom risotto", "hiking trips", "jazz concerts", "the dentist", "a new laptop",
    "her sister's wedding", "marathon training", "the flight to Lisbon", "piano lessons",
    "a vegetarian diet", "the quarterly report", "adopting a puppy", "learning Spanish",
    "the garden fence", "a pottery class", "night shifts", "the book club", "surfing",
    "a broken phone", "moving to Berlin",
]  # fmt: skip
_QUESTIONS = [
    "what does {n} think about {t}?", "when did {n} start {t}?",
    "why did {n} mention {t} last week?", "how does {n} feel about {t}?",
    "did {n} ever talk about {t}?", "who told {n} about {t}?",
    "where was {n} when {t} came up?", "is {n} still interested in {t}?",
    "what happened with {n} and {t}?", "has {n} finished {t} yet?",
]  # fmt: skip
_SENTENCES = [
    "{n} talked about {t} over dinner on Friday.", "{n} says {t} changed everything.",
    "Yesterday {n} finally sorted out {t}.", "{n} is worried about {t} this month.",
]  # fmt: skip


def questions(count: int = 200) -> list[str]:
    out = [
        q.format(n=n, t=t) for q in _QUESTIONS for t in _THINGS for n in _NAMES
    ]  # 2,000 distinct, spread so that neighbours differ in every slot
    return out[:: max(1, len(out) // count)][:count]


def sentences(count: int = 2000) -> list[str]:
    return [
        _SENTENCES[i % len(_SENTENCES)].format(n=_NAMES[i % 10], t=_THINGS[(i // 10) % 20])
        + f" ({i})"
        for i in range(count)
    ]


def _cpu(action: Callable[[], object]) -> float:
    start = time.process_time()
    action()
    return (time.process_time() - start) * 1000.0


def _one_run(data: bytes, asked: list[str], texts: list[str]) -> tuple[float, ...]:
    """(load ms, MiB held, cold query ms, warm query ms, texts/s) of one run."""
    gc.collect()
    start = time.process_time()
    embedder = StaticEmbedder.from_bytes(data)
    load = (time.process_time() - start) * 1000.0
    gc.collect()
    tracemalloc.start()  # a second load, traced (tracing slows it: not timed)
    traced = StaticEmbedder.from_bytes(data)
    held = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    del traced
    cold = statistics.median(_cpu(lambda q=q: embedder.embed([q], "query")) for q in asked)
    warm = statistics.median(_cpu(lambda q=q: embedder.embed([q], "query")) for q in asked)
    fresh = StaticEmbedder.from_bytes(data)
    gc.collect()
    spent = _cpu(lambda: [fresh.embed(texts[i : i + 256]) for i in range(0, len(texts), 256)])
    return load, held, cold, warm, len(texts) / (spent / 1000.0)


def measure(data: bytes) -> dict[str, object]:
    runs = [_one_run(data, questions(), sentences()) for _ in range(RUNS)]
    load, held, cold, warm, rate = (statistics.median(column) for column in zip(*runs, strict=True))
    return {
        "python": platform.python_version(),
        "platform": sys.platform,
        "table_bytes": len(data),
        "runs": RUNS,
        "load_ms": round(load, 1),
        "table_mib": round(held, 1),
        "query_cold_ms": round(cold, 3),
        "query_warm_ms": round(warm, 3),
        "texts_per_s": round(rate),
    }


def test_print_table() -> None:
    print(json.dumps(measure(TABLE.read_bytes()), indent=1))


if __name__ == "__main__":
    test_print_table()
