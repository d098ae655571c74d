"""Generated from ``core/engramdb/flows/_view_faces_async.py`` by
``tools/unasync.py``: the client's faces are the bound view's operations that have an
HTTP route (``engramdb.flows.VIEW_OPS``), with the parameters their routes take. Edit
the view (or its ``@view_op`` declaration), then run ``python tools/unasync.py``."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from engramdb import Hits, MemoryRecord, Scope, ScopeCount
from engramdb.documents import DEFAULT_MAX_CHARS, Document, DocumentUpload
from engramdb.flows import UNSET

from ._remote import Fusion, RecallMode, RemoteStatus, _AsyncRemoteMemoryBase, _RemoteMemoryBase

__all__ = ["AsyncRemoteMemory", "RemoteMemory"]


class AsyncRemoteMemory(_AsyncRemoteMemoryBase):
    __doc__ = _AsyncRemoteMemoryBase.__doc__

    async def remember(
        self,
        text: str,
        *,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
        expires_at: Any = None,
        ttl: Any = None,
    ) -> MemoryRecord:
        """Remember ``text`` in the bound scope (``durability="session"``: the bound
        session's scope). ``ttl`` (a ``timedelta`` or seconds) or ``expires_at`` sets an
        expiry. Labels are normalised and held to the view's label rules; the labeler's
        labels fill the names not given (best effort: its failure adds none, and so does
        an async labeler's timeout; a sync view runs no async labeler). The answer is the
        record, with ``dropped``: how many memories the scope's capacity
        (``Policy(max_items=...)``) dropped in the same write. ``vector``: your own
        vector of the text, as ``Memory.remember`` takes it."""
        answer: MemoryRecord = await self._run(
            self._flow(
                "remember",
                {
                    "text": text,
                    "metadata": metadata,
                    "labels": labels,
                    "importance": importance,
                    "expires_at": expires_at,
                    "ttl": ttl,
                },
            )
        )
        return answer

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
        context: int = 0,
        vector: Sequence[float] | None = None,
    ) -> Hits:
        """Recall from the bound scope, the session and the read scopes, with the view's
        policy; ``labels`` is the label context of this work (for utility per context).
        ``rerank``: how many hits of the policy's order the memory's reranker re-scores
        (as ``Memory.recall``). ``context``: each hit that is a turn of a conversation
        comes with up to this many turns before and after it (``hit.context``), from its
        own scope.
        ``vector`` is your own query vector (as ``Memory.recall`` takes it). The hits'
        ``selection_id`` is the receipt ``complete()`` accepts."""
        answer: Hits = await self._run(
            self._flow(
                "recall",
                {
                    "query": query,
                    "top_k": top_k,
                    "labels": labels,
                    "mode": mode,
                    "min_similarity": min_similarity,
                    "filter": filter,
                    "fusion": fusion,
                    "weights": weights,
                    "exact": exact,
                    "rerank": rerank,
                    "context": context,
                    "vector": vector,
                },
            )
        )
        return answer

    async def get(self, id: str) -> MemoryRecord | None:
        """The memory ``id`` with its ``utility`` if the view can see it, else None
        (counts no exposure)."""
        answer: MemoryRecord | None = await self._run(self._flow("get", {"id": id}))
        return answer

    async def forget(self, id: str) -> bool:
        """Delete the memory ``id`` of the bound scope or session; False otherwise."""
        answer: bool = await self._run(self._flow("forget", {"id": id}))
        return answer

    async def complete(self, selection_id: str, score: float) -> bool:
        """Apply ``score`` in [-1, 1] to the memories a recall returned, once: True the
        first time, False for a used, expired, evicted or unknown selection."""
        answer: bool = await self._run(
            self._flow("complete", {"selection_id": selection_id, "score": score})
        )
        return answer

    async def feedback(self, memory_id: str, value: float | None) -> MemoryRecord | None:
        """Set (``None``: clear) the manual value in [-1, 1] of a memory of the bound
        scope or session; the record after it, or None when there is no such memory."""
        answer: MemoryRecord | None = await self._run(
            self._flow("feedback", {"memory_id": memory_id, "value": value})
        )
        return answer

    async def remember_many(
        self, items: Iterable[Mapping[str, Any]], *, dedupe: bool = True
    ) -> list[MemoryRecord]:
        """Remember many items (dicts with ``text`` and any of ``durability``,
        ``metadata``, ``labels``, ``importance``, ``ttl``, ``expires_at``, ``vector``), each as
        :meth:`remember` would: all are checked first, then the labeler labels each, then
        they are stored ``batch_size`` at a time, each batch atomic with the capacity's
        drops. Items whose text their scope already holds answer the existing record
        (``dedupe=False`` stores copies)."""
        answer: list[MemoryRecord] = await self._run(
            self._flow("remember_many", {"items": items, "dedupe": dedupe})
        )
        return answer

    async def remember_conversation(
        self,
        turns: Iterable[Mapping[str, Any]],
        *,
        conversation: str,
        start: int = 0,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
    ) -> list[MemoryRecord]:
        """Remember each turn (``{"speaker", "text", "at"?, "metadata"?}``) of the
        conversation ``conversation`` as a memory of the bound scope (``durability=
        "session"``: the bound session's) whose metadata holds ``conversation``,
        ``turn`` (``start`` + its index), ``speaker`` and ``at``; a place the scope
        already holds is not stored again (its record answers). Every turn is checked
        and labelled first, then the new ones are stored in one atomic batch. The answer
        is a record per turn, in turn order (``docs/conversations.md``)."""
        answer: list[MemoryRecord] = await self._run(
            self._flow(
                "remember_conversation",
                {
                    "turns": turns,
                    "conversation": conversation,
                    "start": start,
                    "metadata": metadata,
                    "labels": labels,
                },
            )
        )
        return answer

    async def history(self, id: str, limit: int = 10) -> list[MemoryRecord] | None:
        """Earlier revisions of a memory the view can see, newest first (``[]`` if it
        has none); None when the view cannot see it."""
        answer: list[MemoryRecord] | None = await self._run(
            self._flow("history", {"id": id, "limit": limit})
        )
        return answer

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
        answer: MemoryRecord | None = await self._run(
            self._flow(
                "update",
                {
                    "id": id,
                    "text": text,
                    "metadata": metadata,
                    "labels": labels,
                    "importance": importance,
                    "expires_at": expires_at,
                    "expected_revision": expected_revision,
                },
            )
        )
        return answer

    async def remember_document(
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
        answer: Document = await self._run(
            self._flow(
                "remember_document",
                {
                    "text": text,
                    "source": source,
                    "max_chars": max_chars,
                    "metadata": metadata,
                    "labels": labels,
                },
            )
        )
        return answer

    async def remember_document_part(
        self,
        text: str,
        *,
        source: str,
        part: int,
        parts: int,
        sha256: str,
        max_chars: int = DEFAULT_MAX_CHARS,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
    ) -> DocumentUpload:
        """Hold ``text`` as part ``part`` (from 0) of a document of ``source`` sent in
        ``parts`` parts, whose whole text has the SHA-256 ``sha256``; the call that
        completes the parts remembers their text as :meth:`remember_document` does
        (with its ``max_chars``, ``metadata`` and ``labels``). Nothing of the document is
        stored before; the parts are held by the memory, in memory, and a restart
        forgets them (the answer's ``received`` says which it holds)."""
        answer: DocumentUpload = await self._run(
            self._flow(
                "remember_document_part",
                {
                    "text": text,
                    "source": source,
                    "part": part,
                    "parts": parts,
                    "sha256": sha256,
                    "max_chars": max_chars,
                    "metadata": metadata,
                    "labels": labels,
                },
            )
        )
        return answer

    async def forget_document(self, source: str) -> int:
        """Forget every chunk of the document of ``source``; return how many."""
        answer: int = await self._run(self._flow("forget_document", {"source": source}))
        return answer

    async def forget_all(self) -> int:
        """Delete every memory of the bound scope and session; return how many."""
        answer: int = await self._run(self._flow("forget_all", {}))
        return answer

    async def list_scopes(self, limit: int = 100, cursor: Scope | None = None) -> list[ScopeCount]:
        """The scopes under the bound scope (itself included) that hold memories, with
        counts, in scope order; ``cursor`` is the last scope of the previous page."""
        answer: list[ScopeCount] = await self._run(
            self._flow("list_scopes", {"limit": limit, "cursor": cursor})
        )
        return answer

    async def status(self) -> RemoteStatus:
        """The view's scope and session, how many memories they hold, the active space
        and the schema version, and the memory's own maintainer's state
        (``maintenance``): nothing that counts another scope's data."""
        answer: RemoteStatus = await self._run(self._flow("status", {}))
        return answer

    async def list(
        self,
        limit: int = 50,
        before: str | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
        below: tuple[datetime, str] | None = None,
    ) -> builtins.list[MemoryRecord]:
        """Memories of the bound scope and session, newest first; ``before`` is the id to
        continue after; ``below`` a position ``(created_at, id)`` to continue strictly
        below, whether or not a memory holds it (a page's last memory, forgotten since;
        another shard's: ``engramdb.shards``)."""
        answer: builtins.list[MemoryRecord] = await self._run(
            self._flow("list", {"limit": limit, "before": before, "filter": filter, "below": below})
        )
        return answer

    async def count(self) -> int:
        """How many live memories the bound scope and session hold (what ``status()``
        reports as ``items``, without the maintainer's state)."""
        answer: int = await self._run(self._flow("count", {}))
        return answer


class RemoteMemory(_RemoteMemoryBase):
    __doc__ = _RemoteMemoryBase.__doc__

    def remember(
        self,
        text: str,
        *,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
        expires_at: Any = None,
        ttl: Any = None,
    ) -> MemoryRecord:
        """Remember ``text`` in the bound scope (``durability="session"``: the bound
        session's scope). ``ttl`` (a ``timedelta`` or seconds) or ``expires_at`` sets an
        expiry. Labels are normalised and held to the view's label rules; the labeler's
        labels fill the names not given (best effort: its failure adds none, and so does
        an async labeler's timeout; a sync view runs no async labeler). The answer is the
        record, with ``dropped``: how many memories the scope's capacity
        (``Policy(max_items=...)``) dropped in the same write. ``vector``: your own
        vector of the text, as ``Memory.remember`` takes it."""
        answer: MemoryRecord = self._run(
            self._flow(
                "remember",
                {
                    "text": text,
                    "metadata": metadata,
                    "labels": labels,
                    "importance": importance,
                    "expires_at": expires_at,
                    "ttl": ttl,
                },
            )
        )
        return answer

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
        context: int = 0,
        vector: Sequence[float] | None = None,
    ) -> Hits:
        """Recall from the bound scope, the session and the read scopes, with the view's
        policy; ``labels`` is the label context of this work (for utility per context).
        ``rerank``: how many hits of the policy's order the memory's reranker re-scores
        (as ``Memory.recall``). ``context``: each hit that is a turn of a conversation
        comes with up to this many turns before and after it (``hit.context``), from its
        own scope.
        ``vector`` is your own query vector (as ``Memory.recall`` takes it). The hits'
        ``selection_id`` is the receipt ``complete()`` accepts."""
        answer: Hits = self._run(
            self._flow(
                "recall",
                {
                    "query": query,
                    "top_k": top_k,
                    "labels": labels,
                    "mode": mode,
                    "min_similarity": min_similarity,
                    "filter": filter,
                    "fusion": fusion,
                    "weights": weights,
                    "exact": exact,
                    "rerank": rerank,
                    "context": context,
                    "vector": vector,
                },
            )
        )
        return answer

    def get(self, id: str) -> MemoryRecord | None:
        """The memory ``id`` with its ``utility`` if the view can see it, else None
        (counts no exposure)."""
        answer: MemoryRecord | None = self._run(self._flow("get", {"id": id}))
        return answer

    def forget(self, id: str) -> bool:
        """Delete the memory ``id`` of the bound scope or session; False otherwise."""
        answer: bool = self._run(self._flow("forget", {"id": id}))
        return answer

    def complete(self, selection_id: str, score: float) -> bool:
        """Apply ``score`` in [-1, 1] to the memories a recall returned, once: True the
        first time, False for a used, expired, evicted or unknown selection."""
        answer: bool = self._run(
            self._flow("complete", {"selection_id": selection_id, "score": score})
        )
        return answer

    def feedback(self, memory_id: str, value: float | None) -> MemoryRecord | None:
        """Set (``None``: clear) the manual value in [-1, 1] of a memory of the bound
        scope or session; the record after it, or None when there is no such memory."""
        answer: MemoryRecord | None = self._run(
            self._flow("feedback", {"memory_id": memory_id, "value": value})
        )
        return answer

    def remember_many(
        self, items: Iterable[Mapping[str, Any]], *, dedupe: bool = True
    ) -> list[MemoryRecord]:
        """Remember many items (dicts with ``text`` and any of ``durability``,
        ``metadata``, ``labels``, ``importance``, ``ttl``, ``expires_at``, ``vector``), each as
        :meth:`remember` would: all are checked first, then the labeler labels each, then
        they are stored ``batch_size`` at a time, each batch atomic with the capacity's
        drops. Items whose text their scope already holds answer the existing record
        (``dedupe=False`` stores copies)."""
        answer: list[MemoryRecord] = self._run(
            self._flow("remember_many", {"items": items, "dedupe": dedupe})
        )
        return answer

    def remember_conversation(
        self,
        turns: Iterable[Mapping[str, Any]],
        *,
        conversation: str,
        start: int = 0,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
    ) -> list[MemoryRecord]:
        """Remember each turn (``{"speaker", "text", "at"?, "metadata"?}``) of the
        conversation ``conversation`` as a memory of the bound scope (``durability=
        "session"``: the bound session's) whose metadata holds ``conversation``,
        ``turn`` (``start`` + its index), ``speaker`` and ``at``; a place the scope
        already holds is not stored again (its record answers). Every turn is checked
        and labelled first, then the new ones are stored in one atomic batch. The answer
        is a record per turn, in turn order (``docs/conversations.md``)."""
        answer: list[MemoryRecord] = self._run(
            self._flow(
                "remember_conversation",
                {
                    "turns": turns,
                    "conversation": conversation,
                    "start": start,
                    "metadata": metadata,
                    "labels": labels,
                },
            )
        )
        return answer

    def history(self, id: str, limit: int = 10) -> list[MemoryRecord] | None:
        """Earlier revisions of a memory the view can see, newest first (``[]`` if it
        has none); None when the view cannot see it."""
        answer: list[MemoryRecord] | None = self._run(
            self._flow("history", {"id": id, "limit": limit})
        )
        return answer

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
        answer: MemoryRecord | None = self._run(
            self._flow(
                "update",
                {
                    "id": id,
                    "text": text,
                    "metadata": metadata,
                    "labels": labels,
                    "importance": importance,
                    "expires_at": expires_at,
                    "expected_revision": expected_revision,
                },
            )
        )
        return answer

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
        answer: Document = self._run(
            self._flow(
                "remember_document",
                {
                    "text": text,
                    "source": source,
                    "max_chars": max_chars,
                    "metadata": metadata,
                    "labels": labels,
                },
            )
        )
        return answer

    def remember_document_part(
        self,
        text: str,
        *,
        source: str,
        part: int,
        parts: int,
        sha256: str,
        max_chars: int = DEFAULT_MAX_CHARS,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
    ) -> DocumentUpload:
        """Hold ``text`` as part ``part`` (from 0) of a document of ``source`` sent in
        ``parts`` parts, whose whole text has the SHA-256 ``sha256``; the call that
        completes the parts remembers their text as :meth:`remember_document` does
        (with its ``max_chars``, ``metadata`` and ``labels``). Nothing of the document is
        stored before; the parts are held by the memory, in memory, and a restart
        forgets them (the answer's ``received`` says which it holds)."""
        answer: DocumentUpload = self._run(
            self._flow(
                "remember_document_part",
                {
                    "text": text,
                    "source": source,
                    "part": part,
                    "parts": parts,
                    "sha256": sha256,
                    "max_chars": max_chars,
                    "metadata": metadata,
                    "labels": labels,
                },
            )
        )
        return answer

    def forget_document(self, source: str) -> int:
        """Forget every chunk of the document of ``source``; return how many."""
        answer: int = self._run(self._flow("forget_document", {"source": source}))
        return answer

    def forget_all(self) -> int:
        """Delete every memory of the bound scope and session; return how many."""
        answer: int = self._run(self._flow("forget_all", {}))
        return answer

    def list_scopes(self, limit: int = 100, cursor: Scope | None = None) -> list[ScopeCount]:
        """The scopes under the bound scope (itself included) that hold memories, with
        counts, in scope order; ``cursor`` is the last scope of the previous page."""
        answer: list[ScopeCount] = self._run(
            self._flow("list_scopes", {"limit": limit, "cursor": cursor})
        )
        return answer

    def status(self) -> RemoteStatus:
        """The view's scope and session, how many memories they hold, the active space
        and the schema version, and the memory's own maintainer's state
        (``maintenance``): nothing that counts another scope's data."""
        answer: RemoteStatus = self._run(self._flow("status", {}))
        return answer

    def list(
        self,
        limit: int = 50,
        before: str | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
        below: tuple[datetime, str] | None = None,
    ) -> builtins.list[MemoryRecord]:
        """Memories of the bound scope and session, newest first; ``before`` is the id to
        continue after; ``below`` a position ``(created_at, id)`` to continue strictly
        below, whether or not a memory holds it (a page's last memory, forgotten since;
        another shard's: ``engramdb.shards``)."""
        answer: builtins.list[MemoryRecord] = self._run(
            self._flow("list", {"limit": limit, "before": before, "filter": filter, "below": below})
        )
        return answer

    def count(self) -> int:
        """How many live memories the bound scope and session hold (what ``status()``
        reports as ``items``, without the maintainer's state)."""
        answer: int = self._run(self._flow("count", {}))
        return answer
