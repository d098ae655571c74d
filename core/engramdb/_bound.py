"""``BoundMemory`` and ``AsyncBoundMemory``: a memory seen through a scope the operator
chose (``memory.bind(...)``); see ``_bound_flows`` for the authority rules."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, TypeVar

from ._bound_flows import Authority, BoundFlows, Durability
from ._effects import Flow, adrive, drive
from ._errors import ConfigurationError
from ._labels import Labels
from ._policy import Policy
from ._ranking import Fusion
from ._types import Hits, MemoryRecord, RecallMode, Remembered, Scope
from .store import ScopeSet

__all__ = ["AsyncBoundMemory", "BoundMemory"]

T = TypeVar("T")


class _BoundBase:
    def __init__(self, memory: Any, authority: Authority, policy: Policy) -> None:
        self._memory = memory
        self._bound = BoundFlows(memory._flows, authority, policy)
        if policy.max_items is not None and not memory._flows.capabilities.supports_policy:
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

    def __repr__(self) -> str:
        authority = self._bound.authority
        return (
            f"{type(self).__name__}(scope={authority.scope!r}, session={authority.session!r}, "
            f"read={authority.read!r})"
        )

    def _prepare(
        self, text: object, durability: object, labels: object, **fields: Any
    ) -> tuple[str, Scope, Labels, dict[str, Any]]:
        """A remember's arguments, checked before the labeler runs or anything is
        written: the (redacted) text, the scope, the given labels and the other fields."""
        bound = self._bound
        checked = bound.flows._document_text(text)  # redacted before the labeler sees it
        scope = bound.authority.target(durability)
        given = bound.labels(labels)
        bound.flows._expiry(fields["expires_at"], fields["ttl"], bound.flows._now())
        fields["importance"] = bound.flows.check.importance(fields["importance"])
        fields["metadata"] = bound.flows.check.metadata(fields["metadata"])
        return checked, scope, given, fields


class BoundMemory(_BoundBase):
    """A :class:`~engramdb.Memory` bound to a scope (``memory.bind(...)``): no method
    takes a scope, so a model, a tool argument or a request body cannot choose one."""

    def _run(self, flow: Flow[T]) -> T:
        return drive(flow, self._memory.embedder, self._memory.store)

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

    def remember(
        self,
        text: str,
        *,
        durability: Durability = "shared",
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
        expires_at: Any = None,
        ttl: Any = None,
    ) -> Remembered:
        """Remember ``text`` in the bound scope (``durability="session"``: the bound
        session's scope). ``ttl`` (a ``timedelta`` or seconds) or ``expires_at`` sets an
        expiry. Labels are normalised and held to the view's label rules; the labeler's
        labels fill the names not given (best effort: its failure adds none). The
        answer is the record, with ``dropped``: how many memories the scope's capacity
        (``Policy(max_items=...)``) dropped in the same write."""
        checked, scope, given, fields = self._prepare(
            text,
            durability,
            labels,
            metadata=metadata,
            importance=importance,
            expires_at=expires_at,
            ttl=ttl,
        )
        automatic = self._proposed(checked)
        return self._run(self._bound.remember(checked, scope, given, automatic, **fields))

    def recall(
        self,
        query: str,
        *,
        top_k: int = 5,
        labels: Mapping[str, list[str]] | None = None,
        mode: RecallMode = "hybrid",
        min_similarity: float | None = None,
        filter: Mapping[str, Any] | None = None,
        fusion: Fusion = "convex",
        weights: Mapping[str, float] | None = None,
        exact: bool = False,
    ) -> Hits:
        """Recall from the bound scope, the session and the read scopes, with the view's
        policy; ``labels`` is the label context of this work (for utility per context).
        The hits' ``selection_id`` is the receipt ``complete()`` accepts."""
        return self._run(
            self._bound.recall(
                query,
                top_k=top_k,
                labels=labels,
                mode=mode,
                min_similarity=min_similarity,
                filter=filter,
                fusion=fusion,
                weights=weights,
                exact=exact,
            )
        )

    def get(self, id: str) -> MemoryRecord | None:
        """The memory ``id`` with its ``utility`` if the view can see it, else None
        (counts no exposure)."""
        return self._run(self._bound.get(id))

    def forget(self, id: str) -> bool:
        """Delete the memory ``id`` of the bound scope or session; False otherwise."""
        return self._run(self._bound.forget(id))

    def complete(self, selection_id: str, score: float) -> bool:
        """Apply ``score`` in [-1, 1] to the memories a recall returned, once: True the
        first time, False for a used, expired, evicted or unknown selection."""
        return self._run(self._bound.complete(selection_id, score))

    def feedback(self, memory_id: str, value: float | None) -> MemoryRecord | None:
        """Set (``None``: clear) the manual value in [-1, 1] of a memory of the bound
        scope or session; the record after it, or None when there is no such memory."""
        return self._run(self._bound.feedback(memory_id, value))


class AsyncBoundMemory(_BoundBase):
    """An :class:`~engramdb.AsyncMemory` bound to a scope: the methods of
    :class:`BoundMemory`, awaited."""

    async def _run(self, flow: Flow[T]) -> T:
        return await adrive(flow, self._memory.embedder, self._memory.store)

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

    async def remember(
        self,
        text: str,
        *,
        durability: Durability = "shared",
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
        expires_at: Any = None,
        ttl: Any = None,
    ) -> Remembered:
        """Remember ``text`` in the bound scope (``durability="session"``: the bound
        session's scope). ``ttl`` (a ``timedelta`` or seconds) or ``expires_at`` sets an
        expiry. Labels are normalised and held to the view's label rules; the labeler's
        labels fill the names not given (best effort: its failure or timeout adds none).
        The answer is the record, with ``dropped``: how many memories the scope's capacity
        (``Policy(max_items=...)``) dropped in the same write."""
        checked, scope, given, fields = self._prepare(
            text,
            durability,
            labels,
            metadata=metadata,
            importance=importance,
            expires_at=expires_at,
            ttl=ttl,
        )
        automatic = await self._proposed(checked)
        return await self._run(self._bound.remember(checked, scope, given, automatic, **fields))

    async def recall(
        self,
        query: str,
        *,
        top_k: int = 5,
        labels: Mapping[str, list[str]] | None = None,
        mode: RecallMode = "hybrid",
        min_similarity: float | None = None,
        filter: Mapping[str, Any] | None = None,
        fusion: Fusion = "convex",
        weights: Mapping[str, float] | None = None,
        exact: bool = False,
    ) -> Hits:
        """Recall from the bound scope, the session and the read scopes, with the view's
        policy; ``labels`` is the label context of this work (for utility per context).
        The hits' ``selection_id`` is the receipt ``complete()`` accepts."""
        return await self._run(
            self._bound.recall(
                query,
                top_k=top_k,
                labels=labels,
                mode=mode,
                min_similarity=min_similarity,
                filter=filter,
                fusion=fusion,
                weights=weights,
                exact=exact,
            )
        )

    async def get(self, id: str) -> MemoryRecord | None:
        """The memory ``id`` with its ``utility`` if the view can see it, else None
        (counts no exposure)."""
        return await self._run(self._bound.get(id))

    async def forget(self, id: str) -> bool:
        """Delete the memory ``id`` of the bound scope or session; False otherwise."""
        return await self._run(self._bound.forget(id))

    async def complete(self, selection_id: str, score: float) -> bool:
        """Apply ``score`` in [-1, 1] to the memories a recall returned, once: True the
        first time, False for a used, expired, evicted or unknown selection."""
        return await self._run(self._bound.complete(selection_id, score))

    async def feedback(self, memory_id: str, value: float | None) -> MemoryRecord | None:
        """Set (``None``: clear) the manual value in [-1, 1] of a memory of the bound
        scope or session; the record after it, or None when there is no such memory."""
        return await self._run(self._bound.feedback(memory_id, value))
