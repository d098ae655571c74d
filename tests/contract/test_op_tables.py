"""Every store declares the op types its batch answers (``OPS``), and none of the
protocol's ops is missing from it: adding an op to ``engramdb.store.Op`` fails here
until each store has learnt it. PostgreSQL's table is checked in
tests/postgres/test_postgres_op_table.py, D1's and Durable Objects' in
workers/tests/test_op_table.py (their environments have their dependencies)."""

from __future__ import annotations

import sys
from typing import get_args

import pytest

from engramdb import InMemoryStore
from engramdb.store import Op, TrimScope
from engramdb.testing import CheckFailed, check_op_table

STORE_CLASSES = ["InMemoryStore"]
if sys.platform != "emscripten":  # drivers/ is CPython-only
    STORE_CLASSES += ["SqliteStore"]


def _store_class(name: str) -> type:
    if name == "InMemoryStore":
        return InMemoryStore
    from engramdb.sqlite import SqliteStore

    return SqliteStore


@pytest.mark.parametrize("name", STORE_CLASSES)
def test_the_op_table_holds_every_op_of_the_protocol(name: str) -> None:
    """The store's class declares OPS, and every op of the protocol is in it."""
    store_class = _store_class(name)
    check_op_table(store_class)
    assert set(get_args(Op)) <= store_class.OPS  # type: ignore[attr-defined]


def test_a_table_missing_an_op_fails_and_names_it() -> None:
    """A store that has not learnt an op of the protocol is caught, by name."""

    class Behind(InMemoryStore):
        OPS = InMemoryStore.OPS - {TrimScope}

    with pytest.raises(CheckFailed, match=r"Behind's op table \(OPS\) lacks TrimScope:"):
        check_op_table(Behind)
    with pytest.raises(CheckFailed, match="lacks TrimScope"):
        check_op_table(Behind())


def test_a_store_without_a_table_fails() -> None:
    """A store that declares no OPS cannot be checked, and says so."""

    class Silent:
        pass

    with pytest.raises(CheckFailed, match="Silent declares no op table"):
        check_op_table(Silent())


def test_the_ops_of_a_capability_left_off_may_be_missing() -> None:
    """A store without the lexical leg, history or policy need not answer their ops; the
    others stay required."""
    from engramdb.store import (
        ConsumeSelection,
        GetUtility,
        History,
        RecordSelection,
        SearchLexical,
        SetManual,
        StoreCapabilities,
    )

    optional = {SearchLexical, History, RecordSelection, ConsumeSelection}
    optional |= {SetManual, GetUtility, TrimScope}

    class Small:
        capabilities = StoreCapabilities(supports_lexical=False, supports_history=False)
        OPS = InMemoryStore.OPS - optional

    check_op_table(Small)
    Small.capabilities = StoreCapabilities(supports_history=False)
    with pytest.raises(CheckFailed, match=r"lacks SearchLexical:"):
        check_op_table(Small)
