"""Generated from ``_memory_faces_async.py`` by ``tools/unasync.py``: edit that file, then run
``python tools/unasync.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from engramdb._base.types import Hits, MemoryRecord, RecallMode, Scope, ScopePrefix
from engramdb.flows._maintenance import MaintenanceReport
from engramdb.flows._memory import _MemoryBase
from engramdb.flows._operations import UNSET, MemoryStatus
from engramdb.flows._policy import Policy
from engramdb.flows._view_faces_sync import BoundMemory
from engramdb.ranking._hits import Fusion
from engramdb.store import ScopeCount

__all__ = ["Memory"]


class Memory(_MemoryBase):
    __doc__ = _MemoryBase.__doc__

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
        vector: Sequence[float] | None = None,
    ) -> MemoryRecord:
        """Store ``text`` in ``scope`` and return its record. ``expires_at`` (an aware
        ``datetime``) or ``ttl`` (a ``timedelta`` or seconds from now) makes it expire.

        Without ``id``, a live memory of ``scope`` with the same text is returned as it is
        and nothing is written (``dedupe=False`` stores a copy). ``defer_embedding=True``
        (default: the memory's) stores it at once, pending, for ``maintain()`` to embed.
        With ``id`` of a live memory in ``scope`` this is its next revision;
        ``expected_revision`` makes it a compare-and-set (``0``: the id must be new)
        that raises ``ConflictError`` and changes nothing when it loses.

        ``vector``: your own vector of ``text`` in the memory's space, stored instead of
        embedding it (``docs/providers.md``, "Your own vectors").
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
                vector=vector,
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
        """Store many items (dicts with ``text``, ``scope`` …, ``vector``): all are checked first,
        then stored ``batch_size`` at a time, each batch atomic, with
        ``progress(stored, total)`` after each. A provider failure raises ``IngestError``
        carrying the records already stored. Items whose text their scope already holds
        answer the existing record (``dedupe=False`` stores copies)."""
        return self._run(
            self._flows.remember_many(items, batch_size, progress, defer_embedding, dedupe)
        )

    def remember_conversation(
        self,
        turns: Iterable[Mapping[str, Any]],
        scope: Scope,
        *,
        conversation: str,
        start: int = 0,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        defer_embedding: bool | None = None,
    ) -> list[MemoryRecord]:
        """Remember each turn (``{"speaker", "text", "at"?, "metadata"?}``) of the
        conversation ``conversation`` as a memory of ``scope`` whose metadata holds
        ``conversation``, ``turn`` (``start`` + its index), ``speaker`` and ``at``; a
        place ``scope`` already holds is not stored again (its record answers). The new
        turns are stored in one atomic batch; the answer is a record per turn, in turn
        order (``docs/conversations.md``)."""
        return self._run(
            self._flows.remember_conversation(
                turns, scope, conversation, start, metadata, labels, defer_embedding
            )
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
        context: int = 0,
        vector: Sequence[float] | None = None,
    ) -> Hits:
        """Find the memories of ``scopes`` (exact, or ``ScopePrefix``) that best match
        ``query``: the first ``top_k`` of the fused legs (a larger ``top_k`` only
        appends: the first k are the same for every ``top_k >= k``).
        ``fusion`` is ``"convex"`` (normalised scores, weighted by ``weights``; the
        default) or ``"rrf"`` (reciprocal ranks, ``rrf_k``).
        ``rerank``: how many of the fused hits the memory's reranker re-scores first
        (None: 30 with a reranker, 0 without; 0 is off); its failure keeps the fused
        order with ``status="degraded"`` (``docs/quality.md``, "Rerank stage").
        ``context``: each hit that is a turn of a conversation comes with up to this many
        turns before and after it in its scope (``hit.context``, in turn order).
        ``vector``: your own query vector in the memory's space, searched instead of the
        query's embedding (``query`` still drives the lexical leg)."""
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
                context=context,
                vector=vector,
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
        closes_memory: bool = False,
    ) -> BoundMemory:
        """A view of this memory bound to ``scope`` (writes), ``session`` (its sub-scope
        ``(*scope, "session", session)``) and the read-only ``read`` scopes, with
        ``policy``. Its methods never take a scope: hand it to tools and agents.
        ``closes_memory=True`` hands the memory to the view: closing the view (or leaving
        its ``with`` block) closes the memory too, as ``engramdb.open(scope=...)`` does."""
        authority, checked = self._authority(scope, read, session, policy)
        return BoundMemory(self, authority, checked, closes_memory=closes_memory)

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
