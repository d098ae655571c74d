"""The state a batch is resolved against (:class:`State`): what ``InMemoryStore`` holds.

Items live in exact scope partitions; vectors are kept compact (float32 bytes plus
sign-bit codes in one :class:`VectorIndex` per scope and space); the lexical leg is one
pure-Python BM25 index per scope, searched with the statistics of the scopes a search
selects, as the SQL stores compute them. :func:`engramdb.store.semantics.resolve` decides
what each op does; this module applies the outcomes it computed (keeping every index in
step) and answers the reads.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import TypeVar

from engramdb._base.clock import from_ms, to_ms
from engramdb._base.types import MemoryRecord, Scope, Utility
from engramdb._lexical.bm25 import BM25Index, search_many, term_statistics
from engramdb._vectors.exact import Excluding
from engramdb._vectors.index import VectorIndex
from engramdb._vectors.rules import search_with_head
from engramdb.ranking._ties import newest, ranked_pairs
from engramdb.store import (
    DropSpace,
    FindContent,
    FindVectors,
    GetItems,
    GetUtility,
    GetVectors,
    History,
    ListItems,
    ListScopes,
    PendingTexts,
    PutVector,
    RegisterSpace,
    RepairVectors,
    ScopeCount,
    ScopeSet,
    SearchHit,
    SearchLexical,
    SearchResult,
    SearchVectors,
    Stats,
    StoredItem,
    StoreStats,
    TermStatistics,
    VectorRepair,
)
from engramdb.store._filter import Filter
from engramdb.store._outcomes import live

__all__ = ["Receipt", "State"]

V = TypeVar("V")


class State:
    """What a store holds: items, histories, vectors, spaces, evidence and receipts.

    ``State()`` is empty; ``State.of(records, spaces)`` holds ``records`` (without
    history) and the registered ``spaces`` (id -> dimensions). Change it only through
    :func:`engramdb.store.semantics.resolve`, which keeps the derived indexes in step; the
    fields below may be read:

    * ``items``: id -> the current ``MemoryRecord`` (expired ones too, until purged),
    * ``history``: id -> its earlier revisions, oldest first,
    * ``vectors``: (space id, content hash) -> (float32 bytes, embedded_at),
    * ``spaces``: registered space id -> dimensions,
    * ``utility``: id -> its evidence, once it has some,
    * ``receipts``: selection id -> :class:`Receipt`.
    """

    __slots__ = (
        "_by_hash",
        "_expiring",
        "_indexes",
        "_lexical",
        "_scopes",
        "_spaces_of",
        "history",
        "items",
        "receipts",
        "spaces",
        "utility",
        "vectors",
    )

    def __init__(self) -> None:
        self.items: dict[str, MemoryRecord] = {}
        self.history: dict[str, tuple[MemoryRecord, ...]] = {}  # oldest first
        self.vectors: dict[tuple[str, str], tuple[bytes, datetime]] = {}
        self.spaces: dict[str, int] = {}  # space id -> dimensions
        self.utility: dict[str, Utility] = {}  # item id -> its evidence, once it has some
        self.receipts: dict[str, Receipt] = {}  # selection id -> receipt
        self._scopes: dict[Scope, dict[str, None]] = {}  # insertion-ordered id sets
        self._by_hash: dict[str, set[str]] = {}
        self._spaces_of: dict[str, set[str]] = {}  # content hash -> spaces with its vector
        self._indexes: dict[Scope, dict[str, VectorIndex]] = {}  # scope -> space -> index
        self._expiring: dict[Scope, set[str]] = {}  # ids with an expires_at, per scope
        self._lexical: dict[Scope, BM25Index] = {}  # per scope: BM25 statistics per scope

    @classmethod
    def of(
        cls, records: Iterable[MemoryRecord] = (), spaces: Mapping[str, int] | None = None
    ) -> State:
        """A state holding ``records`` (no history, no vectors) and ``spaces``."""
        state = cls()
        for record in records:
            state.set(record, ())
        state.spaces.update(spaces or {})
        return state

    def __len__(self) -> int:
        """How many items it holds (expired ones too, until purged)."""
        return len(self.items)

    # -- applying outcomes (pass 2 of resolve: nothing here can fail) -----------------------

    def set(self, record: MemoryRecord, history: tuple[MemoryRecord, ...]) -> None:
        """Make ``record`` the item of its id, keeping every index in step."""
        old = self.items.get(record.id)
        if old is not None:
            self._unindex(old, record)
        self.items[record.id] = record
        if history:
            self.history[record.id] = history
        else:
            self.history.pop(record.id, None)
        if old is None or old.scope != record.scope:
            self._scopes.setdefault(record.scope, {})[record.id] = None
        if record.expires_at is not None:
            self._expiring.setdefault(record.scope, set()).add(record.id)
        if old is None or old.text != record.text or old.scope != record.scope:
            self._lexical.setdefault(record.scope, BM25Index()).add(record.id, record.text)
        if old is None or old.content_sha256 != record.content_sha256 or old.scope != record.scope:
            self._by_hash.setdefault(record.content_sha256, set()).add(record.id)
            for space_id, index in self._indexes.get(record.scope, {}).items():
                vector = self.vectors.get((space_id, record.content_sha256))
                if vector is not None:
                    index.add(record.id, vector[0])
        if old is not None:
            self._collect(old.content_sha256)

    def remove(self, item_id: str) -> None:
        record = self.items.pop(item_id, None)
        if record is None:
            return
        self.history.pop(item_id, None)
        self.utility.pop(item_id, None)
        self._unindex(record, None)
        self._collect(record.content_sha256)

    def _unindex(self, old: MemoryRecord, new: MemoryRecord | None) -> None:
        """Take ``old`` out of what ``new`` (None: nothing) does not share with it."""
        if old.expires_at is not None:
            self._expiring[old.scope].discard(old.id)
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
            del self.vectors[(space_id, sha)]

    def register(self, op: RegisterSpace) -> None:
        self.spaces.setdefault(op.space.id, op.space.dimensions)

    def drop_space(self, op: DropSpace) -> int:
        self.spaces.pop(op.space_id, None)
        for indexes in self._indexes.values():
            indexes.pop(op.space_id, None)
        gone = [key for key in self.vectors if key[0] == op.space_id]
        for key in gone:
            del self.vectors[key]
            holders = self._spaces_of[key[1]]
            holders.discard(op.space_id)
            if not holders:
                del self._spaces_of[key[1]]
        return len(gone)

    def put_vector(self, op: PutVector) -> None:
        key = (op.space_id, op.content_sha256)
        if key in self.vectors and not op.replace:
            return
        self.vectors[key] = (bytes(op.vector), op.embedded_at)
        self._spaces_of.setdefault(op.content_sha256, set()).add(op.space_id)
        for item_id in self._by_hash.get(op.content_sha256, ()):
            index = self._indexes.get(self.items[item_id].scope, {}).get(op.space_id)
            if index is not None:
                index.add(item_id, op.vector)

    def change(
        self, evidence: Mapping[str, Utility | None], receipts: Mapping[str, Receipt | None]
    ) -> None:
        """Set evidence and receipts (None: remove them)."""
        _apply(self.utility, evidence)
        _apply(self.receipts, receipts)

    # -- reads ------------------------------------------------------------------------------

    def get_utility(self, op: GetUtility) -> dict[str, Utility]:
        return {i: self.utility[i] for i in dict.fromkeys(op.ids) if i in self.utility}

    def get_items(self, op: GetItems) -> list[StoredItem | None]:
        out: list[StoredItem | None] = []
        for item_id in op.ids:
            record = self.items.get(item_id)
            if record is None or not live(record, op.now):
                out.append(None)
            else:
                out.append(StoredItem(record, self._embedded_at(record, op.space_id)))
        return out

    def _embedded_at(self, record: MemoryRecord, space_id: str | None) -> datetime | None:
        vector = self.vectors.get((space_id, record.content_sha256)) if space_id else None
        return vector[1] if vector else None

    def find_content(self, op: FindContent) -> dict[tuple[Scope, str], MemoryRecord]:
        found: dict[tuple[Scope, str], MemoryRecord] = {}
        for scope, sha in dict.fromkeys(op.pairs):
            ids = [
                i
                for i in self._by_hash.get(sha, ())
                if self.items[i].scope == scope and live(self.items[i], op.now)
            ]
            if ids:
                found[(scope, sha)] = self.items[min(ids)]
        return found

    def find_vectors(self, op: FindVectors) -> frozenset[str]:
        return frozenset(h for h in op.hashes if (op.space_id, h) in self.vectors)

    def get_vectors(self, op: GetVectors) -> dict[str, tuple[bytes, datetime]]:
        found = ((h, self.vectors.get((op.space_id, h))) for h in dict.fromkeys(op.hashes))
        return {h: vector for h, vector in found if vector is not None}

    def _selected(self, scopes: ScopeSet) -> Iterator[Scope]:
        """The scopes holding items that ``scopes`` selects."""
        if not scopes.prefixes:
            return (scope for scope in dict.fromkeys(scopes.exact) if scope in self._scopes)
        return (scope for scope in self._scopes if scope in scopes)

    def list_items(self, op: ListItems) -> list[MemoryRecord]:
        """Newest first: by (created_at, id) descending, strictly after ``before`` and
        ``below``."""
        records = [
            record
            for scope in self._selected(op.scopes)
            for record in map(self.items.__getitem__, self._scopes[scope])
            if live(record, op.now)
        ]
        if op.before is not None:
            cursor = self.items.get(op.before)
            if cursor is None or cursor.scope not in op.scopes or not live(cursor, op.now):
                return []
            records = [r for r in records if (r.created_at, r.id) < (cursor.created_at, cursor.id)]
        if op.below is not None:  # to the millisecond, as every store keeps times
            below = (from_ms(to_ms(op.below[0])), op.below[1])
            records = [r for r in records if (r.created_at, r.id) < below]
        if op.filter is not None:
            records = [r for r in records if op.filter.matches(r)]
        records.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return records[: op.limit]

    def list_scopes(self, op: ListScopes) -> list[ScopeCount]:
        width = len(op.prefix)
        found = []
        for scope, ids in self._scopes.items():
            if scope[:width] != op.prefix or (op.after is not None and scope <= op.after):
                continue
            count = sum(1 for i in ids if live(self.items[i], op.now))
            if count:
                found.append(ScopeCount(scope, count))
        found.sort(key=lambda entry: entry.scope)
        return found[: op.limit]

    def history_of(self, op: History) -> list[MemoryRecord]:
        if not live(self.items.get(op.id), op.now):
            return []
        return list(reversed(self.history.get(op.id, ())))[: op.limit]

    def _index(self, scope: Scope, space_id: str) -> VectorIndex | None:
        index = self._indexes.get(scope, {}).get(space_id)
        if index is not None or scope not in self._scopes or space_id not in self.spaces:
            return index
        index = VectorIndex(self.spaces[space_id])
        vectors = self.vectors
        pairs = []
        for item_id in self._scopes[scope]:
            vector = vectors.get((space_id, self.items[item_id].content_sha256))
            if vector is not None:
                pairs.append((item_id, vector[0]))
        index.add_many(pairs)
        self._indexes.setdefault(scope, {})[space_id] = index
        return index

    def _newer(self, item_id: str) -> tuple[datetime, str]:
        """Where an item goes among equal scores: by (created_at, id), greater first."""
        return newest(self.items[item_id])

    def _hits(self, found: list[tuple[str, float]], k: int, space_id: str | None) -> SearchResult:
        """Score descending, equal scores newest first, at most ``k``."""
        hits = []
        for item_id, score in ranked_pairs(found, k, self._newer):
            record = self.items[item_id]
            hits.append(SearchHit(record, score, self._embedded_at(record, space_id)))
        return SearchResult(tuple(hits))

    def search_vectors(self, op: SearchVectors) -> SearchResult:
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
            allowed = self._allowed([scope], op.scopes, op.now, op.filter)
            search = partial(
                index.search, op.query, exact=op.exact, allowed=allowed, newer=self._newer
            )
            found += search_with_head(search, op.k, op.exact)  # first hits whatever k
        return replace(self._hits(found, op.k, op.space_id), coverage=(embedded, items))

    def search_lexical(self, op: SearchLexical) -> SearchResult:
        scopes = list(self._selected(op.scopes))
        if not scopes:
            return SearchResult()
        indexes = [self._lexical[scope] for scope in scopes]
        found = search_many(
            indexes,
            op.query,
            op.k,
            allowed=self._allowed(scopes, op.scopes, op.now, op.filter),
            newer=self._newer,
        )
        result = self._hits(found, op.k, op.space_id)
        if not result.hits:
            return result
        return replace(result, statistics=TermStatistics(*term_statistics(indexes, op.query)))

    def _allowed(
        self, scopes: Iterable[Scope], selection: ScopeSet, now: datetime, spec: Filter | None
    ) -> Container[str] | None:
        """The ids a search of the selected ``scopes`` may return (each of them holds
        only its own ids). With a filter, each id is tested (its record's scope, expiry
        and the filter); without one, every id but those of ``scopes`` expired at ``now``
        (looked up among the ids that carry an expiry), None when there are none."""
        if spec is not None:
            return _Eligible(self.items, selection, now, spec)
        expired = {
            i
            for scope in scopes
            for i in self._expiring.get(scope, ())
            if not live(self.items[i], now)
        }
        return Excluding(expired) if expired else None

    def pending_texts(self, op: PendingTexts) -> list[tuple[str, str]]:
        """In hash order, like the SQL stores (a stable order for paging)."""
        missing = sorted(sha for sha in self._by_hash if (op.space_id, sha) not in self.vectors)
        return [
            (sha, self.items[next(iter(self._by_hash[sha]))].text) for sha in missing[: op.limit]
        ]

    def repair_vectors(self, op: RepairVectors) -> VectorRepair:
        """Vectors are checked when they are put, so a scan finds none corrupt."""
        hashes = sorted(sha for space, sha in self.vectors if space == op.space_id)
        examined = [sha for sha in hashes if sha > op.after][: op.limit]
        return VectorRepair((), examined[-1] if len(examined) == op.limit else None)

    def stats(self, op: Stats) -> StoreStats:
        live_records = [r for r in self.items.values() if live(r, op.now)]
        return StoreStats(
            items=len(live_records),
            expired=len(self.items) - len(live_records),
            scopes=len(self._scopes),
            pending=sum(
                1 for r in live_records if (op.space_id, r.content_sha256) not in self.vectors
            ),
            vectors=sum(1 for key in self.vectors if key[0] == op.space_id),
            spaces=tuple(sorted(self.spaces)),
            schema_version=None,
            embedded=tuple(
                (space, sum(1 for r in live_records if (space, r.content_sha256) in self.vectors))
                for space in sorted(self.spaces)
            ),
        )


def _apply(target: dict[str, V], changes: Mapping[str, V | None]) -> None:
    for key, value in changes.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


@dataclass(frozen=True, slots=True)
class Receipt:
    """A recall's selection receipt (``RecordSelection``), times in epoch ms."""

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
