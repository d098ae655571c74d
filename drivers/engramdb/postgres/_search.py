"""The searches on PostgreSQL: the vector leg through each space's HNSW index (or
exactly), and the lexical leg, BM25 over a GIN index of each item's terms.
"""

from __future__ import annotations

import math
from typing import Any

from engramdb.driver import extend_vector_head, from_ms, vector_searches_for
from engramdb.store import (
    BM25Index,
    SearchHit,
    SearchLexical,
    SearchResult,
    SearchVectors,
    TermStatistics,
    best_first,
    check_query,
    quantised,
    query_tokens,
)
from engramdb.store.rows import ITEM_WIDTH, decoded

from ._coverage import selected
from ._filters import where_filter
from ._sql import (
    COLUMNS,
    DEFAULT_EF_SEARCH,
    Context,
    Flow,
    Query,
    Rows,
    dimensions_of,
    embedded_join,
    indexed_type,
    live_condition,
    optional_time,
    scope_condition,
    sql_literal,
)

__all__ = ["HANDLERS"]


def _search_vectors(op: SearchVectors, context: Context) -> Flow:
    """Through the space's HNSW index, or exactly with ``exact=True`` (and for spaces
    too large to index).

    The index path runs in two steps, so that the index scan drives the query whatever
    the statistics say: the nearest vectors (content hashes) that some eligible item
    uses, from one table ordered by distance (iterative scans in strict order go on
    past ``ef_search`` until enough pass the scope, expiry and filter conditions), then
    those hashes' items. It asks for a head of 100 whatever ``k`` and, for a larger
    ``k``, extends it by a search for ``k + 100`` (the head rule every store's leg
    follows), so a larger ``k`` only appends.
    """
    dimensions = yield from dimensions_of(op.space_id)
    check_query(op, dimensions)
    if op.k <= 0:
        return SearchResult()
    in_scopes, scope_params = scope_condition(op.scopes)
    (counts,) = yield selected(in_scopes, scope_params, op.space_id)
    embedded, items = int(counts[0]), int(counts[1])
    if not embedded or dimensions is None:
        return SearchResult(coverage=(0, items))
    live_sql, live_params = live_condition(op.now)
    eligible = f"{in_scopes} AND {live_sql}{where_filter(op.filter)}"
    eligible_params = (*scope_params, *live_params)
    query = "[" + ",".join(repr(float(v)) for v in op.query) + "]"
    kind = indexed_type(dimensions)
    norm = math.hypot(*op.query)  # the core scales the query so (within 1e-15)
    unit = [float(v) / norm for v in op.query]
    if op.exact or kind is None:
        rows = yield Query(
            f"SELECT {COLUMNS}, v.embedded_at, {_COSINE} "
            "FROM engramdb_vectors v JOIN engramdb_items i "
            "ON i.content_sha256 = v.content_sha256 "
            f"WHERE v.space_id = %s AND {eligible} "
            "ORDER BY v.embedding <=> %s::vector, i.created_at DESC, i.id DESC "
            f"LIMIT {int(op.k) + _slack(op.k)}",
            (unit, op.space_id, *eligible_params, query),
        )
        return SearchResult(*_vector_hits(rows, op.k), coverage=(embedded, items))
    distance = f"v.embedding::{kind} <=> %s::{kind}"

    def nearest(n: int, k: int) -> Flow:
        """The best ``k`` hits among the ``n`` nearest vectors the index finds, and the
        ids that do not decode: the exact similarities of only the first ``k`` of
        those (with slack, and the vectors as near as the k-th), since pgvector's
        float32 distance may misplace only neighbours at the cut."""
        wanted = n + _slack(n)
        while True:
            ef_search = min(1000, max(wanted, context.ef_search or DEFAULT_EF_SEARCH))
            yield Query(
                "SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
                "set_config('hnsw.ef_search', %s, true)",
                (str(ef_search),),
            )
            found = yield Query(
                f"SELECT v.content_sha256, {distance} AS distance FROM engramdb_vectors v "
                f"WHERE v.space_id = {sql_literal(op.space_id)} AND EXISTS (SELECT 1 FROM "
                f"engramdb_items i WHERE i.content_sha256 = v.content_sha256 AND {eligible}) "
                f"ORDER BY distance LIMIT {wanted}",
                (query, *eligible_params),
            )
            if not _tied_past(found, n, wanted) or wanted >= n + _MOST_TIED:
                break
            wanted = min(2 * wanted, n + _MOST_TIED)  # the tie goes on: read further
        rows = yield Query(
            f"SELECT {COLUMNS}, v.embedded_at, {_COSINE} "
            "FROM engramdb_vectors v JOIN engramdb_items i "
            "ON i.content_sha256 = v.content_sha256 "
            f"WHERE v.space_id = %s AND v.content_sha256 = ANY(%s) AND {eligible}",
            (unit, op.space_id, _first(found, k), *eligible_params),
        )
        return _vector_hits(rows, k)

    # The head rule (engramdb.driver.vector_searches_for): the index is asked for the
    # same candidates whatever k up to the head, and a deeper search only extends it, so
    # a larger k only appends, as on every store.
    k = int(op.k)
    first, *deeper = vector_searches_for(k, exact=False)
    hits, bad = yield from nearest(first, min(k, first))
    if deeper and len(hits) >= first:
        more, more_bad = yield from nearest(deeper[0], deeper[0])
        by_id = {hit.record.id: hit for hit in (*more, *hits)}
        pairs = extend_vector_head(_pairs(hits), _pairs(more), k)
        hits, bad = tuple(by_id[key] for key, _ in pairs), (*bad, *more_bad)
    return SearchResult(hits, tuple(sorted(set(bad))), coverage=(embedded, items))


