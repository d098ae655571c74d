"""Stepped plans: ops that need Python between their statements.

:class:`VectorSearch` runs ``SearchVectors`` over the vector cache:

1. read the space's dimensions (a query of another size is refused), the generations of
   the selected scopes and the ids the search may not return (expired ones; with a
   filter, the eligible ones instead);
2. reload every cache entry whose generation moved: its packed segments and the rows
   between them (``pack``), page by page, each page read with the scope's generation (a
   change between pages starts the entry over);
3. rank in Python (an entry that keeps only codes, past its ``floats_up_to``, first names
   the candidates it scores exactly, and their float32 rows are read), then read the
   winners' records together with the generations again (and the batch's other reads,
   ``extra``): if a generation moved since step 1 (possible on D1, where steps are
   separate batches), start over. So the scores, the records and
   the other reads always come from one snapshot: in ``sqlite3`` everything is one read
   transaction anyway.

:func:`repair_vectors` runs ``RepairVectors``: it reads a page of vectors, reports those
that do not decode and writes the derived index data of those that lack it.
"""

from __future__ import annotations

from collections.abc import Container, Generator, Sequence

from engramdb._base.clock import to_ms
from engramdb._base.errors import StoreError
from engramdb._vectors.exact import Excluding
from engramdb._vectors.index_data import index_data_many, scrub
from engramdb.ranking._ties import ranked_pairs
from engramdb.store import (
    RepairVectors,
    SearchHit,
    SearchResult,
    SearchVectors,
    VectorRepair,
    check_query,
)
from engramdb.store._sqlite.cache import SqliteVectorCache
from engramdb.store._sqlite.fragments import embedded_join, scope_condition, where_filter
from engramdb.store._sqlite.pack import load_scope
from engramdb.store._sqlite.rows import (
    Rows,
    Statement,
    columns,
    embedded_time,
    expired_bound,
    live_bound,
)
from engramdb.store.rows import as_json, decoded

__all__ = ["VectorSearch", "repair_vectors"]

_ATTEMPTS = 5
IDS_PER_STATEMENT = 20_000
"""Most ids one statement of an entry that keeps only codes names (a JSON array of
about 600 KB): an exact search reads every eligible row, and a Durable Object's SQL
refuses a value above 2 MB; more ids go in more statements of the same step."""


