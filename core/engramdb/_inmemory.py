"""``InMemoryStore``: the store of the core, for Workers isolates, scripts and tests.

Items live in exact scope partitions; vectors are kept compact (float32 bytes plus
sign-bit codes in one :class:`VectorIndex` per scope and space); the lexical leg is one
pure-Python BM25 index per scope, searched with the statistics of the scopes a search
selects, as the SQL stores compute them. Nothing survives the process.

A batch runs in two passes. The first *resolves* every op against the store as the
earlier ops of the batch leave it (an overlay of the items they touch): it checks every
condition that can fail (a missing or expired id, a lost compare-and-set, a bad vector,
a query of the wrong size) and computes every write's outcome, changing nothing. The
second applies the outcomes and runs the reads, in op order; nothing in it can fail. So
a batch that raises leaves the store exactly as it was. A SQL store replays the first
pass to name the op that failed its guard (:func:`first_failure`).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from ._clock import to_ms
from ._errors import ConflictError, NotFoundError, StoreError, ValidationError
from ._filter import Filter
from ._lexical import BM25Index, search_many
from ._types import MemoryRecord, Scope, Utility
from ._vectors import VectorIndex
from .store import (
    ConsumeSelection,
    DeleteItem,
    DeleteItems,
    DropSpace,
    FindContent,
    FindVectors,
    GetItems,
    GetUtility,
    History,
    ListItems,
    ListScopes,
    Op,
    PatchItem,
    PendingTexts,
    PurgeExpired,
    PutItem,
    PutVector,
    RecordSelection,
    RegisterSpace,
    RepairVectors,
    ScopeCount,
    ScopeSet,
    SearchHit,
    SearchLexical,
    SearchResult,
    SearchVectors,
    SetManual,
    Stats,
    StoreCapabilities,
    StoredItem,
    StoreStats,
    TrimScope,
    VectorRepair,
    check_batch,
    check_query,
    check_vector,
    evaluated,
    exposed,
    live,
    manually_valued,
    next_revision,
    patched,
)

__all__ = ["InMemoryStore", "first_failure"]

_Step = Callable[[], Any]


class InMemoryStore:
    """A store held in this process's memory. ``batch`` and ``abatch`` run the same code.

    Not thread-safe: share it between threads only behind your own lock.
    """

    capabilities = StoreCapabilities(durable=False, thread_safe=False, supports_policy=True)

    def __init__(self) -> None:
        self._items: dict[str, MemoryRecord] = {}
        self._history: dict[str, tuple[MemoryRecord, ...]] = {}  # oldest first
        self._scopes: dict[Scope, dict[str, None]] = {}  # insertion-ordered id sets
        self._by_hash: dict[str, set[str]] = {}
        self._vectors: dict[tuple[str, str], tuple[bytes, datetime]] = {}
        self._spaces_of: dict[str, set[str]] = {}  # content hash -> spaces with its vector
        self._spaces: dict[str, int] = {}  # space id -> dimensions
        self._indexes: dict[Scope, dict[str, VectorIndex]] = {}  # scope -> space -> index
        self._expiring: dict[Scope, int] = {}  # items with an expires_at, per scope
        self._lexical: dict[Scope, BM25Index] = {}  # per scope: BM25 statistics per scope
        self._utility: dict[str, Utility] = {}  # item id -> its evidence, once it has some
        self._receipts: dict[str, _Receipt] = {}  # selection id -> receipt
        self._closed = False

    def __repr__(self) -> str:
        return f"InMemoryStore({len(self._items)} items)"

    # -- protocol -------------------------------------------------------------------------

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        if self._closed:
            raise StoreError("this InMemoryStore is closed; create a new one")
        check_batch(ops)
        overlay = _Overlay(self)
        steps = [self._resolve(op, overlay) for op in ops]  # may raise: nothing changed
        return [step() for step in steps]

    async def abatch(self, ops: Sequence[Op]) -> list[Any]:
        return self.batch(ops)

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    # -- pass 1: resolve --------------------------------------------------------------------

    def _resolve(self, op: Op, overlay: _Overlay) -> _Step:
        """Check ``op`` against the store as the batch has changed it so far and return
        the step that applies it (and answers it) in pass 2."""
        if isinstance(op, PutItem):
            old = overlay.record(op.record.id)
            record = next_revision(old, op.record, op.now, op.expected_revision)
            if record is op.record:  # new, or replacing an expired item: no history
                return overlay.set(record, (), 0, fresh=True)
            assert old is not None
            return overlay.set(record, (*overlay.history(old.id), old), op.keep_revisions)
        if isinstance(op, PatchItem):
            old = overlay.record(op.id)
            record = patched(old, op)
            assert old is not None
            return overlay.set(record, (*overlay.history(old.id), old), op.keep_revisions)
        if isinstance(op, DeleteItem):
            found = overlay.record(op.id)
            if found is None or (op.scopes is not None and found.scope not in op.scopes):
                return lambda: False
            return overlay.remove([op.id], True)
        if isinstance(op, DeleteItems):
            ids = [
                record.id
                for record in overlay.records()
                if record.scope in op.scopes and (op.filter is None or op.filter.matches(record))
            ]
            return overlay.remove(ids, len(ids))
        if isinstance(op, PutVector):
            check_vector(op, overlay.spaces.get(op.space_id))
            return lambda: self._put_vector(op)
        if isinstance(op, RegisterSpace):
            overlay.spaces.setdefault(op.space.id, op.space.dimensions)
            return lambda: self._register(op)
        if isinstance(op, DropSpace):
            overlay.spaces.pop(op.space_id, None)
            return lambda: self._drop_space(op)
        if isinstance(op, PurgeExpired):
            expired = sorted(
                (r for r in overlay.records() if not live(r, op.now)),
                key=lambda r: (to_ms(r.expires_at) if r.expires_at else 0, r.id),
            )
            purged = [r.id for r in expired[: op.limit]]
            now_ms = to_ms(op.now)
            stale = {key: None for key, r in overlay.receipts() if r.expires_ms <= now_ms}
            return _sequence(overlay.change({}, stale), overlay.remove(purged, len(purged)))
        if isinstance(op, TrimScope):
            gone = _beyond(op, overlay)
            return overlay.remove(gone, len(gone))
        policy = _POLICY.get(type(op))
        if policy is not None:
            return policy(op, overlay)
        if isinstance(op, SearchVectors):
            check_query(op, overlay.spaces.get(op.space_id))
        read = self._READS.get(type(op))
        if read is None:
            raise StoreError(f"InMemoryStore does not know the op {op!r}")
        return lambda: read(self, op)

    # -- pass 2: apply ----------------------------------------------------------------------

    def _set(self, record: MemoryRecord, history: tuple[MemoryRecord, ...]) -> None:
        """Make ``record`` the item of its id, keeping every index in step."""
        old = self._items.get(record.id)
        if old is not None:
            self._unindex(old, record)
        self._items[record.id] = record
        if history:
            self._history[record.id] = history
        else:
            self._history.pop(record.id, None)
        if old is None or old.scope != record.scope:
            self._scopes.setdefault(record.scope, {})[record.id] = None
        if record.expires_at is not None:
            self._expiring[record.scope] = self._expiring.get(record.scope, 0) + 1
        if old is None or old.text != record.text or old.scope != record.scope:
            self._lexical.setdefault(record.scope, BM25Index()).add(record.id, record.text)
        if old is None or old.content_sha256 != record.content_sha256 or old.scope != record.scope:
            self._by_hash.setdefault(record.content_sha256, set()).add(record.id)
            for space_id, index in self._indexes.get(record.scope, {}).items():
                vector = self._vectors.get((space_id, record.content_sha256))
                if vector is not None:
                    index.add(record.id, vector[0])
        if old is not None:
            self._collect(old.content_sha256)

    def _remove(self, item_id: str) -> None:
        record = self._items.pop(item_id, None)
        if record is None:
            return
        self._history.pop(item_id, None)
        self._utility.pop(item_id, None)
        self._unindex(record, None)
        self._collect(record.content_sha256)

    def _unindex(self, old: MemoryRecord, new: MemoryRecord | None) -> None:
        """Take ``old`` out of what ``new`` (None: nothing) does not share with it."""
        if old.expires_at is not None:
            self._expiring[old.scope] -= 1
        moved = new is None or new.scope != old.scope
        if new is None or moved or new.text != old.text:
            self._lexical[old.scope].remove(old.id)
        if new is None or moved or new.content_sha256 != old.content_sha256:
            holders = self._by_hash[old.content_sha256]
            holders.discard(old.id)
            if not holders:
                del self._by_hash[old.content_sha256]
            for index in self._indexes.get(old.scope, {}).values():
                index.remove(old.id)
        if moved:
            members = self._scopes[old.scope]
            del members[old.id]
            if not members:
                del self._scopes[old.scope]
                self._indexes.pop(old.scope, None)
                del self._lexical[old.scope]

    def _collect(self, sha: str) -> None:
        """Drop the vectors of ``sha`` once no item references it."""
        if sha in self._by_hash:
            return
        for space_id in self._spaces_of.pop(sha, ()):
            del self._vectors[(space_id, sha)]

    def _register(self, op: RegisterSpace) -> None:
        self._spaces.setdefault(op.space.id, op.space.dimensions)

    def _drop_space(self, op: DropSpace) -> int:
        self._spaces.pop(op.space_id, None)
        for indexes in self._indexes.values():
            indexes.pop(op.space_id, None)
        gone = [key for key in self._vectors if key[0] == op.space_id]
        for key in gone:
            del self._vectors[key]
            holders = self._spaces_of[key[1]]
            holders.discard(op.space_id)
            if not holders:
                del self._spaces_of[key[1]]
        return len(gone)

    def _put_vector(self, op: PutVector) -> None:
        key = (op.space_id, op.content_sha256)
        if key in self._vectors and not op.replace:
            return
        self._vectors[key] = (bytes(op.vector), op.embedded_at)
        self._spaces_of.setdefault(op.content_sha256, set()).add(op.space_id)
        for item_id in self._by_hash.get(op.content_sha256, ()):
            index = self._indexes.get(self._items[item_id].scope, {}).get(op.space_id)
            if index is not None:
                index.add(item_id, op.vector)

    # -- policy (pass 1: every outcome computed against the overlay) ---------------------

    def _get_utility(self, op: GetUtility) -> dict[str, Utility]:
        return {i: self._utility[i] for i in dict.fromkeys(op.ids) if i in self._utility}

    # -- reads ------------------------------------------------------------------------------

    def _get_items(self, op: GetItems) -> list[StoredItem | None]:
        out: list[StoredItem | None] = []
        for item_id in op.ids:
            record = self._items.get(item_id)
            if record is None or not live(record, op.now):
                out.append(None)
            else:
                out.append(StoredItem(record, self._embedded_at(record, op.space_id)))
        return out

    def _embedded_at(self, record: MemoryRecord, space_id: str | None) -> datetime | None:
        vector = self._vectors.get((space_id, record.content_sha256)) if space_id else None
        return vector[1] if vector else None

    def _find_content(self, op: FindContent) -> dict[tuple[Scope, str], MemoryRecord]:
        found: dict[tuple[Scope, str], MemoryRecord] = {}
        for scope, sha in dict.fromkeys(op.pairs):
            ids = [
                i
                for i in self._by_hash.get(sha, ())
                if self._items[i].scope == scope and live(self._items[i], op.now)
            ]
            if ids:
                found[(scope, sha)] = self._items[min(ids)]
        return found

    def _find_vectors(self, op: FindVectors) -> frozenset[str]:
        return frozenset(h for h in op.hashes if (op.space_id, h) in self._vectors)

    def _selected(self, scopes: ScopeSet) -> Iterator[Scope]:
        """The scopes holding items that ``scopes`` selects."""
        if not scopes.prefixes:
            return (scope for scope in dict.fromkeys(scopes.exact) if scope in self._scopes)
        return (scope for scope in self._scopes if scope in scopes)

    def _list_items(self, op: ListItems) -> list[MemoryRecord]:
        """Newest first: by (created_at, id) descending, strictly after ``before``."""
        records = [
            record
            for scope in self._selected(op.scopes)
            for record in map(self._items.__getitem__, self._scopes[scope])
            if live(record, op.now)
        ]
        if op.before is not None:
            cursor = self._items.get(op.before)
            if cursor is None or cursor.scope not in op.scopes or not live(cursor, op.now):
                return []
            records = [r for r in records if (r.created_at, r.id) < (cursor.created_at, cursor.id)]
        if op.filter is not None:
            records = [r for r in records if op.filter.matches(r)]
        records.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return records[: op.limit]

    def _list_scopes(self, op: ListScopes) -> list[ScopeCount]:
        width = len(op.prefix)
        found = []
        for scope, ids in self._scopes.items():
            if scope[:width] != op.prefix or (op.after is not None and scope <= op.after):
                continue
            count = sum(1 for i in ids if live(self._items[i], op.now))
            if count:
                found.append(ScopeCount(scope, count))
        found.sort(key=lambda entry: entry.scope)
        return found[: op.limit]

    def _history_of(self, op: History) -> list[MemoryRecord]:
        if not live(self._items.get(op.id), op.now):
            return []
        return list(reversed(self._history.get(op.id, ())))[: op.limit]

    def _index(self, scope: Scope, space_id: str) -> VectorIndex | None:
        index = self._indexes.get(scope, {}).get(space_id)
        if index is not None or scope not in self._scopes or space_id not in self._spaces:
            return index
        index = VectorIndex(self._spaces[space_id])
        vectors = self._vectors
        pairs = []
        for item_id in self._scopes[scope]:
            vector = vectors.get((space_id, self._items[item_id].content_sha256))
            if vector is not None:
                pairs.append((item_id, vector[0]))
        index.add_many(pairs)
        self._indexes.setdefault(scope, {})[space_id] = index
        return index

    def _hits(self, found: list[tuple[str, float]], k: int, space_id: str | None) -> SearchResult:
        found.sort(key=lambda hit: (-hit[1], hit[0]))
        hits = []
        for item_id, score in found[:k]:
            record = self._items[item_id]
            hits.append(SearchHit(record, score, self._embedded_at(record, space_id)))
        return SearchResult(tuple(hits))

    def _search_vectors(self, op: SearchVectors) -> SearchResult:
        found: list[tuple[str, float]] = []
        if op.k <= 0:
            return SearchResult()
        embedded = items = 0
        for scope in self._selected(op.scopes):
            index = self._index(scope, op.space_id)
            items += len(self._scopes[scope])
            if index is None or not len(index):
                continue
            embedded += len(index)
            allowed: Container[str] | None = None
            if op.filter is not None or self._expiring.get(scope):
                allowed = _Eligible(self._items, op.scopes, op.now, op.filter)
            found += index.search(op.query, op.k, exact=op.exact, allowed=allowed)
        return replace(self._hits(found, op.k, op.space_id), coverage=(embedded, items))

    def _search_lexical(self, op: SearchLexical) -> SearchResult:
        indexes = [self._lexical[scope] for scope in self._selected(op.scopes)]
        if not indexes:
            return SearchResult()
        eligible = _Eligible(self._items, op.scopes, op.now, op.filter)
        found = search_many(indexes, op.query, op.k, allowed=eligible)
        return self._hits(found, op.k, op.space_id)

    def _pending(self, op: PendingTexts) -> list[tuple[str, str]]:
        """In hash order, like the SQL stores (a stable order for paging)."""
        missing = sorted(sha for sha in self._by_hash if (op.space_id, sha) not in self._vectors)
        return [
            (sha, self._items[next(iter(self._by_hash[sha]))].text) for sha in missing[: op.limit]
        ]

    def _repair(self, op: RepairVectors) -> VectorRepair:
        """Vectors are checked when they are put, so a scan finds none corrupt."""
        hashes = sorted(sha for space, sha in self._vectors if space == op.space_id)
        examined = [sha for sha in hashes if sha > op.after][: op.limit]
        return VectorRepair((), examined[-1] if len(examined) == op.limit else None)

    def _stats(self, op: Stats) -> StoreStats:
        live_records = [r for r in self._items.values() if live(r, op.now)]
        return StoreStats(
            items=len(live_records),
            expired=len(self._items) - len(live_records),
            scopes=len(self._scopes),
            pending=sum(
                1 for r in live_records if (op.space_id, r.content_sha256) not in self._vectors
            ),
            vectors=sum(1 for key in self._vectors if key[0] == op.space_id),
            spaces=tuple(sorted(self._spaces)),
            schema_version=None,
            embedded=tuple(
                (space, sum(1 for r in live_records if (space, r.content_sha256) in self._vectors))
                for space in sorted(self._spaces)
            ),
        )

    _READS: ClassVar[dict[type, Callable[[InMemoryStore, Any], Any]]] = {
        GetItems: _get_items,
        FindVectors: _find_vectors,
        FindContent: _find_content,
        ListItems: _list_items,
        ListScopes: _list_scopes,
        History: _history_of,
        SearchVectors: _search_vectors,
        SearchLexical: _search_lexical,
        PendingTexts: _pending,
        RepairVectors: _repair,
        Stats: _stats,
        GetUtility: _get_utility,
    }


def first_failure(
    ops: Sequence[Op], records: Iterable[MemoryRecord], spaces: Mapping[str, int]
) -> Exception | None:
    """The error ``InMemoryStore`` raises for ``ops`` over a store holding ``records``
    and ``spaces``, or None: how a SQL store whose guard aborted a batch names the op
    at fault (``records`` are the items the batch's ops name, as they were before it)."""
    store = InMemoryStore()
    store._items = {record.id: record for record in records}
    store._spaces = dict(spaces)
    overlay = _Overlay(store)
    try:
        for op in ops:
            store._resolve(op, overlay)
    except (ValidationError, NotFoundError, ConflictError) as error:
        return error
    return None


V = TypeVar("V")


def _apply(target: dict[str, V], changes: Mapping[str, V | None]) -> None:
    for key, value in changes.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


def _sequence(*steps: _Step) -> _Step:
    """One step running ``steps`` in order and answering the last one's result."""
    return lambda: [step() for step in steps][-1]


def _live_ids(ids: Iterable[str], now: datetime, overlay: _Overlay) -> list[str]:
    return [i for i in dict.fromkeys(ids) if live(overlay.record(i), now)]


def _record_selection(op: RecordSelection, overlay: _Overlay) -> _Step:
    now_ms = to_ms(op.now)
    ids = tuple(dict.fromkeys(op.memory_ids))
    kept = {k: r for k, r in overlay.receipts() if r.scope == op.scope and r.expires_ms > now_ms}
    receipts: dict[str, _Receipt | None] = {
        k: None for k, r in overlay.receipts() if r.scope == op.scope and k not in kept
    }
    kept[op.id] = receipts[op.id] = _Receipt(
        op.scope, ids, op.context, now_ms, to_ms(op.expires_at)
    )
    oldest = sorted((r.created_ms, k) for k, r in kept.items())
    for _created, key in oldest[: max(0, len(oldest) - op.keep)]:
        receipts[key] = None
    evidence: dict[str, Utility | None] = {}
    for item_id in _live_ids(ids, op.now, overlay):
        evidence[item_id] = exposed(overlay.evidence(item_id), op.now)
    return overlay.change(evidence, receipts)


def _consume_selection(op: ConsumeSelection, overlay: _Overlay) -> _Step:
    receipt = overlay.receipt(op.id)
    if receipt is None or receipt.scope != op.scope:
        return lambda: False
    if receipt.expires_ms <= to_ms(op.now):
        return overlay.change({}, {op.id: None}, False)
    evidence: dict[str, Utility | None] = {}
    if receipt.memory_ids:
        share = op.score / len(receipt.memory_ids)
        for item_id in _live_ids(receipt.memory_ids, op.now, overlay):
            evidence[item_id] = evaluated(overlay.evidence(item_id), share, receipt.context, op)
    return overlay.change(evidence, {op.id: None}, True)


def _set_manual(op: SetManual, overlay: _Overlay) -> _Step:
    record = overlay.record(op.id)
    if record is None or not live(record, op.now) or record.scope not in op.scopes:
        return lambda: False
    return overlay.change({op.id: manually_valued(overlay.evidence(op.id), op)}, {}, True)


def _beyond(op: TrimScope, overlay: _Overlay) -> list[str]:
    """The live items of ``op.scope`` beyond the ``keep`` to keep: the most useful (with
    ``by_utility``), then the newest, are kept."""
    records = [r for r in overlay.records() if r.scope == op.scope and live(r, op.now)]

    def worth(r: MemoryRecord) -> tuple[float, int, str]:
        value = overlay.evidence(r.id).value() if op.by_utility else 0.0
        return (value, to_ms(r.created_at), r.id)

    records.sort(key=worth, reverse=True)
    return [r.id for r in records[op.keep :]]


_POLICY: dict[type, Callable[[Any, _Overlay], _Step]] = {
    RecordSelection: _record_selection,
    ConsumeSelection: _consume_selection,
    SetManual: _set_manual,
}


class _Overlay:
    """Pass 1's view of the store: the items, histories and spaces as the batch's earlier
    ops leave them, without changing the store."""

    __slots__ = ("_evidence", "_history", "_items", "_receipts", "_store", "spaces")

    def __init__(self, store: InMemoryStore) -> None:
        self._store = store
        self._items: dict[str, MemoryRecord | None] = {}  # None: removed by the batch
        self._history: dict[str, tuple[MemoryRecord, ...]] = {}
        self._evidence: dict[str, Utility | None] = {}  # None: no evidence (any more)
        self._receipts: dict[str, _Receipt | None] = {}  # None: gone
        self.spaces = dict(store._spaces)

    def evidence(self, item_id: str) -> Utility:
        if item_id in self._evidence:
            return self._evidence[item_id] or Utility()
        return self._store._utility.get(item_id, Utility())

    def receipts(self) -> Iterator[tuple[str, _Receipt]]:
        for key, receipt in self._store._receipts.items():
            if key not in self._receipts:
                yield key, receipt
        yield from ((k, r) for k, r in self._receipts.items() if r is not None)

    def receipt(self, key: str) -> _Receipt | None:
        if key in self._receipts:
            return self._receipts[key]
        return self._store._receipts.get(key)

    def change(
        self,
        evidence: Mapping[str, Utility | None],
        receipts: Mapping[str, _Receipt | None],
        result: object = None,
    ) -> _Step:
        """Set evidence and receipts (None: remove them) now, and in the store in pass 2."""
        self._evidence.update(evidence)
        self._receipts.update(receipts)
        store = self._store

        def step() -> object:
            _apply(store._utility, evidence)
            _apply(store._receipts, receipts)
            return result

        return step

    def record(self, item_id: str) -> MemoryRecord | None:
        if item_id in self._items:
            return self._items[item_id]
        return self._store._items.get(item_id)

    def history(self, item_id: str) -> tuple[MemoryRecord, ...]:
        if item_id in self._history:
            return self._history[item_id]
        return self._store._history.get(item_id, ())

    def records(self) -> Iterator[MemoryRecord]:
        for item_id, record in self._store._items.items():
            if item_id not in self._items:
                yield record
        yield from (record for record in self._items.values() if record is not None)

    def set(
        self,
        record: MemoryRecord,
        history: tuple[MemoryRecord, ...],
        keep: int,
        *,
        fresh: bool = False,
    ) -> _Step:
        """Make ``record`` the item, with the newest ``keep`` revisions of ``history``;
        a ``fresh`` item (new, or replacing an expired one) starts without evidence."""
        history = history[max(0, len(history) - keep) :]
        self._items[record.id] = record
        self._history[record.id] = history
        if fresh:
            self._evidence[record.id] = None
        store = self._store

        def step() -> MemoryRecord:
            store._set(record, history)
            if fresh:
                store._utility.pop(record.id, None)
            return record

        return step

    def remove(self, ids: list[str], result: object) -> _Step:
        for item_id in ids:
            self._items[item_id] = None
            self._history[item_id] = ()
            self._evidence[item_id] = None
        store = self._store

        def step() -> object:
            for item_id in ids:
                store._remove(item_id)
            return result

        return step


@dataclass(frozen=True, slots=True)
class _Receipt:
    scope: Scope
    memory_ids: tuple[str, ...]
    context: str
    created_ms: int
    expires_ms: int


class _Eligible:
    """The ids a search may return: in ``scopes``, not expired, matching the filter."""

    __slots__ = ("_filter", "_items", "_now", "_scopes")

    def __init__(
        self,
        items: dict[str, MemoryRecord],
        scopes: ScopeSet,
        now: datetime,
        spec: Filter | None,
    ) -> None:
        self._items = items
        self._scopes = scopes
        self._now = now
        self._filter = spec

    def __contains__(self, item_id: object) -> bool:
        record = self._items.get(item_id) if isinstance(item_id, str) else None
        return (
            record is not None
            and record.scope in self._scopes
            and live(record, self._now)
            and (self._filter is None or self._filter.matches(record))
        )
