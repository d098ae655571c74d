"""The plans of the policy ops: selection receipts, exposures, evaluations, manual values.

Evidence lives beside the items (``item_utility``, ``item_contexts``, ``selections``:
migration 4), so recording it touches neither an item's revision nor its full-text row.
A ``ConsumeSelection`` is one list of statements, atomic in ``sqlite3`` and in D1 alike:
its updates read the receipt, and its last statement deletes it, so of two consumers the
one that runs second finds no receipt and changes nothing. Evaluations are computed in
SQL in the order ``InMemoryStore`` computes them (a share of ``score / len(memory_ids)``,
added one evaluation at a time), so both give the same floats.
"""

from __future__ import annotations

from engramdb._base.clock import from_ms, to_ms
from engramdb._base.types import ContextUtility, Utility, scope_key
from engramdb.store import ConsumeSelection, GetUtility, RecordSelection, SetManual, TrimScope
from engramdb.store._sqlite.fragments import Planned, no_result, scope_condition
from engramdb.store._sqlite.rows import Rows, Statement, live
from engramdb.store.rows import as_json, optional_time

__all__ = ["consume_selection", "get_utility", "record_selection", "set_manual", "trim_scope"]

_KEEP_REINFORCED = "reinforced_at = coalesce(excluded.reinforced_at, reinforced_at)"


def record_selection(op: RecordSelection) -> Planned:
    now = to_ms(op.now)
    key = scope_key(op.scope)
    ids = as_json(list(dict.fromkeys(op.memory_ids)))
    return [
        Statement(f"DELETE FROM selections WHERE scope_key = ? AND expires_at <= {now}", (key,)),
        Statement(
            "INSERT INTO selections (id, scope_key, memory_ids, context, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
            "scope_key = excluded.scope_key, memory_ids = excluded.memory_ids, "
            "context = excluded.context, created_at = excluded.created_at, "
            "expires_at = excluded.expires_at",
            (op.id, key, ids, op.context, now, to_ms(op.expires_at)),
        ),
        Statement(
            "DELETE FROM selections WHERE scope_key = ? AND id NOT IN (SELECT id FROM "
            "selections WHERE scope_key = ? ORDER BY created_at DESC, id DESC "
            f"LIMIT {int(op.keep)})",
            (key, key),
        ),
        Statement(
            f"INSERT INTO item_utility (id, exposures, last_exposed_at) SELECT items.id, 1, {now} "
            f"FROM json_each(?) AS member JOIN items ON items.id = member.value "
            f"WHERE {live(op.now)} ON CONFLICT (id) DO UPDATE SET "
            "exposures = exposures + 1, last_exposed_at = excluded.last_exposed_at",
            (ids,),
        ),
    ], no_result


def consume_selection(op: ConsumeSelection) -> Planned:
    now = to_ms(op.now)
    receipt = (op.id, scope_key(op.scope))
    found = f"selections.id = ? AND selections.scope_key = ? AND selections.expires_at > {now}"
    members = (
        "FROM selections, json_each(selections.memory_ids) AS member "
        f"JOIN items ON items.id = member.value WHERE {found} AND {live(op.now)}"
    )
    share = "CAST(? AS REAL) / json_array_length(selections.memory_ids)"
    reinforced = str(now) if op.reinforce and op.score > 0 else "NULL"
    score = float(op.score)
    return [
        Statement(
            "INSERT INTO item_utility (id, eval_count, eval_sum, reinforced_at) "
            f"SELECT items.id, 1, {share}, {reinforced} {members} "
            "ON CONFLICT (id) DO UPDATE SET eval_count = eval_count + 1, "
            f"eval_sum = eval_sum + excluded.eval_sum, {_KEEP_REINFORCED}",
            (score, *receipt),
        ),
        Statement(
            "INSERT INTO item_contexts (id, key, eval_count, eval_sum, updated_at) "
            f"SELECT items.id, selections.context, 1, {share}, {now} {members} "
            "AND selections.context <> '' ON CONFLICT (id, key) DO UPDATE SET "
            "eval_count = eval_count + 1, eval_sum = eval_sum + excluded.eval_sum, "
            "updated_at = excluded.updated_at",
            (score, *receipt),
        ),
        # Each memory keeps its max_contexts most recently updated summaries (ties: the
        # greater key stays).
        Statement(
            "DELETE FROM item_contexts WHERE id IN (SELECT member.value FROM selections, "
            f"json_each(selections.memory_ids) AS member WHERE {found} "
            "AND selections.context <> '') AND (SELECT count(*) FROM item_contexts AS newer "
            "WHERE newer.id = item_contexts.id AND (newer.updated_at > item_contexts.updated_at "
            "OR (newer.updated_at = item_contexts.updated_at AND newer.key > item_contexts.key)))"
            f" >= {int(op.max_contexts)}",
            receipt,
        ),
        Statement(
            "DELETE FROM selections WHERE id = ? AND scope_key = ? RETURNING expires_at", receipt
        ),
    ], lambda results: bool(results[-1]) and int(results[-1][0][0]) > now


