"""The store protocol's operations: one frozen dataclass per op, the union ``Op``, and
the batch rules (which ops write, which run in steps, which come alone: ``check_batch``).

``engramdb.store`` is the public module: it re-exports all of this beside the results,
the capabilities and the store protocols (its docstring is the op table).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from engramdb._base.errors import StoreError, ValidationError
from engramdb._base.types import EmbeddingSpace, MemoryRecord, Scope, Utility, content_sha256
from engramdb.store._filter import Filter

__all__ = [
    "KEEP",
    "STEPPED",
    "WRITES",
    "ConsumeSelection",
    "DeleteItem",
    "DeleteItems",
    "DropSpace",
    "FindContent",
    "FindVectors",
    "GetItems",
    "GetUtility",
    "GetVectors",
    "History",
    "Keep",
    "ListItems",
    "ListScopes",
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
    "ScopeSet",
    "SearchLexical",
    "SearchVectors",
    "SetManual",
    "Stats",
    "TrimScope",
    "UnreadableItems",
    "check_batch",
    "check_writable",
    "is_write",
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
    item of the selection). ``below`` is a position ``(created_at, id)``: only items
    strictly older than it, whether or not an item holds it (a page's last item that was
    forgotten since, or one of another store: each shard of a tenant lists below the same
    position), its time taken to the millisecond, as stores keep times. With both, both
    apply.
    """

    scopes: ScopeSet
    limit: int
    now: datetime
    before: str | None = None
    filter: Filter | None = None
    below: tuple[datetime, str] | None = None


@dataclass(frozen=True, slots=True)
class ListScopes:
    """Scopes under ``prefix`` (``()``: all) holding live items, in scope order
    (part by part), strictly after the scope ``after``; at most ``limit``."""

    prefix: Scope
    limit: int
    now: datetime
    after: Scope | None = None


@dataclass(frozen=True, slots=True)
class UnreadableItems:
    """The ids, in id order and at most ``limit``, of the live items of ``scopes`` whose
    stored row does not decode (a damaged page, a bad hand edit): the items every listing
    and search leaves out. A store that keeps records as objects answers ``[]``; a backup
    reports these ids instead of leaving them out silently, and ``doctor`` finds them."""

    scopes: ScopeSet
    now: datetime
    limit: int = 1000


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
    into a few blobs (``docs/performance-history.md``, "Packed vector segments"), which a cold
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
    | UnreadableItems
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


def check_writable(ops: Sequence[Op], store: str) -> None:
    """Refuse a batch that holds a write, for ``store`` (e.g. ``"the SQLite database
    'x.db'"``) opened read-only: one ``StoreError`` naming the op and the fix, before
    anything runs, so nothing changes. A read-only store calls it first in each batch."""
    for op in ops:
        if is_write(op):
            raise StoreError(
                f"{store} is open read-only, and {type(op).__name__} would change it; "
                "nothing was changed. To write, open it without read_only=True (the CLI: "
                "without --read-only, as a user who may write the file and its folder)"
            )


STEPPED: Final = (SearchVectors, RepairVectors, PackVectors)
"""Ops a SQL store runs in steps, with Python between its statements."""

_ALONE: Final = (RepairVectors, PackVectors)
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
            if isinstance(op, _ALONE):
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
