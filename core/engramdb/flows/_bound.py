"""``BoundMemory`` and ``AsyncBoundMemory``: a memory seen through a scope the operator
chose (``memory.bind(...)``); see ``bound_flows`` for the authority rules and
``bound_writes`` for how its writes and documents are checked and planned."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from engramdb._base.errors import ConfigurationError
from engramdb._base.types import Hits, MemoryRecord, RecallMode, Remembered, Scope
from engramdb.documents import (
    DEFAULT_MAX_CHARS,
    Document,
    DocumentSummary,
)
from engramdb.flows._bound_flows import Authority, BoundFlows, BoundStatus, Durability
from engramdb.flows._bound_writes import (
    DocumentSteps,
    Label,
    Outcome,
    ViewWrites,
    document_pairs,
    record,
    record_id,
)
from engramdb.flows._effects import Flow, adrive, drive
from engramdb.flows._labels import Labels
from engramdb.flows._operations import UNSET
from engramdb.flows._policy import Policy
from engramdb.flows._trampoline import arun, run
from engramdb.ranking._hits import Fusion
from engramdb.store import ScopeCount, ScopeSet

__all__ = ["AsyncBoundMemory", "BoundMemory", "BoundStatus"]

T = TypeVar("T")


class _BoundBase(ViewWrites):
    def __init__(self, memory: Any, authority: Authority, policy: Policy) -> None:
        self._memory = memory
        self._bound = BoundFlows(memory._flows.context, authority, policy)
        if policy.max_items is not None and not memory._flows.context.capabilities.supports_policy:
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


class BoundMemory(_BoundBase):
    """A :class:`~engramdb.Memory` bound to a scope (``memory.bind(...)``): no method
    takes a scope, so a model, a tool argument or a request body cannot choose one."""

    def _run(self, flow: Flow[T]) -> T:
        return drive(
            flow, self._memory.embedder, self._memory.store, reranker=self._memory.reranker
        )

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
        rerank: int | None = None,
    ) -> Hits:
        """Recall from the bound scope, the session and the read scopes, with the view's
        policy; ``labels`` is the label context of this work (for utility per context).
        ``rerank``: how many hits of the policy's order the memory's reranker re-scores
        (as ``Memory.recall``). The hits' ``selection_id`` is the receipt ``complete()``
        accepts."""
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
                rerank=rerank,
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

    def remember_many(
        self, items: Iterable[Mapping[str, Any]], *, batch_size: int = 256, dedupe: bool = True
    ) -> list[MemoryRecord]:
        """Remember many items (dicts with ``text`` and any of ``durability``,
        ``metadata``, ``labels``, ``importance``, ``ttl``, ``expires_at``), each as
        :meth:`remember` would: all are checked first, then the labeler labels each, then
        they are stored ``batch_size`` at a time, each batch atomic with the capacity's
        drops. Items whose text their scope already holds answer the existing record
        (``dedupe=False`` stores copies)."""
        prepared = self._prepare_many(items)
        automatic = [self._proposed(text) for text, *_ in prepared]
        rows = self._rows(prepared, automatic)
        return self._run(self._bound.remember_many(rows, batch_size, dedupe))

    def history(self, id: str, limit: int = 10) -> list[MemoryRecord] | None:
        """Earlier revisions of a memory the view can see, newest first (``[]`` if it
        has none); None when the view cannot see it."""
        return self._run(self._bound.history(id, limit))

    def update(
        self,
        id: str,
        *,
        text: Any = UNSET,
        metadata: Any = UNSET,
        labels: Any = UNSET,
        importance: Any = UNSET,
        expires_at: Any = UNSET,
        expected_revision: int | None = None,
    ) -> MemoryRecord | None:
        """Change the given fields of a memory of the bound scope or session, atomically
        (labels held to the view's label rules); the record after it, or None when there
        is no such memory. The store checks the scope in the write itself, so a memory
        moved out of the view meanwhile is not changed. ``ConflictError`` when
        ``expected_revision`` is given and the memory is at another revision."""
        return self._run(
            self._bound.update(
                id,
                text=text,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
                expected_revision=expected_revision,
            )
        )

    def remember_document(
        self,
        text: str,
        *,
        source: str,
        max_chars: int = DEFAULT_MAX_CHARS,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
    ) -> Document:
        """Remember a long ``text`` as chunks of at most ``max_chars`` characters cut on
        its natural boundaries, each a memory of the bound scope whose metadata says
        where in ``source`` it comes from (``engramdb.documents``). The same source with
        the same text adds nothing; with another text, its new chunks replace the old.
        The text is checked before anything is computed from it or stored."""
        steps = self._documents([(source, text)], max_chars, metadata, labels, None, record)
        (document,) = self._steps(steps)
        return Document(*document)

    def remember_documents(
        self,
        documents: Mapping[str, str],
        *,
        max_chars: int = DEFAULT_MAX_CHARS,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[DocumentSummary]:
        """Remember many documents (``{source: text}``), each as
        :meth:`remember_document` does, in order, with one read of what the scope holds
        of them (not one per document: re-importing a folder costs time in proportion
        to its size). Every document and every chunk to store is checked before
        anything is stored; ``progress(done, total)`` is called after each document.
        The answer holds the chunks' ids, not their records."""
        pairs = document_pairs(documents)
        steps = self._documents(pairs, max_chars, metadata, labels, progress, record_id)
        return [DocumentSummary(*document) for document in self._steps(steps)]

    def _steps(self, steps: DocumentSteps[T]) -> list[Outcome[T]]:
        def perform(step: Flow[Any] | Label) -> Any:
            if isinstance(step, Label):
                return [self._proposed(text) for text in step.texts]
            return self._run(step)

        return run(steps, perform)

    def forget_document(self, source: str) -> int:
        """Forget every chunk of the document of ``source``; return how many."""
        return self._run(self._forget_document(source))

    def forget_all(self) -> int:
        """Delete every memory of the bound scope and session; return how many."""
        return self._run(self._bound.forget_all())

    def list_scopes(self, limit: int = 100, cursor: Scope | None = None) -> list[ScopeCount]:
        """The scopes under the bound scope (itself included) that hold memories, with
        counts, in scope order; ``cursor`` is the last scope of the previous page."""
        return self._run(self._bound.list_scopes(limit, cursor))

    def status(self) -> BoundStatus:
        """The view's scope and session, how many memories they hold, the active space
        and the schema version, and the memory's own maintainer's state
        (``maintenance``): nothing that counts another scope's data."""
        return self._with_maintenance(self._run(self._bound.status(self.space)))

    def list(
        self,
        limit: int = 50,
        before: str | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
        below: tuple[datetime, str] | None = None,
    ) -> list[MemoryRecord]:
        """Memories of the bound scope and session, newest first; ``before`` is the id to
        continue after; ``below`` a position ``(created_at, id)`` to continue strictly
        below, whether or not a memory holds it (a page's last memory, forgotten since;
        another shard's: ``engramdb.shards``)."""
        return self._run(self._bound.list(limit, before, filter, below))


class AsyncBoundMemory(_BoundBase):
    """An :class:`~engramdb.AsyncMemory` bound to a scope: the methods of
    :class:`BoundMemory`, awaited."""

    async def _run(self, flow: Flow[T]) -> T:
        start = getattr(self._memory, "_start_maintainer", None)
        if start is not None:  # the memory's own maintainer starts on first use
            start()
        return await adrive(
            flow, self._memory.embedder, self._memory.store, reranker=self._memory.reranker
        )

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
        rerank: int | None = None,
    ) -> Hits:
        """Recall from the bound scope, the session and the read scopes, with the view's
        policy; ``labels`` is the label context of this work (for utility per context).
        ``rerank``: how many hits of the policy's order the memory's reranker re-scores
        (as ``Memory.recall``). The hits' ``selection_id`` is the receipt ``complete()``
        accepts."""
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
                rerank=rerank,
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

    async def remember_many(
        self, items: Iterable[Mapping[str, Any]], *, batch_size: int = 256, dedupe: bool = True
    ) -> list[MemoryRecord]:
        """Remember many items (dicts with ``text`` and any of ``durability``,
        ``metadata``, ``labels``, ``importance``, ``ttl``, ``expires_at``), each as
        :meth:`remember` would: all are checked first, then the labeler labels each, then
        they are stored ``batch_size`` at a time, each batch atomic with the capacity's
        drops. Items whose text their scope already holds answer the existing record
        (``dedupe=False`` stores copies)."""
        prepared = self._prepare_many(items)
        automatic = [await self._proposed(text) for text, *_ in prepared]
        rows = self._rows(prepared, automatic)
        return await self._run(self._bound.remember_many(rows, batch_size, dedupe))

    async def history(self, id: str, limit: int = 10) -> list[MemoryRecord] | None:
        """Earlier revisions of a memory the view can see, newest first (``[]`` if it
        has none); None when the view cannot see it."""
        return await self._run(self._bound.history(id, limit))

    async def update(
        self,
        id: str,
        *,
        text: Any = UNSET,
        metadata: Any = UNSET,
        labels: Any = UNSET,
        importance: Any = UNSET,
        expires_at: Any = UNSET,
        expected_revision: int | None = None,
    ) -> MemoryRecord | None:
        """Change the given fields of a memory of the bound scope or session, atomically
        (labels held to the view's label rules); the record after it, or None when there
        is no such memory. The store checks the scope in the write itself, so a memory
        moved out of the view meanwhile is not changed. ``ConflictError`` when
        ``expected_revision`` is given and the memory is at another revision."""
        return await self._run(
            self._bound.update(
                id,
                text=text,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
                expected_revision=expected_revision,
            )
        )

    async def remember_document(
        self,
        text: str,
        *,
        source: str,
        max_chars: int = DEFAULT_MAX_CHARS,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
    ) -> Document:
        """As :meth:`BoundMemory.remember_document`."""
        steps = self._documents([(source, text)], max_chars, metadata, labels, None, record)
        (document,) = await self._steps(steps)
        return Document(*document)

    async def remember_documents(
        self,
        documents: Mapping[str, str],
        *,
        max_chars: int = DEFAULT_MAX_CHARS,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[DocumentSummary]:
        """As :meth:`BoundMemory.remember_documents`."""
        pairs = document_pairs(documents)
        steps = self._documents(pairs, max_chars, metadata, labels, progress, record_id)
        return [DocumentSummary(*document) for document in await self._steps(steps)]

    async def _steps(self, steps: DocumentSteps[T]) -> list[Outcome[T]]:
        async def perform(step: Flow[Any] | Label) -> Any:
            if isinstance(step, Label):
                return [await self._proposed(text) for text in step.texts]
            return await self._run(step)

        return await arun(steps, perform)

    async def forget_document(self, source: str) -> int:
        """As :meth:`BoundMemory.forget_document`."""
        return await self._run(self._forget_document(source))

    async def forget_all(self) -> int:
        """Delete every memory of the bound scope and session; return how many."""
        return await self._run(self._bound.forget_all())

    async def list_scopes(self, limit: int = 100, cursor: Scope | None = None) -> list[ScopeCount]:
        """The scopes under the bound scope (itself included) that hold memories, with
        counts, in scope order; ``cursor`` is the last scope of the previous page."""
        return await self._run(self._bound.list_scopes(limit, cursor))

    async def status(self) -> BoundStatus:
        """The view's scope and session, how many memories they hold, the active space
        and the schema version, and the memory's own maintainer's state
        (``maintenance``): nothing that counts another scope's data."""
        return self._with_maintenance(await self._run(self._bound.status(self.space)))

    async def list(
        self,
        limit: int = 50,
        before: str | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
        below: tuple[datetime, str] | None = None,
    ) -> list[MemoryRecord]:
        """Memories of the bound scope and session, newest first; ``before`` is the id to
        continue after; ``below`` a position ``(created_at, id)`` to continue strictly
        below, whether or not a memory holds it (a page's last memory, forgotten since;
        another shard's: ``engramdb.shards``)."""
        return await self._run(self._bound.list(limit, before, filter, below))
