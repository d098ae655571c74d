"""The public store protocol: a batch of operation records in, results in op order out.

Every memory operation is a tuple of the frozen records below handed to ``batch`` (or
``abatch``). A store runs one batch atomically: either every op in it succeeds and every
write is applied, or the batch raises and nothing of it is applied. Reads in a batch see
the writes before them. Arguments are validated once, in the memory flows, before any op
is built; a store may trust the records it is given (see ``docs/stores.md``).

=====================  ==========================================================
op                     result
=====================  ==========================================================
``PutItem``            ``MemoryRecord``: the stored record. A new id is inserted; a
                       live item with the same id and scope gets a new revision
                       (``revision + 1``, ``created_at`` kept, the old revision kept
                       in its history); an expired one is replaced.
                       ``NotFoundError``/``ConflictError``/``ValidationError`` as
                       described on the class
``PatchItem``          ``MemoryRecord``: the changed fields applied to the current
                       revision, in the store, as one atomic step
``RestoreItem``        ``MemoryRecord``: the record inserted exactly as given (id,
                       times, revision), with its earlier revisions and its evidence
                       (a backup's item); ``ConflictError`` when a live item holds the
                       id (an expired one is replaced)
``DeleteItem``         ``bool``: whether the item existed (with its history)
``DeleteItems``        ``int``: how many items of the selection matched and went
``PutVector``          ``None``: store a vector unless (space, hash) has one
``RegisterSpace``      ``None``: record an embedding space (idempotent)
``DropSpace``          ``int``: how many vectors of a space went, with the space
``GetItems``           ``list[StoredItem | None]`` in the order of ``ids``
``FindVectors``        ``frozenset[str]``: the hashes of ``hashes`` that have a vector
``GetVectors``         ``dict[str, (bytes, datetime)]``: the stored bytes and
                       ``embedded_at`` of each of ``hashes`` that has a vector
``FindContent``        ``dict[(scope, hash), MemoryRecord]``: live items with those texts
``ListItems``          ``list[MemoryRecord]``, newest first
``ListScopes``         ``list[ScopeCount]``, in scope order
``History``            ``list[MemoryRecord]``: earlier revisions, newest first
``UnreadableItems``    ``list[str]``: ids of live items whose stored row does not
                       decode (``[]`` for a store of objects), in id order
``SearchVectors``      ``SearchResult``: best cosine similarity first, and how many of
                       the selected scopes' items have a vector in the space
``SearchLexical``      ``SearchResult``: best BM25 relevance first, the statistics
                       (item count, term counts, mean length) of the selected scopes
``PendingTexts``       ``list[tuple[str, str]]``: (content_sha256, text) without a vector,
                       in hash order
``RepairVectors``      ``VectorRepair``: vectors that do not decode, found by a scan
``PackVectors``        ``int``: vectors written into packed segments (0 for a store
                       that keeps none); it changes no answer
``Stats``              ``StoreStats``
``RecordSelection``    ``None``: a recall's receipt and its exposures
``ConsumeSelection``   ``bool``: whether the receipt was live (its evaluation applied)
``SetManual``          ``bool``: whether the item is live in the scopes given
``GetUtility``         ``dict[str, Utility]``: the evidence of the ids that have some
``PurgeExpired``       ``int``: how many expired items (at most ``limit``) went
``TrimScope``          ``int``: how many live items beyond a scope's capacity went
=====================  ==========================================================

The policy ops (``RecordSelection`` to ``GetUtility``, and ``TrimScope``) are those of a
store that declares ``supports_policy``; ``PurgeExpired`` is every store's.

Times in ops are aware ``datetime`` objects; ``now`` is the caller's clock reading, so
expiry is decided by the caller's clock. An item whose ``expires_at`` is not after
``now`` is expired: no op returns it, and writes treat its id as free.

Scopes are selected by :class:`ScopeSet`: exact scopes plus prefixes matched by whole
parts (``("a",)`` selects ``("a",)`` and ``("a", "x")``, never ``("ab",)``).

Results are ranked with equal scores newest first: by ``created_at``, then id, both
descending, and a store breaks ties this way *before* it cuts a search to ``k``, so the
cut keeps the newest of the items that tie at the k-th score. Scores tie when equal on
a grid of 2**-30 (``quantised``: every store ranks by it and returns it), so their last
bits, which differ between SQL and Python, decide nothing (``best_first`` sorts
search hits so; ``BM25Index.search`` and the in-process vector index take a ``newer``
key). Every store gives the same order for the same data. A batch with a
``SearchVectors`` holds only reads, and a ``RepairVectors`` or ``PackVectors`` comes alone
(:func:`check_batch`). The outcome every store must reach for each write (and the checks
it must make) is computed by the helpers exported here (``next_revision``, ``patched``,
``live``, ``evaluated``, ``check_vector``, ``check_query`` ...). The filters of the ops
(``Filter``, ``parse_filter``), the vector bytes (``decode_f32``, ``encode_f32``, ``unit_f32``,
``check_unit_vector``), the keys of scopes and texts (``scope_key``, ``scope_from_key``,
``content_sha256``) and the lexical leg's terms and BM25 (``terms``, ``query_tokens``,
``BM25Index``, ``bm25_ceiling``) are exported here too, so a store author imports one module;
``docs/stores.md`` shows how to write a store and :mod:`engramdb.testing` checks one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from engramdb._base.types import (
    ContextUtility,
    EmbeddingSpace,
    MemoryRecord,
    Scope,
    Utility,
    content_sha256,
    scope_from_key,
    scope_key,
)
from engramdb._lexical.bm25 import BM25Index, bm25_ceiling, query_tokens, terms
from engramdb._vectors.codec import check_unit_vector, decode_f32, encode_f32
from engramdb._vectors.index import unit_f32
from engramdb.ranking._ties import best_first, quantised
from engramdb.store import _ops, _outcomes
from engramdb.store._filter import (
    Filter,
    FilterValue,
    LabelCondition,
    MetadataCondition,
    parse_filter,
)
from engramdb.store._ops import *  # noqa: F403 (the op records, re-exported whole: _ops.__all__)
from engramdb.store._ops import Op
from engramdb.store._outcomes import *  # noqa: F403 (what every store must reach: _outcomes.__all__)

__all__ = [
    "AsyncStore",
    "BM25Index",
    "ContextUtility",
    "EmbeddingSpace",
    "Filter",
    "FilterValue",
    "LabelCondition",
    "MemoryRecord",
    "MetadataCondition",
    "Scope",
    "ScopeCount",
    "SearchHit",
    "SearchResult",
    "StoreCapabilities",
    "StoreStats",
    "StoredItem",
    "SyncStore",
    "TermStatistics",
    "Utility",
    "VectorRepair",
    "best_first",
    "bm25_ceiling",
    "check_unit_vector",
    "content_sha256",
    "decode_f32",
    "encode_f32",
    "parse_filter",
    "quantised",
    "query_tokens",
    "scope_from_key",
    "scope_key",
    "terms",
    "unit_f32",
]
__all__ += _ops.__all__  # the op records
__all__ += _outcomes.__all__  # what every store must reach


# -- results ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredItem:
    record: MemoryRecord
    embedded_at: datetime | None = None  # of the vector in GetItems.space_id, if any


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One item a search found, with its score and, if asked, its vector's time."""

    record: MemoryRecord
    score: float
    embedded_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class TermStatistics:
    """What a lexical search's BM25 was computed with: ``items``, how many items it
    counts (every item of the selected scopes, expired ones and those a filter rejects
    included), and ``found``, for each term of the query (``query_tokens`` order) how
    many of those items hold it. ``bm25_ceiling`` turns them into the best relevance an
    item could score, the lexical leg's absolute scale."""

    items: int
    found: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The hits of a search, best first, and the ids it had to skip.

    ``skipped`` holds items whose stored vector does not decode (they could not be
    scored: a ``RepairVectors`` scan finds them, ``reindex()`` repairs them) or whose
    item row does not decode (``engramdb.store.rows.decoded``: rewrite or forget them).
    ``coverage`` (vector searches): ``(items with a vector in the space, items)`` over
    the selected scopes, expired items included and filters left out; None for a
    lexical search. ``statistics`` (lexical searches that found something): the
    :class:`TermStatistics` its scores were computed with; None otherwise.
    """

    hits: tuple[SearchHit, ...] = ()
    skipped: tuple[str, ...] = ()
    coverage: tuple[int, int] | None = None
    statistics: TermStatistics | None = None


@dataclass(frozen=True, slots=True)
class ScopeCount:
    scope: Scope
    items: int  # live items


@dataclass(frozen=True, slots=True)
class VectorRepair:
    corrupt: tuple[tuple[str, str], ...] = ()  # (content_sha256, a text using it)
    last: str | None = None  # the last hash examined; None when the scan is done


@dataclass(frozen=True, slots=True)
class StoreStats:
    items: int  # live (not expired) items
    expired: int  # expired items not yet removed
    scopes: int
    pending: int  # live items without a vector in the space asked about
    vectors: int  # vectors in the space asked about
    spaces: tuple[str, ...]  # every space id with vectors or registered
    schema_version: int | None  # None for stores without a schema
    embedded: tuple[tuple[str, int], ...] = ()  # (space id, live items with a vector in
    # it) for every space of ``spaces``, in that order


# -- stores -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """What a store can do. The flows and the conformance suites read these.

    ``supports_sync``/``supports_async``: ``batch``/``abatch`` exist. ``supports_lexical``:
    ``SearchLexical`` answers (otherwise recall uses the vector leg only).
    ``supports_ttl``: items may expire (otherwise ``expires_at`` is refused).
    ``supports_history``: past revisions are kept (``History``, ``keep_revisions``).
    ``thread_safe``: one store object may be shared by threads. ``durable``: data
    survives the store object (and the process). ``supports_policy``: the receipt and
    evidence ops answer (``RecordSelection``, ``ConsumeSelection``, ``SetManual``,
    ``GetUtility``); off by default, so a store written before them stays valid.
    ``packs_vectors``: ``PackVectors`` packs (``maintain()`` sends it only then).
    ``read_only``: the store was opened read-only: it answers reads and refuses every
    batch that holds a write with one ``StoreError`` (:func:`check_writable`), changing
    nothing; a recall on it writes no receipt (``Hits.selection_id`` is None).
    """

    supports_sync: bool = True
    supports_async: bool = True
    supports_lexical: bool = True
    supports_ttl: bool = True
    supports_history: bool = True
    thread_safe: bool = False
    durable: bool = False
    supports_policy: bool = False
    packs_vectors: bool = False
    read_only: bool = False


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
