"""Packed vector segments: a scope's vectors of one space in a few blobs.

The ``vectors`` table holds one row per vector, and a cold search of a large scope spends
most of its time reading those rows (``docs/performance-history.md``, "Packed vector segments").
:func:`pack_vectors` (the ``PackVectors`` op, run by ``maintain()``) copies the rows of
the ids a scope's segments do not cover yet into ``vector_segments``: each segment covers
a range of ids ``[first_id, last_id]`` of its scope and holds the JSON list of the ids
there with a vector, their ``created_at`` as int64s, their float32 blobs and index data,
each concatenated, two CRC-32s, and the rows there that did not decode (with the message a
load gives them). Triggers delete a segment whenever a write touches its range (an item
put, deleted, moved or rewritten there, a vector of a text used there put, replaced or
deleted), so a segment is current or absent. :func:`load_scope` (the cold path of
``VectorSearch``) walks the scope's ids in order, taking each segment as it is and the
rows between segments from ``vectors``, so the entry holds the same vectors, in the same
order, as a load of the rows alone. A segment that fails its CRC makes it read the rows.
"""

from __future__ import annotations

import json
import sys
from array import array
from binascii import crc32
from collections.abc import Callable, Generator, Sequence
from typing import Any

from engramdb._base.errors import StoreError
from engramdb._vectors.index_data import index_data_joined, index_data_size, row_errors
from engramdb.store import PackVectors
from engramdb.store._sqlite.cache import CacheEntry, SqliteVectorCache
from engramdb.store._sqlite.rows import Rows, Statement
from engramdb.store.rows import as_json

__all__ = [
    "PACK_FROM",
    "PACK_SEGMENTS",
    "SEGMENT_BYTES",
    "load_scope",
    "pack_tails",
    "pack_vectors",
    "segment_rows",
    "tail_checks",
]

SEGMENT_BYTES = 1_000_000
"""About how many bytes of float32 vectors one segment holds: under the 2 MB that D1 and
Durable Objects allow per row, with its index data beside it."""
PACK_SEGMENTS = 8
"""At most how many segments one ``PackVectors`` or one write packs (a few MB)."""
PACK_FROM = 4096
"""A scope of at least this many items is packed as its memories arrive (``pack_tails``,
after each write that puts items into it), like ``PackVectors``' default ``min_vectors``:
smaller scopes load their rows about as fast as segments."""

_LITTLE = sys.byteorder == "little"
_ATTEMPTS = 5


class _Doubt(Exception):
    """A segment does not check out: read the scope's rows instead."""


def _checksum(ids: bytes, created: bytes, vectors: bytes) -> int:
    return crc32(vectors, crc32(created, crc32(ids)))


def _int64s(values: Sequence[int]) -> bytes:
    packed = array("q", values)
    if not _LITTLE:  # pragma: no cover - no big-endian CI host
        packed.byteswap()
    return packed.tobytes()


def _from_int64s(blob: bytes) -> array[int]:
    """The int64s of ``blob``, kept as an array (8 bytes each, not an int object each)."""
    values = array("q")
    values.frombytes(blob)
    if not _LITTLE:  # pragma: no cover - no big-endian CI host
        values.byteswap()
    return values


def _rows_between(
    key: str, space_id: str, after: str, before: str | None, page: int, *, pending: bool = False
) -> Statement:
    """The rows ``(id, vector, index_data, created_at)`` of the scope's items with
    ``after < id < before`` (no upper bound for None), at most ``page``, in id order;
    with ``pending``, the items without a vector too (their vector None)."""
    upper = "" if before is None else "AND items.id < ? "
    return Statement(
        "SELECT items.id, vectors.vector, vectors.index_data, items.created_at FROM items "
        f"{'LEFT ' if pending else ''}JOIN vectors ON vectors.space_id = ? "
        "AND vectors.content_sha256 = items.content_sha256 "
        f"WHERE items.scope_key = ? AND items.id > ? {upper}ORDER BY items.id LIMIT ?",
        (space_id, key, after, *(() if before is None else (before,)), page),
    )


