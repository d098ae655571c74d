"""The reference semantics of a batch (``engramdb.store.semantics``): one ``match`` over every
op of the protocol, atomic, and the explanation a SQL store gives of a failed guard."""

from __future__ import annotations

import ast
import inspect
from typing import get_args

import pytest

from engramdb import ConflictError, NotFoundError, StoreError, ValidationError, semantics
from engramdb.store import (
    KEEP,
    GetItems,
    ListItems,
    Op,
    PatchItem,
    PutItem,
    PutVector,
    RegisterSpace,
    ScopeSet,
)
from engramdb.store.semantics import OPS, State, resolve
from engramdb.testing._harness import NOW, SPACE, record, unit_blob

SAM = ("acme", "user", "sam")


def _cases() -> set[str]:
    """The class names of the ``case store.X():`` patterns of resolve's one ``match``."""
    tree = ast.parse(inspect.getsource(semantics))
    matches = [node for node in ast.walk(tree) if isinstance(node, ast.Match)]
    assert len(matches) == 1
    return {
        ast.unparse(case.pattern.cls).removeprefix("store.")
        for case in matches[0].cases
        if isinstance(case.pattern, ast.MatchClass)
    }


def test_the_match_answers_exactly_the_declared_op_table() -> None:
    """OPS, the table InMemoryStore declares, is the set of cases of the match: it can
    neither claim an op the match does not answer nor miss one it does."""
    assert _cases() == {op.__name__ for op in OPS}


def test_the_table_holds_every_op_of_the_protocol() -> None:
    assert set(get_args(Op)) == OPS


def test_a_failing_batch_changes_nothing() -> None:
    """An op that fails (a patch of a missing id) undoes nothing because nothing of the
    batch was applied: the put and the space before it are not in the state."""
    state = State()
    batch = [
        RegisterSpace(SPACE, NOW),
        PutItem(record(1, "Sam is vegetarian", SAM), NOW),
        PatchItem("missing", NOW, text="x"),
    ]
    with pytest.raises(NotFoundError, match="'missing'"):
        resolve(batch, state)
    assert (state.items, state.spaces, len(state)) == ({}, {}, 0)


def test_reads_see_the_writes_before_them_and_the_state_keeps_them() -> None:
    state = State()
    put = PutItem(record(1, "Sam is vegetarian", SAM), NOW)
    patch = PatchItem(put.record.id, NOW, importance=0.9)
    listed = ListItems(ScopeSet.of(SAM), 10, NOW)
    before = resolve([listed], state)
    stored, patched, after = resolve([put, patch, listed], state)
    assert before == [[]]
    assert (stored.revision, patched.revision, after) == (1, 2, [patched])
    assert state.items == {put.record.id: patched}
    assert state.history == {put.record.id: (stored,)}


def test_an_object_that_is_no_op_is_refused() -> None:
    with pytest.raises(StoreError, match="no store op"):
        resolve([object()], State())  # type: ignore[list-item]


def test_a_state_of_rows_explains_a_failed_guard() -> None:
    """``State.of`` holds the rows a SQL store read after its guard aborted a batch;
    resolve over it raises the error of the op at fault, as InMemoryStore would."""
    item = record(1, "Sam is vegetarian", SAM)
    state = State.of([item], {SPACE.id: SPACE.dimensions})
    with pytest.raises(ConflictError, match="is at revision 1, not revision 3"):
        resolve([PatchItem(item.id, NOW, text=KEEP, expected_revision=3)], state)
    with pytest.raises(ValidationError, match="another scope"):
        resolve([PutItem(record(1, "elsewhere", ("acme", "user", "kim")), NOW)], state)
    with pytest.raises(ValidationError):
        resolve([PutVector(SPACE.id, item.content_sha256, unit_blob([1, 0]), NOW)], state)
    assert resolve([GetItems((item.id,), NOW)], state)[0][0].record == item
