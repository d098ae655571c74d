"""CPU per Worker request, one Durable Object per tenant: a benchmark, not a test.

    node --experimental-wasm-stack-switching workers/tests/run.mjs \\
        .tox/.workers/py3.13/site workers/tests/bench_cpu.py -s -q -p no:cacheprovider
    (BENCH_SIZES=1000,10000 BENCH_DIMS=384,768 BENCH_RUNS=15 to choose)

Each request goes through the entry's ``Default.fetch`` (token, forwarding) into the
tenant's ``MemoryObject`` (JSON, recall, the store, Workers AI's reply parsed), as in
production, with two differences the numbers correct for:

* the CPU clock is Node's MAIN thread (``/proc/.../schedstat``, ns): Pyodide and the JS
  it calls. The SQL runs in workerd (another process, shown apart as ``sql``), and the
  harness's bridge to it (a worker thread) is not counted; the main thread's own share
  of each bridged statement is measured first (a ``SELECT 1`` loop) and subtracted per
  statement, as is the CPU of the Workers AI stand-in (it makes up the vectors).
* vectors are clustered unit vectors (20 centres) chosen per text, so the vector leg
  works on data shaped like real embeddings; texts are 12 words of a 2,000-word
  vocabulary, so BM25 has realistic postings.

Cold: the first request of a new object instance over a stored tenant (the vector index
loads). Warm: the median of ``BENCH_RUNS`` requests with different queries.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import statistics
from collections.abc import Callable
from typing import Any

import engramdb_harness
import pytest
from js import Object, process
from pyodide.ffi import to_js

from engramdb_workers import worker as worker_module
from test_api import call

TOKEN = "bench-token"
TOKENS = json.dumps({TOKEN: ["bench", "user"]})
TENANT = json.dumps(["bench"])


def _setting(name: str, default: str) -> str:
    """A ``BENCH_*`` variable of Node's environment (Pyodide's ``os.environ`` is its own)."""
    value = getattr(process.env, name, None)
    return default if value is None else str(value)


SIZES = [int(n) for n in _setting("BENCH_SIZES", "1000,10000").split(",")]
DIMS = [int(d) for d in _setting("BENCH_DIMS", "384,768").split(",")]
RUNS = int(_setting("BENCH_RUNS", "15"))
WORDS = [f"w{i:04d}" for i in range(2000)]
MODELS = {384: "@cf/baai/bge-small-en-v1.5", 768: "@cf/baai/bge-base-en-v1.5"}


def cpu_ms() -> float:
    return float(engramdb_harness.mainThreadCpuNs()) / 1e6


def sql_ms() -> float:
    return float(engramdb_harness.childrenCpuNs()) / 1e6


def harness_stats() -> tuple[int, float]:
    """Statements bridged so far, and this thread's ms spent encoding/decoding them."""
    stats = engramdb_harness.durableObjectStats()
    return int(stats.calls), float(stats.hostMs)


class Corpus:
    """Texts and the clustered unit vectors the AI stand-in answers for them."""

    def __init__(self, dimensions: int, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.dimensions = dimensions
        self.centres = [
            self._unit([self.rng.gauss(0, 1) for _ in range(dimensions)]) for _ in range(20)
        ]
        self.vectors: dict[str, list[float]] = {}

    def _random_unit(self) -> list[float]:
        return self._unit([self.rng.gauss(0, 1) for _ in range(self.dimensions)])

    @staticmethod
    def _unit(v: list[float]) -> list[float]:
        n = math.sqrt(sum(x * x for x in v))
        return [x / n for x in v]

    def text(self, i: int) -> str:
        words = " ".join(self.rng.choice(WORDS) for _ in range(12))
        return f"note {i} {words}"

    def query(self) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(3))

    def vector(self, text: str) -> list[float]:
        found = self.vectors.get(text)
        if found is None:
            centre = self.centres[hash(text) % len(self.centres)]
            found = self._unit(
                [c + self.rng.gauss(0, 0.35 / math.sqrt(len(centre))) * 10 for c in centre]
            )
            self.vectors[text] = found
        return found


