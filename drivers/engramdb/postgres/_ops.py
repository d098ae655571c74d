"""The store ops on PostgreSQL, written once as a generator and run by both faces.

:func:`batch_flow` yields :class:`Query` objects and receives each one's rows (a list of
tuples; ``[]`` for a statement without a result). ``PostgresStore.batch`` drives it with
a psycopg ``Connection``, ``abatch`` with an ``AsyncConnection``, inside one transaction,
so a batch commits whole or not at all and its reads see its earlier writes.

Every write decides its outcome with the core's ``_outcomes`` functions on the row it
locked (``SELECT ... FOR UPDATE``), so the store reaches the same results as every other
store. The vector leg orders by pgvector's cosine distance (``<=>``) exactly; the lexical
leg ranks with the core's BM25 over the texts of the selected scopes; filters are
evaluated by the core's filter objects on the rows SQL selected by scope and expiry.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from engramdb._clock import from_ms, to_ms
from engramdb._codec import decode_f32
from engramdb._errors import StoreError
from engramdb._lexical import BM25Index, query_tokens, terms
from engramdb._outcomes import check_batch, check_query, check_vector, live, next_revision, patched
from engramdb._sqlite.rows import ITEM_COLUMNS, ITEM_WIDTH, item_row, record_from, scope_path
from engramdb._store import (
    DeleteItem,
    DeleteItems,
    DropSpace,
    FindContent,
    FindVectors,
    GetItems,
    History,
    ListItems,
    ListScopes,
    Op,
    PatchItem,
    PendingTexts,
    PurgeExpired,
    PutItem,
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
    VectorRepair,
)
from engramdb._types import MemoryRecord, scope_from_key, scope_key

__all__ = [
    "COLUMNS",
    "HANDLERS",
    "HNSW_MAX_DIMENSIONS",
    "Context",
    "Flow",
    "Query",
    "batch_flow",
    "hnsw_index",
    "remove",
]

Rows = list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Query:
    """One SQL statement with ``%s`` parameters."""

    sql: str
    params: tuple[Any, ...] = ()


Flow = Generator[Query, Rows, Any]

HNSW_MAX_DIMENSIONS: Final = 2000
"""pgvector indexes ``vector`` columns of up to 2,000 dimensions; larger spaces search
exactly."""


@dataclass(frozen=True, slots=True)
class Context:
    """What every op's flow may read: the schema version, and ``ef_search`` (None:
    pgvector's default, 40; at least ``k`` is used)."""

    schema_version: int
    ef_search: int | None = None


def hnsw_index(space_id: str) -> str:
    """The name of the HNSW index of ``space_id`` (a partial index per space)."""
    return "engramdb_hnsw_" + hashlib.sha256(space_id.encode()).hexdigest()[:16]


def _literal(text: str) -> str:
    """``text`` as an SQL string literal (a partial index's predicate must be matched
    by a literal, not a parameter, for the planner to use it)."""
    if "\x00" in text:
        raise StoreError(f"{text!r} contains U+0000, which PostgreSQL cannot hold")
    return "'" + text.replace("'", "''") + "'"


COLUMNS = ", ".join(f"i.{name}" for name in ITEM_COLUMNS)
_INSERT_ITEM = (
    f"INSERT INTO engramdb_items ({', '.join(ITEM_COLUMNS)}, scope_path, terms, term_count) "
    f"VALUES ({', '.join(['%s'] * (ITEM_WIDTH + 3))})"
)
_UPDATE_ITEM = (
    "UPDATE engramdb_items SET "
    + ", ".join(f"{name} = %s" for name in ITEM_COLUMNS[1:])
    + ", scope_path = %s, terms = %s, term_count = %s WHERE id = %s"
)
_SAVE_REVISION = (
    f"INSERT INTO engramdb_item_revisions ({', '.join(ITEM_COLUMNS)}) "
    f"SELECT {', '.join(ITEM_COLUMNS)} FROM engramdb_items WHERE id = %s"
)


