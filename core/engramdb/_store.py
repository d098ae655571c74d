"""The store protocol: a batch of operation records in, results in order out.

Every memory operation is expressed as a tuple of the frozen records below and handed
to ``Store.batch`` (or ``abatch``). A store runs one batch atomically: either every
write in it is applied, or none is. Reads in a batch see the writes before them.
Validation happens before ops are built (in the memory flows), once, for every store.

=====================  ==========================================================
op                     result
=====================  ==========================================================
``PutItem``            ``None``: insert or replace the item (by id) and its lexical
                       row; drop vectors no item references any more
``PutVector``          ``None``: insert the vector unless (space, hash) exists
``RegisterSpace``      ``None``: record an embedding space (idempotent)
``GetItems``           ``list[StoredItem | None]`` in the order of ``ids``
``FindVectors``        ``frozenset[str]``: the hashes of ``hashes`` that have a vector
``ListItems``          ``list[MemoryRecord]``, newest first
``DeleteItem``         ``bool``: whether the item existed
``DeleteScope``        ``int``: how many items were deleted
``SearchVectors``      ``list[tuple[str, float]]``: (id, cosine similarity), best first
``SearchLexical``      ``list[tuple[str, float]]``: (id, relevance), best first
``PendingTexts``       ``list[tuple[str, str]]``: (content_sha256, text) without a vector
``Stats``              ``StoreStats``
=====================  ==========================================================

Times in ops are aware ``datetime`` objects; ``now`` is the caller's clock reading, so
expiry is decided by the caller's clock. Expired items are never returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ._filter import Filter
from ._types import EmbeddingSpace, MemoryRecord, Scope

__all__ = [
    "AsyncStore",
    "DeleteItem",
    "DeleteScope",
    "FindVectors",
    "GetItems",
    "ListItems",
    "Op",
    "PendingTexts",
    "PutItem",
    "PutVector",
    "RegisterSpace",
    "SearchLexical",
    "SearchVectors",
    "Stats",
    "StoreCapabilities",
    "StoreStats",
    "StoredItem",
    "SyncStore",
]


@dataclass(frozen=True, slots=True)
class PutItem:
    record: MemoryRecord


@dataclass(frozen=True, slots=True)
class PutVector:
    space_id: str
    content_sha256: str
    vector: bytes  # little-endian float32 of a unit vector
    embedded_at: datetime


@dataclass(frozen=True, slots=True)
class RegisterSpace:
    space: EmbeddingSpace
    now: datetime


@dataclass(frozen=True, slots=True)
class GetItems:
    ids: tuple[str, ...]
    now: datetime
    space_id: str | None = None  # when set, StoredItem.embedded_at is filled


@dataclass(frozen=True, slots=True)
class FindVectors:
    space_id: str
    hashes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ListItems:
    scope: Scope
    limit: int
    now: datetime
    before: str | None = None  # an id: only items with a smaller id


@dataclass(frozen=True, slots=True)
class DeleteItem:
    id: str


@dataclass(frozen=True, slots=True)
class DeleteScope:
    scope: Scope


@dataclass(frozen=True, slots=True)
class SearchVectors:
    scopes: tuple[Scope, ...]
    space_id: str
    query: tuple[float, ...]  # unit vector
    k: int
    now: datetime
    exact: bool = False
    filter: Filter | None = None


@dataclass(frozen=True, slots=True)
class SearchLexical:
    scopes: tuple[Scope, ...]
    query: str
    k: int
    now: datetime
    filter: Filter | None = None


@dataclass(frozen=True, slots=True)
class PendingTexts:
    """Distinct texts of items (expired or not) that have no vector in ``space_id``."""

    space_id: str
    limit: int


@dataclass(frozen=True, slots=True)
class Stats:
    space_id: str
    now: datetime


Op = (
    PutItem
    | PutVector
    | RegisterSpace
    | GetItems
    | FindVectors
    | ListItems
    | DeleteItem
    | DeleteScope
    | SearchVectors
    | SearchLexical
    | PendingTexts
    | Stats
)


@dataclass(frozen=True, slots=True)
class StoredItem:
    record: MemoryRecord
    embedded_at: datetime | None = None  # of the vector in GetItems.space_id, if any


@dataclass(frozen=True, slots=True)
class StoreStats:
    items: int  # live (not expired) items
    expired: int  # expired items not yet removed
    scopes: int
    pending: int  # live items without a vector in the space asked about
    vectors: int  # vectors in the space asked about
    spaces: tuple[str, ...]  # every space id with vectors or registered
    schema_version: int | None  # None for stores without a schema


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    supports_lexical: bool = True
    supports_ttl: bool = True
    supports_sync: bool = True
    supports_async: bool = True
    durable: bool = False


@runtime_checkable
class SyncStore(Protocol):
    capabilities: StoreCapabilities

    def batch(self, ops: Sequence[Op]) -> list[Any]: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncStore(Protocol):
    capabilities: StoreCapabilities

    async def abatch(self, ops: Sequence[Op]) -> list[Any]: ...

    async def aclose(self) -> None: ...
