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
(``Filter``, ``parse_filter``), the vector bytes (``decode_f32``, ``encode_f32``,
``check_unit_vector``), the keys of scopes and texts (``scope_key``, ``scope_from_key``,
``content_sha256``) and the lexical leg's terms and BM25 (``terms``, ``query_tokens``,
``BM25Index``) are exported here too, so a store author imports one module;
``docs/stores.md`` shows how to write a store and :mod:`engramdb.testing` checks one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol, runtime_checkable

from ._codec import check_unit_vector, decode_f32, encode_f32
from ._errors import ValidationError
from ._filter import (
    Filter,
    FilterValue,
    LabelCondition,
    MetadataCondition,
    parse_filter,
)
from ._lexical import BM25Index, query_tokens, terms
from ._outcomes import (
    check_query,
    check_restore,
    check_vector,
    conflict,
    evaluated,
    exposed,
    live,
    manually_valued,
    next_revision,
    not_found,
    other_scope,
    patched,
)
from ._ties import best_first, quantised
from ._types import (
    ContextUtility,
    EmbeddingSpace,
    MemoryRecord,
    Scope,
    Utility,
    content_sha256,
    scope_from_key,
    scope_key,
)

__all__ = [
    "KEEP",
    "STEPPED",
    "WRITES",
    "AsyncStore",
    "BM25Index",
    "ConsumeSelection",
    "ContextUtility",
    "DeleteItem",
    "DeleteItems",
    "DropSpace",
    "EmbeddingSpace",
    "Filter",
    "FilterValue",
    "FindContent",
    "FindVectors",
    "GetItems",
    "GetUtility",
    "GetVectors",
    "History",
    "Keep",
    "LabelCondition",
    "ListItems",
    "ListScopes",
    "MemoryRecord",
    "MetadataCondition",
    "Op",
    "PackVectors",
    "PatchItem",
    "PendingTexts",
    "PurgeExpired",
    "PutItem",
    "PutVector",
    "RecordSelection",
    "RegisterSpace",
    "RepairVectors",
    "RestoreItem",
    "Scope",
    "ScopeCount",
    "ScopeSet",
    "SearchHit",
    "SearchLexical",
    "SearchResult",
    "SearchVectors",
    "SetManual",
    "Stats",
    "StoreCapabilities",
    "StoreStats",
    "StoredItem",
    "SyncStore",
    "TrimScope",
    "Utility",
    "VectorRepair",
    "best_first",
    "check_batch",
    "check_query",
    "check_restore",
    "check_unit_vector",
    "check_vector",
    "conflict",
    "content_sha256",
    "decode_f32",
    "encode_f32",
    "evaluated",
    "exposed",
    "is_write",
    "live",
    "manually_valued",
    "next_revision",
    "not_found",
    "other_scope",
    "parse_filter",
    "patched",
    "quantised",
    "query_tokens",
    "scope_from_key",
    "scope_key",
    "terms",
]


class Keep:
    """The value of a :class:`PatchItem` field that is not changed (``KEEP``)."""

    _instance: Keep | None = None

    def __new__(cls) -> Keep:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "KEEP"

    def __reduce__(self) -> str:
        return "KEEP"


KEEP: Final = Keep()


@dataclass(frozen=True, slots=True)
class ScopeSet:
    """The scopes an op selects: ``exact`` scopes and whole-part ``prefixes``.

    A prefix selects every scope whose first parts equal it, itself included. Prefixes
    are never empty (``ListScopes`` takes its own, possibly empty, prefix).
    """

    exact: tuple[Scope, ...] = ()
    prefixes: tuple[Scope, ...] = ()

    def __contains__(self, scope: object) -> bool:
        if not isinstance(scope, tuple):
            return False
        return scope in self.exact or any(scope[: len(p)] == p for p in self.prefixes)

    @classmethod
    def of(cls, *scopes: Scope) -> ScopeSet:
        """The set of exactly ``scopes``."""
        return cls(exact=tuple(scopes))


# -- writes -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PutItem:
    """Insert ``record``, or make it the next revision of the live item with its id.

    * No item with ``record.id``, or only an expired one: ``record`` is stored as given
      (an expired item is replaced whole, its history dropped).
    * A live item with that id in ``record.scope``: ``record`` becomes its next revision:
      ``revision`` is the old one plus one, ``created_at`` the old one; the old revision
      goes to the history, which keeps the newest ``keep_revisions``.
    * A live item with that id in another scope: ``ValidationError``.
    * ``expected_revision`` (compare-and-set): ``0`` demands that no live item has the id,
      ``n >= 1`` that the live item is at revision ``n``; otherwise ``ConflictError``.

    ``record.content_sha256`` must be the SHA-256 of ``record.text``'s UTF-8.
    """

    record: MemoryRecord
    now: datetime
    expected_revision: int | None = None
    keep_revisions: int = 10


