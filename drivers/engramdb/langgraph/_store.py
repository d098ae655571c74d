"""``EngramStore``: LangGraph's ``BaseStore`` over any engramdb store."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from engramdb import AsyncMemory, ConfigurationError, InMemoryStore, Limits, Memory, StoreError
from engramdb.driver import system_clock
from engramdb.flows import adrive, drive
from engramdb.flows.context import FlowContext
from engramdb.store import StoreCapabilities
from engramdb.validate import Validator, check_int
from langgraph.store.base import BaseStore, Op, Result, TTLConfig

from ._batch import Settings, batch_flow, sweep_flow
from ._embeddings import index_of
from ._ops import check_ops

__all__ = ["EngramStore"]


class EngramStore(BaseStore):  # type: ignore[misc,unused-ignore]
    """A LangGraph store whose items live in an engramdb store.

    ``EngramStore(store=None, *, index=None, ttl=None, limits=None, keep_revisions=10,
    clock=None)``. ``store`` is any engramdb store (default: a new ``InMemoryStore``), or
    a ``Memory``/``AsyncMemory``, whose store is used and whose embedder is the default
    ``index["embed"]``. ``index`` is LangGraph's ``{"dims", "embed", "fields"}``; ``ttl``
    LangGraph's ``TTLConfig`` (``default_ttl`` minutes; ``refresh_on_read``: reads with
    ``refresh_ttl`` move expiries, off unless set, as in LangGraph's SQL stores). Namespaces
    are scopes, one record per item (see ``docs/langgraph.md``). Whoever holds the store
    reads and writes every namespace of it, as with LangGraph's own stores.
    """

    def __init__(
        self,
        store: Any = None,
        *,
        index: Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        limits: Limits | None = None,
        keep_revisions: int = 10,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if isinstance(store, Memory | AsyncMemory):
            if index is None:
                index = {"embed": store.embedder}
            store = store.store
        self.store = InMemoryStore() if store is None else store
        capabilities = getattr(self.store, "capabilities", None)
        if not isinstance(capabilities, StoreCapabilities):
            raise ConfigurationError(
                f"store={self.store!r} is not an engramdb store; pass e.g. "
                "engramdb.InMemoryStore() or engramdb.sqlite.SqliteStore('memory.db')"
            )
        if ttl is not None and not isinstance(ttl, Mapping):
            raise ConfigurationError(
                f"ttl={ttl!r} must be LangGraph's TTLConfig, e.g. "
                "{'default_ttl': 60, 'refresh_on_read': True}, or None"
            )
        self._index = index_of(index)
        self.index_config = None if self._index is None else self._index.config
        self.embeddings = None if self._index is None else self._index.embeddings
        self.embedder = None if self._index is None else self._index.embedder
        self.supports_ttl = bool(capabilities.supports_ttl)
        self.ttl_config = ttl
        self._validator = Validator(limits)
        self._clock = clock or system_clock
        context = None
        if self.embedder is not None:
            context = FlowContext.of(
                self.embedder, clock=self._clock, capabilities=capabilities, limits=limits
            )
        refresh_on_read = bool(ttl and ttl.get("refresh_on_read", False))
        keep = check_int("keep_revisions", keep_revisions, 0, 1000)
        if not capabilities.supports_history:
            keep = 0
        self._settings = Settings(context, keep, refresh_on_read)

    def __repr__(self) -> str:
        return f"EngramStore({self.store!r}, index={self.index_config!r})"

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` with plain calls (no event loop is used, so this works on a thread
        that runs one); needs a store with ``batch``."""
        checked = check_ops(ops, self._index, self._validator, self.supports_ttl)
        if not callable(getattr(self.store, "batch", None)):
            raise StoreError(
                f"{type(self.store).__name__} is async-only; call abatch() (or the a* methods)"
            )
        return drive(batch_flow(self._settings, checked, self._clock()), self.embedder, self.store)  # type: ignore[arg-type]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` awaiting the store and the embedder (a sync-only store is called
        as it is, on the loop's thread)."""
        checked = check_ops(ops, self._index, self._validator, self.supports_ttl)
        flow = batch_flow(self._settings, checked, self._clock())
        if not callable(getattr(self.store, "abatch", None)):
            return drive(flow, self.embedder, self.store)  # type: ignore[arg-type]
        return await adrive(flow, self.embedder, self.store)  # type: ignore[arg-type]

    def sweep_ttl(self, batch_size: int = 1000) -> int:
        """Delete every expired item now (they are already hidden from every read);
        answer how many records went."""
        return drive(sweep_flow(batch_size, self._clock()), self.embedder, self.store)  # type: ignore[arg-type]

    async def asweep_ttl(self, batch_size: int = 1000) -> int:
        """:meth:`sweep_ttl`, awaited."""
        return await adrive(sweep_flow(batch_size, self._clock()), self.embedder, self.store)  # type: ignore[arg-type]
