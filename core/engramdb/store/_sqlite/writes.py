"""The plans of writes, and the errors of a batch whose guard failed.

Conditional writes are *guards*: an ``INSERT INTO engramdb_guards`` that inserts a row
only when the condition fails, so that the row's named ``CHECK`` aborts the statement and
with it the whole batch (D1 has no interactive transactions, so the condition must be
checked inside the batch). :func:`guard_failure` recognises the abort in the driver's
error, and :func:`explain` turns it into the error the caller sees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from itertools import groupby
from typing import Any, Final

from engramdb._base.clock import from_ms, to_ms
from engramdb._base.errors import ConflictError, NotFoundError, ValidationError
from engramdb._base.types import MemoryRecord, Utility, scope_key
from engramdb._lexical.bm25 import token_count
from engramdb._vectors.index_data import unit_index_data
from engramdb.store import (
    DeleteItem,
    DeleteItems,
    DropSpace,
    Op,
    PatchItem,
    PurgeExpired,
    PutItem,
    PutVector,
    RegisterSpace,
    RestoreItem,
)
from engramdb.store._outcomes import check_restore
from engramdb.store._sqlite.fragments import Planned, no_result, scope_condition, where_filter
from engramdb.store._sqlite.rows import Rows, Statement, columns, expired, live
from engramdb.store._sqlite.schema import SEGMENT_COVERING
from engramdb.store.rows import ITEM_COLUMNS, as_json, item_row, record_from, scope_path
from engramdb.store.semantics import State, resolve

__all__ = [
    "delete_item",
    "delete_items",
    "drop_space",
    "explain",
    "explain_reads",
    "guard_failure",
    "patch_item",
    "purge_expired",
    "put_items",
    "put_vectors",
    "register_space",
    "restore_items",
]

# Item rows per JSON payload of a put: few statements matter, since FTS5 writes out a
# segment at every statement's savepoint (10k rows: 2.6x slower one per statement,
# ``python -m bench.writes``); a payload stays well under D1's 2,000,000-byte limit on one
# bound value (a single larger row goes alone).
_PUT_ROWS = 4096
_PUT_BYTES = 1_000_000
_GUARDS: Final = ("not_found", "conflict", "other_scope", "wrong_dimensions")


def _guard(column: str, select: str, params: tuple[Any, ...] = ()) -> Statement:
    """A statement that aborts with the CHECK ``engramdb_<column>`` when ``select``
    returns a row (``select`` picks the failing rows; LIMIT 1 is added)."""
    return Statement(f"INSERT INTO engramdb_guards ({column}) {select} LIMIT 1", params)


def guard_failure(error: BaseException) -> str | None:
    """The guard (``not_found``, ``conflict`` ...) whose CHECK aborted ``error``'s batch."""
    text = str(error)
    for name in _GUARDS:
        if f"engramdb_{name}" in text:
            return name
    return None