@dataclass(frozen=True, slots=True)
class RestoreItem:
    """Insert ``record`` exactly as given, with its earlier revisions and its evidence:
    an item read back from a backup (``engramdb.backup``).

    Nothing of ``record`` is recomputed: its id, scope, times, ``revision`` and
    ``content_sha256`` are stored as they are. ``history`` holds its earlier revisions
    newest first, as ``History`` answers them (each of its id and scope, revisions
    below ``record.revision``, each once: ``ValidationError`` otherwise, from
    :func:`check_restore`). ``utility`` is its evidence as ``GetUtility`` answers it
    (None: none); a store without ``supports_policy`` keeps no evidence and leaves it
    out, as one without ``supports_history`` leaves out ``history``.

    A live item with ``record.id`` (in any scope): ``ConflictError``, nothing written.
    An expired one is replaced whole, with its history and evidence, as ``PutItem``
    replaces it.
    """

    record: MemoryRecord
    now: datetime
    history: tuple[MemoryRecord, ...] = ()
    utility: Utility | None = None


@dataclass(frozen=True, slots=True)
class PatchItem:
    """Change the fields given (all others are ``KEEP``) of the live item ``id``.

    Applied to the current revision inside the store: ``revision`` goes up by one,
    ``updated_at`` becomes ``now``, the old revision goes to the history. Raises
    ``NotFoundError`` when there is no live item ``id`` (with ``scopes``: none in one of
    them, a bound view's update) and ``ConflictError`` when ``expected_revision`` is
    given and differs. A patch without ``text`` leaves the lexical index and the vectors
    alone.
    """

    id: str
    now: datetime
    text: str | Keep = KEEP
    metadata: dict[str, object] | Keep = KEEP
    labels: dict[str, list[str]] | Keep = KEEP
    importance: float | Keep = KEEP
    expires_at: datetime | Keep | None = KEEP
    expected_revision: int | None = None
    keep_revisions: int = 10
    scopes: ScopeSet | None = None

    @property
    def content_sha256(self) -> str | Keep:
        """The hash of the new text, or ``KEEP``."""
        if isinstance(self.text, Keep):
            return KEEP
        return content_sha256(self.text)

    def changes(self) -> dict[str, Any]:
        """The fields this patch sets (``content_sha256`` with ``text``)."""
        out: dict[str, Any] = {}
        for name in ("text", "metadata", "labels", "importance", "expires_at"):
            value = getattr(self, name)
            if not isinstance(value, Keep):
                out[name] = value
        if "text" in out:
            out["content_sha256"] = self.content_sha256
        return out


@dataclass(frozen=True, slots=True)
class DeleteItem:
    """Delete the item ``id`` (live or expired) with its history and its evidence; with
    ``scopes``, only if the item is in one of them (a bound view's forget)."""

    id: str
    scopes: ScopeSet | None = None


@dataclass(frozen=True, slots=True)
class DeleteItems:
    """Delete every item (live or expired) of ``scopes`` that matches ``filter``."""

    scopes: ScopeSet
    filter: Filter | None = None


@dataclass(frozen=True, slots=True)
class PutVector:
    """Store the vector of ``content_sha256`` in ``space_id``.

    ``vector`` is the little-endian float32 bytes of a unit vector. An existing vector is
    kept unless ``replace`` (which repairs a corrupt one).
    """

    space_id: str
    content_sha256: str
    vector: bytes
    embedded_at: datetime
    replace: bool = False


@dataclass(frozen=True, slots=True)
class RegisterSpace:
    space: EmbeddingSpace
    now: datetime


@dataclass(frozen=True, slots=True)
class PurgeExpired:
    """Delete up to ``limit`` items expired at ``now`` (the earliest expiries first, then
    by id), with their history and evidence, and every expired selection receipt."""

    now: datetime
    limit: int


# -- policy: receipts and evidence (a store that declares supports_policy) ---------------


