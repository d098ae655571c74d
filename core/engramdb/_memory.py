"""``Memory`` and ``AsyncMemory``: the same flows, driven with calls or with awaits."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from ._clock import Clock, system_clock
from ._effects import Flow, adrive, drive
from ._embedder import Embedder
from ._flows import UNSET, Limits, MemoryFlows, MemoryStatus, OnEmbedError
from ._types import Hits, MemoryRecord, RecallMode, Scope

__all__ = ["AsyncMemory", "Memory"]

T = TypeVar("T")


class _Base:
    def __init__(
        self,
        store: Any,
        embedder: Embedder,
        *,
        redact: Callable[[str], str] | None = None,
        on_embed_error: OnEmbedError = "lexical",
        clock: Clock | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self._flows = MemoryFlows(
            embedder,
            clock=clock or system_clock,
            redact=redact,
            on_embed_error=on_embed_error,
            limits=limits,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r}, {self.embedder!r})"


class Memory(_Base):
    """Durable semantic memory with plain (blocking) calls.

    ``Memory(store, embedder, *, redact=None, on_embed_error="lexical", clock=None)``.
    Every method validates its arguments before touching the store; a bad argument
    raises ``ValidationError`` and changes nothing.
    """

    def _run(self, flow: Flow[T]) -> T:
        return drive(flow, self.embedder, self.store)

    def remember(
        self,
        text: str,
        scope: Scope,
        *,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
        expires_at: Any = None,
        id: str | None = None,
    ) -> MemoryRecord:
        """Store ``text`` in ``scope`` and return its record."""
        return self._run(
            self._flows.remember(
                text,
                scope,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
                id=id,
            )
        )

    def remember_many(self, items: Iterable[Mapping[str, Any]]) -> list[MemoryRecord]:
        """Store many items (dicts with ``text``, ``scope`` …) in one atomic batch."""
        return self._run(self._flows.remember_many(items))

    def recall(
        self,
        query: str,
        scopes: Iterable[Scope],
        *,
        top_k: int = 10,
        mode: RecallMode = "hybrid",
        min_similarity: float | None = None,
        filter: Mapping[str, Any] | None = None,
        rrf_k: int = 60,
        weights: Mapping[str, float] | None = None,
        exact: bool = False,
    ) -> Hits:
        """Find the memories of ``scopes`` that best match ``query``."""
        return self._run(
            self._flows.recall(
                query,
                scopes,
                top_k=top_k,
                mode=mode,
                min_similarity=min_similarity,
                filter=filter,
                rrf_k=rrf_k,
                weights=weights,
                exact=exact,
            )
        )

    def get(self, id: str) -> MemoryRecord | None:
        """The memory with ``id``, or None if there is none (or it expired)."""
        return self._run(self._flows.get(id))

    def list(self, scope: Scope, limit: int = 50, before: str | None = None) -> list[MemoryRecord]:
        """Memories of ``scope``, newest first; ``before`` is the id to continue after."""
        return self._run(self._flows.list(scope, limit, before))

    def update(
        self,
        id: str,
        *,
        text: Any = UNSET,
        metadata: Any = UNSET,
        labels: Any = UNSET,
        importance: Any = UNSET,
        expires_at: Any = UNSET,
    ) -> MemoryRecord:
        """Change a memory; its revision increases by one. Raises ``NotFoundError``."""
        return self._run(
            self._flows.update(
                id,
                text=text,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
            )
        )

    def forget(self, id: str) -> bool:
        """Delete a memory; True if it existed."""
        return self._run(self._flows.forget(id))

    def forget_scope(self, scope: Scope) -> int:
        """Delete every memory of exactly ``scope``; return how many."""
        return self._run(self._flows.forget_scope(scope))

    def reindex(self, batch_size: int = 64, progress: Callable[[int], None] | None = None) -> int:
        """Embed every pending text in the active space; return how many were embedded."""
        return self._run(self._flows.reindex(batch_size, progress))

    def status(self) -> MemoryStatus:
        """Counts, pending embeddings, active space and schema version."""
        return self._run(self._flows.status())

    def close(self) -> None:
        """Close the store."""
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
    """Durable semantic memory for ``async`` code: the methods of :class:`Memory`, awaited."""

    async def _run(self, flow: Flow[T]) -> T:
        return await adrive(flow, self.embedder, self.store)

    async def remember(
        self,
        text: str,
        scope: Scope,
        *,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
        expires_at: Any = None,
        id: str | None = None,
    ) -> MemoryRecord:
        """Store ``text`` in ``scope`` and return its record."""
        return await self._run(
            self._flows.remember(
                text,
                scope,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
                id=id,
            )
        )

    async def remember_many(self, items: Iterable[Mapping[str, Any]]) -> list[MemoryRecord]:
        """Store many items (dicts with ``text``, ``scope`` …) in one atomic batch."""
        return await self._run(self._flows.remember_many(items))

    async def recall(
        self,
        query: str,
        scopes: Iterable[Scope],
        *,
        top_k: int = 10,
        mode: RecallMode = "hybrid",
        min_similarity: float | None = None,
        filter: Mapping[str, Any] | None = None,
        rrf_k: int = 60,
        weights: Mapping[str, float] | None = None,
        exact: bool = False,
    ) -> Hits:
        """Find the memories of ``scopes`` that best match ``query``."""
        return await self._run(
            self._flows.recall(
                query,
                scopes,
                top_k=top_k,
                mode=mode,
                min_similarity=min_similarity,
                filter=filter,
                rrf_k=rrf_k,
                weights=weights,
                exact=exact,
            )
        )

    async def get(self, id: str) -> MemoryRecord | None:
        """The memory with ``id``, or None if there is none (or it expired)."""
        return await self._run(self._flows.get(id))

    async def list(
        self, scope: Scope, limit: int = 50, before: str | None = None
    ) -> list[MemoryRecord]:
        """Memories of ``scope``, newest first; ``before`` is the id to continue after."""
        return await self._run(self._flows.list(scope, limit, before))

    async def update(
        self,
        id: str,
        *,
        text: Any = UNSET,
        metadata: Any = UNSET,
        labels: Any = UNSET,
        importance: Any = UNSET,
        expires_at: Any = UNSET,
    ) -> MemoryRecord:
        """Change a memory; its revision increases by one. Raises ``NotFoundError``."""
        return await self._run(
            self._flows.update(
                id,
                text=text,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
            )
        )

    async def forget(self, id: str) -> bool:
        """Delete a memory; True if it existed."""
        return await self._run(self._flows.forget(id))

    async def forget_scope(self, scope: Scope) -> int:
        """Delete every memory of exactly ``scope``; return how many."""
        return await self._run(self._flows.forget_scope(scope))

    async def reindex(
        self, batch_size: int = 64, progress: Callable[[int], None] | None = None
    ) -> int:
        """Embed every pending text in the active space; return how many were embedded."""
        return await self._run(self._flows.reindex(batch_size, progress))

    async def status(self) -> MemoryStatus:
        """Counts, pending embeddings, active space and schema version."""
        return await self._run(self._flows.status())

    async def aclose(self) -> None:
        """Close the store."""
        aclose = getattr(self.store, "aclose", None)
        if aclose is not None:
            await aclose()
        else:
            self.store.close()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
