"""``Memory`` and ``AsyncMemory``: the same flows, driven with calls or with awaits."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from types import TracebackType
from typing import Any, TypeVar

from engramdb._base.clock import Clock, system_clock
from engramdb._base.errors import ConfigurationError, ValidationError, shown
from engramdb._base.types import Hits, MemoryRecord, RecallMode, Scope, ScopePrefix
from engramdb._embedders.embedder import Embedder
from engramdb.flows._bound import AsyncBoundMemory, BoundMemory
from engramdb.flows._bound_flows import Authority
from engramdb.flows._effects import Flow, adrive, drive
from engramdb.flows._maintainer import Maintainer, Maintenance, Stop, in_task
from engramdb.flows._maintenance import MaintenanceReport
from engramdb.flows._operations import UNSET, MemoryFlows, MemoryStatus
from engramdb.flows._policy import Policy
from engramdb.flows._redact import redact_secrets
from engramdb.flows.context import FlowContext, OnEmbedError
from engramdb.ranking._hits import Fusion
from engramdb.ranking._rerank_guard import RerankGuard
from engramdb.ranking._reranker import Reranker
from engramdb.store import ScopeCount, StoreCapabilities
from engramdb.validate import Limits

__all__ = ["AsyncMemory", "Memory"]

T = TypeVar("T")


class _Base:
    def __init__(
        self,
        store: Any,
        embedder: Embedder,
        *,
        redact: Callable[[str], str] | None = redact_secrets,
        on_embed_error: OnEmbedError = "lexical",
        clock: Clock | None = None,
        limits: Limits | None = None,
        keep_revisions: int = 10,
        defer_embedding: bool = False,
        maintain: bool | Maintenance = False,
        reranker: Reranker | None = None,
        rerank_guard: RerankGuard | None = None,
        shards: int = 1,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        """The rerank stage's model (``recall(..., rerank=N)``), or None."""
        self._maintenance = Maintenance.of(maintain)
        self._stop_maintainer: Stop | None = None
        self._closed = False
        capabilities = getattr(store, "capabilities", None)
        self._flows = MemoryFlows(
            FlowContext.of(
                embedder,
                clock=clock or system_clock,
                capabilities=capabilities if isinstance(capabilities, StoreCapabilities) else None,
                redact=redact,
                on_embed_error=on_embed_error,
                limits=limits,
                keep_revisions=keep_revisions,
                defer_embedding=defer_embedding,
                reranker=reranker,
                rerank_guard=rerank_guard,
                shards=shards,
            )
        )
        self.rerank_guard: RerankGuard | None = self._flows.context.rerank_guard
        """The rerank stage's budget and breaker (with a reranker), or None."""
        self.maintainer: Maintainer | None = (
            None if self._maintenance is None else self._maintenance.maintainer(self)
        )
        """The memory's own :class:`Maintainer` (``maintain=``), or None."""
        self._open()

    def _open(self) -> None:
        """Start what starts with the memory (``Memory``: its own maintainer)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r}, {self.embedder!r})"

    def _authority(
        self, scope: Scope, read: Iterable[Scope | ScopePrefix], session: str | None, policy: object
    ) -> tuple[Authority, Policy]:
        if policy is not None and not isinstance(policy, Policy):
            raise ValidationError(f"policy={shown(policy)} must be a Policy(...) or None")
        return Authority.of(self._flows.context, scope, read, session), policy or Policy()

    def _with_maintenance(self, status: MemoryStatus) -> MemoryStatus:
        if self.maintainer is None:
            return status
        return replace(status, maintenance=self.maintainer.snapshot)


class Memory(_Base):
    """Durable semantic memory with plain (blocking) calls.

    ``Memory(store, embedder, *, redact=redact_secrets, on_embed_error="lexical",
    clock=None, limits=None, keep_revisions=10, reranker=None, rerank_guard=None)``.
    ``redact`` rewrites each memory's text and metadata strings, and each query, before
    anything is embedded, stored or searched: by default
    :func:`~engramdb.redact_secrets` (credentials become ``[REDACTED:<kind>]``); pass
    your own function, or ``redact=None`` to store texts exactly as given. ``reranker``
    (an :class:`~engramdb.Reranker`, e.g. ``reranker_from_url("cohere:rerank-v3.5")``)
    re-scores the first 30 fused hits of each recall unless it says ``rerank=N``
    (``docs/quality.md``, "Rerank stage"), within ``rerank_guard``'s time budget and
    behind its circuit breaker (default ``RerankGuard()``: 5 s per recall; after 3
    failures in a row the stage is skipped for 30 s; memories that share a reranker may
    share a guard). Every method validates its arguments before touching the store; a
    bad argument raises ``ValidationError`` and changes nothing. Every write is one
    atomic store batch. A ``Memory`` holds no state of its own but its rerank guard's
    breaker (whose races cost at most an extra trial call), so it may be shared by
    threads when its store is (``store.capabilities.thread_safe``).

    ``maintain`` (False): True or ``Maintenance(runner=...)`` gives the memory its own
    :class:`Maintainer`, started here with the ``runner`` (the core starts no thread:
    ``engramdb.background.in_thread`` runs it in one) and stopped by :meth:`close`
    after its running pass, before the store closes. See ``docs/maintenance.md``.

    ``shards`` (1: a store of its own): the store holds one of that many parts of a
    tenant's memories (``engramdb.shards``, ``docs/workers.md``): its recall measures
    the vector leg's noise floor as one store of the whole tenant would. Every id a
    memory makes carries its text's place among 64 shards, whatever ``shards`` says.
    """

    def _open(self) -> None:
        if self._maintenance is not None:
            assert self.maintainer is not None
            runner = self._maintenance.runner
            if runner is None:
                raise ConfigurationError(
                    "a Memory runs its own maintainer with a runner, and the core starts "
                    "no thread: pass maintain=Maintenance(runner=in_thread) (from "
                    "engramdb.background import in_thread), or use AsyncMemory, whose "
                    "maintainer runs in an asyncio task"
                )
            self._stop_maintainer = runner(self.maintainer)

    def _run(self, flow: Flow[T]) -> T:
        return drive(flow, self.embedder, self.store, reranker=self.reranker)

    def remember(
        self,
        text: str,
        scope: Scope,
        *,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
        expires_at: Any = None,
        ttl: Any = None,
        id: str | None = None,
        expected_revision: int | None = None,
        defer_embedding: bool | None = None,
        dedupe: bool = True,
    ) -> MemoryRecord:
        """Store ``text`` in ``scope`` and return its record. ``expires_at`` (an aware
        ``datetime``) or ``ttl`` (a ``timedelta`` or seconds from now) makes it expire.

        Without ``id``, a live memory of ``scope`` with the same text is returned as it is
        and nothing is written (``dedupe=False`` stores a copy). ``defer_embedding=True``
        (default: the memory's) stores it at once, pending, for ``maintain()`` to embed.
        With ``id`` of a live memory in ``scope`` this is its next revision;
        ``expected_revision`` makes it a compare-and-set (``0``: the id must be new)
        that raises ``ConflictError`` and changes nothing when it loses.
        """
        return self._run(
            self._flows.remember(
                text,
                scope,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
                ttl=ttl,
                id=id,
                expected_revision=expected_revision,
                defer_embedding=defer_embedding,
                dedupe=dedupe,
            )
        )

    def remember_many(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = 256,
        progress: Callable[[int, int], None] | None = None,
        defer_embedding: bool | None = None,
        dedupe: bool = True,
    ) -> list[MemoryRecord]:
        """Store many items (dicts with ``text``, ``scope`` …): all are checked first,
        then stored ``batch_size`` at a time, each batch atomic, with
        ``progress(stored, total)`` after each. A provider failure raises ``IngestError``
        carrying the records already stored. Items whose text their scope already holds
        answer the existing record (``dedupe=False`` stores copies)."""
        return self._run(
            self._flows.remember_many(items, batch_size, progress, defer_embedding, dedupe)
        )

    def recall(
        self,
        query: str,
        scopes: Iterable[Scope | ScopePrefix],
        *,
        top_k: int = 10,
        mode: RecallMode = "hybrid",
        min_similarity: float | None = None,
        filter: Mapping[str, Any] | None = None,
        fusion: Fusion = "convex",
        rrf_k: int = 60,
        weights: Mapping[str, float] | None = None,
        exact: bool = False,
        rerank: int | None = None,
    ) -> Hits:
        """Find the memories of ``scopes`` (exact, or ``ScopePrefix``) that best match
        ``query``: the first ``top_k`` of the fused legs (a larger ``top_k`` only
        appends: the first k are the same for every ``top_k >= k``).
        ``fusion`` is ``"convex"`` (normalised scores, weighted by ``weights``; the
        default) or ``"rrf"`` (reciprocal ranks, ``rrf_k``).
        ``rerank``: how many of the fused hits the memory's reranker re-scores first
        (None: 30 with a reranker, 0 without; 0 is off); its failure keeps the fused
        order with ``status="degraded"`` (``docs/quality.md``, "Rerank stage")."""
        return self._run(
            self._flows.recall(
                query,
                scopes,
                top_k=top_k,
                mode=mode,
                min_similarity=min_similarity,
                filter=filter,
                fusion=fusion,
                rrf_k=rrf_k,
                weights=weights,
                exact=exact,
                rerank=rerank,
            )
        )

    def get(self, id: str) -> MemoryRecord | None:
        """The memory with ``id`` and its ``utility`` (counting no exposure), or None if
        there is none (or it expired)."""
        return self._run(self._flows.get(id))

    def list_scopes(
        self, prefix: Scope = (), limit: int = 100, cursor: Scope | None = None
    ) -> list[ScopeCount]:
        """Scopes under ``prefix`` that hold memories, with counts, in scope order;
        ``cursor`` is the last scope of the previous page."""
        return self._run(self._flows.list_scopes(prefix, limit, cursor))

    def history(self, id: str, limit: int = 10) -> list[MemoryRecord]:
        """Earlier revisions of a memory, newest first (``[]`` if it has none)."""
        return self._run(self._flows.history(id, limit))

    def list(
        self,
        scope: Scope | ScopePrefix,
        limit: int = 50,
        before: str | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
    ) -> list[MemoryRecord]:
        """Memories of ``scope``, newest first; ``before`` is the id to continue after."""
        return self._run(self._flows.list(scope, limit, before, filter))

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
    ) -> MemoryRecord:
        """Change the given fields of a memory, atomically, in the store; its revision
        increases by one. Raises ``NotFoundError``, or ``ConflictError`` when
        ``expected_revision`` is given and the memory is at another revision."""
        return self._run(
            self._flows.update(
                id,
                text=text,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
                expected_revision=expected_revision,
            )
        )

    def forget(self, id: str) -> bool:
        """Delete a memory and its history; True if it existed."""
        return self._run(self._flows.forget(id))

    def forget_scope(self, scope: Scope | ScopePrefix, *, descendants: bool = False) -> int:
        """Delete every memory of ``scope`` (and the scopes under it with
        ``descendants=True``); return how many."""
        return self._run(self._flows.forget_scope(scope, descendants))

    def forget_where(
        self,
        scope: Scope | ScopePrefix,
        filter: Mapping[str, Any],
        *,
        descendants: bool = False,
    ) -> int:
        """Delete the memories of ``scope`` that match ``filter``; return how many."""
        return self._run(self._flows.forget_where(scope, filter, descendants))

    def bind(
        self,
        scope: Scope,
        *,
        read: Iterable[Scope | ScopePrefix] = (),
        session: str | None = None,
        policy: Policy | None = None,
    ) -> BoundMemory:
        """A view of this memory bound to ``scope`` (writes), ``session`` (its sub-scope
        ``(*scope, "session", session)``) and the read-only ``read`` scopes, with
        ``policy``. Its methods never take a scope: hand it to tools and agents."""
        return BoundMemory(self, *self._authority(scope, read, session, policy))

    def purge_expired(self, batch_size: int = 1000) -> int:
        """Delete every memory that has expired (``batch_size`` per store batch) with its
        history and evidence; return how many."""
        return self._run(self._flows.purge_expired(batch_size))

    def maintain(
        self, max_items: int = 1000, repair_after: str = "", *, prune_spaces: bool = False
    ) -> MaintenanceReport:
        """One bounded maintenance pass: embed pending texts, repair corrupt vectors,
        purge expired memories (up to ``max_items`` each); with ``prune_spaces``, once
        nothing is pending, drop other spaces' vectors. See ``docs/maintenance.md``."""
        return self._run(self._flows.maintain(max_items, repair_after, prune_spaces))

    def reindex(self, batch_size: int = 64, progress: Callable[[int], None] | None = None) -> int:
        """Embed every pending text in the active space, and repair vectors that do not
        decode; return how many texts were embedded."""
        return self._run(self._flows.reindex(batch_size, progress))

    def status(self) -> MemoryStatus:
        """Counts, pending embeddings, active space and schema version, and the own
        maintainer's snapshot (``maintenance``; None without ``maintain=``)."""
        return self._with_maintenance(self._run(self._flows.status()))

    def close(self) -> None:
        """Stop the own maintainer (its running pass finishes first), then close the
        store."""
        stop, self._stop_maintainer = self._stop_maintainer, None
        self._closed = True
        if stop is not None:
            stop()
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncMemory(_Base):
    """Durable semantic memory for ``async`` code: the methods of :class:`Memory`, awaited.

    With ``maintain=True`` (or ``Maintenance(...)``) its own :class:`Maintainer` starts
    on first use (any call, a bound view's too, or ``async with``) in an asyncio task (or
    the ``runner`` given), and :meth:`aclose` stops it after its running pass, before
    the store closes.
    """

    def _start_maintainer(self) -> None:
        """Start the own maintainer if it should run and does not yet (needs a running
        loop: called from the async methods)."""
        if self.maintainer is None or self._stop_maintainer is not None or self._closed:
            return
        assert self._maintenance is not None
        runner = self._maintenance.runner or in_task
        self._stop_maintainer = runner(self.maintainer)

    async def _run(self, flow: Flow[T]) -> T:
        self._start_maintainer()
        return await adrive(flow, self.embedder, self.store, reranker=self.reranker)

    async def remember(
        self,
        text: str,
        scope: Scope,
        *,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
        expires_at: Any = None,
        ttl: Any = None,
        id: str | None = None,
        expected_revision: int | None = None,
        defer_embedding: bool | None = None,
        dedupe: bool = True,
    ) -> MemoryRecord:
        """Store ``text`` in ``scope`` and return its record. ``expires_at`` (an aware
        ``datetime``) or ``ttl`` (a ``timedelta`` or seconds from now) makes it expire.

        Without ``id``, a live memory of ``scope`` with the same text is returned as it is
        and nothing is written (``dedupe=False`` stores a copy). ``defer_embedding=True``
        (default: the memory's) stores it at once, pending, for ``maintain()`` to embed.
        With ``id`` of a live memory in ``scope`` this is its next revision;
        ``expected_revision`` makes it a compare-and-set (``0``: the id must be new)
        that raises ``ConflictError`` and changes nothing when it loses.
        """
        return await self._run(
            self._flows.remember(
                text,
                scope,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
                ttl=ttl,
                id=id,
                expected_revision=expected_revision,
                defer_embedding=defer_embedding,
                dedupe=dedupe,
            )
        )

    async def remember_many(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = 256,
        progress: Callable[[int, int], None] | None = None,
        defer_embedding: bool | None = None,
        dedupe: bool = True,
    ) -> list[MemoryRecord]:
        """Store many items (dicts with ``text``, ``scope`` …): all are checked first,
        then stored ``batch_size`` at a time, each batch atomic, with
        ``progress(stored, total)`` after each. A provider failure raises ``IngestError``
        carrying the records already stored. Items whose text their scope already holds
        answer the existing record (``dedupe=False`` stores copies)."""
        return await self._run(
            self._flows.remember_many(items, batch_size, progress, defer_embedding, dedupe)
        )

    async def recall(
        self,
        query: str,
        scopes: Iterable[Scope | ScopePrefix],
        *,
        top_k: int = 10,
        mode: RecallMode = "hybrid",
        min_similarity: float | None = None,
        filter: Mapping[str, Any] | None = None,
        fusion: Fusion = "convex",
        rrf_k: int = 60,
        weights: Mapping[str, float] | None = None,
        exact: bool = False,
        rerank: int | None = None,
    ) -> Hits:
        """Find the memories of ``scopes`` (exact, or ``ScopePrefix``) that best match
        ``query``: the first ``top_k`` of the fused legs (a larger ``top_k`` only
        appends: the first k are the same for every ``top_k >= k``).
        ``fusion`` is ``"convex"`` (normalised scores, weighted by ``weights``; the
        default) or ``"rrf"`` (reciprocal ranks, ``rrf_k``).
        ``rerank``: how many of the fused hits the memory's reranker re-scores first
        (None: 30 with a reranker, 0 without; 0 is off); its failure keeps the fused
        order with ``status="degraded"`` (``docs/quality.md``, "Rerank stage")."""
        return await self._run(
            self._flows.recall(
                query,
                scopes,
                top_k=top_k,
                mode=mode,
                min_similarity=min_similarity,
                filter=filter,
                fusion=fusion,
                rrf_k=rrf_k,
                weights=weights,
                exact=exact,
                rerank=rerank,
            )
        )

    async def get(self, id: str) -> MemoryRecord | None:
        """The memory with ``id`` and its ``utility`` (counting no exposure), or None if
        there is none (or it expired)."""
        return await self._run(self._flows.get(id))

    async def list_scopes(
        self, prefix: Scope = (), limit: int = 100, cursor: Scope | None = None
    ) -> list[ScopeCount]:
        """Scopes under ``prefix`` that hold memories, with counts, in scope order;
        ``cursor`` is the last scope of the previous page."""
        return await self._run(self._flows.list_scopes(prefix, limit, cursor))

    async def history(self, id: str, limit: int = 10) -> list[MemoryRecord]:
        """Earlier revisions of a memory, newest first (``[]`` if it has none)."""
        return await self._run(self._flows.history(id, limit))

    async def list(
        self,
        scope: Scope | ScopePrefix,
        limit: int = 50,
        before: str | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
    ) -> list[MemoryRecord]:
        """Memories of ``scope``, newest first; ``before`` is the id to continue after."""
        return await self._run(self._flows.list(scope, limit, before, filter))

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
    ) -> MemoryRecord:
        """Change the given fields of a memory, atomically, in the store; its revision
        increases by one. Raises ``NotFoundError``, or ``ConflictError`` when
        ``expected_revision`` is given and the memory is at another revision."""
        return await self._run(
            self._flows.update(
                id,
                text=text,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
                expected_revision=expected_revision,
            )
        )

    async def forget(self, id: str) -> bool:
        """Delete a memory and its history; True if it existed."""
        return await self._run(self._flows.forget(id))

    async def forget_scope(self, scope: Scope | ScopePrefix, *, descendants: bool = False) -> int:
        """Delete every memory of ``scope`` (and the scopes under it with
        ``descendants=True``); return how many."""
        return await self._run(self._flows.forget_scope(scope, descendants))

    async def forget_where(
        self,
        scope: Scope | ScopePrefix,
        filter: Mapping[str, Any],
        *,
        descendants: bool = False,
    ) -> int:
        """Delete the memories of ``scope`` that match ``filter``; return how many."""
        return await self._run(self._flows.forget_where(scope, filter, descendants))

    def bind(
        self,
        scope: Scope,
        *,
        read: Iterable[Scope | ScopePrefix] = (),
        session: str | None = None,
        policy: Policy | None = None,
    ) -> AsyncBoundMemory:
        """A view of this memory bound to ``scope`` (writes), ``session`` (its sub-scope
        ``(*scope, "session", session)``) and the read-only ``read`` scopes, with
        ``policy``. Its methods never take a scope: hand it to tools and agents."""
        return AsyncBoundMemory(self, *self._authority(scope, read, session, policy))

    async def purge_expired(self, batch_size: int = 1000) -> int:
        """Delete every memory that has expired (``batch_size`` per store batch) with its
        history and evidence; return how many."""
        return await self._run(self._flows.purge_expired(batch_size))

    async def maintain(
        self, max_items: int = 1000, repair_after: str = "", *, prune_spaces: bool = False
    ) -> MaintenanceReport:
        """One bounded maintenance pass: embed pending texts, repair corrupt vectors,
        purge expired memories (up to ``max_items`` each); with ``prune_spaces``, once
        nothing is pending, drop other spaces' vectors. See ``docs/maintenance.md``."""
        return await self._run(self._flows.maintain(max_items, repair_after, prune_spaces))

    async def reindex(
        self, batch_size: int = 64, progress: Callable[[int], None] | None = None
    ) -> int:
        """Embed every pending text in the active space, and repair vectors that do not
        decode; return how many texts were embedded."""
        return await self._run(self._flows.reindex(batch_size, progress))

    async def status(self) -> MemoryStatus:
        """Counts, pending embeddings, active space and schema version, and the own
        maintainer's snapshot (``maintenance``; None without ``maintain=``)."""
        return self._with_maintenance(await self._run(self._flows.status()))

    async def aclose(self) -> None:
        """Stop the own maintainer (its running pass finishes first), then close the
        store."""
        stop, self._stop_maintainer = self._stop_maintainer, None
        self._closed = True
        if stop is not None:
            stopped = stop()
            if inspect.isawaitable(stopped):
                await stopped
        aclose = getattr(self.store, "aclose", None)
        if aclose is not None:
            await aclose()
        else:
            self.store.close()

    async def __aenter__(self) -> AsyncMemory:
        self._start_maintainer()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