def set_manual(op: SetManual) -> Planned:
    now = to_ms(op.now)
    where, params = scope_condition(op.scopes)
    value, bound = ("NULL", ()) if op.value is None else ("?", (float(op.value),))
    positive = op.reinforce and op.value is not None and op.value > 0
    return [
        Statement(
            "INSERT INTO item_utility (id, manual, manual_updated_at, reinforced_at) "
            f"SELECT items.id, {value}, {now}, {now if positive else 'NULL'} FROM items "
            f"WHERE items.id = ? AND {live(op.now)} AND {where} ON CONFLICT (id) DO UPDATE SET "
            "manual = excluded.manual, manual_updated_at = excluded.manual_updated_at, "
            f"{_KEEP_REINFORCED} RETURNING id",
            (*bound, op.id, *params),
        )
    ], lambda results: bool(results[0])


# Utility.value() without a context, in SQL: the same float operations in the same order.
_VALUE = (
    "CASE WHEN u.manual IS NOT NULL THEN u.manual WHEN coalesce(u.eval_count, 0) > 0 "
    "THEN max(-1.0, min(1.0, u.eval_sum / (u.eval_count + 2))) ELSE 0.0 END"
)


def trim_scope(op: TrimScope) -> Planned:
    worth = f"{_VALUE} DESC, " if op.by_utility else ""
    return [
        Statement(
            "DELETE FROM items WHERE id IN (SELECT items.id FROM items "
            "LEFT JOIN item_utility AS u ON u.id = items.id "
            f"WHERE items.scope_key = ? AND {live(op.now)} "
            f"ORDER BY {worth}items.created_at DESC, items.id DESC "
            f"LIMIT -1 OFFSET {int(op.keep)}) RETURNING id",
            (scope_key(op.scope),),
        )
    ], lambda results: len(results[0])


def get_utility(op: GetUtility) -> Planned:
    ids = as_json(list(dict.fromkeys(op.ids)))
    return [
        Statement(
            "SELECT u.id, u.exposures, u.last_exposed_at, u.eval_count, u.eval_sum, u.manual, "
            "u.manual_updated_at, u.reinforced_at FROM json_each(?) AS member "
            "JOIN item_utility AS u ON u.id = member.value",
            (ids,),
        ),
        Statement(
            "SELECT c.id, c.key, c.eval_count, c.eval_sum, c.updated_at FROM json_each(?) AS "
            "member JOIN item_contexts AS c ON c.id = member.value "
            "ORDER BY c.id, c.updated_at DESC, c.key DESC",
            (ids,),
        ),
    ], _utilities


def _utilities(results: list[Rows]) -> dict[str, Utility]:
    contexts: dict[str, list[ContextUtility]] = {}
    for item_id, key, count, total, updated in results[1]:
        summary = ContextUtility(str(key), int(count), float(total), from_ms(int(updated)))
        contexts.setdefault(str(item_id), []).append(summary)
    out: dict[str, Utility] = {}
    for row in results[0]:
        item_id = str(row[0])
        out[item_id] = Utility(
            exposures=int(row[1]),
            last_exposed_at=optional_time(row[2]),
            eval_count=int(row[3]),
            eval_sum=float(row[4]),
            manual=None if row[5] is None else float(row[5]),
            manual_updated_at=optional_time(row[6]),
            reinforced_at=optional_time(row[7]),
            contexts=tuple(contexts.get(item_id, ())),
        )
    return out
