"""Packed vector segments: a scope's vectors of one space in a few blobs.

The ``vectors`` table holds one row per vector, and a cold search of a large scope spends
most of its time reading those rows (``docs/performance.md``, "Packed vector segments").
:func:`pack_vectors` (the ``PackVectors`` op, run by ``maintain()``) copies the rows a
cache load would read into ``vector_segments``: segment ``i`` of ``segments`` holds the
JSON list of its item ids, their ``created_at`` as int64s, their float32 blobs and index
data, each concatenated, and a CRC-32 of all four; segment 0 also lists the rows that did
not decode (with the message a load gives them). Every segment carries the scope's
generation when it was read; the insert happens only if the generation is still that,
and a trigger deletes a scope's segments whenever its generation moves. So segments are
either current or absent, and :func:`read_segments` (the cold path of ``VectorSearch``)
still checks the generation and the CRC, falling back to the rows on any doubt.
"""

from __future__ import annotations

import json
import sys
from array import array
from binascii import crc32
from collections.abc import Callable, Generator, Sequence
from typing import Any

from .._index_data import index_data_joined, index_data_size, row_errors
from ..store import PackVectors
from ..store_rows import as_json
from .cache import CacheEntry, SqliteVectorCache
from .rows import Rows, Statement

__all__ = ["SEGMENT_BYTES", "pack_vectors", "read_segments", "scope_rows"]

SEGMENT_BYTES = 1_000_000
"""About how many bytes of float32 vectors one segment holds: under the 2 MB that D1 and
Durable Objects allow per row, with its index data beside it."""

_LITTLE = sys.byteorder == "little"


def _checksum(ids: bytes, created: bytes, vectors: bytes) -> int:
    return crc32(vectors, crc32(created, crc32(ids)))


def _int64s(values: Sequence[int]) -> bytes:
    packed = array("q", values)
    if not _LITTLE:  # pragma: no cover - no big-endian CI host
        packed.byteswap()
    return packed.tobytes()


def _from_int64s(blob: bytes) -> list[int]:
    values = array("q")
    values.frombytes(blob)
    if not _LITTLE:  # pragma: no cover - no big-endian CI host
        values.byteswap()
    return values.tolist()


def scope_rows(
    key: str, space_id: str, page: int, on_page: Callable[[int, Rows, bool], None]
) -> Generator[list[Statement], list[Rows], bool]:
    """Read the rows ``(id, vector, index_data, created_at)`` of one scope in one space,
    ``page`` at a time, all at one generation: each page goes to ``on_page(generation,
    rows, first)``, ``first`` True for the first page of a (re)started read (a change
    between pages starts over). Returns False when the scope has no generation (it
    never held an item)."""
    generation: int | None = None
    after = ""
    while True:
        generation_rows, rows = yield [
            Statement("SELECT generation FROM scope_generations WHERE scope_key = ?", (key,)),
            Statement(
                "SELECT items.id, vectors.vector, vectors.index_data, items.created_at "
                "FROM items "
                "JOIN vectors ON vectors.space_id = ? "
                "AND vectors.content_sha256 = items.content_sha256 "
                "WHERE items.scope_key = ? AND items.id > ? ORDER BY items.id LIMIT ?",
                (space_id, key, after, page),
            ),
        ]
        if not generation_rows:
            return False
        seen = int(generation_rows[0][0])
        if generation is not None and seen != generation:  # changed between pages
            generation, after = None, ""
            continue
        on_page(seen, rows, generation is None)
        generation = seen
        if len(rows) < page:
            return True
        after = str(rows[-1][0])