def _live(now: datetime) -> tuple[str, tuple[Any, ...]]:
    return "(i.expires_at IS NULL OR i.expires_at > %s)", (to_ms(now),)


def _in_scopes(scopes: ScopeSet) -> tuple[str, tuple[Any, ...]]:
    """The SQL condition "the item's scope is selected" and its parameters."""
    parts: list[str] = []
    params: list[Any] = []
    if scopes.exact:
        parts.append("i.scope_key = ANY(%s)")
        params.append([scope_key(s) for s in scopes.exact])
    for prefix in scopes.prefixes:
        path = scope_path(prefix)
        parts.append("(i.scope_path = %s OR (i.scope_path > %s AND i.scope_path < %s))")
        params += [path, path + "\x1f", path + "\x20"]
    if not parts:
        return "FALSE", ()
    return "(" + " OR ".join(parts) + ")", tuple(params)


def _vector_text(blob: bytes) -> str:
    return "[" + ",".join(repr(v) for v in decode_f32(blob)) + "]"


def batch_flow(ops: Sequence[Op], context: Context, handlers: dict[type, Any]) -> Flow:
    """Run ``ops`` (already inside one transaction) with ``handlers`` (op type -> flow of
    the op and ``context``); return their results in order."""
    check_batch(ops)
    results: list[Any] = []
    for op in ops:
        handler = handlers.get(type(op))
        if handler is None:
            raise StoreError(f"PostgresStore does not know the op {op!r}")
        results.append((yield from handler(op, context)))
    return results


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
    row = [*item_row(record), scope_path(record.scope), words, len(words)]
    if old is None:
        yield Query(_INSERT_ITEM, tuple(row))
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
        yield from _collect([old.content_sha256])


def remove(ids: Sequence[str]) -> Flow:
    """Delete ``ids`` with their history, and the vectors no item uses any more."""
    if not ids:
        return
    rows = yield Query(
        "DELETE FROM engramdb_items WHERE id = ANY(%s) RETURNING content_sha256", (list(ids),)
    )
    yield Query("DELETE FROM engramdb_item_revisions WHERE id = ANY(%s)", (list(ids),))
    yield Query("DELETE FROM engramdb_utility WHERE id = ANY(%s)", (list(ids),))
    yield from _collect(sorted({r[0] for r in rows}))


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


def _patch_item(op: PatchItem, _context: Context) -> Flow:
    old = yield from _locked(op.id)
    record = patched(old, op)
    yield from _store_record(record, old, op.keep_revisions)
    return record


def _delete_item(op: DeleteItem, _context: Context) -> Flow:
    found = yield from _locked(op.id)
    if found is None or (op.scopes is not None and found.scope not in op.scopes):
        return False
    yield from remove([op.id])
    return True


def _delete_items(op: DeleteItems, _context: Context) -> Flow:
    where, params = _in_scopes(op.scopes)
    rows = yield Query(f"SELECT {COLUMNS} FROM engramdb_items i WHERE {where} FOR UPDATE", params)
    records = [record_from(r) for r in rows]
    ids = [r.id for r in records if op.filter is None or op.filter.matches(r)]
    yield from remove(ids)
    return len(ids)


def _dimensions(space_id: str) -> Flow:
    rows = yield Query("SELECT dimensions FROM engramdb_spaces WHERE space_id = %s", (space_id,))
    return int(rows[0][0]) if rows else None


def _put_vector(op: PutVector, _context: Context) -> Flow:
    check_vector(op, (yield from _dimensions(op.space_id)))
    conflict = (
        "DO UPDATE SET embedding = EXCLUDED.embedding, embedded_at = EXCLUDED.embedded_at"
        if op.replace
        else "DO NOTHING"
    )
    yield Query(
        "INSERT INTO engramdb_vectors (space_id, content_sha256, embedding, embedded_at) "
        f"VALUES (%s, %s, %s::vector, %s) ON CONFLICT (space_id, content_sha256) {conflict}",
        (op.space_id, op.content_sha256, _vector_text(op.vector), to_ms(op.embedded_at)),
    )