class VectorSearch:
    """The stepped plan of one ``SearchVectors`` op."""

    def __init__(self, op: SearchVectors, cache: SqliteVectorCache) -> None:
        self.op = op
        self.cache = cache
        self.dimensions = 0  # the space's, read in step 1
        self.items = 0  # the selected scopes' items, read in step 1
        self.where = where_filter(op.filter)  # refuses a filter too long, before any I/O

    def run(
        self, extra: Sequence[Statement] = ()
    ) -> Generator[list[Statement], list[Rows], tuple[SearchResult, list[Rows]]]:
        """Return the search's result and the rows of ``extra`` (read with its records)."""
        op = self.op
        if op.k <= 0 or not (op.scopes.exact or op.scopes.prefixes):  # finds nothing
            space_rows, *extra_rows = yield [self._space(), *extra]
            self._check(space_rows)
            return SearchResult(), extra_rows
        for _attempt in range(_ATTEMPTS):
            generations, allowed = yield from self._first()
            held = {(key, op.space_id) for key in generations}
            for key, generation in generations.items():
                if self.cache.generation(key, op.space_id) != generation:
                    yield from self._load(key)
                    self.cache.fit(keep=held)  # before any shortlist: every part may go
            wanted: dict[str, list[str]] = {}  # scope key -> ids to score from their rows
            for key in generations:
                ids = self.cache.shortlist(
                    key, op.space_id, op.query, op.k, exact=op.exact, allowed=allowed
                )
                if ids is not None:
                    wanted[key] = ids
            blobs: dict[str, bytes] = {}
            if wanted:
                ids = [i for ids in wanted.values() for i in ids]
                parts = yield [
                    self._vectors_of(ids[at : at + IDS_PER_STATEMENT])
                    for at in range(0, len(ids), IDS_PER_STATEMENT)
                ]
                blobs = {str(row[0]): bytes(row[1]) for rows in parts for row in rows}
            found: list[tuple[str, float]] = []
            skipped: list[str] = []
            newer: dict[str, tuple[int, str]] = {}  # id -> (created_at, id)
            for key in generations:
                pairs = None
                if key in wanted:  # an entry that keeps only codes: score the rows read
                    pairs = [(i, blobs[i]) for i in wanted[key] if i in blobs]
                hits, bad = self.cache.search(
                    key, op.space_id, op.query, op.k, exact=op.exact, allowed=allowed, vectors=pairs
                )
                found += hits
                skipped += bad
                entry = self.cache.entry(key, op.space_id)
                if entry is not None and len(generations) > 1:
                    newer.update((i, entry.newer(i)) for i, _ in hits)
            self.cache.fit(keep=held)  # what this search's scores built (no entry in use)
            # score descending, equal scores newest first, at most k (one scope's index
            # answers so already: quantised, ordered by its entry's ``newer``)
            ranked = (
                found if len(generations) == 1 else ranked_pairs(found, op.k, newer.__getitem__)
            )
            used = {key: self.cache.generation(key, op.space_id) for key in generations}
            column, join, join_params = embedded_join(op.space_id)
            # The ids first, then each one's item by its key (``CROSS JOIN``): no
            # ephemeral table of the ids as ``IN (...)`` builds, a sixth less time.
            rows = yield [
                Statement(
                    f"SELECT {columns()}, {column} FROM json_each(?) AS wanted "
                    f"CROSS JOIN items ON items.id = wanted.value{join} "
                    f"WHERE {live_bound()}{self.where}",
                    (as_json([item_id for item_id, _ in ranked]), *join_params, to_ms(op.now)),
                ),
                self._generations_of(list(used)),
                *extra,
            ]
            if {str(k): int(g) for k, g in rows[1]} != used:
                continue  # the scope changed between the steps: search again
            records = {str(row[0]): row for row in rows[0]}
            entries = [self.cache.entry(key, op.space_id) for key in generations]
            embedded = sum(len(e.index) + len(e.corrupt) for e in entries if e is not None)
            scores = dict(ranked)
            good, bad = decoded(records[item_id] for item_id, _ in ranked if item_id in records)
            answered = tuple(
                SearchHit(record, scores[record.id], embedded_time(row, record))
                for record, row in good
            )
            skipped += bad
            coverage = (embedded, self.items)
            return SearchResult(answered, tuple(sorted(set(skipped))), coverage), list(rows[2:])
        raise StoreError(
            f"the scopes of a vector search changed during {_ATTEMPTS} attempts to read "
            "them consistently; retry the recall"
        )

    def _vectors_of(self, ids: list[str]) -> Statement:
        """The float32 blobs of the items ``ids`` in the search's space: what an entry
        that keeps only codes scores exactly (an id gone since is simply missing; the
        generations read with the records then start the search over). ``CROSS JOIN``
        keeps SQLite's planner from scanning the space's vectors for the few ids: the ids
        first, then each one's item and vector by primary key."""
        return Statement(
            "SELECT items.id, vectors.vector FROM json_each(?) AS wanted "
            "CROSS JOIN items ON items.id = wanted.value "
            "CROSS JOIN vectors ON vectors.space_id = ? "
            "AND vectors.content_sha256 = items.content_sha256",
            (as_json(ids), self.op.space_id),
        )

    def _generations_of(self, keys: list[str]) -> Statement:
        return Statement(
            "SELECT scope_key, generation FROM scope_generations "
            "WHERE scope_key IN (SELECT value FROM json_each(?))",
            (as_json(keys),),
        )

    def _space(self) -> Statement:
        return Statement("SELECT dimensions FROM spaces WHERE id = ?", (self.op.space_id,))

    def _check(self, space_rows: Rows) -> bool:
        """Take the space's dimensions from ``space_rows`` and refuse a query of another
        size (``check_query``); whether the space is registered."""
        if not space_rows:
            return False
        self.dimensions = int(space_rows[0][0])
        check_query(self.op, self.dimensions)
        return True

    def _first(
        self,
    ) -> Generator[list[Statement], list[Rows], tuple[dict[str, int], Container[str] | None]]:
        """The selected scopes' generations and the eligibility of their items; the
        space's dimensions, against which the query is checked (an unregistered space
        selects no scope: it holds no vectors)."""
        op = self.op
        where, params = scope_condition(op.scopes, "scope_generations.scope_key")
        item_where, item_params = scope_condition(op.scopes)
        scope_where, counted = scope_condition(op.scopes, "scopes.scope_key")
        if op.filter is not None:
            eligibility = Statement(
                f"SELECT items.id FROM items WHERE {item_where} AND {live_bound()}{self.where}",
                (*item_params, to_ms(op.now)),
            )
        else:
            eligibility = Statement(
                f"SELECT items.id FROM items WHERE {item_where} AND {expired_bound()}",
                (*item_params, to_ms(op.now)),
            )
        space_rows, generation_rows, id_rows, count_rows = yield [
            self._space(),
            Statement(f"SELECT scope_key, generation FROM scope_generations WHERE {where}", params),
            eligibility,
            Statement(f"SELECT coalesce(sum(items), 0) FROM scopes WHERE {scope_where}", counted),
        ]
        self.items = int(count_rows[0][0])
        if not self._check(space_rows):
            return {}, None
        generations = {str(key): int(generation) for key, generation in generation_rows}
        ids = {str(row[0]) for row in id_rows}
        allowed: Container[str] | None
        allowed = ids if op.filter is not None else Excluding(ids) if ids else None
        return generations, allowed

    def _load(self, key: str) -> Generator[list[Statement], list[Rows], None]:
        """Reload one scope's entry (``pack.load_scope``: its packed segments and the
        rows between them, page by page)."""
        space_id = self.op.space_id
        entry = yield from load_scope(key, space_id, self.dimensions, self.cache)
        if entry is None:
            self.cache.drop(key, space_id)
        else:
            self.cache.install(key, space_id, entry)