@dataclass(frozen=True, slots=True)
class RecordSelection:
    """Record what a recall returned: the receipt ``id`` of ``scope`` (``memory_ids``,
    the label ``context``, ``now``), accepted by ``ConsumeSelection`` until
    ``expires_at``, and one exposure (``exposures + 1``, ``last_exposed_at = now``) for
    each of ``memory_ids`` that is a live item. The expired receipts of ``scope`` go, and
    then the oldest (by ``(now, id)``) beyond the newest ``keep``."""

    id: str
    scope: Scope
    memory_ids: tuple[str, ...]
    context: str
    now: datetime
    expires_at: datetime
    keep: int


@dataclass(frozen=True, slots=True)
class ConsumeSelection:
    """Use the receipt ``id`` of ``scope`` once: when it is live at ``now``, each of its
    memories that is a live item gets one evaluation of ``score / len(memory_ids)``
    (``eval_count + 1``, ``eval_sum + share``; :func:`evaluated`), also in the summary of
    the receipt's context (when it has one; the memory keeps the ``max_contexts`` most
    recently updated summaries), and ``reinforced_at = now`` when ``reinforce`` and the
    score is positive. The receipt goes, live or expired. Answers whether it was live:
    of two consumers of one receipt, exactly one gets ``True``."""

    id: str
    scope: Scope
    score: float
    now: datetime
    max_contexts: int
    reinforce: bool


@dataclass(frozen=True, slots=True)
class SetManual:
    """Set (or, with ``None``, clear) the manual value of the live item ``id`` of
    ``scopes`` at ``now``; ``reinforced_at = now`` when ``reinforce`` and the value is
    positive. Answers whether there was such an item (nothing changes otherwise)."""

    id: str
    value: float | None
    now: datetime
    reinforce: bool
    scopes: ScopeSet


@dataclass(frozen=True, slots=True)
class TrimScope:
    """Keep at most ``keep`` live items in ``scope`` at ``now``: the others are deleted
    (with their history and evidence). Kept first are the newest, by ``(created_at, id)``;
    with ``by_utility``, the most useful (``Utility.value()``, no evidence: 0), then the
    newest. Answers how many went."""

    scope: Scope
    keep: int
    now: datetime
    by_utility: bool = False


@dataclass(frozen=True, slots=True)
class GetUtility:
    """The evidence of ``ids``: a ``Utility`` for each id that has any (exposures,
    evaluations or a manual value), contexts the most recently updated first (ties by
    key, descending)."""

    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DropSpace:
    """Delete every vector of ``space_id`` and the space's registration (its items stay,
    pending in that space); answer how many vectors went. For a space nothing embeds in
    any more (``maintain(prune_spaces=True)``)."""

    space_id: str


# -- reads --------------------------------------------------------------------------------


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
class GetVectors:
    """The stored vectors of ``hashes`` in ``space_id``: for each hash that has one,
    its little-endian float32 bytes exactly as stored and its ``embedded_at`` (a
    backup's vectors, a copy between stores); hashes without one are absent."""

    space_id: str
    hashes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FindContent:
    """For each ``(scope, content_sha256)`` of ``pairs``, the live item of that scope with
    that text (the smallest id when there are several); pairs without one are absent."""

    pairs: tuple[tuple[Scope, str], ...]
    now: datetime


@dataclass(frozen=True, slots=True)
class ListItems:
    """Live items of ``scopes`` matching ``filter``, newest first by (created_at, id).

    ``before`` is an id: only items strictly older than it (none if it is not a live
    item of the selection).
    """

    scopes: ScopeSet
    limit: int
    now: datetime
    before: str | None = None
    filter: Filter | None = None


@dataclass(frozen=True, slots=True)
class ListScopes:
    """Scopes under ``prefix`` (``()``: all) holding live items, in scope order
    (part by part), strictly after the scope ``after``; at most ``limit``."""

    prefix: Scope
    limit: int
    now: datetime
    after: Scope | None = None


@dataclass(frozen=True, slots=True)
class History:
    """The earlier revisions of the live item ``id``, newest first; ``[]`` if none."""

    id: str
    limit: int
    now: datetime


@dataclass(frozen=True, slots=True)
class SearchVectors:
    scopes: ScopeSet
    space_id: str
    query: tuple[float, ...]  # unit vector
    k: int
    now: datetime
    exact: bool = False
    filter: Filter | None = None


@dataclass(frozen=True, slots=True)
class SearchLexical:
    scopes: ScopeSet
    query: str
    k: int
    now: datetime
    filter: Filter | None = None
    space_id: str | None = None  # when set, SearchHit.embedded_at is filled


