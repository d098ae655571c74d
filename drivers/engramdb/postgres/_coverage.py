"""Coverage counters: per scope, how many items it holds and how many of them have a
vector in each space, kept in step by every write.

A vector search reports its coverage (``SearchResult.coverage``: items with a vector in
the space, items, over the selected scopes). Joining every item of the scopes to its
vector costs a row per item (74 ms at 100k items, a second at 1M, measured in
``bench/postgres_scale.py``); ``engramdb_coverage`` answers it from a row per scope:
``(scope_key, '')`` counts the scope's items, ``(scope_key, space_id)`` those with a
vector in the space.

Every change goes through :func:`count` (an item stored, its text changed, items
removed) or :func:`put_vectors` (a new vector), in the writing transaction. Each batch
first locks the content hashes it will store (``lock_hashes``, in one sorted order, so
no two batches deadlock): an item and a new vector of the same text written by two
transactions at once then wait for each other and the second counts the first's row.
A vector that arrives while another transaction removes the last item of its text is
not covered by a lock; :func:`recount` (run when a ``RepairVectors`` scan starts, as
maintenance does) rebuilds the counts from the tables, so such a drift lasts until the
next maintenance pass at most, and rows loaded around the store are counted then.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engramdb.store import Op, PatchItem, PutItem, PutVector, RestoreItem

from ._sql import Flow, Query, each

__all__ = ["count", "lock_hashes", "put_vector", "put_vectors", "recount", "selected"]

_HEX = re.compile("[0-9a-f]{15}")  # a content hash (any other string locks nothing)
_UPSERT = "ON CONFLICT (scope_key, space_id) DO UPDATE SET n = engramdb_coverage.n + EXCLUDED.n"


def lock_hashes(ops: Sequence[Op]) -> Flow:
    """Take the transaction's advisory lock of every content hash the ops store, in key
    order (the first 60 bits of the hash)."""
    hashes: set[str] = set()
    for op in ops:
        stored = (
            op.record.content_sha256
            if isinstance(op, PutItem | RestoreItem)
            else op.content_sha256
            if isinstance(op, PutVector | PatchItem)
            else None
        )
        if isinstance(stored, str):
            hashes.add(stored)
    keys = sorted({int(h[:15], 16) for h in hashes if _HEX.fullmatch(h[:15])})
    if keys:
        yield Query(
            "SELECT count(pg_advisory_xact_lock(k)) FROM "
            "(SELECT k FROM unnest(%s::bigint[]) WITH ORDINALITY AS u(k, n) ORDER BY n) s",
            (keys,),
        )


def count(changes: Sequence[tuple[str, str, str, int]]) -> Flow:
    """Apply ``(scope_key, scope_path, content_sha256, delta)`` changes: ``delta`` items
    of the scope, and as many with a vector in each space that has one for the hash."""
    if not changes:
        return
    keys, paths, hashes, deltas = (list(column) for column in zip(*changes, strict=True))
    yield Query(
        "INSERT INTO engramdb_coverage (scope_key, space_id, scope_path, n) "
        "SELECT d.scope_key, s.space_id, min(d.scope_path), sum(d.delta) "
        "FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[]) "
        "AS d(scope_key, scope_path, sha, delta) CROSS JOIN LATERAL (SELECT ''::text AS "
        "space_id UNION ALL SELECT v.space_id FROM engramdb_vectors v "
        "WHERE v.content_sha256 = d.sha) s GROUP BY d.scope_key, s.space_id " + _UPSERT,
        (keys, paths, hashes, deltas),
    )


def put_vector(space_id: str, sha: str, embedding: str, at_ms: int, replace: bool) -> Flow:
    """Store a vector; a new one counts every item of its text in the space."""
    yield from put_vectors([(space_id, sha, embedding, at_ms)], replace)


def put_vectors(rows: Sequence[tuple[str, str, str, int]], replace: bool) -> Flow:
    """:func:`put_vector` of each ``(space_id, sha, embedding, at_ms)`` row in turn."""
    conflict = (
        "DO UPDATE SET embedding = EXCLUDED.embedding, embedded_at = EXCLUDED.embedded_at"
        if replace
        else "DO NOTHING"
    )
    yield each(
        "WITH put AS (INSERT INTO engramdb_vectors (space_id, content_sha256, embedding, "
        "embedded_at) VALUES (%s, %s, %s::vector, %s) ON CONFLICT (space_id, content_sha256) "
        f"{conflict} RETURNING space_id, content_sha256, xmax = 0 AS inserted) "
        "INSERT INTO engramdb_coverage (scope_key, space_id, scope_path, n) "
        "SELECT i.scope_key, put.space_id, min(i.scope_path), count(*) FROM put "
        "JOIN engramdb_items i ON i.content_sha256 = put.content_sha256 WHERE put.inserted "
        "GROUP BY i.scope_key, put.space_id " + _UPSERT,
        rows,
    )


def recount(space_id: str) -> Flow:
    """Rebuild the item counts and those of ``space_id`` from the items and vectors (so
    rows loaded around the store, e.g. by COPY, are counted too)."""
    yield Query("DELETE FROM engramdb_coverage WHERE space_id IN ('', %s)", (space_id,))
    yield Query(
        "INSERT INTO engramdb_coverage (scope_key, space_id, scope_path, n) "
        "SELECT scope_key, '', min(scope_path), count(*) FROM engramdb_items GROUP BY scope_key"
    )
    yield Query(
        "INSERT INTO engramdb_coverage (scope_key, space_id, scope_path, n) "
        "SELECT i.scope_key, v.space_id, min(i.scope_path), count(*) FROM engramdb_items i "
        "JOIN engramdb_vectors v ON v.space_id = %s AND v.content_sha256 = i.content_sha256 "
        "GROUP BY i.scope_key, v.space_id",
        (space_id,),
    )


def selected(in_scopes: str, params: tuple[object, ...], space_id: str) -> Query:
    """The coverage of the scopes ``in_scopes`` selects: (items with a vector in
    ``space_id``, items)."""
    return Query(
        "SELECT coalesce(sum(i.n) FILTER (WHERE i.space_id = %s), 0), "
        "coalesce(sum(i.n) FILTER (WHERE i.space_id = ''), 0) "
        f"FROM engramdb_coverage i WHERE (i.space_id = '' OR i.space_id = %s) AND {in_scopes}",
        (space_id, space_id, *params),
    )