def repair_vectors(op: RepairVectors) -> Generator[list[Statement], list[Rows], VectorRepair]:
    """Scan a page of vectors: report the corrupt ones (a blob that is not a finite unit
    vector or no longer matches its CRC-32, or index data that is not what the blob
    derives), refresh missing or older derived data."""
    (rows,) = yield [
        Statement(
            "SELECT vectors.content_sha256, vectors.vector, vectors.index_data, "
            "coalesce(spaces.dimensions, vectors.dimensions), "
            "(SELECT min(items.text) FROM items "
            "WHERE items.content_sha256 = vectors.content_sha256) "
            "FROM vectors LEFT JOIN spaces ON spaces.id = vectors.space_id "
            "WHERE vectors.space_id = ? AND vectors.content_sha256 > ? "
            "ORDER BY vectors.content_sha256 LIMIT ?",
            (op.space_id, op.after, max(0, int(op.limit))),
        )
    ]
    blobs = [bytes(row[1]) for row in rows]
    records = [None if row[2] is None else bytes(row[2]) for row in rows]
    groups: dict[int, list[int]] = {}  # dimensions -> row positions, in order
    for position, row in enumerate(rows):
        groups.setdefault(int(row[3]), []).append(position)
    unsound: set[int] = set()
    stale: dict[int, list[tuple[str, bytes]]] = {}
    for dimensions, positions in groups.items():
        bad, old = scrub([blobs[p] for p in positions], [records[p] for p in positions], dimensions)
        unsound.update(positions[i] for i in bad)
        if old:
            stale[dimensions] = [(str(rows[positions[i]][0]), blobs[positions[i]]) for i in old]
    corrupt = [
        (str(row[0]), str(row[4]))
        for p, row in enumerate(rows)
        if p in unsound and row[4] is not None
    ]
    updates: list[Statement] = []
    for dimensions, pairs in stale.items():
        derived = index_data_many([blob for _, blob in pairs], dimensions)
        updates += [
            Statement(
                "UPDATE vectors SET index_data = ? WHERE space_id = ? AND content_sha256 = ?",
                (data, op.space_id, sha),
            )
            for (sha, _), data in zip(pairs, derived, strict=True)
        ]
    if updates:
        yield updates
    last = str(rows[-1][0]) if len(rows) == op.limit and rows else None
    return VectorRepair(tuple(corrupt), last)
