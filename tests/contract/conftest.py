"""The conformance suite's fixtures: every store, in both faces.

Tests take ``memory`` (and, when they need them, ``clock`` and ``make_memory``) and know
nothing about backends. ``memory``'s methods are always awaited: for the sync face they
wrap ``Memory``'s plain calls, so one test body checks both faces.
"""

from __future__ import annotations

import importlib.util
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
    # sqlite-memory takes the default vector kernel (numpy where it imports), sqlite-file
    # the pure-Python one, sqlite-codes (a file) the pure-Python one keeping only codes
    # (every search reads its exact candidates' rows), sqlite-numpy (a file) numpy's,
    # where numpy imports.
    STORES += ["sqlite-memory", "sqlite-file", "sqlite-codes"]
    if importlib.util.find_spec("numpy") is not None:
        STORES += ["sqlite-numpy"]
KERNELS = {
    "sqlite-memory": None,
    "sqlite-file": "python",
    "sqlite-codes": "codes",
    "sqlite-numpy": "numpy",
}


def _open_store(kind: str, tmp_path: Path) -> Any:
    if kind == "inmemory":
        return InMemoryStore()
    from engramdb.sqlite import SqliteStore

    path = ":memory:" if kind == "sqlite-memory" else tmp_path / "memory.db"
    return SqliteStore(path, vector_kernel=KERNELS[kind])


def _read_only_opener(kind: str, store: Any, tmp_path: Path) -> Callable[[], Any] | None:
    """How to open a read-only store object on ``store``'s storage: the in-memory
    store's view, a file's ``read_only=True`` store; None for ``:memory:`` (no second
    connection sees it)."""
    if kind == "inmemory":
        return store.read_only_view  # type: ignore[no-any-return]
    if kind == "sqlite-memory":
        return None
    from engramdb.sqlite import SqliteStore

    def read_only() -> SqliteStore:
        return SqliteStore(tmp_path / "memory.db", vector_kernel=KERNELS[kind], read_only=True)

    return read_only


@pytest.fixture(params=[(s, f) for s in STORES for f in ("sync", "async")], ids="-".join)
def make_memory(
    request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock
) -> Iterator[Callable[..., Any]]:
    """Build memories over ONE store of the parametrised kind and face; its
    ``read_only`` attribute builds them over a read-only store object on the same storage
    (None where the kind has none), each such store closed at the end."""
    kind, face = request.param
    store = _open_store(kind, tmp_path)
    make = memory_factory(store, face, clock)
    opener = _read_only_opener(kind, store, tmp_path)
    readers: list[Any] = []

    def read_only(embedder: Any, **options: Any) -> Any:
        assert opener is not None
        readers.append(opener())
        return memory_factory(readers[-1], face, clock)(embedder, **options)

    make.read_only = None if opener is None else read_only  # type: ignore[attr-defined]
    yield make
    for reader in readers:
        reader.close()
    store.close()


@pytest.fixture(params=[(s, f) for s in STORES for f in ("sync", "async")], ids="-".join)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreUnderTest]:
    """A fresh, empty store of the parametrised kind, seen through one face; a file store
    can open a second store object on the same file."""
    kind, face = request.param
    store = _open_store(kind, tmp_path)
    another = None
    if kind in ("sqlite-file", "sqlite-codes", "sqlite-numpy"):
        from engramdb.sqlite import SqliteStore

        def another() -> SqliteStore:
            return SqliteStore(tmp_path / "memory.db", vector_kernel=KERNELS[kind])

    yield StoreUnderTest(store, face, another, _read_only_opener(kind, store, tmp_path))
    store.close()