def put_items(ops: Sequence[PutItem]) -> Planned:
    """Runs of puts: guards, history, one upsert per JSON payload, scope paths.

    A run is split where ``now`` changes or an id repeats, so each statement sees each
    id once and decides liveness with one clock reading.
    """
    statements: list[Statement] = []
    # Per run: its ops and the positions of its upserts, whose RETURNING rows finish
    # (an id is once in a run, not once in the batch).
    upserts: list[tuple[list[PutItem], list[int]]] = []
    for run in _runs(ops):
        upserts.append((run, []))
        now = run[0].now
        alive = live(now)
        keys = as_json(
            [
                [op.record.id, scope_key(op.record.scope), op.expected_revision, op.keep_revisions]
                for op in run
            ]
        )
        joined = "FROM json_each(?) AS new JOIN items ON items.id = json_extract(new.value, '$[0]')"
        # One guard per run: the first row (in op order) that fails, as the failure of
        # its own kind (another scope, then a lost compare-and-set), like op-by-op checks.
        moved = "(items.id IS NOT NULL AND items.scope_key <> json_extract(new.value, '$[1]'))"
        stale = (
            "(json_type(new.value, '$[2]') = 'integer' "
            "AND coalesce(items.revision, 0) <> json_extract(new.value, '$[2]'))"
        )
        statements.append(
            _guard(
                "other_scope, conflict",
                f"SELECT CASE WHEN {moved} THEN 1 END, CASE WHEN NOT {moved} THEN 1 END "
                "FROM json_each(?) AS new LEFT JOIN items "
                f"ON items.id = json_extract(new.value, '$[0]') AND {alive} "
                f"WHERE {moved} OR {stale} ORDER BY new.key",
                (keys,),
            )
        )
        # An expired item is replaced whole: its history and evidence go; a live one
        # keeps them.
        statements += [
            Statement(
                f"DELETE FROM {table} WHERE id IN (SELECT items.id {joined} WHERE NOT {alive})",
                (keys,),
            )
            for table in ("item_revisions", "item_utility", "item_contexts")
        ]
        if any(op.keep_revisions > 0 for op in run):
            statements.append(
                Statement(
                    f"INSERT INTO item_revisions ({', '.join(ITEM_COLUMNS)}) "
                    f"SELECT {columns()} {joined} "
                    f"WHERE {alive} AND json_extract(new.value, '$[3]') > 0",
                    (keys,),
                )
            )
        # Scope rows first: the new items are counted into their scope's row.
        statements.append(_scope_rows(run))
        rows = [[*item_row(op.record), token_count(op.record.text)] for op in run]
        statements += _new_items(rows)
        for payload in _payloads(rows):
            upserts[-1][1].append(len(statements))
            statements.append(Statement(_upsert(alive), (payload,)))
        statements.append(
            Statement(
                "DELETE FROM item_revisions WHERE (id, revision) IN "
                "(SELECT old.id, old.revision FROM json_each(?) AS new "
                "JOIN item_revisions AS old ON old.id = json_extract(new.value, '$[0]') "
                "JOIN items ON items.id = old.id "
                "WHERE old.revision < items.revision - json_extract(new.value, '$[3]'))",
                (keys,),
            )
        )

    def finish(results: list[Rows]) -> list[MemoryRecord]:
        out = []
        moments: dict[datetime, int] = {}  # a run's records share a few creation times
        for run, positions in upserts:
            stored = {
                str(row[0]): (int(row[1]), int(row[2]), int(row[3]))
                for position in positions
                for row in results[position]
            }
            for op in run:
                revision, created, updated = stored[op.record.id]
                record = op.record
                given = moments.get(record.created_at)
                if given is None:
                    given = moments[record.created_at] = to_ms(record.created_at)
                if revision != record.revision or created != given:
                    record = replace(
                        record,
                        revision=revision,
                        created_at=from_ms(created),
                        updated_at=from_ms(updated),
                    )
                out.append(record)
        return out

    return statements, finish


def restore_items(ops: Sequence[RestoreItem]) -> Planned:
    """Runs of restores: a conflict guard (a live item holds an id), the old rows of the
    ids (an expired item is replaced whole), then the history, the items and the
    evidence as given, each from one JSON payload.

    SQLite's JSON parser rounds some floats of 16 or 17 significant digits to a
    neighbour, so a float the payload could change (:func:`_inexact`) is written again
    from a bound parameter: the store holds the float given, bit for bit.
    """
    for op in ops:
        check_restore(None, op)
    statements: list[Statement] = []
    for run in _runs(ops):
        alive = live(run[0].now)
        ids = as_json([op.record.id for op in run])
        statements.append(
            _guard(
                "conflict",
                f"SELECT 1 FROM json_each(?) AS new JOIN items ON items.id = new.value AND {alive}",
                (ids,),
            )
        )
        statements += [
            Statement(f"DELETE FROM {table} WHERE id IN (SELECT value FROM json_each(?))", (ids,))
            for table in ("item_revisions", "item_utility", "item_contexts")
        ]
        history = [item_row(earlier) for op in run for earlier in op.history]
        selected = ", ".join(f"json_extract(value, '$[{i}]')" for i in range(len(ITEM_COLUMNS)))
        statements += [
            Statement(
                f"INSERT INTO item_revisions ({', '.join(ITEM_COLUMNS)}) "
                f"SELECT {selected} FROM json_each(?)",
                (payload,),
            )
            for payload in _payloads(history)
        ]
        statements.append(_scope_rows(run))
        rows = [[*item_row(op.record), token_count(op.record.text)] for op in run]
        statements += _new_items(rows)
        statements += [Statement(_RESTORE_UPSERT, (payload,)) for payload in _payloads(rows)]
        evidence = [(op.record.id, op.utility) for op in run if op.utility is not None]
        statements += _evidence(evidence)
        for op in run:
            if _inexact(op.record.importance):
                statements.append(_exact("items", "importance", op.record.importance, op.record.id))
            statements += [
                _exact("item_revisions", "importance", e.importance, e.id, "revision", e.revision)
                for e in op.history
                if _inexact(e.importance)
            ]
    return statements, lambda _results: [op.record for op in ops]


