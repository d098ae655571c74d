"""``BoundMemory`` and ``AsyncBoundMemory``: a memory seen through a scope the operator
chose (``memory.bind(...)``); see ``_bound_flows`` for the authority rules and
``_bound_writes`` for how its writes and documents are checked and planned.

Their operations are written once, async, in ``_view_faces_async.py``;
``_view_faces_sync.py`` is generated from it (``tools/unasync.py``). Here is what they
share and where they differ in substance: driving a flow, and the labeler (an async one
runs only in an async view, within its timeout)."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any, Self, TypeVar

from engramdb._base.errors import ConfigurationError, ValidationError, shown
from engramdb._base.types import Scope
from engramdb.flows._bound_flows import Authority, BoundFlows, BoundStatus
from engramdb.flows._bound_writes import (
    ViewWrites,
)
from engramdb.flows._effects import Flow, adrive, drive
from engramdb.flows._labels import Labels
from engramdb.flows._policy import Policy
from engramdb.store import ScopeSet

__all__ = ["BoundStatus"]  # the faces: _view_faces_async, _view_faces_sync

T = TypeVar("T")


class _BoundBase(ViewWrites):
    def __init__(
        self, memory: Any, authority: Authority, policy: Policy, *, closes_memory: bool = False
    ) -> None:
        if not isinstance(closes_memory, bool):
            raise ValidationError(f"closes_memory={shown(closes_memory)} must be True or False")
        self._memory = memory
        self._closes_memory = closes_memory
        self._bound = BoundFlows(memory.flows.context, authority, policy)
        self._bound_uploads = memory.flows.uploads  # the memory's, shared by its views
        if policy.max_items is not None and not memory.flows.context.capabilities.supports_policy:
            raise ConfigurationError(
                "max_items needs a store that keeps policy evidence (supports_policy is "
                "False for this store); leave max_items=None"
            )

    @property
    def scope(self) -> Scope:
        """The scope writes go to."""
        return self._bound.authority.scope

    @property
    def session(self) -> str | None:
        """The bound session id, or None."""
        return self._bound.authority.session

    @property
    def session_scope(self) -> Scope | None:
        """Where ``durability="session"`` writes go: ``(*scope, "session", session)``."""
        return self._bound.authority.session_scope

    @property
    def read(self) -> ScopeSet:
        """The read-only scopes recall also searches."""
        return self._bound.authority.read

    @property
    def policy(self) -> Policy:
        return self._bound.policy

    def _with_maintenance(self, status: BoundStatus) -> BoundStatus:
        """``status`` with the memory's own maintainer's snapshot, scoped (no counts of
        the whole store: :meth:`~engramdb.MaintenanceSnapshot.scoped`)."""
        maintainer = getattr(self._memory, "maintainer", None)
        if maintainer is None:
            return status
        return replace(status, maintenance=maintainer.snapshot.scoped())

    @property
    def space(self) -> str | None:
        """The id of the embedding space recall searches, or None while the embedder
        has not learned its dimensions."""
        try:
            return str(self._memory.embedder.space.id)
        except ConfigurationError:
            return None

    def __repr__(self) -> str:
        authority = self._bound.authority
        return (
            f"{type(self).__name__}(scope={authority.scope!r}, session={authority.session!r}, "
            f"read={authority.read!r})"
        )


class _BoundMemoryBase(_BoundBase):
    """A :class:`~engramdb.Memory` bound to a scope (``memory.bind(...)``): no method
    takes a scope, so a model, a tool argument or a request body cannot choose one."""

    def _run(self, flow: Flow[T]) -> T:
        return drive(
            flow, self._memory.embedder, self._memory.store, reranker=self._memory.reranker
        )

    def close(self) -> None:
        """Close the memory when the view holds it (``bind(..., closes_memory=True)``, as
        ``engramdb.open(scope=...)`` binds); otherwise nothing: the memory is its
        maker's to close."""
        if self._closes_memory:
            self._memory.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _proposed(self, text: str) -> Labels:
        labeler = self._bound.policy.labeler
        if labeler is None:
            return {}
        try:
            proposed = labeler(text)
        except Exception:
            return {}
        if inspect.isawaitable(proposed):  # an async labeler runs only under AsyncMemory
            getattr(proposed, "close", lambda: None)()
            return {}
        return self._bound.proposed(proposed)


class _AsyncBoundMemoryBase(_BoundBase):
    """An :class:`~engramdb.AsyncMemory` bound to a scope: the methods of
    :class:`BoundMemory`, awaited."""

    async def _run(self, flow: Flow[T]) -> T:
        start = getattr(self._memory, "_start_maintainer", None)
        if start is not None:  # the memory's own maintainer starts on first use
            start()
        return await adrive(
            flow, self._memory.embedder, self._memory.store, reranker=self._memory.reranker
        )

    async def aclose(self) -> None:
        """Close the memory when the view holds it (``bind(..., closes_memory=True)``, as
        ``engramdb.open_async(scope=...)`` binds); otherwise nothing."""
        if self._closes_memory:
            await self._memory.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _proposed(self, text: str) -> Labels:
        labeler = self._bound.policy.labeler
        if labeler is None:
            return {}
        import asyncio  # here, not at import: asyncio loads threading and reads the clock

        try:
            proposed = labeler(text)
            if inspect.isawaitable(proposed):
                proposed = await asyncio.wait_for(proposed, self._bound.policy.labeler_timeout)
        except Exception:
            return {}
        return self._bound.proposed(proposed)
