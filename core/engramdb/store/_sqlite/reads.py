"""The plans of reads: one statement (or a few) per op, and the function from their rows
to its result. The vector search, which needs Python between statements, is in
``search.py``."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from engramdb._base.clock import from_ms, to_ms
from engramdb._base.types import MemoryRecord, Scope, scope_from_key, scope_key
from engramdb._lexical.bm25 import query_tokens
from engramdb.ranking._ties import GRID
from engramdb.store import (
    FindContent,
    FindVectors,
    GetItems,
    GetVectors,
    History,
    ListItems,
    ListScopes,
    PendingTexts,
    ScopeCount,
    SearchHit,
    SearchLexical,
    SearchResult,
    Stats,
    StoredItem,
    StoreStats,
    TermStatistics,
    UnreadableItems,
)
from engramdb.store._sqlite.fragments import (
    Planned,
    chunks,
    embedded_join,
    scope_condition,
    where_filter,
)
from engramdb.store._sqlite.rows import (
    Rows,
    Statement,
    columns,
    embedded_time,
    live,
    live_bound,
)
from engramdb.store.rows import ITEM_WIDTH, as_json, decoded, optional_time, record_from, scope_path

__all__ = [
    "find_content",
    "find_vectors",
    "get_items",
    "get_vectors",
    "history",
    "list_items",
    "list_scopes",
    "pending_texts",
    "search_lexical",
    "stats",
    "unreadable_items",
]

_HASHES_PER_STATEMENT = 10_000
_VECTORS_PER_STATEMENT = 1_000  # rows of up to a few KB each: a bounded answer


def get_items(op: GetItems) -> Planned:
    column, join, join_params = embedded_join(op.space_id)
    statement = Statement(
        f"SELECT {columns()}, {column} FROM items{join} "
        f"WHERE items.id IN (SELECT value FROM json_each(?)) AND {live(op.now)}",
        (*join_params, as_json(list(dict.fromkeys(op.ids)))),
    )

    def finish(results: list[Rows]) -> list[StoredItem | None]:
        found = {
            str(row[0]): StoredItem(record_from(row), optional_time(row[ITEM_WIDTH]))
            for row in results[0]
        }
        return [found.get(item_id) for item_id in op.ids]

    return [statement], finish


def find_content(op: FindContent) -> Planned:
    pairs = [[scope_key(scope), sha] for scope, sha in dict.fromkeys(op.pairs)]
    statement = Statement(
        f"SELECT {columns()} FROM json_each(?) AS pair JOIN items "
        "ON items.scope_key = json_extract(pair.value, '$[0]') "
        "AND items.content_sha256 = json_extract(pair.value, '$[1]') "
        f"WHERE {live(op.now)} ORDER BY items.id",
        (as_json(pairs),),
    )

    def finish(results: list[Rows]) -> dict[tuple[Scope, str], MemoryRecord]:
        found: dict[tuple[Scope, str], MemoryRecord] = {}
        for row in results[0]:
            record = record_from(row)
            found.setdefault((record.scope, record.content_sha256), record)
        return found

    return [statement], finish


def _vectors_of(
    selected: str, space_id: str, hashes: list[str], per_statement: int
) -> list[Statement]:
    """The statements reading the columns ``selected`` of the vectors of ``hashes`` in
    ``space_id``, ``per_statement`` hashes to a statement (one JSON array)."""
    return [
        Statement(
            f"SELECT {selected} FROM vectors WHERE space_id = ? "
            "AND content_sha256 IN (SELECT value FROM json_each(?))",
            (space_id, as_json(list(chunk))),
        )
        for chunk in chunks(hashes, per_statement)
    ]


def find_vectors(op: FindVectors) -> Planned:
    # The hashes travel as one JSON array per statement (10,000 hashes ≈ 670 KB, under
    # D1's 2,000,000-byte value limit): one lookup per remember_many.
    distinct = list(dict.fromkeys(op.hashes))
    statements = _vectors_of("content_sha256", op.space_id, distinct, _HASHES_PER_STATEMENT)
    return statements, lambda results: frozenset(str(row[0]) for rows in results for row in rows)


def get_vectors(op: GetVectors) -> Planned:
    distinct = list(dict.fromkeys(op.hashes))
    statements = _vectors_of(
        "content_sha256, vector, embedded_at", op.space_id, distinct, _VECTORS_PER_STATEMENT
    )

    def finish(results: list[Rows]) -> dict[str, tuple[bytes, datetime]]:
        found = {
            str(row[0]): (bytes(row[1]), from_ms(int(row[2]))) for rows in results for row in rows
        }
        return {sha: found[sha] for sha in distinct if sha in found}

    return statements, finish


def list_items(op: ListItems) -> Planned:
    # Newest first by (created_at, id); a cursor that is not a live item of the selection
    # compares with NULL and so yields nothing, as in the in-memory store.
    where, params = scope_condition(op.scopes)
    before = ""
    if op.before is not None:
        cursor_where, cursor_params = scope_condition(op.scopes, "cursor.scope_key")
        before = (
            " AND (items.created_at, items.id) < (SELECT cursor.created_at, cursor.id "
            f"FROM items AS cursor WHERE cursor.id = ? AND {cursor_where} "
            f"AND {live(op.now, 'cursor')})"
        )
        params += (op.before, *cursor_params)
    if op.below is not None:
        before += " AND (items.created_at, items.id) < (?, ?)"
        params += (to_ms(op.below[0]), op.below[1])
    sql = (
        f"SELECT {columns()} FROM items WHERE {where} AND {live(op.now)}{before}"
        f"{where_filter(op.filter)} ORDER BY items.created_at DESC, items.id DESC LIMIT ?"
    )
    return [Statement(sql, (*params, max(0, int(op.limit))))], lambda results: [
        record
        for record, _ in decoded(results[0])[0]  # an undecodable row is left out
    ]


def unreadable_items(op: UnreadableItems) -> Planned:
    # Every live row of the selection decoded, as a listing decodes it: the ones that
    # fail are the ones every listing and search leaves out.
    where, params = scope_condition(op.scopes)
    sql = f"SELECT {columns()} FROM items WHERE {where} AND {live(op.now)} ORDER BY items.id"
    return [Statement(sql, params)], lambda results: decoded(results[0])[1][: max(0, op.limit)]


def list_scopes(op: ListScopes) -> Planned:
    alive = live(op.now)
    where = [f"EXISTS (SELECT 1 FROM items WHERE items.scope_key = scopes.scope_key AND {alive})"]
    params: list[Any] = []
    if op.prefix:
        path = scope_path(op.prefix)
        where.append("(scopes.path = ? OR (scopes.path > ? AND scopes.path < ?))")
        params += [path, path + "\x1f", path + "\x20"]
    if op.after is not None:
        where.append("scopes.path > ?")
        params.append(scope_path(op.after))
    sql = (
        "SELECT scopes.scope_key, (SELECT count(*) FROM items WHERE items.scope_key = "
        f"scopes.scope_key AND {alive}) FROM scopes WHERE {' AND '.join(where)} "
        "ORDER BY scopes.path LIMIT ?"
    )
    return [Statement(sql, (*params, max(0, int(op.limit))))], lambda results: [
        ScopeCount(scope_from_key(row[0]), int(row[1])) for row in results[0]
    ]


def history(op: History) -> Planned:
    sql = (
        f"SELECT {columns('item_revisions')} FROM item_revisions WHERE item_revisions.id = ? "
        f"AND EXISTS (SELECT 1 FROM items WHERE items.id = ? AND {live(op.now)}) "
        "ORDER BY item_revisions.revision DESC LIMIT ?"
    )
    return [Statement(sql, (op.id, op.id, max(0, int(op.limit))))], lambda results: [
        record_from(row) for row in results[0]
    ]


# BM25 as FTS5's bm25() computes it (k1 = 1.2, b = 0.75), but with the statistics of the
# scopes the search selects: their number of items and tokens (kept per scope by
# triggers) and, per query term, how many of their items hold it (from the term
# occurrences of the full-text index, ``items_terms``). The query's terms are stemmed
# here as FTS5 stems the text (``query_tokens``), stop words left out. Ranked (and
# returned) on the grid of ``_ties.quantised``: BM25 is above 0, so CAST truncates the
# exactly scaled score as Python's floor does, and the sum's last bits (its terms' order
# is SQLite's) cannot decide a tie. The best ``k`` are chosen first (``best``: the order
# and the filter need only ``items``), and only they are read whole, with their vector's
# time: a lookup in ``vectors`` for each item matched cost about a quarter of the
# statement at 10,000 items (docs/performance-history.md, "Small scopes, warm").
_BM25 = """WITH
q (term) AS (SELECT value FROM json_each(?)),
stats (n, avgdl) AS (SELECT sum(scopes.items),
    CAST(sum(scopes.tokens) AS REAL) / max(sum(scopes.items), 1) FROM scopes WHERE {scopes}),