@dataclass(frozen=True, slots=True)
class PendingTexts:
    """Distinct texts of items (expired or not) that have no vector in ``space_id``."""

    space_id: str
    limit: int


@dataclass(frozen=True, slots=True)
class RepairVectors:
    """Examine up to ``limit`` vectors of ``space_id`` whose hash sorts after ``after``.

    Returns the ones that do not decode as unit vectors of the space, with a text that
    uses them, so that they can be embedded again (``PutVector(..., replace=True)``).
    A SQL store also refreshes their derived index data here.
    """

    space_id: str
    limit: int
    after: str = ""


@dataclass(frozen=True, slots=True)
class PackVectors:
    """Pack the vectors of ``space_id`` of ONE scope holding at least ``min_vectors``
    items whose packed segments are missing or stale, largest scope first.

    A SQL store keeps a scope's vectors as one row each; its packed segments copy them
    into a few blobs (``docs/performance.md``, "Packed vector segments"), which a cold
    search loads instead of one row per vector. They are derived data, tagged with the
    scope's generation: a write to the scope deletes them, and a search never reads a
    stale one. Returns how many vectors were packed (0 when no scope needed it, and
    always 0 for a store that keeps no packed segments): it changes no answer.
    """

    space_id: str
    min_vectors: int = 4096


@dataclass(frozen=True, slots=True)
class Stats:
    space_id: str
    now: datetime


Op = (
    PutItem
    | RestoreItem
    | PatchItem
    | DeleteItem
    | DeleteItems
    | PutVector
    | RegisterSpace
    | DropSpace
    | GetItems
    | FindVectors
    | GetVectors
    | FindContent
    | ListItems
    | ListScopes
    | History
    | SearchVectors
    | SearchLexical
    | PendingTexts
    | RepairVectors
    | PackVectors
    | Stats
    | PurgeExpired
    | RecordSelection
    | ConsumeSelection
    | SetManual
    | GetUtility
    | TrimScope
)

WRITES: Final = (
    PutItem,
    RestoreItem,
    PatchItem,
    DeleteItem,
    DeleteItems,
    PutVector,
    RegisterSpace,
    DropSpace,
    RepairVectors,
    PackVectors,
    PurgeExpired,
    RecordSelection,
    ConsumeSelection,
    SetManual,
    TrimScope,
)


def is_write(op: Op) -> bool:
    """Whether ``op`` may change the store."""
    return isinstance(op, WRITES)


STEPPED: Final = (SearchVectors, RepairVectors, PackVectors)
"""Ops a SQL store runs in steps, with Python between its statements."""

ALONE: Final = (RepairVectors, PackVectors)
"""Stepped ops that write: each comes alone in its batch (:func:`check_batch`)."""


def check_batch(ops: Sequence[Op]) -> None:
    """Refuse a batch that mixes a stepped op with writes: a ``RepairVectors`` or a
    ``PackVectors`` comes alone, and a batch with a ``SearchVectors`` holds only reads.

    A SQL store runs those ops in steps, with Python between its statements; D1, which
    has no interactive transaction, could not keep the steps in one atomic unit with the
    batch's writes, so a failure in a later step would leave earlier writes applied.
    Every store refuses the mix, so a batch means the same everywhere.
    """
    if len(ops) > 1:
        for op in ops:
            if isinstance(op, ALONE):
                raise ValidationError(
                    f"{type(op).__name__} must be alone in its batch; send the other ops "
                    "in another batch"
                )
    if any(isinstance(op, SearchVectors) for op in ops):
        for op in ops:
            if is_write(op):
                raise ValidationError(
                    f"a batch with SearchVectors holds only reads, but it holds "
                    f"{type(op).__name__}; send the writes in an earlier batch"
                )


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
class SearchResult:
    """The hits of a search, best first, and the ids it had to skip.

    ``skipped`` holds items whose stored vector does not decode (they could not be
    scored: a ``RepairVectors`` scan finds them, ``reindex()`` repairs them) or whose
    item row does not decode (``engramdb.store_rows.decoded``: rewrite or forget them).
    ``coverage`` (vector searches): ``(items with a vector in the space, items)`` over
    the selected scopes, expired items included and filters left out; None for a
    lexical search.
    """

    hits: tuple[SearchHit, ...] = ()
    skipped: tuple[str, ...] = ()
    coverage: tuple[int, int] | None = None


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
