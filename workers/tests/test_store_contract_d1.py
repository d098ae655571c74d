"""The store-level conformance suite (``engramdb.testing``) on ``D1Store`` (async only).

The tests of tests/contract/test_store_contract.py are collected here unchanged; this
module's ``target`` gives them a fresh miniflare D1 database per test, and ``another`` is
a second ``D1Store`` on the same database, as a second isolate of the Worker would hold.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from engramdb.testing import StoreUnderTest
from engramdb_workers.d1 import D1Store

sys.path.insert(0, "/mnt/project/tests/contract")

from test_store_contract import *  # noqa: F403


@pytest.fixture
def target(d1: Any) -> Iterator[StoreUnderTest]:
    store = D1Store(d1)
    yield StoreUnderTest(store, "async", lambda: D1Store(d1))
    store.close()