def _register_space(op: RegisterSpace, _context: Context) -> Flow:
    """Record the space; a new one gets its HNSW index (cosine) over its vectors, a
    partial index on the ``vector(d)`` expression, built while the space is empty."""
    rows = yield Query(
        "INSERT INTO engramdb_spaces (space_id, dimensions, registered_at) VALUES (%s, %s, %s) "
        "ON CONFLICT (space_id) DO NOTHING RETURNING space_id",
        (op.space.id, op.space.dimensions, to_ms(op.now)),
    )
    d = int(op.space.dimensions)
    if rows and 0 < d <= HNSW_MAX_DIMENSIONS:
        yield Query(
            f"CREATE INDEX IF NOT EXISTS {hnsw_index(op.space.id)} ON engramdb_vectors "
            f"USING hnsw ((embedding::vector({d})) vector_cosine_ops) "
            f"WHERE space_id = {_literal(op.space.id)}"
        )


def _drop_space(op: DropSpace, _context: Context) -> Flow:
    rows = yield Query(
        "DELETE FROM engramdb_vectors WHERE space_id = %s RETURNING 1", (op.space_id,)
    )
    yield Query("DELETE FROM engramdb_spaces WHERE space_id = %s", (op.space_id,))
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


# -- reads --------------------------------------------------------------------------------


def _embedded_join(space_id: str | None) -> tuple[str, str, tuple[Any, ...]]:
    """The column and join that add the embedding time of ``space_id`` to an item row."""
    if space_id is None:
        return "NULL", "", ()
    return (
        "v.embedded_at",
        "LEFT JOIN engramdb_vectors v ON v.space_id = %s AND v.content_sha256 = i.content_sha256",
        (space_id,),
    )


def _optional_time(value: Any) -> datetime | None:
    return None if value is None else from_ms(int(value))


def _get_items(op: GetItems, _context: Context) -> Flow:
    column, join, params = _embedded_join(op.space_id)
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
            out.append(StoredItem(record, _optional_time(row[ITEM_WIDTH])))
    return out


def _find_vectors(op: FindVectors, _context: Context) -> Flow:
    rows = yield Query(
        "SELECT content_sha256 FROM engramdb_vectors "
        "WHERE space_id = %s AND content_sha256 = ANY(%s)",
        (op.space_id, list(set(op.hashes))),
    )
    return frozenset(r[0] for r in rows)


def _find_content(op: FindContent, _context: Context) -> Flow:
    pairs = list(dict.fromkeys(op.pairs))
    if not pairs:
        return {}
    where, params = _live(op.now)
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
    in_scopes, scope_params = _in_scopes(op.scopes)
    live_sql, live_params = _live(op.now)
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
    limit = "" if op.filter is not None else f" LIMIT {max(0, int(op.limit))}"
    rows = yield Query(
        f"SELECT {COLUMNS} FROM engramdb_items i WHERE {where} "
        f"ORDER BY i.created_at DESC, i.id DESC{limit}",
        params,
    )
    records = [record_from(r) for r in rows]
    if op.filter is not None:
        records = [r for r in records if op.filter.matches(r)]
    return records[: max(0, op.limit)]


def _list_scopes(op: ListScopes, _context: Context) -> Flow:
    live_sql, params = _live(op.now)
    where = [live_sql]
    if op.prefix:
        condition, prefix_params = _in_scopes(ScopeSet(prefixes=(op.prefix,)))
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
    live_sql, params = _live(op.now)
    rows = yield Query(
        f"SELECT {COLUMNS} FROM engramdb_item_revisions i WHERE i.id = %s AND EXISTS "
        f"(SELECT 1 FROM engramdb_items i WHERE i.id = %s AND {live_sql}) "
        "ORDER BY i.revision DESC LIMIT %s",
        (op.id, op.id, *params, max(0, op.limit)),
    )
    return [record_from(r) for r in rows]


