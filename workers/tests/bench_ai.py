"""CPU of ``WorkersAIEmbedder.aembed`` through the SDK-wrapped binding, as in a Worker: a
benchmark, not a test.

    node --experimental-wasm-stack-switching workers/tests/run.mjs \\
        .tox/.workers/py3.13/site workers/tests/bench_ai.py -s -q -p no:cacheprovider

Node's main-thread CPU (``bench_cpu.cpu_ms``) of embedding one text (a recall's query)
and a batch of 100 (``remember_many``'s), median of 15 calls each, d = 768. The
binding's stand-in answers from a cache of ready answers, but its ``to_js`` of each
answer is in the figures (the same in every tree compared): compare trees, not
absolute times.
"""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

from bench_cpu import cpu_ms
from engramdb import HashEmbedder
from engramdb_workers.ai import WorkersAIEmbedder

RUNS = 15


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
        loop.run_until_complete(embedder.aembed(texts))  # the answer cached
        spent = []
        for _ in range(RUNS):
            start = cpu_ms()
            loop.run_until_complete(embedder.aembed(texts))
            spent.append(cpu_ms() - start)
        print(f"aembed of {size} text(s): {statistics.median(spent):.2f} ms CPU")
