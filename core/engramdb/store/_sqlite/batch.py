"""A batch of store ops as the lists of statements a driver runs.

:func:`run_batch` is a plan (see ``rows.Plan``). The ``sqlite3`` driver runs all of its
yields in one transaction (rolled back when a list fails); D1 runs each yielded list as
one atomic ``batch()``. Every write of a batch is in ONE list (a batch with a vector
search holds only reads, and a repair scan comes alone: ``check_batch``), and the reads
of a batch with vector searches travel with the last search's final read, so that a
recall's two legs and its records are one snapshot on D1 too.

:class:`CacheDelta` keeps cached vector entries current across the batch's own writes,
so that only another writer's changes force a reload.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from itertools import groupby
from typing import Any, Final

from engramdb._base.errors import CorruptDataError, StoreError
from engramdb._base.types import scope_key
from engramdb.store import (
    DeleteItem,
    DeleteItems,
    Op,
    PackVectors,
    PatchItem,
    PurgeExpired,
    PutItem,
    PutVector,
    RepairVectors,
    RestoreItem,
    SearchVectors,
    TrimScope,
    check_batch,
)
from engramdb.store._sqlite.cache import SqliteVectorCache
from engramdb.store._sqlite.fragments import Finish
from engramdb.store._sqlite.pack import PACK_FROM, pack_tails, pack_vectors, tail_checks
from engramdb.store._sqlite.plans import GROUPED, PLANNED, plan
from engramdb.store._sqlite.rows import Rows, Statement
from engramdb.store._sqlite.search import VectorSearch, repair_vectors
from engramdb.store._sqlite.writes import explain, explain_reads, guard_failure
from engramdb.store.rows import as_json

__all__ = ["OPS", "CacheDelta", "run_batch"]

OPS: Final[frozenset[type]] = PLANNED | {SearchVectors, RepairVectors, PackVectors}
"""The op table of the SQLite dialect: the op types :func:`run_batch` answers (every
SQLite-dialect store declares it as its ``OPS``)."""

_DELETES = (DeleteItem, DeleteItems, PurgeExpired, TrimScope)
"""Ops whose statements return the ids of the items they deleted."""


def run_batch(
    ops: Sequence[Op],
    cache: SqliteVectorCache,
    *,
    schema_version: int | None,
    pack_from: int | None = PACK_FROM,
) -> Generator[list[Statement], list[Rows], list[Any]]:
    """Execute ``ops``: yield statement lists, receive their rows, return the op results.

    The driver answers each yielded list with one row list per statement, in order (an
    empty list for statements that return nothing), and throws its errors (as
    ``StoreError``) back in, with the failed list's writes undone (every write of a
    batch is in one list). A batch aborted by a guard raises the caller's error
    (``NotFoundError``, ``ConflictError``, ``ValidationError``) instead.

    A batch without stepped ops is ONE list: one transaction on D1 too. A repair scan
    comes alone (``check_batch``). A batch with vector searches holds only reads, and
    they travel in the last search's final list, so that a recall's legs and records
    are one snapshot.

    A write that puts items into a scope of at least ``pack_from`` items (None: never,
    as D1 passes) then packs the scope's full segments past its last one
    (``pack.pack_tails``): in the writes' transaction on sqlite3, in transactions of
    their own right after it in a Durable Object (a segment is derived data, made only
    if the scope's generation is still the one read).
    """
    check_batch(ops)
    if len(ops) == 1 and isinstance(ops[0], RepairVectors):
        return [(yield from repair_vectors(ops[0]))]
    if len(ops) == 1 and isinstance(ops[0], PackVectors):
        return [(yield from pack_vectors(ops[0]))]
    results: list[Any] = [None] * len(ops)
    searches = {
        p: VectorSearch(op, cache) for p, op in enumerate(ops) if isinstance(op, SearchVectors)
    }
    # Plan everything before the first yield: an op that cannot be planned (a filter
    # too long for a statement) must fail before anything is sent.
    delta = CacheDelta(ops, cache) if CacheDelta.wanted(ops, cache) else None
    statements = delta.generations() if delta else []
    head = len(statements)
    simple = [p for p in range(len(ops)) if p not in searches]
    spans = _planned(ops, simple, statements, schema_version)
    body = len(statements)
    if searches:  # reads only: they travel with the last search's final read
        last = max(searches)
        for position, search in searches.items():
            mine = statements if position == last else []
            results[position], read = yield from search.run(mine)
            if mine:
                _assign(results, spans, read)
        return results
    if delta is not None:
        statements += delta.tail()
    grown, spaces = _grown(ops) if pack_from is not None else ([], [])
    checks = len(statements)
    statements += tail_checks(grown, spaces, pack_from or 0)
    rows: list[Rows] = []
    if statements:
        try:
            rows = yield statements
        except StoreError as exc:
            guard = guard_failure(exc)
            if guard is None:
                raise
            found = yield explain_reads(ops)
            raise explain(guard, ops, found) from exc
        _check_answer(rows, statements)
    _assign(results, spans, rows)
    if delta is not None:
        removed = [
            str(row[0])
            for positions, start, stop, _ in spans
            if isinstance(ops[positions[0]], _DELETES)
            for block in rows[start:stop]
            for row in block
        ]
        delta.apply(rows[:head], rows[body:checks], removed)
    if grown:
        yield from pack_tails(grown, rows[checks:])
    return results


def _grown(ops: Sequence[Op]) -> tuple[list[str], list[str]]:
    """The keys of the scopes the batch puts items into, and the spaces it puts vectors
    in (the only spaces whose segments could hold the new items' vectors), each sorted;
    none when it puts no vector (embedding deferred)."""
    spaces = sorted({op.space_id for op in ops if isinstance(op, PutVector)})
    if not spaces:
        return [], []
    puts = (op for op in ops if isinstance(op, PutItem | RestoreItem))
    return sorted({scope_key(op.record.scope) for op in puts}), spaces


Span = tuple[tuple[int, ...], int, int, Callable[[list[Rows]], list[Any]]]
"""The op positions a planned run answers, its statements' start and stop, and the
function from their rows to one result per position."""


def _planned(
    ops: Sequence[Op], positions: Sequence[int], statements: list[Statement], version: int | None
) -> list[Span]:
    """Append the statements of ``positions`` to ``statements``; return the spans. A run
    of grouped ops is planned (and finished) at once; any other op alone."""
    spans: list[Span] = []
    for kind, run in groupby(positions, key=lambda p: type(ops[p])):
        grouped = GROUPED.get(kind)
        run_positions = tuple(run)
        if grouped is not None:
            start = len(statements)
            planned, finish = grouped([ops[p] for p in run_positions])
            statements += planned
            spans.append((run_positions, start, len(statements), _each(finish, len(run_positions))))
            continue
        for position in run_positions:
            planned, finish = plan(ops[position], version)
            start = len(statements)
            statements += planned
            spans.append(((position,), start, len(statements), _each(finish, 0)))
    return spans


def _each(finish: Finish, count: int) -> Callable[[list[Rows]], list[Any]]:
    """``finish`` answering a list: a grouped run's results (``count`` of them; a run
    whose result is None answers None for each), or one op's result."""

    def answer(rows: list[Rows]) -> list[Any]:
        result = finish(rows)
        if not count:
            return [result]
        return [None] * count if result is None else list(result)

    return answer


def _assign(results: list[Any], spans: list[Span], rows: list[Rows]) -> None:
    for positions, start, stop, finish in spans:
        for position, result in zip(positions, finish(rows[start:stop]), strict=True):
            results[position] = result


def _check_answer(rows: list[Rows], statements: list[Statement]) -> None:
    if len(rows) != len(statements):
        raise CorruptDataError(
            f"the driver answered {len(rows)} row lists for {len(statements)} statements; "
            "this is a driver bug"
        )


_READ_BACK = (
    "SELECT items.scope_key, items.id, vectors.vector, vectors.index_data, items.created_at "
    "FROM items "
    "JOIN vectors ON vectors.space_id = ? AND vectors.content_sha256 = items.content_sha256 "
    "WHERE items.{column} IN (SELECT value FROM json_each(?))"
)


class CacheDelta:
    """Keeps cached entries current across this batch's own writes, without a reload.

    The write list is wrapped: its FIRST statements read the cached scopes' generations
    and its LAST statements read back the final rows the writes touched (items put or
    given a new text, items sharing a newly put vector's hash) and the generations
    again, all in the one transaction (sqlite3) or ``batch()`` (D1) of the writes. An
    entry whose generation equals the "before" value saw no other writer, so the
    batch's effect is applied to it exactly (deleted items and rewritten ones are
    removed, the read-back rows re-added) and it is tagged with the "after" generation.
    Any other entry is left to the generation check of the next search.
    """

    def __init__(self, ops: Iterable[Op], cache: SqliteVectorCache) -> None:
        self.cache = cache
        cached = cache.cached()
        self.keys = sorted({key for key, _ in cached})
        spaces = sorted({space for _, space in cached})
        rewritten: dict[str, str] = {}  # item id -> content hash
        vector_hashes: dict[str, set[str]] = {space: set() for space in spaces}
        for op in ops:
            if isinstance(op, PutItem | RestoreItem):
                rewritten[op.record.id] = op.record.content_sha256
            elif isinstance(op, PatchItem) and isinstance(op.content_sha256, str):
                rewritten[op.id] = op.content_sha256
            elif isinstance(op, PutVector) and op.space_id in vector_hashes:
                vector_hashes[op.space_id].add(op.content_sha256)
        self.rewritten = set(rewritten)
        # Read back, per cached space: every item holding a hash whose vector was put
        # (new items and older ones that gain a vector), and the other items rewritten.
        self.reads: list[tuple[str, Statement]] = []
        for space in spaces:
            hashes = sorted(vector_hashes[space])
            ids = sorted(i for i, sha in rewritten.items() if sha not in vector_hashes[space])
            for column, values in (("content_sha256", hashes), ("id", ids)):
                if values:
                    sql = _READ_BACK.format(column=column)
                    self.reads.append((space, Statement(sql, (space, as_json(values)))))

    @staticmethod
    def wanted(ops: Iterable[Op], cache: SqliteVectorCache) -> bool:
        """Whether the writes may change what a cached entry holds."""
        return bool(len(cache)) and any(
            isinstance(op, (PutItem, RestoreItem, PutVector, *_DELETES))
            or (isinstance(op, PatchItem) and isinstance(op.content_sha256, str))
            for op in ops
        )

    def generations(self) -> list[Statement]:
        return [
            Statement(
                "SELECT scope_key, generation FROM scope_generations "
                "WHERE scope_key IN (SELECT value FROM json_each(?))",
                (as_json(self.keys),),
            )
        ]

    def tail(self) -> list[Statement]:
        return [statement for _, statement in self.reads] + self.generations()

    def apply(self, before_rows: list[Rows], tail_rows: list[Rows], removed: list[str]) -> None:
        before = {str(k): int(g) for rows in before_rows for k, g in rows}
        after = {str(k): int(g) for rows in tail_rows[len(self.reads) :] for k, g in rows}
        found: dict[str, dict[str, list[tuple[object, ...]]]] = {}
        for (space, _), rows in zip(self.reads, tail_rows, strict=False):
            by_key = found.setdefault(space, {})
            for key, item_id, blob, data, created in rows:
                by_key.setdefault(str(key), []).append((item_id, blob, data, created))
        gone = self.rewritten.union(removed)
        changed: list[tuple[str, str]] = []
        for key, space in self.cache.cached():
            start, end = before.get(key), after.get(key)
            if start is None or end is None or start == end:
                continue
            entry = self.cache.entry(key, space)
            if entry is None or entry.generation != start:
                continue  # stale already: the next search reloads it
            for item_id in gone:
                entry.remove(item_id)
            entry.add_rows(found.get(space, {}).get(key, []))
            entry.generation = end
            changed.append((key, space))
        self.cache.fit(changed=changed)