def _evidence(evidence: list[tuple[str, Utility]]) -> list[Statement]:
    """The statements that write ``evidence`` (none exists for these ids), exactly."""
    if not evidence:
        return []
    utility = [
        [
            item_id,
            u.exposures,
            _ms(u.last_exposed_at),
            u.eval_count,
            float(u.eval_sum),
            None if u.manual is None else float(u.manual),
            _ms(u.manual_updated_at),
            _ms(u.reinforced_at),
        ]
        for item_id, u in evidence
    ]
    contexts = [
        [item_id, c.key, c.eval_count, float(c.eval_sum), to_ms(c.updated_at)]
        for item_id, u in evidence
        for c in u.contexts
    ]
    statements = [
        Statement(
            "INSERT INTO item_utility (id, exposures, last_exposed_at, eval_count, eval_sum, "
            "manual, manual_updated_at, reinforced_at) SELECT "
            + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(8))
            + " FROM json_each(?)",
            (payload,),
        )
        for payload in _payloads(utility)
    ]
    statements += [
        Statement(
            "INSERT INTO item_contexts (id, key, eval_count, eval_sum, updated_at) SELECT "
            + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(5))
            + " FROM json_each(?)",
            (payload,),
        )
        for payload in _payloads(contexts)
    ]
    for item_id, u in evidence:
        if _inexact(u.eval_sum):
            statements.append(_exact("item_utility", "eval_sum", u.eval_sum, item_id))
        if u.manual is not None and _inexact(u.manual):
            statements.append(_exact("item_utility", "manual", u.manual, item_id))
        statements += [
            _exact("item_contexts", "eval_sum", c.eval_sum, item_id, "key", c.key)
            for c in u.contexts
            if _inexact(c.eval_sum)
        ]
    return statements


def _ms(moment: Any) -> int | None:
    return None if moment is None else to_ms(moment)


def _inexact(value: float) -> bool:
    """Whether SQLite's JSON parser may round ``value``: a float of more than 15
    significant digits (its shortest repr), which SQLite 3.40 parses to a neighbour
    about nine times in ten; 15 or fewer it parses exactly."""
    mantissa = repr(float(value)).lstrip("-").partition("e")[0].replace(".", "")
    return len(mantissa.strip("0")) > 15


def _exact(
    table: str, column: str, value: float, item_id: str, key: str = "", key_value: object = None
) -> Statement:
    """Write ``value`` into ``column`` of ``item_id``'s row of ``table`` (with ``key``:
    the row whose ``key`` column is ``key_value``) from a bound parameter."""
    where, params = "id = ?", (float(value), item_id)
    if key:
        return Statement(
            f"UPDATE {table} SET {column} = ? WHERE {where} AND {key} = ?", (*params, key_value)
        )
    return Statement(f"UPDATE {table} SET {column} = ? WHERE {where}", params)


