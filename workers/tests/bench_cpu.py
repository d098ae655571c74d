"""CPU per Worker request, one Durable Object per tenant: a benchmark, not a test.

    node --experimental-wasm-stack-switching workers/tests/run.mjs \\
        .tox/.workers/py3.13/site workers/tests/bench_cpu.py -s -q -p no:cacheprovider
    (BENCH_SIZES=1000,10000 BENCH_DIMS=384,768 BENCH_RUNS=15 to choose; BENCH_FLOATS=
    none,4096 measures each size with each VECTOR_FLOATS_UP_TO, "default" the Worker's;
    BENCH_MIXES=50x1000,500x100,1x50000 the scope mixes of bench_object_memory.py, each
    in a process of its own, "none" for none; BENCH_SITE the site dir for those)

At the end it prints the warm recalls again by stage (:class:`Stages`: the vector search
and its 4-bit and exact scores, the fusion and ranking, the AI answer read; a pass of
its own), the ratios the edge's goals are stated in (warm hybrid /
warm lexical CPU per size and dimension), each scope mix's wasm memory, and the Worker's
upload with and without the static table (``workers/tools/upload.py``).

Each request goes through the entry's ``Default.fetch`` (token, forwarding) into the
tenant's ``MemoryObject`` (JSON, recall, the store, Workers AI's reply parsed), as in
production, with two differences the numbers correct for:

* the CPU clock is Node's MAIN thread (``engramdb_harness.mainThreadCpuNs``): Pyodide
  and the JS it calls. The SQL runs in workerd (another process, shown apart; it
  includes the harness's transport, so it is an upper bound), and the bridge's worker
  thread is not counted. The main thread's own share of each bridged statement
  (encoding it, decoding its answer) is fitted first (``Bridge``: per statement and per
  byte, on statements run straight on the JS storage) and subtracted, as is the CPU of
  the Workers AI stand-in (it makes up the vectors).
* vectors are clustered unit vectors (20 centres) chosen per text, so the vector leg
  works on data shaped like real embeddings; texts are 12 words of a 2,000-word
  vocabulary, so BM25 has realistic postings.

Cold: the first request of a new object instance over a stored tenant (the vector index
loads), median of 5. Warm: the median of ``BENCH_RUNS`` requests with different
queries. Memory: what a new object instance holds in Python objects after one recall
(``tracemalloc``, a separate pass: tracing slows everything down), the peak while that
recall loads the index, and the size the wasm memory has grown to in the whole run (it
never shrinks).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import statistics
import tracemalloc
from collections.abc import Callable
from typing import Any

import engramdb_harness
import pyodide_js
import pytest
from js import Object, process
from pyodide.ffi import to_js

from engramdb.store._sqlite import Statement
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
FLOATS = _setting("BENCH_FLOATS", "default").split(",")
MIXES = [mix for mix in _setting("BENCH_MIXES", "50x1000,500x100,1x50000").split(",") if mix]
SITE = _setting("BENCH_SITE", ".tox/.workers/py3.13/site")
COLD_RUNS = 5
WORDS = [f"w{i:04d}" for i in range(2000)]
MODELS = {384: "@cf/baai/bge-small-en-v1.5", 768: "@cf/baai/bge-base-en-v1.5"}


def cpu_ms() -> float:
    """The CPU of Node's main thread: Pyodide and the JS it calls (run.mjs explains)."""
    return float(engramdb_harness.mainThreadCpuNs()) / 1e6


def sql_ms() -> float:
    return float(engramdb_harness.childrenCpuNs()) / 1e6


def harness_stats() -> tuple[int, int]:
    """Statements bridged so far, and the bytes of their answers."""
    stats = engramdb_harness.durableObjectStats()
    return int(stats.calls), int(stats.bytes)


