"""``InMemoryStore``: the store of the core, for Workers isolates, scripts and tests.

Items live in exact scope partitions; vectors are kept compact (float32 bytes plus
sign-bit codes in one :class:`VectorIndex` per scope and space); the lexical leg is a
pure-Python BM25 index whose scores equal SQLite FTS5's ``bm25()``. Nothing survives
the process.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from datetime import datetime
from typing import Any

from ._clock import to_ms
from ._errors import StoreError
from ._filter import Filter
from ._lexical import BM25Index
from ._store import (
    DeleteItem,
    DeleteScope,
    FindVectors,
    GetItems,
    ListItems,
    Op,
    PendingTexts,
    PutItem,
    PutVector,
    RegisterSpace,
    SearchLexical,
    SearchVectors,
    Stats,
    StoreCapabilities,
    StoredItem,
    StoreStats,
)
from ._types import MemoryRecord, Scope
from ._vectors import VectorIndex

__all__ = ["InMemoryStore"]


class InMemoryStore:
    """A store held in this process's memory. ``batch`` and ``abatch`` run the same code."""

    capabilities = StoreCapabilities(durable=False)

    def __init__(self) -> None:
        self._items: dict[str, MemoryRecord] = {}
        self._scopes: dict[Scope, dict[str, None]] = {}  # insertion-ordered id sets
        self._by_hash: dict[str, set[str]] = {}
        self._vectors: dict[tuple[str, str], tuple[bytes, datetime]] = {}
        self._spaces_of: dict[str, set[str]] = {}  # content hash -> spaces with its vector
        self._spaces: dict[str, int] = {}  # space id -> dimensions
        self._indexes: dict[Scope, dict[str, VectorIndex]] = {}  # scope -> space -> index
        self._expiring: dict[Scope, int] = {}  # items with an expires_at, per scope
        self._lexical = BM25Index()
        self._closed = False

    def __repr__(self) -> str:
        return f"InMemoryStore({len(self._items)} items)"

    # -- protocol -------------------------------------------------------------------------

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        if self._closed:
            raise StoreError("this InMemoryStore is closed; create a new one")
        return [self._apply(op) for op in ops]

    async def abatch(self, ops: Sequence[Op]) -> list[Any]:
        return self.batch(ops)

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    # -- ops ------------------------------------------------------------------------------

    def _apply(self, op: Op) -> Any:
        if isinstance(op, PutItem):
            return self._put_item(op.record)
        if isinstance(op, PutVector):
            return self._put_vector(op)
        if isinstance(op, RegisterSpace):
            self._spaces.setdefault(op.space.id, op.space.dimensions)
            return None
        if isinstance(op, GetItems):
            return [self._get(item_id, op.now, op.space_id) for item_id in op.ids]
        if isinstance(op, FindVectors):
            return frozenset(h for h in op.hashes if (op.space_id, h) in self._vectors)
        if isinstance(op, ListItems):
            return self._list(op)
        if isinstance(op, DeleteItem):
            return self._delete(op.id)
        if isinstance(op, DeleteScope):
            ids = list(self._scopes.get(op.scope, ()))
            for item_id in ids:
                self._delete(item_id)
            return len(ids)
        if isinstance(op, SearchVectors):
            return self._search_vectors(op)
        if isinstance(op, SearchLexical):
            if not any(scope in self._scopes for scope in op.scopes):
                return []
            eligible = _Eligible(self._items, op.scopes, op.now, op.filter)
            return self._lexical.search(op.query, op.k, allowed=eligible)
        if isinstance(op, PendingTexts):
            return self._pending(op.space_id, op.limit)
        if isinstance(op, Stats):
            return self._stats(op)
        raise StoreError(f"InMemoryStore does not know the op {op!r}")

    def _put_item(self, record: MemoryRecord) -> None:
        old = self._items.get(record.id)
        if old is not None:
            self._unindex(old)
            if old.scope != record.scope:  # an expired id reused in another scope
                self._leave_scope(old.scope, old.id)
        self._items[record.id] = record
        self._scopes.setdefault(record.scope, {})[record.id] = None
        if record.expires_at is not None:
            self._expiring[record.scope] = self._expiring.get(record.scope, 0) + 1
        self._by_hash.setdefault(record.content_sha256, set()).add(record.id)
        self._lexical.add(record.id, record.text)
        for space_id, index in self._indexes.get(record.scope, {}).items():
            vector = self._vectors.get((space_id, record.content_sha256))
            if vector is not None:
                index.add(record.id, vector[0])
        if old is not None:
            self._collect(old.content_sha256)

    def _put_vector(self, op: PutVector) -> None:
        key = (op.space_id, op.content_sha256)
        if key in self._vectors:
            return
        self._vectors[key] = (op.vector, op.embedded_at)
        self._spaces_of.setdefault(op.content_sha256, set()).add(op.space_id)
        self._spaces.setdefault(op.space_id, len(op.vector) // 4)
        for item_id in self._by_hash.get(op.content_sha256, ()):
            index = self._indexes.get(self._items[item_id].scope, {}).get(op.space_id)
            if index is not None:
                index.add(item_id, op.vector)

    def _unindex(self, record: MemoryRecord) -> None:
        """Remove ``record`` from every index (the item row itself stays)."""
        self._lexical.remove(record.id)
        if record.expires_at is not None:
            self._expiring[record.scope] -= 1
        holders = self._by_hash.get(record.content_sha256)
        if holders is not None:
            holders.discard(record.id)
            if not holders:
                del self._by_hash[record.content_sha256]
        for index in self._indexes.get(record.scope, {}).values():
            index.remove(record.id)

    def _collect(self, sha: str) -> None:
        """Drop the vectors of ``sha`` once no item references it."""
        if sha in self._by_hash:
            return
        for space_id in self._spaces_of.pop(sha, ()):
            del self._vectors[(space_id, sha)]

    def _delete(self, item_id: str) -> bool:
        record = self._items.pop(item_id, None)
        if record is None:
            return False
        self._unindex(record)
        self._leave_scope(record.scope, item_id)
        self._collect(record.content_sha256)
        return True

    def _leave_scope(self, scope: Scope, item_id: str) -> None:
        members = self._scopes[scope]
        del members[item_id]
        if not members:
            del self._scopes[scope]
            self._indexes.pop(scope, None)

    @staticmethod
    def _live(record: MemoryRecord, now_ms: int) -> bool:
        return record.expires_at is None or to_ms(record.expires_at) > now_ms

    def _get(self, item_id: str, now: datetime, space_id: str | None) -> StoredItem | None:
        record = self._items.get(item_id)
        if record is None or not self._live(record, to_ms(now)):
            return None
        vector = self._vectors.get((space_id, record.content_sha256)) if space_id else None
        return StoredItem(record, vector[1] if vector else None)

    def _list(self, op: ListItems) -> list[MemoryRecord]:
        """Newest first: by (created_at, id) descending, strictly after ``before``."""
        now_ms = to_ms(op.now)
        records = sorted(
            (self._items[i] for i in self._scopes.get(op.scope, ())),
            key=lambda r: (r.created_at, r.id),
            reverse=True,
        )
        if op.before is not None:
            cursor = self._items.get(op.before)
            if cursor is None or cursor.scope != op.scope:
                return []
            records = [r for r in records if (r.created_at, r.id) < (cursor.created_at, cursor.id)]
        out = []
        for record in records:
            if self._live(record, now_ms):
                out.append(record)
                if len(out) == op.limit:
                    break
        return out

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

    def _search_vectors(self, op: SearchVectors) -> list[tuple[str, float]]:
        found: list[tuple[str, float]] = []
        for scope in op.scopes:
            index = self._index(scope, op.space_id)
            if index is None or not len(index):
                continue
            allowed: Container[str] | None = None
            if op.filter is not None or self._expiring.get(scope):
                allowed = _Eligible(self._items, (scope,), op.now, op.filter)
            found.extend(index.search(op.query, op.k, exact=op.exact, allowed=allowed))
        found.sort(key=lambda hit: (-hit[1], hit[0]))
        return found[: op.k]

    def _pending(self, space_id: str, limit: int) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for sha, holders in self._by_hash.items():
            if (space_id, sha) not in self._vectors:
                out.append((sha, self._items[next(iter(holders))].text))
                if len(out) == limit:
                    break
        return out

    def _stats(self, op: Stats) -> StoreStats:
        now_ms = to_ms(op.now)
        live = [r for r in self._items.values() if self._live(r, now_ms)]
        return StoreStats(
            items=len(live),
            expired=len(self._items) - len(live),
            scopes=len(self._scopes),
            pending=sum(1 for r in live if (op.space_id, r.content_sha256) not in self._vectors),
            vectors=sum(1 for key in self._vectors if key[0] == op.space_id),
            spaces=tuple(sorted(self._spaces)),
            schema_version=None,
        )


class _Eligible:
    """The ids a search may return: in one of ``scopes``, not expired, matching."""

    __slots__ = ("_filter", "_items", "_now_ms", "_scopes")

    def __init__(
        self,
        items: dict[str, MemoryRecord],
        scopes: tuple[Scope, ...],
        now: datetime,
        spec: Filter | None,
    ) -> None:
        self._items = items
        self._scopes = frozenset(scopes)
        self._now_ms = to_ms(now)
        self._filter = spec

    def __contains__(self, item_id: object) -> bool:
        record = self._items.get(item_id) if isinstance(item_id, str) else None
        return (
            record is not None
            and record.scope in self._scopes
            and (record.expires_at is None or to_ms(record.expires_at) > self._now_ms)
            and (self._filter is None or self._filter.matches(record))
        )
