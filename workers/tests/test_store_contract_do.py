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

from engramdb.store._sqlite import batch, pack
from engramdb.testing import StoreUnderTest
from engramdb_workers.durable import DurableObjectStore

sys.path.insert(0, "/mnt/project/tests/contract")

from test_store_contract import *  # noqa: F403


@pytest.fixture(params=["sync", "async", "async, packed as written"])
def target(
    request: pytest.FixtureRequest, object_storage: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StoreUnderTest]:
    # "packed as written": segments of 4 vectors (the suite's space has 4 dimensions) and
    # every write packing from one item on, so that writes pack, and later writes unpack,
    # all through the suite, and the differential check compares that with a model.
    face = request.param.split(",")[0]
    if face != request.param:
        monkeypatch.setattr(pack, "SEGMENT_BYTES", 4 * 4 * 4)
        monkeypatch.setitem(batch.run_batch.__kwdefaults__, "pack_from", 1)

    # floats_up_to=0: every search reads its candidates' rows (the codes-only index a
    # large scope gets); the float path of the same index is D1's suite and small scopes'.
    # cache_bytes=1: every search and write then drops every index not in use and all
    # bit planes (the object's budget at its tightest), and the differential check too
    # must find the store's answers unchanged.
    def store() -> DurableObjectStore:
        return DurableObjectStore(object_storage, floats_up_to=0, cache_bytes=1)

    first = store()
    yield StoreUnderTest(first, face, store)
    first.close()
