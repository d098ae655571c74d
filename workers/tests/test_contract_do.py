"""The ``Memory``-level conformance suite over ``DurableObjectStore``, in both faces.

Every test of tests/contract/test_memory_contract.py, test_conversation_contract.py,
test_own_vectors_contract.py and test_policy_contract.py runs here with ``make_memory``
building ``Memory`` (sync) or ``AsyncMemory`` over one store on a fresh SQLite-backed
Durable Object in miniflare.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from engramdb import AsyncMemory, Memory
from engramdb_workers.durable import DurableObjectStore

sys.path.insert(0, "/mnt/project/tests/contract")

from fakes import ManualClock
from fixtures import SyncFace
from test_conversation_contract import *  # noqa: F403
from test_memory_contract import *  # noqa: F403
from test_own_vectors_contract import *  # noqa: F403
from test_policy_contract import *  # noqa: F403


@pytest.fixture(params=["sync", "async"])
def make_memory(
    request: pytest.FixtureRequest, object_storage: Any, clock: ManualClock
) -> Iterator[Callable[..., Any]]:
    # Codes only, as the store suite, and a budget of one byte: every search and write
    # then drops every cache and every index not in use, and must answer the same.
    store = DurableObjectStore(object_storage, floats_up_to=0, cache_bytes=1)

    def make(embedder: Any, **options: Any) -> Any:
        options.setdefault("clock", clock)
        if request.param == "async":
            return AsyncMemory(store, embedder, **options)
        return SyncFace(Memory(store, embedder, **options))

    yield make
    store.close()
