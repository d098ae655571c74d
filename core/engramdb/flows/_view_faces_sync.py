"""Generated from ``_view_faces_async.py`` by ``tools/unasync.py``: edit that file, then run
``python tools/unasync.py``."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from engramdb._base.types import Hits, MemoryRecord, RecallMode, Remembered, Scope
from engramdb.documents import (
    DEFAULT_MAX_CHARS,
    Document,
    DocumentSummary,
    DocumentUpload,
)
from engramdb.flows._bound import _BoundMemoryBase
from engramdb.flows._bound_flows import BoundStatus, Durability
from engramdb.flows._bound_writes import (
    DocumentSteps,
    Label,
    Outcome,
    document_pairs,
    record,
    record_id,
)
from engramdb.flows._effects import Flow
from engramdb.flows._operations import UNSET
from engramdb.flows._trampoline import run
from engramdb.ranking._hits import Fusion
from engramdb.store import ScopeCount

__all__ = ["BoundMemory"]

T = TypeVar("T")


class BoundMemory(_BoundMemoryBase):
    __doc__ = _BoundMemoryBase.__doc__

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
        vector: Sequence[float] | None = None,
    ) -> Remembered:
        """Remember ``text`` in the bound scope (``durability="session"``: the bound
        session's scope). ``ttl`` (a ``timedelta`` or seconds) or ``expires_at`` sets an
        expiry. Labels are normalised and held to the view's label rules; the labeler's
        labels fill the names not given (best effort: its failure adds none, and so does
        an async labeler's timeout; a sync view runs no async labeler). The answer is the
        record, with ``dropped``: how many memories the scope's capacity
        (``Policy(max_items=...)``) dropped in the same write. ``vector``: your own
        vector of the text, as ``Memory.remember`` takes it."""
        checked, scope, given, fields = self._prepare(
            text,
            durability,
            labels,
            metadata=metadata,
            importance=importance,
            expires_at=expires_at,
            ttl=ttl,
            vector=vector,
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
                context=context,
                vector=vector,
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
        ``metadata``, ``labels``, ``importance``, ``ttl``, ``expires_at``, ``vector``), each as
        :meth:`remember` would: all are checked first, then the labeler labels each, then
        they are stored ``batch_size`` at a time, each batch atomic with the capacity's
        drops. Items whose text their scope already holds answer the existing record
        (``dedupe=False`` stores copies)."""
        prepared = self._prepare_many(items)
        automatic = [self._proposed(text) for text, *_ in prepared]
        rows = self._rows(prepared, automatic)
        return self._run(self._bound.remember_many(rows, batch_size, dedupe))

    def remember_conversation(
        self,
        turns: Iterable[Mapping[str, Any]],
        *,
        conversation: str,
        start: int = 0,
        durability: Durability = "shared",
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
        prepared = self._prepare_turns(turns, conversation, start, durability, metadata, labels)
        automatic = [self._proposed(text) for text, *_ in prepared]
        return self._run(self._turns(self._rows(prepared, automatic)))

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
        key, held, whole = self._part(text, source, sha256, part, parts)
        if whole is None:
            return DocumentUpload(source, sha256, parts, tuple(sorted(held)), None)
        steps = self._documents([(source, whole)], max_chars, metadata, labels, None, record)
        (document,) = self._steps(steps)
        self._bound_uploads.drop(key)
        return DocumentUpload(source, sha256, parts, tuple(range(parts)), Document(*document))

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
    ) -> builtins.list[MemoryRecord]:  # its own name is the method's in the class
        """Memories of the bound scope and session, newest first; ``before`` is the id to
        continue after; ``below`` a position ``(created_at, id)`` to continue strictly
        below, whether or not a memory holds it (a page's last memory, forgotten since;
        another shard's: ``engramdb.shards``)."""
        return self._run(self._bound.list(limit, before, filter, below))

    def count(self) -> int:
        """How many live memories the bound scope and session hold (what ``status()``
        reports as ``items``, without the maintainer's state)."""
        status = self._run(self._bound.status(self.space))
        return status.items