tf (seq, term, f, len) AS (SELECT v.doc, v.term, count(*), items.tokens
    FROM q CROSS JOIN items_terms AS v ON v.term = q.term
    JOIN items ON items.seq = v.doc WHERE {items} GROUP BY v.doc, v.term),
df (term, x, found) AS (SELECT tf.term,
    ln((stats.n - count(*) + 0.5) / (count(*) + 0.5)), count(*) FROM tf, stats GROUP BY tf.term),
scored (seq, score) AS (SELECT tf.seq,
    sum(CASE WHEN df.x <= 0 THEN 1e-6 ELSE df.x END * tf.f * 2.2
        / (tf.f + 1.2 * (0.25 + 0.75 * tf.len / stats.avgdl)))
    FROM tf JOIN df ON df.term = tf.term, stats GROUP BY tf.seq),
best (seq, grid) AS (SELECT scored.seq, CAST(scored.score * 1073741824.0 AS INTEGER) AS grid
    FROM scored JOIN items ON items.seq = scored.seq
    WHERE {live}{filter} ORDER BY grid DESC, items.created_at DESC, items.id DESC LIMIT ?)
SELECT {columns}, {embedded}, best.grid,
    (SELECT n FROM stats), (SELECT json_group_object(term, found) FROM df) FROM best
