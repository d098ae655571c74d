"""Generated from ``_faces_async.py`` by ``tools/unasync.py``: edit that file, then run
``python tools/unasync.py``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from engramdb import (
    Hits,
    MemoryRecord,
    ScopeCount,
)

from ._remote import RecallMode, RemoteStatus, _fields, _recall_options, _RemoteMemoryBase

__all__ = ["RemoteMemory"]

T = TypeVar("T")


class RemoteMemory(_RemoteMemoryBase):
    __doc__ = _RemoteMemoryBase.__doc__

    def remember(
        self,
        text: str,
        *,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
    ) -> MemoryRecord:
        """Remember ``text`` in the token's scope (a text the scope holds answers the
        memory that holds it)."""
        return self._run(self._remember(text, metadata, labels, importance))

    def remember_many(self, items: Iterable[Mapping[str, Any]]) -> list[MemoryRecord]:
        """Remember many items (dicts with ``text`` and any of ``metadata``, ``labels``,
        ``importance``), up to 100 per request, each request atomic."""
        return self._run(self._remember_many(items))

    def recall(
        self,
        query: str,
        *,
        top_k: int = 5,
        labels: Mapping[str, list[str]] | None = None,
        mode: RecallMode = "hybrid",
        min_similarity: float | None = None,
        filter: Mapping[str, Any] | None = None,
        rerank: int | None = None,
    ) -> Hits:
        """Recall from the token's scope and its read scopes, as the bound view does."""
        options = _recall_options(top_k, labels, mode, min_similarity, filter, rerank)
        return self._run(self._recall(query, options))

    def get(self, id: str) -> MemoryRecord | None:
        """The memory ``id`` if the token can see it, else None."""
        return self._run(self._get(id))

    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float | None = None,
        expected_revision: int | None = None,
    ) -> MemoryRecord | None:
        """Change the given fields of a memory of the token's scope (None leaves a field
        as it is); the record after it, or None when there is no such memory.
        ``ConflictError`` when ``expected_revision`` names another revision."""
        changes = _fields(
            text=text,
            metadata=metadata,
            labels=labels,
            importance=importance,
            expected_revision=expected_revision,
        )
        return self._run(self._update(id, changes))

    def forget(self, id: str) -> bool:
        """Delete the memory ``id`` of the token's scope; False when there is none."""
        return self._run(self._forget(id))

    def history(self, id: str, limit: int = 10) -> list[MemoryRecord] | None:
        """Earlier revisions of a memory the token can see, newest first; None when it
        cannot see it."""
        return self._run(self._history(id, limit))

    def list_scopes(
        self, limit: int = 100, cursor: Sequence[str] | None = None
    ) -> list[ScopeCount]:
        """The scopes under the token's scope that hold memories, with counts."""
        return self._run(self._list_scopes(limit, cursor))

    def forget_all(self) -> int:
        """Delete every memory of the token's scope; return how many."""
        return self._run(self._forget_all())

    def complete(self, selection_id: str, score: float) -> bool:
        """Apply ``score`` in [-1, 1] to the memories a recall returned, once."""
        return self._run(self._complete(selection_id, score))

    def feedback(self, memory_id: str, value: float | None) -> MemoryRecord | None:
        """Set (``None``: clear) a memory's manual value in [-1, 1]; None when the token's
        scope has no such memory."""
        return self._run(self._feedback(memory_id, value))

    def status(self) -> RemoteStatus:
        """The server's version, the token's scopes and counts (nothing of another
        scope)."""
        return self._run(self._status())

    def list(self, limit: int = 50, before: str | None = None) -> list[MemoryRecord]:
        """Memories of the token's scope, newest first; ``before``: the id to continue
        after."""
        return self._run(self._list(limit, before))
