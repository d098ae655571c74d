"""``Memory`` and ``AsyncMemory``: the same flows, driven with calls or with awaits.

Their operations are written once, async, in ``_memory_faces_async.py``;
``_memory_faces_sync.py`` is generated from it (``tools/unasync.py``). Here is what they
share (``_Base``) and where they differ in substance, their lifecycles: ``Memory``'s own
maintainer starts when it is made and ``close`` stops it; ``AsyncMemory``'s starts on
first use, in a task, and ``aclose`` stops it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Self, TypeVar

from engramdb._base.clock import Clock, system_clock
from engramdb._base.errors import ConfigurationError, ValidationError, shown
from engramdb._base.types import EmbeddingSpace, Scope, ScopePrefix
from engramdb._embedders.embedder import Embedder
from engramdb._embedders.own_vectors import OwnVectors
from engramdb.flows._bound_flows import Authority
from engramdb.flows._effects import Flow, adrive, drive
from engramdb.flows._maintainer import Maintainer, Maintenance, Stop, in_task
from engramdb.flows._operations import MemoryFlows, MemoryStatus
from engramdb.flows._policy import Policy
from engramdb.flows._redact import redact_secrets
from engramdb.flows.context import FlowContext, OnEmbedError
from engramdb.ranking._rerank_guard import RerankGuard
from engramdb.ranking._reranker import Reranker
from engramdb.store import StoreCapabilities
from engramdb.validate import Limits

__all__: list[str] = []  # the faces: _memory_faces_async (AsyncMemory), _memory_faces_sync (Memory)

T = TypeVar("T")


class _Base:
    def __init__(
        self,
        store: Any,
        embedder: Embedder | None,
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
        space: EmbeddingSpace | None = None,
    ) -> None:
        self.store = store
        if embedder is None:
            embedder = OwnVectors(space)
        elif space is not None:
            raise ConfigurationError(
                f"space={shown(space)} is for a memory without an embedder: pass "
                "embedder=None with it, or leave space out (an embedder has its own space)"
            )
        self.embedder: Embedder = embedder
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
        if self._maintenance is not None and self._flows.context.capabilities.read_only:
            raise ConfigurationError(
                f"maintain={shown(maintain)} needs a store open for writing (a pass purges, "
                "packs and embeds), but this store is read-only: pass maintain=False"
            )
        self.maintainer: Maintainer | None = (
            None if self._maintenance is None else self._maintenance.maintainer(self)
        )
        """The memory's own :class:`Maintainer` (``maintain=``), or None."""
        self._open()

    @property
    def flows(self) -> MemoryFlows:
        """This memory's operations as flows (:class:`~engramdb.flows.MemoryFlows`), for
        what drives them itself: its bound views, its maintainer, an adapter."""
        return self._flows

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


class _MemoryBase(_Base):
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

    ``embedder=None`` with ``space=EmbeddingSpace(provider, model, dimensions)``: a
    memory that embeds nothing and stores the vectors you pass in that space
    (``remember(..., vector=[...])``, ``recall(..., vector=[...])``; see
    ``docs/providers.md``, "Your own vectors").
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

    def close(self) -> None:
        """Stop the own maintainer (its running pass finishes first), then close the
        store."""
        stop, self._stop_maintainer = self._stop_maintainer, None
        self._closed = True
        if stop is not None:
            stop()
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _AsyncMemoryBase(_Base):
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

    async def __aenter__(self) -> Self:
        self._start_maintainer()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
