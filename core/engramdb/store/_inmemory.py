"""``InMemoryStore``: the store of the core, for Workers isolates, scripts and tests.

It is the reference semantics and nothing more: a :class:`~engramdb.store.semantics.State`
(items in exact scope partitions, vectors as float32 bytes plus sign-bit codes in one
``VectorIndex`` per scope and space, one pure-Python BM25 index per scope) that each
batch changes through :func:`~engramdb.store.semantics.resolve`. Nothing survives the process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from engramdb._base.errors import StoreError
from engramdb.store import Op, StoreCapabilities, check_writable
from engramdb.store.semantics import OPS, State, resolve

__all__ = ["InMemoryStore"]


class InMemoryStore:
    """A store held in this process's memory. ``batch`` and ``abatch`` run the same code.

    Not thread-safe: share it between threads only behind your own lock.
    :meth:`read_only_view` gives a read-only store over the same memories.
    """

    capabilities = StoreCapabilities(durable=False, thread_safe=False, supports_policy=True)
    OPS: ClassVar[frozenset[type]] = OPS
    """The op types it answers: every op :func:`~engramdb.store.semantics.resolve` answers."""

    def __init__(self) -> None:
        self._state = State()
        self._closed = False

    def read_only_view(self) -> InMemoryStore:
        """A store over the same memories, open read-only (``capabilities.read_only``):
        it answers reads (and sees this store's later writes) and refuses every batch that
        writes with ``StoreError``, changing nothing. Closing it leaves this one open."""
        view = InMemoryStore()
        view._state = self._state
        view.capabilities = replace(self.capabilities, read_only=True)
        return view

    def __repr__(self) -> str:
        mode = ", read-only" if self.capabilities.read_only else ""
        return f"InMemoryStore({len(self._state)} items{mode})"

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        if self._closed:
            raise StoreError("this InMemoryStore is closed; create a new one")
        if self.capabilities.read_only:
            check_writable(ops, "this InMemoryStore view")
        return resolve(ops, self._state)

    async def abatch(self, ops: Sequence[Op]) -> list[Any]:
        return self.batch(ops)

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self.close()