def _search_vectors(op: SearchVectors, context: Context) -> Flow:
    """Through the space's HNSW index, or exactly with ``exact=True`` (and for spaces
    too large to index).

    The index path runs in two steps, so that the index scan drives the query whatever
    the statistics say: the nearest vectors (content hashes) that some eligible item
    uses, from one table ordered by distance (iterative scans in strict order go on past
    ``ef_search`` until enough pass the scope and expiry conditions), then those hashes'
    items. A Python filter may reject items: the step repeats with four times as many
    vectors until ``k`` hits are found or the vectors run out.
    """
    dimensions = yield from _dimensions(op.space_id)
    check_query(op, dimensions)
    if op.k <= 0:
        return SearchResult()
    in_scopes, scope_params = _in_scopes(op.scopes)
    counts = yield Query(
        "SELECT count(*), count(v.content_sha256) FROM engramdb_items i "
        "LEFT JOIN engramdb_vectors v "
        f"ON v.space_id = %s AND v.content_sha256 = i.content_sha256 WHERE {in_scopes}",
        (op.space_id, *scope_params),
    )
    items, embedded = int(counts[0][0]), int(counts[0][1])
    if not embedded or dimensions is None:
        return SearchResult(coverage=(0, items))
    live_sql, live_params = _live(op.now)
    eligible = f"{in_scopes} AND {live_sql}"
    eligible_params = (*scope_params, *live_params)
    query = "[" + ",".join(repr(float(v)) for v in op.query) + "]"
    if op.exact or dimensions > HNSW_MAX_DIMENSIONS:
        limit = "" if op.filter is not None else f" LIMIT {int(op.k)}"
        rows = yield Query(
            f"SELECT {COLUMNS}, v.embedded_at, 1 - (v.embedding <=> %s::vector) "
            "FROM engramdb_vectors v JOIN engramdb_items i "
            "ON i.content_sha256 = v.content_sha256 "
            f"WHERE v.space_id = %s AND {eligible} "
            f"ORDER BY v.embedding <=> %s::vector, i.id{limit}",
            (query, op.space_id, *eligible_params, query),
        )
        hits = _vector_hits(rows, op)
        return SearchResult(tuple(hits), coverage=(embedded, items))
    ef_search = min(1000, max(op.k, context.ef_search or 40))
    yield Query(
        "SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
        "set_config('hnsw.ef_search', %s, true)",
        (str(ef_search),),
    )
    distance = f"v.embedding::vector({dimensions}) <=> %s::vector({dimensions})"
    wanted = op.k
    while True:
        nearest = yield Query(
            f"SELECT v.content_sha256 FROM engramdb_vectors v "
            f"WHERE v.space_id = {_literal(op.space_id)} AND EXISTS (SELECT 1 FROM "
            f"engramdb_items i WHERE i.content_sha256 = v.content_sha256 AND {eligible}) "
            f"ORDER BY {distance} LIMIT {int(wanted)}",
            (*eligible_params, query),
        )
        rows = yield Query(
            f"SELECT {COLUMNS}, v.embedded_at, 1 - (v.embedding <=> %s::vector) "
            "FROM engramdb_vectors v JOIN engramdb_items i "
            "ON i.content_sha256 = v.content_sha256 "
            f"WHERE v.space_id = %s AND v.content_sha256 = ANY(%s) AND {eligible} "
            "ORDER BY v.embedding <=> %s::vector, i.id",
            (query, op.space_id, [r[0] for r in nearest], *eligible_params, query),
        )
        hits = _vector_hits(rows, op)
        if len(hits) >= op.k or len(nearest) < wanted:
            return SearchResult(tuple(hits), coverage=(embedded, items))
        wanted *= 4


