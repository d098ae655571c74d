"""Conformance checks for stores: run them against yours.

A store passes when every check of :data:`STORE_CHECKS` (the store protocol driven
through ``batch``/``abatch`` directly) and :func:`differential_check` (random op
sequences compared with the reference semantics, ``engramdb.store.semantics.resolve``) pass on
a fresh, empty store, in each face the store offers, and :func:`check_op_table` finds
every op of the protocol in the store's declared op table (``OPS``). Everything here
is the standard library only, so it runs under pytest, in Pyodide and in a Worker
alike. With pytest::

    import pytest
    from engramdb.testing import (
        STORE_CHECKS, StoreUnderTest, check_op_table, differential_check,
    )

    @pytest.fixture(params=["sync", "async"])
    def target(request):
        store = MyStore()                      # fresh and empty
        yield StoreUnderTest(store, request.param)
        store.close()

    @pytest.mark.parametrize("check", STORE_CHECKS, ids=str)
    async def test_store_protocol(check, target):
        if (reason := check.applies(target)) is not None:
            pytest.skip(reason)
        await check.run(target)

    @pytest.mark.parametrize("seed", range(5))
    async def test_same_answers_as_the_reference(seed, target):
        await differential_check(target, seed=seed)

    def test_op_table():
        check_op_table(MyStore)

``docs/stores.md`` walks through writing a store and running these against it.
"""

from engramdb.testing import (
    _failure_checks,
    _policy_checks,
    _read_checks,
    _read_only_checks,
    _restore_checks,
    _search_checks,
    _write_checks,
)
from engramdb.testing._checks import StoreCheck
from engramdb.testing._differential import differential_check
from engramdb.testing._harness import CheckFailed, StoreUnderTest
from engramdb.testing._op_table import check_op_table

STORE_CHECKS: list[StoreCheck] = [
    *_write_checks.CHECKS,
    *_failure_checks.CHECKS,
    *_read_checks.CHECKS,
    *_search_checks.CHECKS,
    *_policy_checks.CHECKS,
    *_restore_checks.CHECKS,
    *_read_only_checks.CHECKS,
]
"""Every store-level check, in a fixed order."""

__all__ = [
    "STORE_CHECKS",
    "CheckFailed",
    "StoreCheck",
    "StoreUnderTest",
    "check_op_table",
    "differential_check",
]