def _first(found: Rows, k: int) -> list[str]:
    """The content hashes of the first ``k`` of ``found`` (content hash, distance; nearest
    first) with slack, and those past them as near as the k-th."""
    take = min(len(found), k + _slack(k))
    if take:
        cut = float(found[min(k, len(found)) - 1][1]) + _TIE
        while take < len(found) and float(found[take][1]) <= cut:
            take += 1
    return [str(row[0]) for row in found[:take]]


def _pairs(hits: tuple[SearchHit, ...]) -> list[tuple[str, float]]:
    return [(hit.record.id, hit.score) for hit in hits]


_COSINE = "(SELECT sum(a::float8 * b) FROM unnest(v.embedding::real[], %s::float8[]) AS t(a, b))"
"""The cosine of a stored vector (float32 values) and the unit query, summed in float8 as
the core sums it in Python: pgvector's ``<=>`` sums in float32, about 1e-7 off, more
than the grid of ``quantised``. The order by ``<=>`` picks the candidates, with slack."""


def _slack(k: int) -> int:
    """Candidates read past ``k``: those ``<=>`` (float32) may misplace at the cut."""
    return max(8, k // 8)


_TIE = 1e-6
"""Distances of ``<=>`` (float32) this close may be equal similarities on the grid."""
_MOST_TIED = 1000
"""The most vectors the index path reads past ``k`` while they tie with the k-th."""


def _tied_past(nearest: Rows, k: int, wanted: int) -> bool:
    """Whether the index scan's ``wanted`` nearest (content hash, distance) rows may
    cut a tie: the last is as near as the k-th, so vectors as near may lie beyond, and
    the newest of the tied items must come first (``best_first``), not the ones the
    index happened to reach first."""
    if len(nearest) < wanted or len(nearest) < k:
        return False
    return float(nearest[-1][1]) <= float(nearest[k - 1][1]) + _TIE


def _vector_hits(rows: Rows, k: int) -> tuple[tuple[SearchHit, ...], tuple[str, ...]]:
    """The best ``k`` hits of ``rows`` (item columns, embedded_at, similarity), best
    first by :func:`quantised` similarity, equal ones newest first (``best_first``); and
    the ids of the rows that do not decode."""
    good, bad = decoded(rows)
    hits = [
        SearchHit(
            record,
            quantised(max(-1.0, min(1.0, float(row[ITEM_WIDTH + 1])))),
            from_ms(int(row[ITEM_WIDTH])),
        )
        for record, row in good
    ]
    return tuple(best_first(hits, k)), tuple(sorted(bad))


def _search_lexical(op: SearchLexical, _context: Context) -> Flow:
    """BM25 as the core computes it (``search_many``: statistics over every item of the
    selected scopes, expired ones and those the filter rejects included), in SQL: the
    scopes' item count and total length, each query term's document frequency among the
    items holding one (found through the GIN index), then the best ``k`` live items that
    pass the filter, scored and ordered by the server, so only they cross the wire.

    The score is the core's expression term by term in query order (the same IEEE
    operations in the same order), so it is the same double; it is ranked (and
    returned) on the grid of ``quantised`` all the same, as every store ranks: the
    server rounds down the exactly scaled score (``floor``) as Python does.
    """
    words = [term for _token, term in query_tokens(op.query)]
    if op.k <= 0 or not words:
        return SearchResult()
    in_scopes, scope_params = scope_condition(op.scopes)
    distinct = list(dict.fromkeys(words))
    frequencies = ", ".join(
        "count(*) FILTER (WHERE i.terms @> ARRAY[%s]::text[])" for _ in distinct
    )
    (totals,) = yield Query(
        f"SELECT count(*), coalesce(sum(i.term_count), 0) FROM engramdb_items i WHERE {in_scopes}",
        scope_params,
    )
    n_docs, total_len = int(totals[0]), int(totals[1])
    if not n_docs:
        return SearchResult()
    (found,) = yield Query(
        f"SELECT {frequencies} FROM engramdb_items i WHERE {in_scopes} AND i.terms && %s::text[]",
        (*distinct, *scope_params, words),
    )
    idf: dict[str, float] = {}
    for term, df in zip(distinct, found, strict=True):
        weight = math.log((n_docs - int(df) + 0.5) / (int(df) + 0.5))
        idf[term] = weight if weight > 0.0 else 1e-6
    column, join, join_params = embedded_join(op.space_id)
    live_sql, live_params = live_condition(op.now)
    rows = yield Query(
        f"SELECT {COLUMNS}, {column}, s.score FROM engramdb_items i {join} "
        "CROSS JOIN LATERAL (SELECT coalesce(sum(q.idf * ((f.tf * (%s + 1.0)) / "
        "(f.tf + %s * (1 - %s + %s * i.term_count / %s)))), 0) AS score "
        "FROM unnest(%s::text[], %s::float8[]) WITH ORDINALITY AS q(term, idf, n) "
        "CROSS JOIN LATERAL (SELECT coalesce(cardinality(array_positions(i.terms, q.term)), 0)"
        "::float8 AS tf) f WHERE f.tf > 0) s "
        f"WHERE {in_scopes} AND {live_sql} AND i.terms && %s::text[]{where_filter(op.filter)} "
        "ORDER BY floor(s.score * 1073741824.0::float8) DESC, i.created_at DESC, i.id DESC "
        f"LIMIT {int(op.k)}",
        (
            *join_params,
            *_BM25_CONSTANTS,
            total_len / n_docs,
            words,
            [idf[term] for term in words],
            *scope_params,
            *live_params,
            words,
        ),
    )
    good, bad = decoded(rows)
    hits = tuple(
        SearchHit(record, quantised(float(row[ITEM_WIDTH + 1])), optional_time(row[ITEM_WIDTH]))
        for record, row in good
    )
    counts = dict(zip(distinct, found, strict=True))
    statistics = TermStatistics(n_docs, tuple(int(counts[term]) for term in words))
    return SearchResult(hits, tuple(sorted(bad)), statistics=statistics if hits else None)


_BM25_CONSTANTS = (BM25Index.K1, BM25Index.K1, BM25Index.B, BM25Index.B)


HANDLERS: dict[type, Any] = {
    SearchVectors: _search_vectors,
    SearchLexical: _search_lexical,
}
