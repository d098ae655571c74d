"""Every store reachable here, in both faces, behind one blocking interface."""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engramdb import AsyncMemory, HashEmbedder, InMemoryStore, Memory

STORES = ["inmemory", "sqlite-memory", "sqlite-file"]
FACES = [(store, face) for store in STORES for face in ("sync", "async")]

_files = itertools.count()


class Blocking:
    """Calls a ``Memory`` or an ``AsyncMemory`` (on a loop of its own) alike, and a bound
    view of either."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop | None) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._target, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if inspect.isawaitable(result):
                assert self._loop is not None
                return self._loop.run_until_complete(result)
            if name == "bind":
                return Blocking(result, self._loop)
            return result

        return call


@contextmanager
def isolation_memory(kind: str, face: str, directory: Path) -> Iterator[Blocking]:
    """A fresh, empty store of ``kind`` seen through ``face``."""
    if kind == "inmemory":
        store: Any = InMemoryStore()
    else:
        from engramdb.sqlite import SqliteStore

        where = ":memory:" if kind == "sqlite-memory" else directory / f"{next(_files)}.db"
        store = SqliteStore(where)
    loop = asyncio.new_event_loop() if face == "async" else None
    memory = (
        AsyncMemory(store, HashEmbedder()) if face == "async" else Memory(store, HashEmbedder())
    )
    try:
        yield Blocking(memory, loop)
    finally:
        store.close()
        if loop is not None:
            loop.close()
