"""The policy ops on PostgreSQL: selection receipts and per-item evidence.

A receipt is consumed with one ``DELETE ... RETURNING``: of two connections consuming
it at once, the second waits for the first's row lock and then finds nothing, so exactly
one evaluation is applied. Evidence rows are read ``FOR UPDATE`` and changed with the
core's outcome functions (``_outcomes.evaluated``), so every store reaches the same
values.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engramdb import ContextUtility, Utility
from engramdb.driver import from_ms, to_ms
from engramdb.store import (
    ConsumeSelection,
    GetUtility,
    RecordSelection,
    RestoreItem,
    SetManual,
    TrimScope,
    check_restore,
    evaluated,
    exposed,
    live,
    manually_valued,
    scope_key,
)
from engramdb.store.rows import record_from

from ._items import remove, restorable, restore_record, restore_records
from ._sql import COLUMNS, Context, Flow, Query, each

__all__ = ["HANDLERS", "RUNS"]

_UTILITY_COLUMNS = (
    "id, exposures, last_exposed_at, eval_count, eval_sum, manual, manual_updated_at, "
    "reinforced_at, contexts"
)


def _decode(row: Sequence[Any]) -> Utility:
    contexts = tuple(
        ContextUtility(str(key), int(count), float(total), from_ms(int(updated)))
        for key, count, total, updated in json.loads(row[8])
    )
    return Utility(
        exposures=int(row[1]),
        last_exposed_at=None if row[2] is None else from_ms(int(row[2])),
        eval_count=int(row[3]),
        eval_sum=float(row[4]),
        manual=None if row[5] is None else float(row[5]),
        manual_updated_at=None if row[6] is None else from_ms(int(row[6])),
        reinforced_at=None if row[7] is None else from_ms(int(row[7])),
        contexts=contexts,
    )


def _encode(item_id: str, u: Utility) -> tuple[Any, ...]:
    def ms(value: Any) -> int | None:
        return None if value is None else to_ms(value)

    contexts = [[c.key, c.eval_count, c.eval_sum, to_ms(c.updated_at)] for c in u.contexts]
    return (
        item_id,
        u.exposures,
        ms(u.last_exposed_at),
        u.eval_count,
        u.eval_sum,
        u.manual,
        ms(u.manual_updated_at),
        ms(u.reinforced_at),
        json.dumps(contexts, ensure_ascii=False, separators=(",", ":")),
    )


def _utilities(ids: Sequence[str], lock: bool) -> Flow:
    if not ids:
        return {}
    rows = yield Query(
        f"SELECT {_UTILITY_COLUMNS} FROM engramdb_utility WHERE id = ANY(%s) ORDER BY id"
        + (" FOR UPDATE" if lock else ""),
        (list(ids),),
    )
    return {str(r[0]): _decode(r) for r in rows}


def _save(changed: dict[str, Utility]) -> Flow:
    if changed:
        yield each(
            f"INSERT INTO engramdb_utility ({_UTILITY_COLUMNS}) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
            "exposures = EXCLUDED.exposures, last_exposed_at = EXCLUDED.last_exposed_at, "
            "eval_count = EXCLUDED.eval_count, eval_sum = EXCLUDED.eval_sum, "
            "manual = EXCLUDED.manual, manual_updated_at = EXCLUDED.manual_updated_at, "
            "reinforced_at = EXCLUDED.reinforced_at, contexts = EXCLUDED.contexts",
            [_encode(item_id, utility) for item_id, utility in changed.items()],
        )


def _live_ids(ids: Sequence[str], now_ms: int) -> Flow:
    """The distinct ``ids`` that are live items, locked, in the order given."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return []
    rows = yield Query(
        "SELECT id FROM engramdb_items WHERE id = ANY(%s) "
        "AND (expires_at IS NULL OR expires_at > %s) ORDER BY id FOR UPDATE",
        (wanted, now_ms),
    )
    found = {r[0] for r in rows}
    return [i for i in wanted if i in found]


def _record_selection(op: RecordSelection, _context: Context) -> Flow:
    now_ms = to_ms(op.now)
    key = scope_key(op.scope)
    ids = list(dict.fromkeys(op.memory_ids))
    yield Query(
        "DELETE FROM engramdb_receipts WHERE scope_key = %s AND expires_at <= %s", (key, now_ms)
    )
    yield Query(
        "INSERT INTO engramdb_receipts (id, scope_key, memory_ids, context, created_at, "
        "expires_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
        "scope_key = EXCLUDED.scope_key, memory_ids = EXCLUDED.memory_ids, "
        "context = EXCLUDED.context, created_at = EXCLUDED.created_at, "
        "expires_at = EXCLUDED.expires_at",
        (op.id, key, json.dumps(ids, ensure_ascii=False), op.context, now_ms, to_ms(op.expires_at)),
    )
    yield Query(
        "DELETE FROM engramdb_receipts WHERE id IN (SELECT id FROM engramdb_receipts "
        "WHERE scope_key = %s ORDER BY created_at DESC, id DESC OFFSET %s)",
        (key, max(0, op.keep)),
    )
    shown = yield from _live_ids(ids, now_ms)
    current = yield from _utilities(shown, True)
    yield from _save({i: exposed(current.get(i, Utility()), op.now) for i in shown})