JOIN items ON items.seq = best.seq{join}
ORDER BY best.grid DESC, items.created_at DESC, items.id DESC"""


def search_lexical(op: SearchLexical) -> Planned:
    query_terms = [term for _token, term in query_tokens(op.query)]
    if not query_terms or op.k <= 0 or not (op.scopes.exact or op.scopes.prefixes):
        return [], lambda results: SearchResult()
    in_scopes, scopes_params = scope_condition(op.scopes, "scopes.scope_key")
    in_items, items_params = scope_condition(op.scopes)
    column, join, join_params = embedded_join(op.space_id)
    sql = _BM25.format(
        scopes=in_scopes,
        items=in_items,
        columns=columns(),
        embedded=column,
        join=join,
        live=live_bound(),
        filter=where_filter(op.filter),
    )
    params = (
        as_json(query_terms),
        *scopes_params,
        *items_params,
        to_ms(op.now),
        int(op.k),
        *join_params,
    )

    def finish(results: list[Rows]) -> SearchResult:
        rows = results[0]
        good, bad = decoded(rows)
        hits = tuple(
            SearchHit(
                record,
                int(row[ITEM_WIDTH + 1]) / GRID,
                embedded_time(row, record),
            )
            for record, row in good
        )
        if not rows:
            return SearchResult(hits, tuple(sorted(bad)))
        # Every row carries the statistics its score was computed with.
        items, found = int(rows[0][ITEM_WIDTH + 2]), json.loads(rows[0][ITEM_WIDTH + 3])
        statistics = TermStatistics(items, tuple(int(found.get(t, 0)) for t in query_terms))
        return SearchResult(hits, tuple(sorted(bad)), statistics=statistics if hits else None)

    return [Statement(sql, params)], finish


def pending_texts(op: PendingTexts) -> Planned:
    sql = (
        "SELECT items.content_sha256, min(items.text) FROM items WHERE NOT EXISTS "
        "(SELECT 1 FROM vectors WHERE vectors.space_id = ? "
        "AND vectors.content_sha256 = items.content_sha256) "
        "GROUP BY items.content_sha256 ORDER BY items.content_sha256 LIMIT ?"
    )
    return [Statement(sql, (op.space_id, max(0, int(op.limit))))], lambda results: [
        (str(row[0]), str(row[1])) for row in results[0]
    ]


def stats(op: Stats, schema_version: int | None) -> Planned:
    alive = live(op.now)
    now_ms = to_ms(op.now)
    statements = [
        Statement(f"SELECT count(*) FROM items WHERE {alive}"),
        Statement("SELECT count(DISTINCT scope_key) FROM items"),
        Statement(f"SELECT count(*) FROM items WHERE expires_at <= {now_ms}"),
        Statement("SELECT count(*) FROM vectors WHERE space_id = ?", (op.space_id,)),
        Statement("SELECT id FROM spaces UNION SELECT DISTINCT space_id FROM vectors ORDER BY 1"),
        Statement(
            "SELECT vectors.space_id, count(*) FROM items JOIN vectors "
            f"ON vectors.content_sha256 = items.content_sha256 WHERE {alive} "
            "GROUP BY vectors.space_id"
        ),
    ]

    def finish(results: list[Rows]) -> StoreStats:
        spaces = tuple(str(row[0]) for row in results[4])
        counts = {str(space): int(count) for space, count in results[5]}
        items = int(results[0][0][0])
        return StoreStats(
            items=items,
            scopes=int(results[1][0][0]),
            expired=int(results[2][0][0]),
            # The live items without a vector in the space: the live items less those
            # with one (the last count; a space holds one vector per text), one scan of
            # the items fewer than counting them apart.
            pending=items - counts.get(op.space_id, 0),
            vectors=int(results[3][0][0]),
            spaces=spaces,
            schema_version=schema_version,
            embedded=tuple((space, counts.get(space, 0)) for space in spaces),
        )

    return statements, finish