class AiStandIn:
    """The ``Ai`` binding's behaviour: table vectors as ``{shape, data}``; its own CPU is
    added up in ``spent_ms`` (subtracted from the request's)."""

    def __init__(self) -> None:
        self.corpus = Corpus(8)
        self.spent_ms = 0.0

    def __call__(self, model: Any, inputs: Any, options: Any = None) -> Any:
        start = cpu_ms()
        texts = inputs.text
        texts = [str(texts)] if isinstance(texts, str) else [str(t) for t in texts]
        data = [self.corpus.vector(t) for t in texts]
        answer = to_js(
            {"shape": [len(data), self.corpus.dimensions], "data": data},
            dict_converter=Object.fromEntries,
        )
        self.spent_ms += cpu_ms() - start
        return answer


@pytest.fixture
def ai_stub() -> AiStandIn:
    """Replaces the suite's stub: the Worker's ``AI`` binding answers from the corpus."""
    return AiStandIn()


async def send(worker: Any, path: str, body: dict[str, Any]) -> int:
    status, _, _ = await call(worker, "POST", path, token=TOKEN, body=body)
    return status


def run(coro: Any) -> Any:
    return asyncio.get_event_loop().run_until_complete(coro)


def measure(request: Callable[[], Any], ai: AiStandIn) -> tuple[float, float, float, int]:
    """(adjusted CPU ms, raw main-thread ms, workerd sql ms, statements) of one request."""
    ai.spent_ms = 0.0
    (n0, h0), c0, s0 = harness_stats(), cpu_ms(), sql_ms()
    status = run(request())
    c1, s1, (n1, h1) = cpu_ms(), sql_ms(), harness_stats()
    assert status in (200, 201), status
    raw = c1 - c0
    return raw - ai.spent_ms - (h1 - h0), raw, s1 - s0, n1 - n0


def test_cpu_per_request(make_worker: Any, ai_stub: AiStandIn) -> None:
    rows: list[str] = []
    for dimensions in DIMS:
        corpus = Corpus(dimensions)
        ai_stub.corpus = corpus
        for size in SIZES:
            worker_module.reset_isolate()
            worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL=MODELS[dimensions])
            tenant = worker.objects.open(TENANT)
            items = [{"text": corpus.text(i), "scope": ("bench", "user")} for i in range(size)]
            for start in range(0, size, 500):
                run(tenant.tenant.memory.remember_many(items[start : start + 500]))
            queries = [corpus.query() for _ in range(RUNS + 1)]

            def recall(query: str, mode: str, worker: Any = worker) -> Callable[[], Any]:
                body = {"query": query, "mode": mode, "top_k": 10}
                return lambda: send(worker, "/v1/recall", body)

            worker.objects.restart(TENANT)
            cold = measure(recall(queries[0], "hybrid"), ai_stub)
            rows.append(row("cold hybrid recall", size, dimensions, [cold]))
            for mode in ("hybrid", "vector", "lexical"):
                runs = [measure(recall(q, mode), ai_stub) for q in queries[1:]]
                rows.append(row(f"warm {mode} recall", size, dimensions, runs))
            texts = [corpus.text(size + i) for i in range(RUNS)]
            runs = [
                measure(lambda t=t, w=worker: send(w, "/v1/memories", {"text": t}), ai_stub)
                for t in texts
            ]
            rows.append(row("remember (one text)", size, dimensions, runs))
    print("\n| request | memories | d | CPU ms | main thread, raw | SQL (workerd) | statements |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def row(kind: str, size: int, dimensions: int, runs: list[tuple[float, float, float, int]]) -> str:
    med = [statistics.median(r[i] for r in runs) for i in range(4)]
    return (
        f"| {kind} | {size:,} | {dimensions} | {med[0]:.1f} | {med[1]:.1f} | {med[2]:.1f} "
        f"| {med[3]:.0f} |"
    )