def pack_vectors(op: PackVectors) -> Generator[list[Statement], list[Rows], int]:
    """Pack the largest scope of ``op.space_id`` with at least ``op.min_vectors`` items
    whose segments are missing; return how many vectors went into its segments."""
    space_rows, scope_rows_ = yield [
        Statement("SELECT dimensions FROM spaces WHERE id = ?", (op.space_id,)),
        Statement(
            "SELECT scopes.scope_key FROM scopes "
            "JOIN scope_generations ON scope_generations.scope_key = scopes.scope_key "
            "WHERE scopes.items >= ? AND NOT EXISTS (SELECT 1 FROM vector_segments "
            "WHERE vector_segments.scope_key = scopes.scope_key "
            "AND vector_segments.space_id = ? AND vector_segments.segment = 0 "
            "AND vector_segments.generation = scope_generations.generation) "
            "ORDER BY scopes.items DESC, scopes.scope_key LIMIT 1",
            (max(1, int(op.min_vectors)), op.space_id),
        ),
    ]
    if not space_rows or not scope_rows_:
        return 0
    d = int(space_rows[0][0])
    key = str(scope_rows_[0][0])
    rows: list[Any] = []
    tagged: list[int] = []

    def on_page(generation: int, page: Rows, first: bool) -> None:
        if first:
            rows.clear()
            tagged[:] = [generation]
        rows.extend(page)

    if not (yield from scope_rows(key, op.space_id, max(1, SEGMENT_BYTES // (4 * d)), on_page)):
        return 0
    generation = tagged[0]
    keys = [str(row[0]) for row in rows]
    blobs = [bytes(row[1]) for row in rows]
    records: list[bytes | None] = [None if row[2] is None else bytes(row[2]) for row in rows]
    errors, stale = row_errors(keys, blobs, records, d)
    if stale:
        computed = index_data_joined(b"".join([blobs[i] for i in stale]), d)
        for i, record in zip(stale, computed, strict=True):
            records[i] = record
    good = [i for i in range(len(rows)) if i not in errors]
    corrupt = as_json({keys[i]: str(errors[i]) for i in sorted(errors)}) if errors else None
    per = max(1, SEGMENT_BYTES // (4 * d))
    starts = range(0, max(1, len(good)), per)
    writes = [
        Statement(
            "DELETE FROM vector_segments WHERE scope_key = ? AND space_id = ?",
            (key, op.space_id),
        )
    ]
    for segment, start in enumerate(starts):
        chosen = good[start : start + per]
        ids = as_json([keys[i] for i in chosen])
        created = _int64s([int(rows[i][3]) for i in chosen])
        vectors = b"".join([blobs[i] for i in chosen])
        data = b"".join([records[i] or b"" for i in chosen])
        writes.append(
            Statement(
                "INSERT INTO vector_segments (scope_key, space_id, segment, segments, "
                "generation, checksum, data_checksum, ids, created, vectors, index_data, "
                "corrupt) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE (SELECT generation "
                "FROM scope_generations WHERE scope_key = ?) = ?",
                (
                    key,
                    op.space_id,
                    segment,
                    len(starts),
                    generation,
                    _checksum(ids.encode(), created, vectors),
                    crc32(data),
                    ids,
                    created,
                    vectors,
                    data,
                    corrupt if segment == 0 else None,
                    key,
                    generation,
                ),
            )
        )
    yield writes
    return len(good)


def read_segments(
    key: str, space_id: str, dimensions: int, cache: SqliteVectorCache, per_page: int
) -> Generator[list[Statement], list[Rows], CacheEntry | None]:
    """A cache entry for one scope from its packed segments, ``per_page`` segments per
    read (their index data only if the cache's index uses it); None when they are
    absent, stale, changed while read or do not check out (the caller then reads the
    rows)."""
    entry: CacheEntry | None = None
    size = index_data_size(dimensions) if cache.uses_index_data else 0
    # CAST: a damaged segment reads as bytes that fail their CRC, not as text that the
    # driver cannot decode.
    data = "CAST(index_data AS BLOB), data_checksum" if size else "x'', 0"
    expected = 0  # segments in the set: segment 0's count
    after = -1
    while True:
        generation_rows, segments = yield [
            Statement("SELECT generation FROM scope_generations WHERE scope_key = ?", (key,)),
            Statement(
                "SELECT segment, segments, generation, checksum, CAST(ids AS BLOB), "
                f"CAST(created AS BLOB), CAST(vectors AS BLOB), {data}, corrupt "
                "FROM vector_segments WHERE scope_key = ? AND space_id = ? AND segment > ? "
                "ORDER BY segment LIMIT ?",
                (key, space_id, after, per_page),
            ),
        ]
        if not generation_rows or not segments:
            return None
        generation = int(generation_rows[0][0])
        if entry is None:
            entry = cache.new_entry(dimensions, generation)
        elif generation != entry.generation:
            return None
        if after < 0:
            expected = int(segments[0][1])
        for row in segments:
            number, total, tagged, checksum = map(int, row[:4])
            ids, created, vectors, index_data = map(bytes, row[4:8])
            if (
                number != after + 1
                or total != expected
                or tagged != entry.generation
                or _checksum(ids, created, vectors) != checksum
                or (size and crc32(index_data) != int(row[8]))
            ):
                return None
            keys = json.loads(ids)
            if len(index_data) != size * len(keys):
                return None
            try:
                entry.add_packed(keys, _from_int64s(created), vectors, index_data or None)
            except ValueError:  # lengths or keys that do not fit: read the rows
                return None
            if row[9] is not None:
                entry.corrupt.update(json.loads(str(row[9])))
            after = number
        if after + 1 >= expected:
            return entry
