"""Fixtures for the Worker tests, run inside Pyodide by workers/tests/run.mjs.

* ``d1``: a fresh, empty miniflare (workerd) D1 database per test, as a Python Worker
  sees ``self.env.DB``: the JS object wrapped by the ``workers`` SDK's binding wrapper.
* ``make_memory`` / ``memory`` / ``clock`` / ``embedder``: the conformance suite's
  fixtures (tests/contract/conftest.py) over ``AsyncMemory(D1Store(d1), ...)``.
* ``ai``: an AI binding stub (a JS object named ``Ai``) answering ``{shape, data}`` with
  HashEmbedder vectors, seen through the SDK wrapper like the real binding.
* ``make_worker``: the Worker's ``Default`` entrypoint built with a JS env holding
  DB, AI and the string vars, as workerd builds it.

The two workerd-internal modules the SDK imports are stubbed here, before ``workers`` is
imported; nothing else of the SDK is replaced.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

if sys.platform != "emscripten":  # pragma: no cover
    pytest.skip(
        "the Worker tests run inside Pyodide (workers/tests/run.mjs)", allow_module_level=True
    )


def _stub_runtime_modules() -> None:
    helper = types.ModuleType("_pyodide_entrypoint_helper")
    helper.cloudflareWorkersModule = None  # type: ignore[attr-defined]
    helper.cloudflareSocketsModule = None  # type: ignore[attr-defined]
    helper.patchWaitUntil = lambda ctx: None  # type: ignore[attr-defined]

    async def do_an_import(name: str) -> Any:
        raise ImportError(f"{name} is not available outside workerd")

    helper.doAnImport = do_an_import  # type: ignore[attr-defined]

    def patch_env_helper(kwds: Any) -> Iterator[None]:
        yield

    helper.patch_env_helper = patch_env_helper  # type: ignore[attr-defined]
    flags = types.ModuleType("_cloudflare_compat_flags")
    flags.python_workflows_implicit_dependencies = True  # type: ignore[attr-defined]
    flags.python_request_headers_preserve_commas = True  # type: ignore[attr-defined]
    flags.__getattr__ = lambda name: False  # type: ignore[attr-defined]
    sys.modules.setdefault("_pyodide_entrypoint_helper", helper)
    sys.modules.setdefault("_cloudflare_compat_flags", flags)


_stub_runtime_modules()

import engramdb_harness  # noqa: E402  (the JS module run.mjs registers)
from js import Object  # noqa: E402
from pyodide.ffi import create_proxy, to_js  # noqa: E402

# The repo's async test runner (WebLoop run_until_complete under JSPI), reused as is.
from tests.conftest import pytest_pyfunc_call  # noqa: E402, F401
from workers.rpc import _BindingWrapper  # noqa: E402

from engramdb import AsyncMemory, HashEmbedder  # noqa: E402
from engramdb_workers.d1 import D1Store  # noqa: E402
from objects import Objects, new_object_state, storage_of  # noqa: E402

sys.path.insert(0, "/mnt/project/tests/contract")
from fakes import ManualClock  # noqa: E402
from fixtures import clock_fixture, embedder_fixture, memory_fixture  # noqa: E402, F401


async def new_d1() -> Any:
    """A fresh D1 database as ``self.env.DB`` is in a Worker (SDK-wrapped)."""
    return _BindingWrapper(await engramdb_harness.newD1())


@pytest.fixture
def d1() -> Any:
    import asyncio

    return asyncio.get_event_loop().run_until_complete(new_d1())


@pytest.fixture
def object_state() -> Any:
    """A fresh Durable Object's ``ctx``: its own, empty database."""
    return new_object_state()


@pytest.fixture
def object_storage(object_state: Any) -> Any:
    """The fresh object's ``self.ctx.storage`` as a Python Durable Object sees it."""
    return storage_of(object_state)


@pytest.fixture
def make_memory(d1: Any, clock: ManualClock) -> Iterator[Callable[..., Any]]:
    """Build memories over ONE D1Store (async face: D1 can only be awaited), with a
    budget of one byte: every search and write drops every cache and every index not in
    use (``SqliteVectorCache.fit``), and the suite must pass the same."""
    store = D1Store(d1, cache_bytes=1)

    def make(embedder: Any, **options: Any) -> Any:
        options.setdefault("clock", clock)
        return AsyncMemory(store, embedder, **options)

    yield make
    store.close()


