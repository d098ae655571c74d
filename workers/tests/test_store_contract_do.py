"""The store-level conformance suite (``engramdb.testing``) on ``DurableObjectStore``.

The tests of tests/contract/test_store_contract.py are collected here unchanged, in both
faces; ``target`` is a store over a fresh SQLite-backed Durable Object in miniflare, and
``another`` a second store on the same object's storage (the object after a restart).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from engramdb.testing import StoreUnderTest
from engramdb_workers.durable import DurableObjectStore

sys.path.insert(0, "/mnt/project/tests/contract")

from test_store_contract import *  # noqa: F403


@pytest.fixture(params=["sync", "async"])
def target(request: pytest.FixtureRequest, object_storage: Any) -> Iterator[StoreUnderTest]:
    # floats_up_to=0: every search reads its candidates' rows (the codes-only index a
    # large scope gets); the float path of the same index is D1's suite and small scopes'
    store = DurableObjectStore(object_storage, floats_up_to=0)
    yield StoreUnderTest(
        store, request.param, lambda: DurableObjectStore(object_storage, floats_up_to=0)
    )
    store.close()
