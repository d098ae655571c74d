"""Per-op plans: the statements of one op and the function from their rows to its result.

A plan is ``(statements, finish)`` (``fragments.Planned``): the batch executor
(``batch.run_batch``) puts the statements of many ops into one list, so that every write
of a batch travels together (one transaction in ``sqlite3``, one ``batch()`` in D1), and
hands each op's ``finish`` the rows of its own statements. The plans of writes (with
their guards and the errors of a failed guard) are in ``writes.py``, those of reads in
``reads.py``, those of receipts and evidence in ``policy.py``; ops that need Python
between statements (a vector search, a vector repair scan) are stepped plans in
``search.py``.

Expiry is decided by the op's ``now``, written into the SQL as a literal. Lists of ids,
hashes and scopes travel as one JSON array per statement (``json_each``), so no statement
binds more than a few parameters whatever the list's length, and ``None`` is never bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from engramdb import store
from engramdb.store._sqlite.fragments import Planned
from engramdb.store._sqlite.policy import (
    consume_selection,
    get_utility,
    record_selection,
    set_manual,
    trim_scope,
)
from engramdb.store._sqlite.reads import (
    find_content,
    find_vectors,
    get_items,
    get_vectors,
    history,
    list_items,
    list_scopes,
    pending_texts,
    search_lexical,
    stats,
    unreadable_items,
)
from engramdb.store._sqlite.writes import (
    delete_item,
    delete_items,
    drop_space,
    patch_item,
    purge_expired,
    put_items,
    put_vectors,
    register_space,
    restore_items,
)

__all__ = ["GROUPED", "PLANNED", "plan"]

GROUPED: Final[dict[type, Callable[[Any], Planned]]] = {
    store.PutItem: put_items,
    store.PutVector: put_vectors,
    store.RestoreItem: restore_items,
}
"""Ops planned a run at a time (their statements shared)."""

_SIMPLE: Final[dict[type, Callable[[Any], Planned]]] = {
    store.PatchItem: patch_item,
    store.DeleteItem: delete_item,
    store.DeleteItems: delete_items,
    store.RegisterSpace: register_space,
    store.DropSpace: drop_space,
    store.GetItems: get_items,
    store.FindVectors: find_vectors,
    store.GetVectors: get_vectors,
    store.FindContent: find_content,
    store.ListItems: list_items,
    store.ListScopes: list_scopes,
    store.History: history,
    store.UnreadableItems: unreadable_items,
    store.SearchLexical: search_lexical,
    store.PendingTexts: pending_texts,
    store.PurgeExpired: purge_expired,
    store.RecordSelection: record_selection,
    store.ConsumeSelection: consume_selection,
    store.SetManual: set_manual,
    store.GetUtility: get_utility,
    store.TrimScope: trim_scope,
}


PLANNED: Final[frozenset[type]] = frozenset({*GROUPED, *_SIMPLE, store.Stats})
"""Every op type with a plan (the stepped ops have theirs in ``search.py``)."""


def plan(op: store.Op, schema_version: int | None) -> Planned:
    """The plan of one op planned alone (``Stats`` also reports the schema version)."""
    if isinstance(op, store.Stats):
        return stats(op, schema_version)
    planner = _SIMPLE.get(type(op))
    if planner is None:
        raise TypeError(f"unknown store op {op!r}")
    return planner(op)