def _runs(ops: Sequence[Any]) -> Iterator[list[Any]]:
    """Consecutive ops with one ``now`` and no id twice."""
    for _now, group in groupby(ops, key=lambda op: op.now):
        run: list[PutItem] = []
        ids: set[str] = set()
        for op in group:
            if op.record.id in ids:
                yield run
                run, ids = [], set()
            run.append(op)
            ids.add(op.record.id)
        yield run


_RESTORE_UPSERT = (
    f"INSERT INTO items ({', '.join((*ITEM_COLUMNS, 'tokens'))}) SELECT "
    + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(len(ITEM_COLUMNS) + 1))
    + " FROM json_each(?) WHERE true ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in (*ITEM_COLUMNS[1:], "tokens"))
)
"""Insert a restore's rows as given; an expired item with the id is overwritten whole
(its row updated, so a vector its text shares with the new one stays)."""


def _upsert(alive: str) -> str:
    """Insert the JSON payload's rows (the item columns, then the text's token count);
    a live id gets its next revision, an expired one is replaced. ``WHERE true`` keeps
    ON CONFLICT from being read as a join constraint (SQLite's documented upsert
    parsing rule)."""
    stored = (*ITEM_COLUMNS, "tokens")
    names = ", ".join(stored)
    values = ", ".join(f"json_extract(value, '$[{i}]')" for i in range(len(stored)))
    sets = ", ".join(
        f"{name} = excluded.{name}"
        for name in stored
        if name not in ("id", "created_at", "updated_at", "revision")
    )
    return (
        f"INSERT INTO items ({names}) SELECT {values} FROM json_each(?) WHERE true "
        f"ON CONFLICT (id) DO UPDATE SET {sets}, "
        f"created_at = CASE WHEN {alive} THEN items.created_at ELSE excluded.created_at END, "
        f"updated_at = CASE WHEN {alive} THEN max(excluded.updated_at, items.created_at) "
        "ELSE excluded.updated_at END, "
        f"revision = CASE WHEN {alive} THEN items.revision + 1 ELSE excluded.revision END "
        "RETURNING id, revision, created_at, updated_at"
    )


def _payloads(rows: Sequence[Sequence[Any]]) -> Iterator[str]:
    """JSON arrays of up to 4,096 rows, halved until at most ``_PUT_BYTES`` of UTF-8 (or
    one row)."""
    pending = [rows[start : start + _PUT_ROWS] for start in range(0, len(rows), _PUT_ROWS)][::-1]
    while pending:  # reversed: pop() takes the chunks in order
        chunk = pending.pop()
        payload = as_json(chunk)
        size = len(payload) if payload.isascii() else len(payload.encode("utf-8"))
        if size > _PUT_BYTES and len(chunk) > 1:
            half = len(chunk) // 2
            pending += [chunk[half:], chunk[:half]]
            continue
        yield payload


def patch_item(op: PatchItem) -> Planned:
    alive = live(op.now)
    # The scope guard is part of the not-found guard: checked and written in one batch.
    where, scoped = scope_condition(op.scopes) if op.scopes is not None else ("1", ())
    current = f"(SELECT revision FROM items WHERE id = ? AND {alive} AND {where})"
    if op.expected_revision is None:
        guard = _guard("not_found", f"SELECT 1 WHERE {current} IS NULL", (op.id, *scoped))
    else:
        guard = _guard(
            "not_found, conflict",
            "SELECT CASE WHEN r IS NULL THEN 1 END, CASE WHEN r IS NOT NULL THEN 1 END "
            f"FROM (SELECT {current} AS r) WHERE r IS NULL OR r <> {int(op.expected_revision)}",
            (op.id, *scoped),
        )
    sets: list[str] = []
    params: list[Any] = []
    if isinstance(op.text, str):
        sets.append(f"tokens = {token_count(op.text)}")
    for name, value in op.changes().items():
        if value is None:
            sets.append(f"{name} = NULL")
            continue
        sets.append(f"{name} = ?")
        if name in ("metadata", "labels"):
            params.append(as_json(value) if value else "{}")
        elif name == "expires_at":
            params.append(to_ms(value))
        elif name == "importance":
            params.append(float(value))
        else:
            params.append(value)
    statements = [guard]
    if op.keep_revisions > 0:
        statements.append(
            Statement(
                f"INSERT INTO item_revisions ({', '.join(ITEM_COLUMNS)}) "
                f"SELECT {columns()} FROM items WHERE id = ?",
                (op.id,),
            )
        )
    statements.append(
        Statement(
            f"UPDATE items SET {''.join(s + ', ' for s in sets)}revision = revision + 1, "
            f"updated_at = max({to_ms(op.now)}, created_at) WHERE id = ? RETURNING {columns()}",
            (*params, op.id),
        )
    )
    statements.append(
        Statement(
            "DELETE FROM item_revisions WHERE id = ? AND revision < "
            f"(SELECT revision FROM items WHERE id = ?) - {int(op.keep_revisions)}",
            (op.id, op.id),
        )
    )
    update = len(statements) - 2
    return statements, lambda results: record_from(results[update][0])


