"""An object's memory with many scopes, one budget: a benchmark, not a test.

    BENCH_MIX=50x1000 node --experimental-wasm-stack-switching workers/tests/run.mjs \\
        .tox/.workers/py3.13/site workers/tests/bench_object_memory.py -s -q -p no:cacheprovider
    (BENCH_MIX=SCOPESxMEMORIES, e.g. 50x1000, 500x100, 1x50000; BENCH_CACHE_MB the
    object's VECTOR_CACHE_MB, default the Worker's; BENCH_DIMENSIONS, default 768;
    BENCH_UNPACKED=1: texts deferred, then embedded by reindex(), so scopes stay unpacked)

Run ONE mix per process: the wasm memory of a Pyodide only grows, so its size after each
phase is the isolate's peak so far, from a fresh Pyodide (printed first). One object is
filled scope by scope through ``Memory.remember_many`` (500 texts a call, each scope
recalled once after its writes, as a tenant's users write and read), then a new
instance of the object (a restart) recalls once in every scope, untraced; then another
restart does the same under ``tracemalloc`` (Python objects held after, and their peak;
tracing itself costs memory, so the wasm size is read before it).
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import pyodide_js
from js import process

from engramdb import HashEmbedder, Memory
from engramdb_workers.durable import CACHE_BYTES, DurableObjectStore
from objects import new_object_state, storage_of, write_scope


def _setting(name: str, default: str) -> str:
    value = getattr(process.env, name, None)
    return default if value is None else str(value)


SCOPES, PER_SCOPE = map(int, _setting("BENCH_MIX", "50x1000").split("x"))
BUDGET = int(_setting("BENCH_CACHE_MB", str(CACHE_BYTES // 2**20))) * 2**20
D = int(_setting("BENCH_DIMENSIONS", "768"))
PACKED = _setting("BENCH_UNPACKED", "0") != "1"


def _wasm_mib() -> float:
    return float(pyodide_js._module.HEAP8.length) / 2**20


def _memory(name: str) -> tuple[Memory, Any]:
    store = DurableObjectStore(storage_of(new_object_state(name)), cache_bytes=BUDGET)
    return Memory(store, HashEmbedder(dimensions=D)), store


def _recall_every_scope(memory: Memory, scopes: list[tuple[str, ...]]) -> None:
    for n, scope in enumerate(scopes):
        memory.recall(f"fact 3 of {n}: w3", [scope], mode="vector")


def test_object_memory_with_many_scopes() -> None:
    rows = [f"| wasm memory of a fresh Pyodide | {_wasm_mib():.1f} MiB |"]
    name = f"bench-{SCOPES}x{PER_SCOPE}"
    scopes = [("acme", "user", f"u{n:03d}") for n in range(SCOPES)]
    memory, store = _memory(name)
    started = time.perf_counter()
    written = 0.0  # the wasm memory after a scope's writes, before its recall
    for n, scope in enumerate(scopes):
        write_scope(memory, n, scope, PER_SCOPE, packed=PACKED)
        written = max(written, _wasm_mib())
        memory.recall(f"fact w{n % 97}", [scope], mode="vector")
    rows += [
        f"| writes | {time.perf_counter() - started:.1f} s |",
        f"| wasm memory after a scope's writes, before its recall (the most) | {written:.1f} MiB |",
        f"| indexes held after the writes (estimate) | {store._cache.held() / 2**20:.1f} MiB |",
        f"| whole indexes evicted during the writes | {store._cache.evictions} |",
        f"| wasm memory after the writes | {_wasm_mib():.1f} MiB |",
    ]
    memory, store = _memory(name)
    started = time.perf_counter()
    _recall_every_scope(memory, scopes)
    rows += [
        f"| a cold object's recall of every scope | {time.perf_counter() - started:.1f} s |",
        f"| indexes held after it (estimate) | {store._cache.held() / 2**20:.1f} MiB |",
        f"| wasm memory after it | {_wasm_mib():.1f} MiB |",
    ]
    memory, store = _memory(name)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _recall_every_scope(memory, scopes)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rows += [
        f"| the same, traced: Python objects held after | {(held - before) / 2**20:.1f} MiB |",
        f"| the same, traced: their peak | {(peak - before) / 2**20:.1f} MiB |",
    ]
    how = "packed as written" if PACKED else "unpacked"
    print(
        f"\n| {SCOPES} scopes × {PER_SCOPE:,} memories ({how}), d={D}, "
        f"budget {BUDGET // 2**20} MiB | |"
    )
    print("|---|---|")
    print("\n".join(rows))