class Bridge:
    """The main thread's CPU per bridged statement: ``per_call`` ms plus ``per_byte`` ms
    per byte of answer (encoding the statement, decoding the JSON answer), fitted on
    statements run straight on the JS storage (so no engramdb code is in them), median of
    several rounds."""

    def __init__(self, storage: Any) -> None:
        sql = storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS calibration (b BLOB)")
        blob = to_js(bytes(range(256)) * 64)  # 16 KiB
        for _ in range(64):
            sql.exec("INSERT INTO calibration VALUES (?)", blob)
        small, large = [], []
        for _ in range(5):
            small.append(self._cost(lambda: sql.exec("SELECT 1").raw().toArray(), 100))
            large.append(
                self._cost(lambda: sql.exec("SELECT b FROM calibration").raw().toArray(), 5)
            )
        (ms_small, bytes_small), (ms_large, bytes_large) = (
            tuple(statistics.median(x[i] for x in runs) for i in range(2))
            for runs in (small, large)
        )
        self.per_byte = max(0.0, (ms_large - ms_small) / (bytes_large - bytes_small))
        self.per_call = max(0.0, ms_small - self.per_byte * bytes_small)

    @staticmethod
    def _cost(statement: Callable[[], Any], n: int) -> tuple[float, float]:
        (_, b0), c0 = harness_stats(), cpu_ms()
        for _ in range(n):
            statement()
        c1, (_, b1) = cpu_ms(), harness_stats()
        return (c1 - c0) / n, (b1 - b0) / n

    def cost(self, calls: int, answer_bytes: int) -> float:
        return self.per_call * calls + self.per_byte * answer_bytes


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


