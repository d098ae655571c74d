"""The conformance suite's fixtures: every store, in both faces.

Tests take ``memory`` (and, when they need them, ``clock`` and ``make_memory``) and know
nothing about backends. ``memory``'s methods are always awaited: for the sync face they
wrap ``Memory``'s plain calls, so one test body checks both faces.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import ManualClock

from engramdb import InMemoryStore
from engramdb.testing import StoreUnderTest
from fixtures import (  # noqa: F401
    clock_fixture,
    embedder_fixture,
    memory_factory,
    memory_fixture,
)

STORES = ["inmemory"]
if sys.platform != "emscripten":  # drivers/ is CPython-only
    STORES += ["sqlite-memory", "sqlite-file"]


def _open_store(kind: str, tmp_path: Path) -> Any:
    if kind == "inmemory":
        return InMemoryStore()
    from engramdb.sqlite import SqliteStore

    return SqliteStore(":memory:" if kind == "sqlite-memory" else tmp_path / "memory.db")


@pytest.fixture(params=[(s, f) for s in STORES for f in ("sync", "async")], ids="-".join)
def make_memory(
    request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock
) -> Iterator[Callable[..., Any]]:
    """Build memories over ONE store of the parametrised kind and face."""
    kind, face = request.param
    store = _open_store(kind, tmp_path)
    yield memory_factory(store, face, clock)
    store.close()


@pytest.fixture(params=[(s, f) for s in STORES for f in ("sync", "async")], ids="-".join)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreUnderTest]:
    """A fresh, empty store of the parametrised kind, seen through one face; a file store
    can open a second store object on the same file."""
    kind, face = request.param
    store = _open_store(kind, tmp_path)
    another = None
    if kind == "sqlite-file":
        from engramdb.sqlite import SqliteStore

        def another() -> SqliteStore:
            return SqliteStore(tmp_path / "memory.db")

    yield StoreUnderTest(store, face, another)
    store.close()