def _vector_hits(rows: Rows, op: SearchVectors) -> list[SearchHit]:
    """The best ``op.k`` hits of ``rows`` (item columns, embedded_at, similarity) that
    pass the filter, best first, ties by id."""
    hits: list[SearchHit] = []
    for row in rows:
        record = record_from(row)
        if op.filter is not None and not op.filter.matches(record):
            continue
        hits.append(SearchHit(record, float(row[ITEM_WIDTH + 1]), from_ms(int(row[ITEM_WIDTH]))))
    hits.sort(key=lambda hit: (-hit.score, hit.record.id))
    return hits[: op.k]


def _search_lexical(op: SearchLexical, _context: Context) -> Flow:
    """BM25 as the core computes it (``search_many``: statistics over every item of the
    selected scopes, expired ones included), from SQL: the item count and total length
    of the scopes, and the items holding any query term, found through the GIN index."""
    words = [term for _token, term in query_tokens(op.query)]
    if op.k <= 0 or not words:
        return SearchResult()
    in_scopes, scope_params = _in_scopes(op.scopes)
    (totals,) = yield Query(
        f"SELECT count(*), coalesce(sum(i.term_count), 0) FROM engramdb_items i WHERE {in_scopes}",
        scope_params,
    )
    n_docs, total_len = int(totals[0]), int(totals[1])
    if not n_docs:
        return SearchResult()
    column, join, join_params = _embedded_join(op.space_id)
    rows = yield Query(
        f"SELECT {COLUMNS}, {column}, i.terms, i.term_count FROM engramdb_items i {join} "
        f"WHERE {in_scopes} AND i.terms && %s::text[]",
        (*join_params, *scope_params, words),
    )
    found: dict[str, int] = {}
    documents = []
    for row in rows:
        counts: dict[str, int] = {}
        for term in row[ITEM_WIDTH + 1]:
            counts[term] = counts.get(term, 0) + 1
        for term in words:
            if term in counts:
                found[term] = found.get(term, 0) + 1
        documents.append((row, counts))
    avgdl = total_len / n_docs
    k1, b = BM25Index._K1, BM25Index._B
    idf: dict[str, float] = {}
    for term, df in found.items():
        weight = math.log((n_docs - df + 0.5) / (df + 0.5))
        idf[term] = weight if weight > 0.0 else 1e-6
    scored: list[tuple[float, str, SearchHit]] = []
    for row, counts in documents:
        record = record_from(row)
        if not live(record, op.now) or (op.filter is not None and not op.filter.matches(record)):
            continue
        score = 0.0
        length = float(row[ITEM_WIDTH + 2])
        for term in words:
            if term in counts:
                freq = float(counts[term])
                score += idf[term] * (
                    (freq * (k1 + 1.0)) / (freq + k1 * (1 - b + b * length / avgdl))
                )
        hit = SearchHit(record, score, _optional_time(row[ITEM_WIDTH]))
        scored.append((-score, record.id, hit))
    scored.sort(key=lambda entry: (entry[0], entry[1]))
    return SearchResult(tuple(hit for _, _, hit in scored[: op.k]))


def _pending_texts(op: PendingTexts, _context: Context) -> Flow:
    rows = yield Query(
        "SELECT DISTINCT ON (i.content_sha256) i.content_sha256, i.text FROM engramdb_items i "
        "WHERE NOT EXISTS (SELECT 1 FROM engramdb_vectors v WHERE v.space_id = %s "
        "AND v.content_sha256 = i.content_sha256) ORDER BY i.content_sha256, i.id LIMIT %s",
        (op.space_id, max(0, op.limit)),
    )
    return [(r[0], r[1]) for r in rows]


def _repair_vectors(op: RepairVectors, _context: Context) -> Flow:
    """A ``vector`` value always decodes, and PutVector checks unit length, so a scan
    finds none corrupt; it pages through the hashes like the other stores."""
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
    FindContent: _find_content,
    ListItems: _list_items,
    ListScopes: _list_scopes,
    History: _history,
    SearchVectors: _search_vectors,
    SearchLexical: _search_lexical,
    PendingTexts: _pending_texts,
    RepairVectors: _repair_vectors,
    Stats: _stats,
}