class Stages:
    """Where a request's CPU goes: while entered, each stage's function adds the CPU of
    its calls to ``spent`` (ms), by ``process.cpuUsage()`` (the whole process, in µs;
    :func:`cpu_ms` subtracts the other threads in clock ticks, too coarse for a stage).
    Only stages that run no SQL: during a statement the harness's transport thread
    works, which no Durable Object has. The vector search (the scope's cache entry: the
    index's search or, when it keeps no floats, its shortlist and its re-score of the
    rows read for it, the reading not included) holds the 4-bit and the exact scores. A
    pass of its own, since every wrapped call reads the clock twice."""

    def __init__(self) -> None:
        from engramdb._vectors.index import VectorIndex
        from engramdb.flows import _search as search
        from engramdb.store._sqlite.cache import SqliteVectorCache
        from engramdb_workers.ai import WorkersAIEmbedder

        self.targets: list[tuple[Any, str, str]] = [
            (SqliteVectorCache, "shortlist", "vector search"),
            (SqliteVectorCache, "search", "vector search"),
            (VectorIndex, "_nibble_scores", "4-bit scores"),
            (VectorIndex, "_score", "exact scores"),
            (VectorIndex, "rescore", "exact scores"),
            (search, "rank", "fusion and ranking"),
            (WorkersAIEmbedder, "_parse", "AI answer read"),
        ]
        self.spent: dict[str, float] = {}
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> Stages:
        for owner, name, label in self.targets:
            real = getattr(owner, name)
            self._saved.append((owner, name, real))
            setattr(owner, name, self._timed(real, label))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, real in reversed(self._saved):
            setattr(owner, name, real)
        self._saved.clear()

    def _timed(self, real: Callable[..., Any], label: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = _process_ms()
            try:
                return real(*args, **kwargs)
            finally:
                self.spent[label] = self.spent.get(label, 0.0) + _process_ms() - start

        return timed

    @property
    def labels(self) -> list[str]:
        return list(dict.fromkeys(label for _, _, label in self.targets))

    def row(self, kind: str, size: int, dimensions: int, requests: int, raw: float) -> str:
        cells = " | ".join(f"{self.spent.get(label, 0.0) / requests:.2f}" for label in self.labels)
        return f"| {kind} | {size:,} | {dimensions} | {raw:.1f} | {cells} |"


def _process_ms() -> float:
    usage = process.cpuUsage()
    return (float(usage.user) + float(usage.system)) / 1000


@pytest.fixture
def ai_stub() -> AiStandIn:
    """Replaces the suite's stub: the Worker's ``AI`` binding answers from the corpus."""
    return AiStandIn()


async def send(worker: Any, path: str, body: dict[str, Any]) -> int:
    status, _, _ = await call(worker, "POST", path, token=TOKEN, body=body)
    return status


def run(coro: Any) -> Any:
    return asyncio.get_event_loop().run_until_complete(coro)


def host(command: str, args: list[str], env: dict[str, str], minutes: int = 2) -> str:
    """A process on the host (``engramdb_http.run``, cwd the repository): its stdout."""
    import engramdb_http

    async def spawn() -> Any:
        variables = to_js(env, dict_converter=Object.fromEntries)
        return await engramdb_http.run(command, to_js(args), variables, minutes * 60_000)

    done = run(spawn())
    assert int(done.code) == 0, f"{command} {args} exited {done.code}:\n{done.stderr}"
    return str(done.stdout)


def mix_rows(mix: str) -> list[str]:
    """``bench_object_memory.py``'s table for one scope mix, run in a fresh Node process
    (the wasm memory never shrinks: one mix per Pyodide)."""
    args = ["--experimental-wasm-stack-switching", "workers/tests/run.mjs", SITE]
    args += ["workers/tests/bench_object_memory.py", "-s", "-q", "-p", "no:cacheprovider"]
    out = host("node", args, {"BENCH_MIX": mix}, minutes=20)
    return [line for line in out.splitlines() if line.startswith("|")]


def measure(
    request: Callable[[], Any], ai: AiStandIn, bridge: Bridge
) -> tuple[float, float, float, int]:
    """(CPU ms less the stand-ins, raw process CPU ms, workerd ms, statements)."""
    ai.spent_ms = 0.0
    (n0, b0), c0, s0 = harness_stats(), cpu_ms(), sql_ms()
    status = run(request())
    c1, s1, (n1, b1) = cpu_ms(), sql_ms(), harness_stats()
    assert status in (200, 201), status
    raw = c1 - c0
    return raw - ai.spent_ms - bridge.cost(n1 - n0, b1 - b0), raw, s1 - s0, n1 - n0


def test_cpu_per_request(make_worker: Any, ai_stub: AiStandIn, object_state: Any) -> None:
    print(f"\nwasm memory at the start: {pyodide_js._module.HEAP8.length / 2**20:.0f} MiB")
    bridge = Bridge(object_state.storage)
    rows: list[str] = []
    memory: list[str] = []
    warm: dict[tuple[str, int, int, str], float] = {}  # median CPU ms of warm recalls
    staged: list[str] = []  # the warm recalls again, by stage (Stages)
    for dimensions, size, floats in [(d, n, f) for d in DIMS for n in SIZES for f in FLOATS]:
        corpus = Corpus(dimensions)
        ai_stub.corpus = corpus
        worker_module.reset_isolate()
        limit = {} if floats == "default" else {"VECTOR_FLOATS_UP_TO": floats}
        tag = f" (floats up to {floats})" if len(FLOATS) > 1 else ""
        worker = make_worker(
            None, TOKENS, objects=True, EMBEDDING_MODEL=MODELS[dimensions], **limit
        )
        tenant = worker.objects.open(TENANT)
        items = [{"text": corpus.text(i), "scope": ("bench", "user")} for i in range(size)]
        for start in range(0, size, 500):
            run(tenant.tenant.memory.remember_many(items[start : start + 500]))
        stored = tenant.tenant.store.database_size
        queries = [corpus.query() for _ in range(RUNS + 1)]

        def recall(query: str, mode: str, worker: Any = worker) -> Callable[[], Any]:
            body = {"query": query, "mode": mode, "top_k": 10}
            return lambda: send(worker, "/v1/recall", body)

        covered = tenant.tenant.store._exec(
            Statement("SELECT coalesce(sum(items), 0) FROM vector_segments")
        )[0][0]
        colds = []
        for query in queries[:COLD_RUNS]:
            worker.objects.restart(TENANT)
            colds.append(measure(recall(query, "hybrid"), ai_stub, bridge))
        rows.append(
            row(f"cold hybrid recall, {covered:,} packed as written{tag}", size, dimensions, colds)
        )
        # What the object's maintenance alarm does once the writes stop: pack what the
        # writes left (a scope of at least 4,096 packs as written, a segment at a time).
        packed = run(tenant.tenant.memory.maintain()).packed
        colds = []
        for query in queries[:COLD_RUNS]:
            worker.objects.restart(TENANT)
            colds.append(measure(recall(query, "hybrid"), ai_stub, bridge))
        rows.append(
            row(f"cold hybrid recall, {packed:,} more by maintain(){tag}", size, dimensions, colds)
        )
        for mode in ("hybrid", "vector", "lexical"):
            runs = [measure(recall(q, mode), ai_stub, bridge) for q in queries[1:]]
            rows.append(row(f"warm {mode} recall{tag}", size, dimensions, runs))
            warm[(mode, size, dimensions, tag)] = statistics.median(r[0] for r in runs)
        for mode in ("hybrid", "vector", "lexical"):  # the same recalls, by stage
            with Stages() as timed:
                runs = [measure(recall(q, mode), ai_stub, bridge) for q in queries[1:]]
            raw = statistics.mean(r[1] for r in runs)
            staged.append(timed.row(f"warm {mode}{tag}", size, dimensions, len(runs), raw))
        texts = [corpus.text(size + i) for i in range(RUNS)]
        runs = [
            measure(lambda t=t, w=worker: send(w, "/v1/memories", {"text": t}), ai_stub, bridge)
            for t in texts
        ]
        rows.append(row(f"remember (one text){tag}", size, dimensions, runs))
        worker.objects.restart(TENANT)  # the warm index's memory, traced apart
        tracemalloc.start()
        run(recall(queries[0], "hybrid")())
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        memory.append(
            f"| {size:,}{tag} | {dimensions} | {held / 2**20:.1f} | {held / size / 1024:.2f} "
            f"| {peak / 2**20:.1f} | {pyodide_js._module.HEAP8.length / 2**20:.0f} "
            f"| {stored / size / 1024:.2f} |"
        )
    print(
        f"\nbridge: {bridge.per_call:.3f} ms per statement + {bridge.per_byte * 1e6:.1f} ms per MB"
    )
    print("\n| request | memories | d | CPU ms | main thread, raw | SQL (workerd) | statements |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(
        "\n| memories | d | Python memory after a cold recall, MiB | KiB per memory "
        "| peak during it, MiB | wasm memory so far, MiB | database KiB per memory |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(memory))
    labels = Stages().labels
    print(f"\n| request, mean ms | memories | d | main thread, raw | {' | '.join(labels)} |")
    print("|---|---|---|---|" + "---|" * len(labels))
    print("\n".join(staged))
    print("\n| warm recall | memories | d | hybrid / lexical CPU | vector / lexical CPU |")
    print("|---|---|---|---|---|")
    for (mode, size, dimensions, tag), lexical in warm.items():
        if mode == "lexical":
            hybrid = warm[("hybrid", size, dimensions, tag)]
            vector = warm[("vector", size, dimensions, tag)]
            print(
                f"| {tag or 'default'} | {size:,} | {dimensions} | {hybrid / lexical:.2f} "
                f"| {vector / lexical:.2f} |"
            )
    for mix in MIXES if MIXES != ["none"] else []:
        print("\n" + "\n".join(mix_rows(mix)))
    print("\n" + host("python", ["workers/tools/upload.py"], {}).strip())


def row(kind: str, size: int, dimensions: int, runs: list[tuple[float, float, float, int]]) -> str:
    med = [statistics.median(r[i] for r in runs) for i in range(4)]
    return (
        f"| {kind} | {size:,} | {dimensions} | {med[0]:.1f} | {med[1]:.1f} | {med[2]:.1f} "
        f"| {med[3]:.0f} |"
    )
