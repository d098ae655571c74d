"""The vector cache: decoded vectors per (scope, space), tagged with the scope's generation.

SQLite has no vector index, so a vector search runs in Python over a :class:`VectorIndex`
per (scope key, space id), loaded from the ``vectors`` rows of the scope's items with
their derived index data (sign codes and uint8 copies, so a load decodes nothing). An
entry answers only while the scope's generation in the database equals the one it was
built at: every write that changes what a vector search of the scope can find (an item's
scope or content hash, a vector of one of its hashes) bumps that generation, from any
connection or process. A row whose vector does not decode is left out of the entry and
remembered, so a search can report it instead of failing.

With a ``budget`` (bytes) the entries answer to it together, as a Durable Object needs
(one isolate's memory for all of a tenant's scopes): when they hold more, :meth:`fit`
drops, least recently used entry first, their decoded copies, then their 4-bit copies,
then their float32 copies (a search then reads the rows it scores exactly), and last
whole entries (reloaded by the next search of their scope). Each step leaves every
answer as it was; only its cost changes (docs/workers.md, "One budget per object").

One cache belongs to one store object; it is not shared between databases. Its index
per entry is a :class:`VectorIndex` unless the store passes another ``index`` factory
(a :class:`CacheIndex`: ``engramdb.sqlite`` passes its numpy kernel on CPython hosts
with numpy, ``docs/performance-history.md``, "The numpy kernel").
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter
from typing import Any, Protocol, cast

from engramdb._vectors.held import DATED_ITEM, PACKED_ITEM, Held
from engramdb._vectors.index import VectorIndex
from engramdb._vectors.keys import CompactKeys
from engramdb._vectors.rules import search_with_head, searches_for
from engramdb.ranking._ties import Newer

__all__ = ["CacheEntry", "CacheIndex", "SqliteVectorCache"]

_FIRST, _SECOND, _THIRD, _FOURTH = map(itemgetter, range(4))
_DROPS = (  # what fit() frees first: the cheapest to rebuild, part by part
    (Held._fields.index("decoded"), VectorIndex.drop_decoded),
    (Held._fields.index("nibbles"), VectorIndex.drop_nibbles),
    (Held._fields.index("floats"), VectorIndex.drop_floats),
)


def _as_bytes(values: list[Any]) -> list[Any]:
    """``values`` with each one not None as ``bytes`` (a blob a driver hands over as a
    memoryview or bytearray; sqlite3 gives bytes already: then the list as it is)."""
    if set(map(type, values)) <= {bytes, type(None)}:
        return values
    return [None if value is None else bytes(value) for value in values]


class CacheIndex(Protocol):
    """What a cache entry asks of its vector index: :class:`VectorIndex` has it all.

    A driver's index (built by the ``index`` factory of :class:`SqliteVectorCache` from
    the dimension count) must answer every exact search as :meth:`VectorIndex.search`
    with ``exact=True`` would, (id, similarity) for (id, similarity), and may answer
    any other approximately where :meth:`VectorIndex.search` does
    (``use_exact_vector_scan``), raise its errors for bad arguments, and skip bad rows
    in :meth:`load` with the same messages. ``load_packed``
    adds new keys whose blobs and index data were checked when they were packed; an
    index class whose ``uses_index_data`` is False gets None for the index data (its
    bytes are then not even read). An index may also have ``reserve(rows)``: a load of
    about that many vectors follows (:meth:`CacheEntry.reserve`).
    """

    def __len__(self) -> int: ...

    def load(self, rows: Iterable[tuple[str, bytes, bytes | None]]) -> dict[str, str]: ...

    def load_packed(
        self, keys: Sequence[str], vectors: bytes, index_data: bytes | None
    ) -> None: ...

    def remove(self, key: str) -> bool: ...

    def search(
        self,
        query: Sequence[float],
        k: int,
        *,
        exact: bool = False,
        allowed: Container[str] | None = None,
        newer: Newer | None = None,
    ) -> list[tuple[str, float]]: ...


@dataclass(slots=True)
class CacheEntry:
    generation: int
    index: CacheIndex
    corrupt: dict[str, str] = field(default_factory=dict)  # item id -> why it was left out
    # item id -> created_at (ms), but for the (ids, created_at) of the packed segments
    # added since it was last needed, which go in then (``created``): only ties,
    # removals and row adds need it, and a cold load of a packed scope adds 100k ids.
    _created: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _packed: list[tuple[Sequence[str], Sequence[int]]] = field(
        default_factory=list, init=False, repr=False
    )

    @property
    def created(self) -> dict[str, int]:
        """Item id -> created_at (ms) of every item added."""
        if self._packed:  # a row added since (``_created``) is the later word on its id
            merged: dict[str, int] = {}
            for keys, created in self._packed:
                merged.update(zip(keys, created, strict=True))
            merged.update(self._created)
            self._created = merged
            self._packed.clear()
        return self._created

    def reserve(self, rows: int) -> None:
        """Tell the index, if it asks (``reserve``), that about ``rows`` vectors come:
        the numpy kernel allocates its matrix once for them."""
        reserve = getattr(self.index, "reserve", None)
        if reserve is not None:
            reserve(rows)

    def add_rows(self, rows: Iterable[Sequence[Any]]) -> None:
        """Add ``(id, vector blob, index_data | None, created_at)`` rows; a corrupt one
        is recorded. (C-level passes per column: a cold load adds 100k rows.)"""
        listed = rows if isinstance(rows, list) else list(rows)
        keys = list(map(str, map(_FIRST, listed)))
        blobs = _as_bytes(list(map(_SECOND, listed)))
        data = _as_bytes(list(map(_THIRD, listed)))
        # Into the rows' own dict: the ids of packed segments stay in their lists (a load
        # of a packed scope and its few rows past the last segment builds no dict of all).
        self._created.update(zip(keys, map(int, map(_FOURTH, listed)), strict=True))
        del listed
        if self.corrupt:
            for key in keys:
                self.corrupt.pop(key, None)
        self.corrupt.update(self.index.load(list(zip(keys, blobs, data, strict=True))))

    def add_packed(
        self,
        keys: Sequence[str],
        created: Sequence[int],
        vectors: bytes,
        index_data: bytes | None,
    ) -> None:
        """Add one packed segment (``pack``): new keys, their created_at, their float32
        blobs and current index data concatenated, all checked when packed. Raises
        ``ValueError`` (the index's too) for lengths or keys that do not fit, and
        changes nothing then."""
        if len(keys) != len(created):
            raise ValueError(f"a packed segment of {len(keys)} ids has {len(created)} created_at")
        self.index.load_packed(keys, vectors, index_data)
        self._packed.append((CompactKeys.of(keys), created))  # 26 bytes per id, not 88

    def remove(self, key: str) -> None:
        self.index.remove(key)
        self.corrupt.pop(key, None)
        self.created.pop(key, None)

    def newer(self, key: str) -> tuple[int, str]:
        """Where an item goes among equal scores: by (created_at, id), greater first."""
        return (self.created.get(key, 0), key)

    def held(self) -> Held:
        """About how many bytes the entry holds, by part (its index's
        :meth:`VectorIndex.held_bytes`, with each item's created_at among the codes)."""
        codes, *caches = cast("VectorIndex", self.index).held_bytes()
        packed = sum(len(keys) for keys, _ in self._packed)
        return Held(codes + len(self._created) * DATED_ITEM + packed * PACKED_ITEM, *caches)


class SqliteVectorCache:
    """Cache entries by (scope key, space id). Not thread-safe: the store serialises."""

    __slots__ = (
        "_budget",
        "_entries",
        "_floats_up_to",
        "_held",
        "_index",
        "_page_bytes",
        "evictions",
        "loads",
        "uses_index_data",
    )

    def __init__(
        self,
        *,
        page_bytes: int = 4_000_000,
        index: Callable[[int], CacheIndex] = VectorIndex,
        floats_up_to: int | None = None,
        budget: int | None = None,
    ) -> None:
        """``index`` builds an entry's index from the dimension count. With the default
        :class:`VectorIndex`, ``floats_up_to`` is its argument: an entry past that many
        vectors keeps only their codes in memory, and a search reads the float32 rows of
        the candidates it scores exactly (``VectorSearch``). ``budget``: the bytes all
        entries together may hold (:meth:`fit`; None: no bound). ``page_bytes``: about
        how many bytes of vectors one load statement reads (a load's passing memory; a
        D1 load's round trips)."""
        if (floats_up_to is not None or budget is not None) and index is not VectorIndex:
            raise ValueError("floats_up_to and budget apply to the default VectorIndex only")
        VectorIndex(1, floats_up_to=floats_up_to)  # refuses a bad value now
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget < 0
        ):
            raise ValueError(f"budget={budget!r} must be None or a number of bytes >= 0")
        self._budget = budget
        self.evictions = 0
        """How many whole entries :meth:`fit` dropped: a statistic for tests."""
        # In use order, least recent first (search and install move an entry last).
        self._entries: dict[tuple[str, str], CacheEntry] = {}
        # With a budget, what each entry held when last installed, searched or changed
        # (a sum of its CacheEntry.held), so that fit() adds up ints, not entries.
        self._held: dict[tuple[str, str], int] = {}
        self._page_bytes = page_bytes
        self._index = index
        self._floats_up_to = floats_up_to
        self.uses_index_data: bool = getattr(index, "uses_index_data", True)
        """Whether the entries' index is given index data when it loads packed vectors."""
        self.loads = 0
        """How many entries were (re)built from the database: a statistic for tests."""

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry (the next search reloads)."""
        self._entries.clear()
        self._held.clear()

    def entry(self, key: str, space_id: str) -> CacheEntry | None:
        return self._entries.get((key, space_id))

    def generation(self, key: str, space_id: str) -> int | None:
        """The generation the entry of (``key``, ``space_id``) was built at, if cached."""
        entry = self._entries.get((key, space_id))
        return None if entry is None else entry.generation

    def page_rows(self, dimensions: int) -> int:
        """How many vectors one load statement reads (about ``page_bytes`` of blobs)."""
        return max(1, self._page_bytes // (5 * max(1, dimensions)))

    def page_segments(self, segment_bytes: int) -> int:
        """How many packed segments of about ``segment_bytes`` one load statement reads."""
        return max(1, self._page_bytes // segment_bytes)

    def new_entry(self, dimensions: int, generation: int) -> CacheEntry:
        """An empty entry to fill with :meth:`CacheEntry.add_rows` and :meth:`install`."""
        limit = self._floats_up_to
        if self._budget is not None:  # float32 copies larger than the budget: never kept
            most = self._budget // (4 * dimensions)
            limit = most if limit is None else min(limit, most)
        if limit is None:
            return CacheEntry(generation, self._index(dimensions))
        return CacheEntry(generation, VectorIndex(dimensions, floats_up_to=limit))

    def install(self, key: str, space_id: str, entry: CacheEntry) -> None:
        self._entries.pop((key, space_id), None)
        self._entries[(key, space_id)] = entry
        self._note((key, space_id))
        self.loads += 1

    def held(self) -> int:
        """About how many bytes the entries hold together (:meth:`CacheEntry.held`; an
        entry's index must be a :class:`VectorIndex`)."""
        return sum(sum(entry.held()) for entry in self._entries.values())

    def _note(self, place: tuple[str, str]) -> None:
        """With a budget, take down what the entry at ``place`` holds now."""
        if self._budget is not None:
            self._held[place] = sum(self._entries[place].held())

    def fit(
        self,
        keep: Container[tuple[str, str]] = (),
        changed: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Bring what the entries hold within the budget, if there is one: drop the least
        recently used entries' decoded copies, then their 4-bit copies, then their float32
        copies (each part in that order across all entries before the next part), then
        whole entries, never those in ``keep`` (the scopes of the search under way).
        ``changed``: entries changed since they were installed or searched (a write's
        rows), taken down again first. Call it between searches only: an entry whose
        float32 copies go between :meth:`shortlist` and :meth:`search` could not answer."""
        if self._budget is None:
            return
        for place in changed:
            if place in self._entries:
                self._note(place)
        if sum(self._held.values()) <= self._budget:
            return
        held = {place: entry.held() for place, entry in self._entries.items()}
        total = sum(map(sum, held.values()))
        for part, drop in _DROPS:
            for place, parts in held.items():
                if total <= self._budget:
                    return
                if parts[part]:
                    entry = self._entries[place]
                    drop(cast("VectorIndex", entry.index))
                    held[place] = entry.held()  # less that part (plus CRC-32s for floats)
                    self._held[place] = sum(held[place])
                    total += sum(held[place]) - sum(parts)
        for place, parts in held.items():
            if total <= self._budget:
                return
            if place not in keep:
                del self._entries[place], self._held[place]
                total -= sum(parts)
                self.evictions += 1

    def cached(self) -> list[tuple[str, str]]:
        """The (scope key, space id) of every entry."""
        return list(self._entries)

    def drop(self, key: str, space_id: str) -> None:
        """Forget the entry of (``key``, ``space_id``), if any."""
        self._entries.pop((key, space_id), None)
        self._held.pop((key, space_id), None)

    def shortlist(
        self,
        key: str,
        space_id: str,
        query: Sequence[float],
        k: int,
        *,
        exact: bool,
        allowed: Container[str] | None,
    ) -> list[str] | None:
        """The ids whose float32 rows the search of one cached (scope, space) must read
        (``VectorIndex.shortlist``), or None when its index keeps its float32 copies."""
        entry = self._entries.get((key, space_id))
        if entry is None or not isinstance(entry.index, VectorIndex) or entry.index.keeps_floats:
            return None
        index = entry.index
        return list(  # the ids of every search of search_with_head, each once
            dict.fromkeys(
                key
                for n in searches_for(k, exact)
                for key in index.shortlist(query, n, exact=exact, allowed=allowed)
            )
        )

    def search(
        self,
        key: str,
        space_id: str,
        query: Sequence[float],
        k: int,
        *,
        exact: bool,
        allowed: Container[str] | None,
        vectors: Sequence[tuple[str, bytes]] | None = None,
    ) -> tuple[list[tuple[str, float]], list[str]]:
        """Search one cached (scope, space): ``(hits, skipped)`` where ``skipped`` are the
        eligible items left out because their vector does not decode. ``vectors``: the
        ``(id, float32 blob)`` rows read for the ids :meth:`shortlist` named, if it named
        any."""
        entry = self._entries.pop((key, space_id), None)
        if entry is None:
            return [], []
        self._entries[(key, space_id)] = entry  # the most recently used now
        skipped = [i for i in entry.corrupt if allowed is None or i in allowed]
        index = entry.index
        if vectors is not None and isinstance(index, VectorIndex):
            bad: dict[str, str] = {}
            rows = vectors  # narrowed for mypy inside the closure

            def rescored(n: int) -> list[tuple[str, float]]:
                """Score the rows read for the search of ``n``: all of them, or for
                the head of a deeper search its own shortlist's."""
                chosen = rows
                if n < k:  # the head of a deeper search
                    head = set(index.shortlist(query, n, allowed=allowed))
                    chosen = [row for row in rows if row[0] in head]
                hits, found = index.rescore(query, n, chosen, entry.newer)
                bad.update(found)
                return hits

            hits = search_with_head(rescored, k, exact)
            self._note((key, space_id))  # the 4-bit copies it built
            return hits, skipped + sorted(bad)
        search = partial(index.search, query, exact=exact, allowed=allowed, newer=entry.newer)
        hits = search_with_head(search, k, exact)
        self._note((key, space_id))  # the 4-bit and decoded copies it built
        return hits, skipped