def _generation(key: str, *, sized: bool = False) -> Statement:
    """The scope's generation; ``sized``, also its item count (``scopes.items``, None
    for a scope without a row there): how many vectors a load will bring, at most."""
    if not sized:
        return Statement("SELECT generation FROM scope_generations WHERE scope_key = ?", (key,))
    return Statement(
        "SELECT generation, (SELECT items FROM scopes WHERE scopes.scope_key = ?) "
        "FROM scope_generations WHERE scope_key = ?",
        (key, key),
    )


def _segments_after(key: str, space_id: str, after: str, columns: str, count: int) -> Statement:
    return Statement(
        f"SELECT first_id, last_id, {columns} FROM vector_segments "
        "WHERE scope_key = ? AND space_id = ? AND first_id > ? ORDER BY first_id LIMIT ?",
        (key, space_id, after, count),
    )


def _walk(
    key: str,
    space_id: str,
    page: int,
    columns: str,
    on_rows: Callable[[Rows], None],
    on_segment: Callable[[Sequence[Any]], None],
    *,
    pending: bool = False,
    segments: bool = True,
    per_page: int = 4,
    on_size: Callable[[int], None] | None = None,
    enough: Callable[[], bool] = lambda: False,
) -> Generator[list[Statement], list[Rows], int | None]:
    """Walk one scope's ids in order: the rows between segments go to ``on_rows`` (a
    page at a time), each segment (``first_id, last_id, *columns``) to ``on_segment``;
    with ``segments=False``, every row. ``on_size`` hears first how many items the
    scope holds (when it knows); the walk stops early once ``enough()`` after a page of
    rows. Returns the scope's generation, read with every step (a change between steps
    raises ``_Doubt``), or None when the scope has none (it never held an item)."""
    generation: int | None = None
    after = ""  # every id up to here is done
    queued: list[Sequence[Any]] = []  # segments read and not yet reached
    more = segments  # segments past the queued ones may exist
    while True:
        first = generation is None and on_size is not None  # ask the size once
        statements = [_generation(key, sized=first)]
        if not queued and more:
            statements.append(_segments_after(key, space_id, after, columns, per_page))
        before = str(queued[0][0]) if queued else None
        if queued or not more:  # the rows up to the next segment
            statements.append(_rows_between(key, space_id, after, before, page, pending=pending))
        answers = yield statements
        if not answers[0]:
            return None
        seen = int(answers[0][0][0])
        if generation is not None and seen != generation:
            raise _Doubt
        if on_size is not None and first and answers[0][0][1] is not None:
            on_size(int(answers[0][0][1]))
        generation = seen
        if not queued and more:
            queued = list(answers[1])
            more = len(queued) == per_page
            continue  # read the rows before the first of them next
        rows = answers[-1]
        if rows:
            on_rows(rows)
            after = str(rows[-1][0])
            if enough():
                return generation
        if len(rows) == page:
            continue
        if not queued:
            return generation
        segment = queued.pop(0)
        on_segment(segment)
        after = str(segment[1])


def load_scope(
    key: str, space_id: str, dimensions: int, cache: SqliteVectorCache
) -> Generator[list[Statement], list[Rows], CacheEntry | None]:
    """A cache entry for one scope: its segments as they are (their index data only if
    the cache's index uses it) and its other rows from ``vectors``, in id order. None
    when the scope has no generation. A segment that does not check out, or a change
    while it reads (D1 reads in several batches), makes it start over from the rows
    alone."""
    page = cache.page_rows(dimensions)
    size = index_data_size(dimensions) if cache.uses_index_data else 0
    data = "CAST(index_data AS BLOB), data_checksum" if size else "x'', 0"
    # CAST: a damaged segment reads as bytes that fail their CRC, not as text that the
    # driver cannot decode.
    columns = (
        f"checksum, CAST(ids AS BLOB), CAST(created AS BLOB), CAST(vectors AS BLOB), {data}, "
        "corrupt"
    )
    entries: list[CacheEntry] = []  # the one being filled

    def add_segment(segment: Sequence[Any]) -> None:
        checksum, ids, created, vectors, index_data = segment[2], *map(bytes, segment[3:7])
        if _checksum(ids, created, vectors) != int(checksum) or (
            size and crc32(index_data) != int(segment[7])
        ):
            raise _Doubt
        keys = json.loads(ids)
        if len(index_data) != size * len(keys):
            raise _Doubt
        try:
            entries[0].add_packed(keys, _from_int64s(created), vectors, index_data or None)
        except ValueError as exc:  # lengths or keys that do not fit
            raise _Doubt from exc
        if segment[8] is not None:
            entries[0].corrupt.update(json.loads(str(segment[8])))

    for attempt in range(_ATTEMPTS):
        entry = cache.new_entry(dimensions, 0)
        entries[:] = [entry]
        try:  # from the segments first; after a doubt, from the rows alone
            generation = yield from _walk(
                key,
                space_id,
                page,
                columns,
                entry.add_rows,
                add_segment,
                segments=not attempt,
                per_page=cache.page_segments(SEGMENT_BYTES),
                on_size=entry.reserve,
            )
        except _Doubt:
            continue
        if generation is None:
            return None
        entry.generation = generation
        return entry
    raise StoreError(
        f"the scope {key} changed during {_ATTEMPTS} attempts to load its vectors "
        "consistently; retry the recall"
    )