def _consume_selection(op: ConsumeSelection, _context: Context) -> Flow:
    rows = yield Query(
        "DELETE FROM engramdb_receipts WHERE id = %s AND scope_key = %s "
        "RETURNING memory_ids, context, expires_at",
        (op.id, scope_key(op.scope)),
    )
    if not rows:
        return False
    memory_ids, context, expires_ms = rows[0]
    now_ms = to_ms(op.now)
    if int(expires_ms) <= now_ms:
        return False
    ids = [str(i) for i in json.loads(memory_ids)]
    if ids:
        share = op.score / len(ids)
        evaluated_ids = yield from _live_ids(ids, now_ms)
        current = yield from _utilities(evaluated_ids, True)
        changed = {
            item_id: evaluated(current.get(item_id, Utility()), share, str(context), op)
            for item_id in evaluated_ids
        }
        yield from _save(changed)
    return True


def _set_manual(op: SetManual, _context: Context) -> Flow:
    rows = yield Query(
        f"SELECT {COLUMNS} FROM engramdb_items i WHERE i.id = %s FOR UPDATE", (op.id,)
    )
    record = record_from(rows[0]) if rows else None
    if record is None or not live(record, op.now) or record.scope not in op.scopes:
        return False
    current = yield from _utilities([op.id], True)
    yield from _save({op.id: manually_valued(current.get(op.id, Utility()), op)})
    return True


def _get_utility(op: GetUtility, _context: Context) -> Flow:
    ids = list(dict.fromkeys(op.ids))
    found = yield from _utilities(ids, False)
    return {i: found[i] for i in ids if i in found}


def _restore_item(op: RestoreItem, _context: Context) -> Flow:
    """The item and its history (``_items.restore_record``), then its evidence as given
    (an expired item's went with it)."""
    record = yield from restore_record(op)
    if op.utility is not None:
        yield from _save({record.id: op.utility})
    return record


def _restore_items(ops: Sequence[RestoreItem], context: Context) -> Flow:
    """Consecutive RestoreItem ops as :func:`_restore_item` one by one: set-based
    (``_items.restore_records``, then the evidence in one statement) when
    ``_items.restorable`` allows, else one by one."""
    checked = yield from restorable(ops)
    if not checked:
        records = []
        for op in ops:
            records.append((yield from _restore_item(op, context)))
        return records
    written = ops[:checked]
    records = yield from restore_records(written)
    yield from _save({op.record.id: op.utility for op in written if op.utility is not None})
    if checked < len(ops):
        check_restore(None, ops[checked])  # raises, as the op one by one would
    return records


def _trim_scope(op: TrimScope, _context: Context) -> Flow:
    """Kept first: the most useful (with ``by_utility``), then the newest by
    (created_at, id); ``Utility.value()`` is computed by the core."""
    rows = yield Query(
        "SELECT id, created_at FROM engramdb_items WHERE scope_key = %s "
        "AND (expires_at IS NULL OR expires_at > %s) FOR UPDATE",
        (scope_key(op.scope), to_ms(op.now)),
    )
    utilities: dict[str, Utility] = {}
    if op.by_utility:
        utilities = yield from _utilities([r[0] for r in rows], False)

    def worth(row: Sequence[Any]) -> tuple[float, int, str]:
        value = utilities[row[0]].value() if row[0] in utilities else 0.0
        return (value if op.by_utility else 0.0, int(row[1]), str(row[0]))

    ordered = sorted(rows, key=worth, reverse=True)
    gone = [str(r[0]) for r in ordered[max(0, op.keep) :]]
    yield from remove(gone)
    return len(gone)


HANDLERS: dict[type, Any] = {
    RecordSelection: _record_selection,
    ConsumeSelection: _consume_selection,
    SetManual: _set_manual,
    GetUtility: _get_utility,
    TrimScope: _trim_scope,
    RestoreItem: _restore_item,
}

RUNS: dict[type, Any] = {RestoreItem: _restore_items}
"""The ops written set-based when two or more come in a row (``batch_flow``)."""
