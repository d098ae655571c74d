"""CPU of ``WorkersAIEmbedder.aembed`` through the SDK-wrapped binding, as in a Worker, and
of the two steps it saves: a benchmark, not a test.

    node --experimental-wasm-stack-switching workers/tests/run.mjs \\
        .tox/.workers/py3.13/site workers/tests/bench_ai.py -s -q -p no:cacheprovider

Node's main-thread CPU (``bench_cpu.cpu_ms``), median of 15 calls each, d = 768, for one
text (a recall's query) and a batch of 100 (``remember_many``'s):

* ``aembed``. The binding's stand-in answers from a cache of ready answers, but its
  ``to_js`` of each answer is in the figures (the same in every tree compared): compare
  trees, not absolute times.
* converting one answer to Python: the SDK wrapper's ``python_from_rpc`` against the
  ``to_py()`` the embedder calls on the binding under the wrapper;
* checking its numbers: each in Python (a bool, an int or float, finite: the check
  before ``_finite_numbers``) against ``_finite_numbers``.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Callable
from typing import Any

from js import Object
from pyodide.ffi import to_js
from workers.rpc import python_from_rpc

from bench_cpu import cpu_ms
from engramdb import HashEmbedder
from engramdb_workers.ai import WorkersAIEmbedder, _finite_numbers

RUNS = 15


def _median_ms(work: Callable[[], object]) -> float:
    work()
    spent = []
    for _ in range(RUNS):
        start = cpu_ms()
        work()
        spent.append(cpu_ms() - start)
    return statistics.median(spent)


def _each_in_python(values: list[Any]) -> bool:
    return all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values
    )


def test_embedding_cpu(ai: Any, ai_stub: Any) -> None:
    inner = HashEmbedder(dimensions=768)
    answers: dict[tuple[str, ...], Any] = {}

    def answer(texts: list[str]) -> Any:
        key = tuple(texts)
        if key not in answers:
            data = [list(v) for v in inner.embed(texts, "document")]
            answers[key] = {"shape": [len(data), 768], "data": data}
        return answers[key]

    ai_stub.answer = answer
    embedder = WorkersAIEmbedder(ai)
    loop = asyncio.get_event_loop()
    print()
    for size in (1, 100):
        texts = [f"text {i} of a batch of {size}" for i in range(size)]
        js_answer = to_js(answer(texts), dict_converter=Object.fromEntries)
        data = js_answer.to_py()["data"]
        figures = {
            "aembed": _median_ms(lambda t=texts: loop.run_until_complete(embedder.aembed(t))),
            "SDK conversion": _median_ms(lambda a=js_answer: python_from_rpc(a)),
            "to_py()": _median_ms(lambda a=js_answer: a.to_py()),
            "check each number": _median_ms(lambda d=data: [_each_in_python(v) for v in d]),
            "_finite_numbers": _median_ms(lambda d=data: [_finite_numbers(v) for v in d]),
        }
        print(
            f"{size} text(s): " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in figures.items()),
            flush=True,
        )
