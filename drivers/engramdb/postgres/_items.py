"""The item ops on PostgreSQL: writes of items, vectors and spaces, and the reads that
are not searches.

Every write decides its outcome with the core's ``_outcomes`` functions on the row it
locked (``SELECT ... FOR UPDATE``), so the store reaches the same results as every other
store; filters are part of the SQL (``_filters``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from datetime import datetime
from itertools import groupby
from operator import attrgetter
from typing import Any

from engramdb import MemoryRecord
from engramdb.driver import from_ms, to_ms
from engramdb.store import (
    DeleteItem,
    DeleteItems,
    DropSpace,
    FindContent,
    FindVectors,
    GetItems,
    GetVectors,
    History,
    ListItems,
    ListScopes,
    PackVectors,
    PatchItem,
    PendingTexts,
    PurgeExpired,
    PutItem,
    PutVector,
    RegisterSpace,
    RepairVectors,
    RestoreItem,
    ScopeCount,
    ScopeSet,
    Stats,
    StoredItem,
    StoreStats,
    UnreadableItems,
    VectorRepair,
    check_restore,
    check_vector,
    decode_f32,
    live,
    next_revision,
    patched,
    scope_from_key,
    scope_key,
    terms,
)
from engramdb.store.rows import (
    ITEM_COLUMNS,
    ITEM_WIDTH,
    decoded,
    item_row,
    record_from,
    scope_path,
)

from ._coverage import count, put_vector, put_vectors, recount
from ._filters import where_filter
from ._sql import (
    COLUMNS,
    Context,
    Flow,
    Query,
    dimensions_of,
    each,
    embedded_join,
    hnsw_ddl,
    hnsw_index,
    live_condition,
    optional_time,
    passing,
    scope_condition,
)

__all__ = ["HANDLERS", "RUNS", "remove", "restorable", "restore_record", "restore_records"]

_INSERT_ITEM = (
    f"INSERT INTO engramdb_items ({', '.join(ITEM_COLUMNS)}, scope_path, terms, term_count) "
    f"VALUES ({', '.join(['%s'] * (ITEM_WIDTH + 3))})"
)
_UPDATE_ITEM = (
    "UPDATE engramdb_items SET "
    + ", ".join(f"{name} = %s" for name in ITEM_COLUMNS[1:])
    + ", scope_path = %s, terms = %s, term_count = %s WHERE id = %s"
)
_INSERT_REVISION = (
    f"INSERT INTO engramdb_item_revisions ({', '.join(ITEM_COLUMNS)}) "
    f"VALUES ({', '.join(['%s'] * ITEM_WIDTH)})"
)
_SAVE_REVISION = (
    f"INSERT INTO engramdb_item_revisions ({', '.join(ITEM_COLUMNS)}) "
    f"SELECT {', '.join(ITEM_COLUMNS)} FROM engramdb_items WHERE id = %s"
)


def _vector_text(blob: bytes) -> str:
    return "[" + ",".join(repr(v) for v in decode_f32(blob)) + "]"


# -- writes -------------------------------------------------------------------------------


def _locked(item_id: str) -> Flow:
    rows = yield Query(
        f"SELECT {COLUMNS} FROM engramdb_items i WHERE i.id = %s FOR UPDATE", (item_id,)
    )
    return record_from(rows[0]) if rows else None


def _store_record(record: MemoryRecord, old: MemoryRecord | None, keep: int) -> Flow:
    """Make ``record`` the item of its id: ``old`` (the locked row) goes to the history,
    which keeps the newest ``keep`` revisions."""
    words = terms(record.text)
    path = scope_path(record.scope)
    row = [*item_row(record), path, words, len(words)]
    key = scope_key(record.scope)
    if old is None:
        yield Query(_INSERT_ITEM, tuple(row))
        yield from count([(key, path, record.content_sha256, 1)])
        return
    yield Query(_SAVE_REVISION, (record.id,))
    yield Query(
        "DELETE FROM engramdb_item_revisions WHERE id = %s AND revision NOT IN ("
        "SELECT revision FROM engramdb_item_revisions WHERE id = %s "
        "ORDER BY revision DESC LIMIT %s)",
        (record.id, record.id, max(0, keep)),
    )
    yield Query(_UPDATE_ITEM, (*row[1:], record.id))
    if old.content_sha256 != record.content_sha256:
        yield from count(
            [(key, path, old.content_sha256, -1), (key, path, record.content_sha256, 1)]
        )
        yield from _collect([old.content_sha256])


def remove(ids: Sequence[str], collect: bool = True) -> Flow:
    """Delete ``ids`` with their history and evidence, and (``collect``) the vectors no
    item uses any more; answer the content hashes of the deleted items."""
    if not ids:
        return []
    rows = yield Query(
        "DELETE FROM engramdb_items WHERE id = ANY(%s) "
        "RETURNING scope_key, scope_path, content_sha256",
        (list(ids),),
    )
    yield Query("DELETE FROM engramdb_item_revisions WHERE id = ANY(%s)", (list(ids),))
    yield Query("DELETE FROM engramdb_utility WHERE id = ANY(%s)", (list(ids),))
    yield from count([(key, path, sha, -1) for key, path, sha in rows])
    hashes = sorted({r[2] for r in rows})
    if collect:
        yield from _collect(hashes)
    return hashes


def _collect(hashes: Iterable[str]) -> Flow:
    """Drop the vectors of ``hashes`` that no item references."""
    hashes = list(hashes)
    if hashes:
        yield Query(
            "DELETE FROM engramdb_vectors v WHERE v.content_sha256 = ANY(%s) AND NOT EXISTS "
            "(SELECT 1 FROM engramdb_items i WHERE i.content_sha256 = v.content_sha256)",
            (hashes,),
        )


def _put_item(op: PutItem, _context: Context) -> Flow:
    old = yield from _locked(op.record.id)
    record = next_revision(old, op.record, op.now, op.expected_revision)
    if record is op.record:  # new, or replacing an expired item whole (no evidence)
        if old is not None:
            yield from remove([old.id])
        yield from _store_record(record, None, 0)
    else:
        yield from _store_record(record, old, op.keep_revisions)
    return record


def restore_record(op: RestoreItem) -> Flow:
    """Insert ``op.record`` and its history as given (``RestoreItem``; the evidence is
    ``_policy``'s): an expired item with the id goes first, whole, and a vector of its
    text stays while the new record uses it."""
    check_restore(None, op)
    old = yield from _locked(op.record.id)
    check_restore(old, op)
    hashes = (yield from remove([old.id], collect=False)) if old is not None else []
    yield from _store_record(op.record, None, 0)
    if op.history:
        marks = ", ".join([f"({', '.join(['%s'] * ITEM_WIDTH)})"] * len(op.history))
        yield Query(
            f"INSERT INTO engramdb_item_revisions ({', '.join(ITEM_COLUMNS)}) VALUES {marks}",
            tuple(value for earlier in op.history for value in item_row(earlier)),
        )
    yield from _collect(hashes)
    return op.record


def restorable(ops: Sequence[RestoreItem]) -> Flow:
    """How many of ``ops``, from the first, :func:`restore_records` may write at once
    (0: restore them one by one, as :func:`restore_record`): those whose history checks
    (``passing``), if their ids are distinct and none is an item of the store (an
    expired item to replace first; a live one a conflict). The ids are locked."""
    checked = passing(ops, lambda op: check_restore(None, op))
    ids = [op.record.id for op in ops[:checked]]
    if not ids or len(set(ids)) < len(ids):
        return 0
    held = yield Query(
        "SELECT i.id FROM engramdb_items i WHERE i.id = ANY(%s) ORDER BY i.id FOR UPDATE", (ids,)
    )
    return 0 if held else checked


def restore_records(ops: Sequence[RestoreItem]) -> Flow:
    """The items and histories of ``ops`` (those :func:`restorable` lets through) in
    three statements: what :func:`restore_record` does for each, where no item is held
    and so none is removed."""
    records = [op.record for op in ops]
    rows = []
    for record in records:
        words = terms(record.text)
        rows.append((*item_row(record), scope_path(record.scope), words, len(words)))
    yield each(_INSERT_ITEM, rows)
    yield from count(
        [
            (scope_key(r.scope), row[ITEM_WIDTH], r.content_sha256, 1)
            for r, row in zip(records, rows, strict=True)
        ]
    )
    history = [tuple(item_row(earlier)) for op in ops for earlier in op.history]
    if history:
        yield each(_INSERT_REVISION, history)
    return records


def _patch_item(op: PatchItem, _context: Context) -> Flow:
    old = yield from _locked(op.id)
    record = patched(old, op)
    yield from _store_record(record, old, op.keep_revisions)
    return record


def _delete_item(op: DeleteItem, _context: Context) -> Flow:
    # Only the scope is read, so that an item whose row does not decode can be deleted.
    rows = yield Query(
        "SELECT i.scope_key FROM engramdb_items i WHERE i.id = %s FOR UPDATE", (op.id,)
    )
    if not rows or (op.scopes is not None and scope_from_key(rows[0][0]) not in op.scopes):
        return False
    yield from remove([op.id])
    return True


def _delete_items(op: DeleteItems, _context: Context) -> Flow:
    where, params = scope_condition(op.scopes)
    rows = yield Query(
        f"SELECT i.id FROM engramdb_items i WHERE {where}{where_filter(op.filter)} FOR UPDATE",
        params,
    )
    ids = [r[0] for r in rows]
    yield from remove(ids)
    return len(ids)


def _put_vector(op: PutVector, _context: Context) -> Flow:
    check_vector(op, (yield from dimensions_of(op.space_id)))
    yield from put_vector(
        op.space_id,
        op.content_sha256,
        _vector_text(op.vector),
        to_ms(op.embedded_at),
        op.replace,
    )


REBUILD_AT = 1_000
"""A run of PutVector ops that adds at least this many vectors to a space holding fewer
than it adds drops the space's HNSW index first and builds it again at the end of the
run (same definition, same transaction): pgvector builds a graph of all the vectors at
once about three times faster than it inserts them one by one (docs/performance-history.md,
"A restore into PostgreSQL, set-based"). Until the batch commits, the vector table is
locked against other transactions' searches, as a restore's writes would be anyway."""


def _put_vectors(ops: Sequence[PutVector], _context: Context) -> Flow:
    """Consecutive PutVector ops as :func:`_put_vector` one by one, in a statement per
    run of the same ``replace``: each space's size read once, each vector checked, and
    the index of a space that grows by most of it built again (:data:`REBUILD_AT`)."""
    rows = yield Query(
        "SELECT space_id, dimensions FROM engramdb_spaces WHERE space_id = ANY(%s)",
        (sorted({op.space_id for op in ops}),),
    )
    sizes = {str(r[0]): int(r[1]) for r in rows}

    def check(op: PutVector) -> None:
        check_vector(op, sizes.get(op.space_id))

    checked = passing(ops, check)
    rebuilt = yield from _unindexed(ops[:checked], sizes)
    for replace, run in groupby(ops[:checked], key=attrgetter("replace")):
        yield from put_vectors(
            [
                (op.space_id, op.content_sha256, _vector_text(op.vector), to_ms(op.embedded_at))
                for op in run
            ],
            replace,
        )
    for ddl in rebuilt:
        yield Query(ddl)
    if checked < len(ops):
        check(ops[checked])  # raises, as the op one by one would
    return [None] * len(ops)


def _unindexed(ops: Sequence[PutVector], sizes: dict[str, int]) -> Flow:
    """Drop the HNSW index of each space that ``ops`` grow by :data:`REBUILD_AT` vectors
    or more and by more than it holds (and that has its index); answer the statements
    that build them again."""
    added: dict[str, int] = {}
    for op in ops:
        added[op.space_id] = added.get(op.space_id, 0) + 1
    rebuilt: list[str] = []
    for space_id, adds in sorted(added.items()):
        ddl = hnsw_ddl(space_id, sizes[space_id])
        if adds < REBUILD_AT or ddl is None:
            continue
        ((held, indexed),) = yield Query(
            "SELECT (SELECT count(*) FROM (SELECT 1 FROM engramdb_vectors WHERE space_id = %s "
            "LIMIT %s) v), to_regclass(%s) IS NOT NULL",
            (space_id, adds, hnsw_index(space_id)),
        )
        if int(held) < adds and indexed:
            yield Query(f"DROP INDEX {hnsw_index(space_id)}")
            rebuilt.append(ddl)
    return rebuilt


def _register_space(op: RegisterSpace, _context: Context) -> Flow:
    """Record the space; a new one gets its HNSW index (cosine) over its vectors, a
    partial index on the ``vector(d)`` (or ``halfvec(d)``, see ``indexed_type``)
    expression, built while the space is empty."""
    rows = yield Query(
        "INSERT INTO engramdb_spaces (space_id, dimensions, registered_at) VALUES (%s, %s, %s) "
        "ON CONFLICT (space_id) DO NOTHING RETURNING space_id",
        (op.space.id, op.space.dimensions, to_ms(op.now)),
    )
    ddl = hnsw_ddl(op.space.id, int(op.space.dimensions))
    if rows and ddl is not None:
        yield Query(ddl)


def _drop_space(op: DropSpace, _context: Context) -> Flow:
    rows = yield Query(
        "DELETE FROM engramdb_vectors WHERE space_id = %s RETURNING 1", (op.space_id,)
    )
    yield Query("DELETE FROM engramdb_spaces WHERE space_id = %s", (op.space_id,))
    yield Query("DELETE FROM engramdb_coverage WHERE space_id = %s", (op.space_id,))
    yield Query(f"DROP INDEX IF EXISTS {hnsw_index(op.space_id)}")
    return len(rows)


def _purge_expired(op: PurgeExpired, _context: Context) -> Flow:
    rows = yield Query(
        "SELECT i.id FROM engramdb_items i WHERE i.expires_at IS NOT NULL AND i.expires_at <= %s "
        "ORDER BY i.expires_at, i.id LIMIT %s FOR UPDATE",
        (to_ms(op.now), max(0, op.limit)),
    )
    ids = [r[0] for r in rows]
    yield from remove(ids)
    yield Query("DELETE FROM engramdb_receipts WHERE expires_at <= %s", (to_ms(op.now),))
    return len(ids)


# -- reads (the searches are in _search) ----------------------------------------------


def _get_items(op: GetItems, _context: Context) -> Flow:
    column, join, params = embedded_join(op.space_id)
    rows = yield Query(
        f"SELECT {COLUMNS}, {column} FROM engramdb_items i {join} WHERE i.id = ANY(%s)",
        (*params, list(set(op.ids))),
    )
    found = {r[0]: r for r in rows}
    out: list[StoredItem | None] = []
    for item_id in op.ids:
        row = found.get(item_id)
        record = None if row is None else record_from(row)
        if row is None or record is None or not live(record, op.now):
            out.append(None)
        else:
            out.append(StoredItem(record, optional_time(row[ITEM_WIDTH])))
    return out


def _find_vectors(op: FindVectors, _context: Context) -> Flow:
    rows = yield Query(
        "SELECT content_sha256 FROM engramdb_vectors "
        "WHERE space_id = %s AND content_sha256 = ANY(%s)",
        (op.space_id, list(set(op.hashes))),
    )
    return frozenset(r[0] for r in rows)


def _get_vectors(op: GetVectors, _context: Context) -> Flow:
    """The stored float32 values, exactly: ``vector_send`` gives pgvector's binary form
    (two 16-bit counts, then big-endian float32s), turned into the little-endian bytes
    every store answers (a text round trip through float64 could round)."""
    hashes = list(dict.fromkeys(op.hashes))
    rows = yield Query(
        "SELECT content_sha256, vector_send(embedding), embedded_at FROM engramdb_vectors "
        "WHERE space_id = %s AND content_sha256 = ANY(%s)",
        (op.space_id, hashes),
    )
    found: dict[str, tuple[bytes, datetime]] = {}
    for sha, sent, at in rows:
        body = bytes(sent)[4:]
        size = len(body) // 4
        raw = struct.pack(f"<{size}I", *struct.unpack(f">{size}I", body))
        found[str(sha)] = (raw, from_ms(int(at)))
    return {sha: found[sha] for sha in hashes if sha in found}


def _find_content(op: FindContent, _context: Context) -> Flow:
    pairs = list(dict.fromkeys(op.pairs))
    if not pairs:
        return {}
    where, params = live_condition(op.now)
    rows = yield Query(
        f"SELECT {COLUMNS} FROM engramdb_items i WHERE i.content_sha256 = ANY(%s) AND {where} "
        "ORDER BY i.id",
        (sorted({sha for _, sha in pairs}), *params),
    )
    wanted = set(pairs)
    found: dict[Any, MemoryRecord] = {}
    for row in rows:
        record = record_from(row)
        key = (record.scope, record.content_sha256)
        if key in wanted and key not in found:
            found[key] = record
    return found


def _list_items(op: ListItems, _context: Context) -> Flow:
    in_scopes, scope_params = scope_condition(op.scopes)
    live_sql, live_params = live_condition(op.now)
    where = f"{in_scopes} AND {live_sql}"
    params: tuple[Any, ...] = (*scope_params, *live_params)
    if op.before is not None:
        rows = yield Query(
            f"SELECT i.created_at, i.id FROM engramdb_items i WHERE i.id = %s AND {where}",
            (op.before, *params),
        )
        if not rows:
            return []
        where += " AND (i.created_at, i.id) < (%s, %s)"
        params += (rows[0][0], rows[0][1])
    if op.below is not None:
        where += " AND (i.created_at, i.id) < (%s, %s)"
        params += (to_ms(op.below[0]), op.below[1])
    rows = yield Query(
        f"SELECT {COLUMNS} FROM engramdb_items i WHERE {where}{where_filter(op.filter)} "
        f"ORDER BY i.created_at DESC, i.id DESC LIMIT {max(0, int(op.limit))}",
        params,
    )
    return [record for record, _ in decoded(rows)[0]]  # an undecodable row is left out


def _unreadable_items(op: UnreadableItems, _context: Context) -> Flow:
    in_scopes, scope_params = scope_condition(op.scopes)
    live_sql, live_params = live_condition(op.now)
    rows = yield Query(
        f"SELECT {COLUMNS} FROM engramdb_items i WHERE {in_scopes} AND {live_sql} ORDER BY i.id",
        (*scope_params, *live_params),
    )
    return decoded(rows)[1][: max(0, op.limit)]  # the rows every listing leaves out


def _list_scopes(op: ListScopes, _context: Context) -> Flow:
    live_sql, params = live_condition(op.now)
    where = [live_sql]
    if op.prefix:
        condition, prefix_params = scope_condition(ScopeSet(prefixes=(op.prefix,)))
        where.append(condition)
        params += prefix_params
    if op.after is not None:
        where.append("i.scope_path > %s")
        params += (scope_path(op.after),)
    rows = yield Query(
        f"SELECT i.scope_path, min(i.scope_key), count(*) FROM engramdb_items i "
        f"WHERE {' AND '.join(where)} GROUP BY i.scope_path ORDER BY i.scope_path LIMIT %s",
        (*params, max(0, op.limit)),
    )
    return [ScopeCount(scope_from_key(r[1]), int(r[2])) for r in rows]


def _history(op: History, _context: Context) -> Flow:
    live_sql, params = live_condition(op.now)
    rows = yield Query(
        f"SELECT {COLUMNS} FROM engramdb_item_revisions i WHERE i.id = %s AND EXISTS "
        f"(SELECT 1 FROM engramdb_items i WHERE i.id = %s AND {live_sql}) "
        "ORDER BY i.revision DESC LIMIT %s",
        (op.id, op.id, *params, max(0, op.limit)),
    )
    return [record_from(r) for r in rows]


def _pending_texts(op: PendingTexts, _context: Context) -> Flow:
    rows = yield Query(
        "SELECT DISTINCT ON (i.content_sha256) i.content_sha256, i.text FROM engramdb_items i "
        "WHERE NOT EXISTS (SELECT 1 FROM engramdb_vectors v WHERE v.space_id = %s "
        "AND v.content_sha256 = i.content_sha256) ORDER BY i.content_sha256, i.id LIMIT %s",
        (op.space_id, max(0, op.limit)),
    )
    return [(r[0], r[1]) for r in rows]


def _pack_vectors(_op: PackVectors, _context: Context) -> Flow:
    """pgvector reads the vectors in place (and its HNSW index keeps them): a store
    without packed segments packs nothing, as ``PackVectors`` allows."""
    yield from ()
    return 0


def _repair_vectors(op: RepairVectors, _context: Context) -> Flow:
    """A ``vector`` value always decodes, and PutVector checks unit length, so a scan
    finds none corrupt; it pages through the hashes like the other stores. A scan's
    first page rebuilds the space's coverage counts (derived data, see ``_coverage``)."""
    if not op.after:
        yield from recount(op.space_id)
    rows = yield Query(
        "SELECT content_sha256 FROM engramdb_vectors WHERE space_id = %s AND content_sha256 > %s "
        "ORDER BY content_sha256 LIMIT %s",
        (op.space_id, op.after, max(0, op.limit)),
    )
    examined = [r[0] for r in rows]
    return VectorRepair((), examined[-1] if examined and len(examined) == op.limit else None)


def _stats(op: Stats, context: Context) -> Flow:
    now = to_ms(op.now)
    (row,) = yield Query(
        "SELECT count(*) FILTER (WHERE i.expires_at IS NULL OR i.expires_at > %s), "
        "count(*) FILTER (WHERE i.expires_at IS NOT NULL AND i.expires_at <= %s), "
        "count(DISTINCT i.scope_key) FROM engramdb_items i",
        (now, now),
    )
    spaces = yield Query(
        "SELECT s.space_id, (SELECT count(*) FROM engramdb_items i JOIN engramdb_vectors v "
        "ON v.space_id = s.space_id AND v.content_sha256 = i.content_sha256 "
        "WHERE i.expires_at IS NULL OR i.expires_at > %s) FROM engramdb_spaces s "
        "ORDER BY s.space_id",
        (now,),
    )
    (vectors,) = yield Query(
        "SELECT count(*) FROM engramdb_vectors WHERE space_id = %s", (op.space_id,)
    )
    (embedded,) = yield Query(
        "SELECT count(*) FROM engramdb_items i JOIN engramdb_vectors v ON v.space_id = %s "
        "AND v.content_sha256 = i.content_sha256 WHERE i.expires_at IS NULL OR i.expires_at > %s",
        (op.space_id, now),
    )
    items = int(row[0])
    return StoreStats(
        items=items,
        expired=int(row[1]),
        scopes=int(row[2]),
        pending=items - int(embedded[0]),
        vectors=int(vectors[0]),
        spaces=tuple(r[0] for r in spaces),
        schema_version=context.schema_version,
        embedded=tuple((r[0], int(r[1])) for r in spaces),
    )


HANDLERS: dict[type, Any] = {
    PutItem: _put_item,
    PatchItem: _patch_item,
    DeleteItem: _delete_item,
    DeleteItems: _delete_items,
    PutVector: _put_vector,
    RegisterSpace: _register_space,
    DropSpace: _drop_space,
    PurgeExpired: _purge_expired,
    GetItems: _get_items,
    FindVectors: _find_vectors,
    GetVectors: _get_vectors,
    FindContent: _find_content,
    ListItems: _list_items,
    ListScopes: _list_scopes,
    History: _history,
    UnreadableItems: _unreadable_items,
    PendingTexts: _pending_texts,
    RepairVectors: _repair_vectors,
    PackVectors: _pack_vectors,
    Stats: _stats,
}

RUNS: dict[type, Any] = {PutVector: _put_vectors}
"""The ops written set-based when two or more come in a row (``batch_flow``)."""