def pack_vectors(op: PackVectors) -> Generator[list[Statement], list[Rows], int]:
    """Pack up to ``PACK_SEGMENTS`` segments of the ids not yet covered of the scope of
    ``op.space_id`` with at least ``op.min_vectors`` items that has the most of them (at
    least an eighth of ``min_vectors``); return how many vectors went into its new
    segments. The bound keeps a pass's memory to a few segments: a scope of 50,000
    unpacked vectors read whole once took an object past its 128 MB; the next pass goes
    on."""
    space_rows, scope_rows = yield [
        Statement("SELECT dimensions FROM spaces WHERE id = ?", (op.space_id,)),
        Statement(
            "SELECT scope_key FROM (SELECT scopes.scope_key, scopes.items - coalesce(("
            "SELECT sum(s.items) FROM vector_segments AS s "
            "WHERE s.scope_key = scopes.scope_key AND s.space_id = ?), 0) AS uncovered "
            "FROM scopes WHERE scopes.items >= ?) WHERE uncovered >= ? "
            "ORDER BY uncovered DESC, scope_key LIMIT 1",
            (op.space_id, max(1, int(op.min_vectors)), max(1, int(op.min_vectors) // 8)),
        ),
    ]
    if not space_rows or not scope_rows:
        return 0
    d = int(space_rows[0][0])
    key = str(scope_rows[0][0])
    per = segment_rows(d)
    runs: list[list[Any]] = [[]]  # the uncovered rows, one run per gap between segments
    taken = [0]

    def on_rows(rows: Rows) -> None:
        runs[-1].extend(rows)
        taken[0] += len(rows)

    def on_segment(_segment: Sequence[Any]) -> None:
        if runs[-1]:
            runs.append([])

    try:
        generation = yield from _walk(
            key,
            op.space_id,
            per,
            "1",
            on_rows,
            on_segment,
            pending=True,
            enough=lambda: taken[0] >= PACK_SEGMENTS * per,
        )
    except _Doubt:  # written to meanwhile: the next pass packs it
        return 0
    if generation is None:
        return 0
    packed = 0
    for run in runs:
        for start in range(0, len(run), per):
            statement, vectors = _segment(key, op.space_id, d, run[start : start + per], generation)
            yield [statement]
            packed += vectors
    return packed


def segment_rows(dimensions: int) -> int:
    """How many vectors of ``dimensions`` one segment holds (about ``SEGMENT_BYTES``)."""
    return max(1, SEGMENT_BYTES // (4 * dimensions))


def tail_checks(keys: Sequence[str], spaces: Sequence[str], least: int) -> list[Statement]:
    """For each scope key, one statement answering, for each of ``spaces``, ``(space id,
    dimensions, the last id its segments cover or "", how many of the scope's items
    follow it, how many of those have a vector in that space)``; no row when the scope
    holds fewer than ``least`` items."""
    return [
        Statement(
            "SELECT t.space_id, t.dimensions, t.last_id, "
            "(SELECT count(*) FROM items WHERE items.scope_key = ? AND items.id > t.last_id), "
            "(SELECT count(*) FROM items JOIN vectors ON vectors.space_id = t.space_id "
            "AND vectors.content_sha256 = items.content_sha256 "
            "WHERE items.scope_key = ? AND items.id > t.last_id) "
            "FROM (SELECT spaces.id AS space_id, spaces.dimensions AS dimensions, "
            "coalesce((SELECT s.last_id FROM vector_segments AS s WHERE s.scope_key = ? "
            "AND s.space_id = spaces.id ORDER BY s.first_id DESC LIMIT 1), '') AS last_id "
            "FROM spaces WHERE spaces.id IN (SELECT value FROM json_each(?))) AS t "
            "WHERE (SELECT items FROM scopes WHERE scopes.scope_key = ?) >= ?",
            (key, key, key, as_json(list(spaces)), key, least),
        )
        for key in keys
    ]


def pack_tails(
    keys: Sequence[str], checks: Sequence[Rows]
) -> Generator[list[Statement], list[Rows], int]:
    """Pack, segment by segment, the items after the last segment of each scope of
    ``keys`` whose :func:`tail_checks` answer (``checks``, in the same order) counts a
    full segment or more: a scope is packed as its memories arrive (a partial segment
    waits for more). Not while one of them waits for its vector in that space (after a
    model switch, say): its vector would delete the segment, so maintenance packs such a
    tail once nothing is pending. At most ``PACK_SEGMENTS`` segments in all, so that the
    first write into a large scope stored before packing does not pack all of it
    (maintenance packs the rest). Returns how many vectors went into new segments."""
    packed, left = 0, PACK_SEGMENTS
    for key, rows in zip(keys, checks, strict=True):
        for space_id, dimensions, last_id, following, embedded in rows:
            if int(embedded) != int(following):
                continue
            d, per = int(dimensions), segment_rows(int(dimensions))
            after = str(last_id)
            segments = min(left, int(following) // per)
            left -= segments
            for _ in range(segments):
                generation, tail = yield [
                    _generation(key),
                    _rows_between(key, str(space_id), after, None, per, pending=True),
                ]
                if not generation or len(tail) < per:
                    break
                statement, vectors = _segment(key, str(space_id), d, tail, int(generation[0][0]))
                after = str(tail[-1][0])
                del tail
                yield [statement]
                packed += vectors
    return packed


def _segment(
    key: str, space_id: str, d: int, rows: Sequence[Any], generation: int
) -> tuple[Statement, int]:
    """The insert of one segment covering ``rows`` (in id order, each ``(id, vector or
    None, index_data, created_at)``), made only if the scope's generation is still
    ``generation``; and how many vectors it holds."""
    embedded = [row for row in rows if row[1] is not None]
    keys = [str(row[0]) for row in embedded]
    blobs = [bytes(row[1]) for row in embedded]
    records: list[bytes | None] = [None if row[2] is None else bytes(row[2]) for row in embedded]
    errors, stale = row_errors(keys, blobs, records, d)
    if stale:
        computed = index_data_joined(b"".join([blobs[i] for i in stale]), d)
        for i, record in zip(stale, computed, strict=True):
            records[i] = record
    good = [i for i in range(len(keys)) if i not in errors]
    ids = as_json([keys[i] for i in good])
    created = _int64s([int(embedded[i][3]) for i in good])
    vectors = b"".join([blobs[i] for i in good])
    data = b"".join([records[i] or b"" for i in good])
    corrupt = as_json({keys[i]: str(errors[i]) for i in sorted(errors)}) if errors else None
    return (
        Statement(
            "INSERT INTO vector_segments (scope_key, space_id, first_id, last_id, items, "
            "checksum, data_checksum, ids, created, vectors, index_data, corrupt) "
            "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE (SELECT generation "
            "FROM scope_generations WHERE scope_key = ?) = ?",
            (
                key,
                space_id,
                str(rows[0][0]),
                str(rows[-1][0]),
                len(rows),
                _checksum(ids.encode(), created, vectors),
                crc32(data),
                ids,
                created,
                vectors,
                data,
                corrupt,
                key,
                generation,
            ),
        ),
        len(good),
    )