def delete_item(op: DeleteItem) -> Planned:
    where, params = scope_condition(op.scopes) if op.scopes is not None else ("1", ())
    return [
        Statement(f"DELETE FROM items WHERE id = ? AND {where} RETURNING id", (op.id, *params))
    ], lambda results: bool(results[0])


def purge_expired(op: PurgeExpired) -> Planned:
    return [
        Statement(
            "DELETE FROM items WHERE id IN (SELECT id FROM items WHERE "
            f"{expired(op.now)} ORDER BY expires_at, id LIMIT {int(op.limit)}) RETURNING id"
        ),
        Statement(f"DELETE FROM selections WHERE expires_at <= {to_ms(op.now)}"),
    ], lambda results: len(results[0])


def delete_items(op: DeleteItems) -> Planned:
    where, params = scope_condition(op.scopes)
    return [
        Statement(f"DELETE FROM items WHERE {where}{where_filter(op.filter)} RETURNING id", params)
    ], lambda results: len(results[0])


def put_vectors(ops: Sequence[PutVector]) -> Planned:
    """One insert per vector with its derived index data (the ``sqlite3`` driver runs a
    run of them as one ``executemany``; a blob cannot travel inside JSON), after a guard
    against a vector of an unregistered space or whose size is not its space's."""
    derived = unit_index_data([op.vector for op in ops])
    sizes = as_json(sorted({(op.space_id, len(op.vector) // 4) for op in ops}))
    statements = [
        _guard(
            "wrong_dimensions",
            "SELECT 1 FROM json_each(?) AS v LEFT JOIN spaces "
            "ON spaces.id = json_extract(v.value, '$[0]') "
            "WHERE spaces.dimensions IS NOT json_extract(v.value, '$[1]')",
            (sizes,),
        )
    ]
    statements += _new_vectors(ops)
    moments: dict[datetime, int] = {}  # a batch's vectors share a few embedding times
    for position, op in enumerate(ops):
        embedded_at = moments.get(op.embedded_at)
        if embedded_at is None:
            embedded_at = moments[op.embedded_at] = to_ms(op.embedded_at)
        statements.append(
            Statement(
                _PUT_VECTOR_REPLACE if op.replace else _PUT_VECTOR,
                (
                    op.space_id,
                    op.content_sha256,
                    len(op.vector) // 4,
                    embedded_at,
                    bytes(op.vector),
                    derived[position],
                ),
            )
        )
    return statements, no_result


_PUT_VECTOR_HEAD: Final = (
    "INSERT INTO vectors (space_id, content_sha256, dimensions, embedded_at, vector, "
    "index_data) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (space_id, content_sha256) "
)
_PUT_VECTOR_REPLACE: Final = (
    f"{_PUT_VECTOR_HEAD}DO UPDATE SET dimensions = excluded.dimensions, "
    "embedded_at = excluded.embedded_at, vector = excluded.vector, "
    "index_data = excluded.index_data"
)
_PUT_VECTOR: Final = f"{_PUT_VECTOR_HEAD}DO NOTHING"


def register_space(op: RegisterSpace) -> Planned:
    s = op.space
    variant = "NULL" if s.variant is None else "?"
    params: list[Any] = [s.id, s.provider, s.model, s.dimensions]
    if s.variant is not None:
        params.append(s.variant)
    params.append(to_ms(op.now))
    sql = (
        "INSERT INTO spaces (id, provider, model, dimensions, variant, created_at) "
        f"VALUES (?, ?, ?, ?, {variant}, ?) ON CONFLICT (id) DO NOTHING"
    )
    return [Statement(sql, tuple(params))], no_result


def drop_space(op: DropSpace) -> Planned:
    """The space's packed segments go first (then each vector's delete finds none)."""
    return [
        Statement("DELETE FROM vector_segments WHERE space_id = ?", (op.space_id,)),
        Statement("DELETE FROM vectors WHERE space_id = ? RETURNING 1", (op.space_id,)),
        Statement("DELETE FROM spaces WHERE id = ?", (op.space_id,)),
    ], lambda results: len(results[1])


# -- errors of guarded writes ---------------------------------------------------------------


def explain(guard: str, ops: Sequence[Op], rows: list[Rows]) -> Exception:
    """The error of a batch aborted by ``guard``: the first op's that fails when the
    batch is replayed through the reference semantics (:func:`engramdb.store.semantics.resolve`)
    over ``rows``, the answers of :func:`explain_reads` read after the abort (the items
    the batch's ops name, as they were before it, and the spaces); or, if none fails
    (the store changed meanwhile), an error of the guard's class about the batch."""
    item_rows, space_rows = rows
    state = State.of(
        (record_from(row) for row in item_rows),
        {str(space): int(size) for space, size in space_rows},
    )
    try:
        resolve(ops, state)
    except (ValidationError, NotFoundError, ConflictError) as error:
        return error
    if guard == "not_found":
        return NotFoundError("a memory of this batch was forgotten or expired while it ran")
    if guard == "conflict":
        return ConflictError("a memory of this batch changed while it ran; read it and retry")
    if guard == "other_scope":
        return ValidationError("an id of this batch already belongs to another scope")
    return ValidationError(
        "a space of this batch changed while it ran; register it and put its vectors again"
    )


def explain_reads(ops: Sequence[Op]) -> list[Statement]:
    """What :func:`explain` reads: the items the ops name, and the spaces."""
    ids = [
        op.id if isinstance(op, PatchItem) else op.record.id
        for op in ops
        if isinstance(op, PatchItem | PutItem | RestoreItem)
    ]
    return [
        Statement(
            f"SELECT {columns()} FROM items WHERE id IN (SELECT value FROM json_each(?))",
            (as_json(list(dict.fromkeys(ids))),),
        ),
        Statement("SELECT id, dimensions FROM spaces"),
    ]


def _scope_rows(run: Sequence[PutItem] | Sequence[RestoreItem]) -> Statement:
    """The ``scopes`` rows of the items of ``run`` that have none yet (written before the
    items: :func:`_new_items` counts the new ones into their scope's row)."""
    paths = {scope_key(op.record.scope): scope_path(op.record.scope) for op in run}
    return Statement(
        "INSERT INTO scopes (scope_key, path) SELECT json_extract(value, '$[0]'), "
        "json_extract(value, '$[1]') FROM json_each(?) WHERE true "
        "ON CONFLICT (scope_key) DO NOTHING",
        (as_json(sorted(paths.items())),),
    )


# -- what an insert changes besides its rows (schema 6: set-based, once per statement) ----

_ID, _SCOPE, _TOKENS = ITEM_COLUMNS.index("id"), ITEM_COLUMNS.index("scope_key"), len(ITEM_COLUMNS)


def _new_items(rows: list[list[Any]]) -> list[Statement]:
    """What inserting ``rows`` (item rows with their token count, ids unique) changes
    besides them, for the ids not stored yet (an id stored already is updated, and the
    update triggers see to it): each scope's item and token counts, its generation
    (once), and the segments a new id falls in (new ids are time ordered and usually
    fall past every segment, so this deletes nothing). Run after the scopes' rows
    exist and before the insert, in the same batch (JSON payloads of D1's size, as the
    insert's)."""
    return _in_payloads([[row[_ID], row[_SCOPE], row[_TOKENS]] for row in rows], _new_in)


def _new_in(marks: str) -> list[Statement]:
    """:func:`_new_items` of one JSON payload of ``[id, scope key, tokens]`` rows."""
    new = (
        "WITH new (id, scope_key, tokens) AS (SELECT json_extract(value, '$[0]'), "
        "json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?) "
        "WHERE NOT EXISTS (SELECT 1 FROM items WHERE items.id = json_extract(value, '$[0]'))) "
    )
    covering = SEGMENT_COVERING.format(scope="new.scope_key", space="spaces.id", id="new.id")
    return [
        Statement(
            f"{new}UPDATE scopes SET items = scopes.items + n.items, "
            "tokens = scopes.tokens + n.tokens FROM (SELECT scope_key, count(*) AS items, "
            "sum(tokens) AS tokens FROM new GROUP BY scope_key) AS n "
            "WHERE scopes.scope_key = n.scope_key",
            (marks,),
        ),
        Statement(
            f"{new}INSERT INTO scope_generations (scope_key, generation) "
            "SELECT DISTINCT scope_key, 1 FROM new WHERE true "
            "ON CONFLICT (scope_key) DO UPDATE SET generation = generation + 1",
            (marks,),
        ),
        Statement(
            f"{new}DELETE FROM vector_segments WHERE rowid IN (SELECT s.rowid FROM new, spaces "
            f"JOIN vector_segments AS s ON s.rowid = {covering} WHERE s.last_id >= new.id)",
            (marks,),
        ),
    ]


def _new_vectors(ops: Sequence[PutVector]) -> list[Statement]:
    """What inserting the vectors of ``ops`` changes besides them, for the (space,
    content hash) pairs not stored yet (a stored one is kept or updated, and the update
    triggers see to it): the generation (once) of each scope with an item of such a
    text, and the segments that hold such an item. Run before the inserts, in the same
    batch (JSON payloads of D1's size)."""
    return _in_payloads(sorted({(op.space_id, op.content_sha256) for op in ops}), _fresh_in)


def _fresh_in(keys: str) -> list[Statement]:
    """:func:`_new_vectors` of one JSON payload of ``[space id, content hash]`` pairs."""
    fresh = (
        "WITH fresh (space_id, content_sha256) AS (SELECT DISTINCT "
        "json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?) "
        "WHERE NOT EXISTS (SELECT 1 FROM vectors WHERE vectors.space_id = "
        "json_extract(value, '$[0]') AND vectors.content_sha256 = json_extract(value, '$[1]'))) "
    )
    covering = SEGMENT_COVERING.format(
        scope="items.scope_key", space="fresh.space_id", id="items.id"
    )
    return [
        Statement(
            f"{fresh}UPDATE scope_generations SET generation = generation + 1 WHERE scope_key IN "
            "(SELECT items.scope_key FROM fresh JOIN items "
            "ON items.content_sha256 = fresh.content_sha256)",
            (keys,),
        ),
        Statement(
            f"{fresh}DELETE FROM vector_segments WHERE rowid IN (SELECT s.rowid FROM fresh "
            "JOIN items ON items.content_sha256 = fresh.content_sha256 "
            f"JOIN vector_segments AS s ON s.rowid = {covering} WHERE s.last_id >= items.id)",
            (keys,),
        ),
    ]


def _in_payloads(
    rows: Sequence[Sequence[Any]], plan: Callable[[str], list[Statement]]
) -> list[Statement]:
    """The statements ``plan`` makes of each JSON payload of ``rows`` (see _payloads)."""
    return [statement for payload in _payloads(rows) for statement in plan(payload)]