class AiStub:
    """The behaviour behind the ``Ai``-named JS stub: HashEmbedder vectors as {shape, data};
    for a reranker's inputs ``{query, contexts: [{text}]}`` the documented
    ``{response: [{id, score}]}``, best first, a context's score being how many of the
    query's words it holds (``rerank_answer`` replaces it)."""

    def __init__(self, dimensions: int = 768) -> None:
        self.inner = HashEmbedder(dimensions=dimensions)
        self.calls: list[tuple[str, list[str]]] = []
        self.fail: str | None = None
        self.answer: Callable[[list[str]], Any] | None = None
        self.rerank_answer: Callable[[str, list[str]], Any] | None = None

    def __call__(self, model: Any, inputs: Any, options: Any = None) -> Any:
        if hasattr(inputs, "contexts"):
            return to_js(self._rerank(str(model), inputs), dict_converter=Object.fromEntries)
        texts = inputs.text
        texts = [str(texts)] if isinstance(texts, str) else [str(t) for t in texts]
        self.calls.append((str(model), texts))
        if self.fail:  # the JS stub throws Error(message), as the binding does
            payload: Any = {"$error": self.fail}
        elif len(texts) > 100:
            payload = {"$error": "AiError: 5006: text: must NOT have more than 100 items"}
        elif self.answer is not None:
            payload = self.answer(texts)
        else:
            data = [list(v) for v in self.inner.embed(texts, "document")]
            payload = {"shape": [len(data), self.inner.dimensions], "data": data}
        return to_js(payload, dict_converter=Object.fromEntries)

    def _rerank(self, model: str, inputs: Any) -> Any:
        query = str(inputs.query)
        contexts = [str(context.text) for context in inputs.contexts]
        self.calls.append((model, [query, *contexts]))
        if self.fail:
            return {"$error": self.fail}
        if self.rerank_answer is not None:
            return self.rerank_answer(query, contexts)
        rows = [{"id": i, "score": _overlap(query, text)} for i, text in enumerate(contexts)]
        return {"response": sorted(rows, key=lambda row: -row["score"])}


def _overlap(query: str, text: str) -> float:
    words = set(text.lower().split())
    return float(sum(1 for word in query.lower().split() if word in words))


def ai_binding(stub: AiStub) -> Any:
    """The JS ``Ai`` object (unwrapped) whose ``run`` calls ``stub``."""
    return engramdb_harness.makeAi(create_proxy(stub))


@pytest.fixture
def ai_stub() -> AiStub:
    return AiStub()


@pytest.fixture
def ai(ai_stub: AiStub) -> Any:
    """The AI binding as ``self.env.AI`` is in a Worker (SDK-wrapped JS object ``Ai``)."""
    return _BindingWrapper(ai_binding(ai_stub))


@pytest.fixture
def make_worker(ai_stub: AiStub) -> Iterator[Callable[..., Any]]:
    """``make_worker(db_js, tokens_json, **vars)`` -> the entry's ``Default`` instance."""
    import entry  # workers/src/entry.py
    from engramdb_workers import worker

    worker.reset_isolate()

    def make(db: Any, tokens: str | None, *, objects: bool = False, **variables: str | None) -> Any:
        """``objects=True``: one Durable Object per tenant (``env.MEMORY``, see
        ``objects.Objects``, reachable as ``worker.objects``) instead of D1; a variable
        given as None is left out (``AI=None``: no AI binding)."""
        env: dict[str, Any] = {"AI": ai_binding(ai_stub), **variables}
        env = {name: value for name, value in env.items() if value is not None}  # AI=None
        if db is not None:
            env["DB"] = getattr(db, "_binding", db)  # the JS object: the SDK wraps it
        if tokens is not None:
            env["ENGRAMDB_TOKENS"] = tokens
        js_env = to_js(env, dict_converter=Object.fromEntries)
        namespace = None
        if objects:
            namespace = Objects(js_env)
            js_env.MEMORY = namespace.binding
        worker = entry.Default(engramdb_harness.makeCtx(), js_env)
        worker.objects = namespace
        return worker

    yield make
    worker.reset_isolate()


@pytest.fixture(params=["d1", "objects", "shards"])
def make_host(request: pytest.FixtureRequest, make_worker: Callable[..., Any]) -> Any:
    """``make_host(tokens, **vars)``: the Worker over one D1 database, over one Durable
    Object per tenant, or over four per tenant (``SHARDS=4``): what every deployment
    must answer alike."""
    if request.param == "d1":
        d1 = request.getfixturevalue("d1")
        return lambda tokens, **variables: make_worker(d1, tokens, **variables)
    if request.param == "shards":
        return lambda tokens, **variables: make_worker(
            None, tokens, objects=True, **{"SHARDS": "4", **variables}
        )
    return lambda tokens, **variables: make_worker(None, tokens, objects=True, **variables)
