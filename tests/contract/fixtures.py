"""The store-independent fixtures of the conformance suite.

A conftest that runs the suite against a store imports these and adds its own
``make_memory`` (a factory of memories over ONE store): tests/contract/conftest.py for
the core and SQLite stores, workers/tests/conftest.py for D1. The functions are named
``*_fixture`` so that importing them does not shadow test parameters of the same name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fakes import CountingEmbedder, ManualClock


class SyncFace:
    """``Memory`` with awaitable methods, so a test body serves both faces."""

    def __init__(self, memory: Any) -> None:
        self._memory = memory

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._memory, name)
        if not callable(attribute):
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            return attribute(*args, **kwargs)

        return call

    async def aclose(self) -> None:
        self._memory.close()


def bound(memory: Any, scope: tuple[str, ...], **options: Any) -> Any:
    """``memory.bind(scope, ...)`` in the memory's face (the sync face's view made
    awaitable)."""
    inner = getattr(memory, "_memory", None)
    if inner is None:
        return memory.bind(scope, **options)
    return type(memory)(inner.bind(scope, **options))


def memory_factory(store: Any, face: str, clock: ManualClock) -> Callable[..., Any]:
    """``make(embedder, **options)``: a memory over ``store`` in ``face`` (``"sync"``,
    wrapped in :class:`SyncFace`, or ``"async"``) on ``clock`` unless options name one."""
    from engramdb import AsyncMemory, Memory

    def make(embedder: Any, **options: Any) -> Any:
        options.setdefault("clock", clock)
        if face == "async":
            return AsyncMemory(store, embedder, **options)
        return SyncFace(Memory(store, embedder, **options))

    return make


@pytest.fixture(name="clock")
def clock_fixture() -> ManualClock:
    return ManualClock()


@pytest.fixture(name="embedder")
def embedder_fixture() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture(name="memory")
def memory_fixture(make_memory: Callable[..., Any], embedder: CountingEmbedder) -> Any:
    return make_memory(embedder)
