"""Scope isolation as a property on the Worker's stores: a Durable Object's database
(``DurableObjectStore``, sync face) and D1 (``D1Store``, async face).

The property, its strategies and its model are tests/reliability/isolation_property.py,
run there on the CPython stores; here each example gets a fresh object (or D1 database)
in miniflare. Fewer examples than on CPython: every statement is a round trip to workerd.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from conftest import new_d1
from engramdb import AsyncMemory, HashEmbedder, Memory
from engramdb_workers.d1 import D1Store
from engramdb_workers.durable import DurableObjectStore
from objects import new_object_state, storage_of

sys.path.insert(0, "/mnt/project/tests/reliability")

from isolation_faces import Blocking
from isolation_property import check_isolation

EXAMPLES = 25


@contextmanager
def on_an_object() -> Iterator[Any]:
    store = DurableObjectStore(storage_of(new_object_state()))
    try:
        yield Memory(store, HashEmbedder())
    finally:
        store.close()


@contextmanager
def on_d1() -> Iterator[Any]:
    loop = asyncio.get_event_loop()
    store = D1Store(loop.run_until_complete(new_d1()))
    try:
        yield Blocking(AsyncMemory(store, HashEmbedder()), loop)
    finally:
        store.close()


def test_no_call_on_a_durable_object_sees_outside_what_it_named() -> None:
    check_isolation(on_an_object, EXAMPLES)


def test_no_call_on_d1_sees_outside_what_it_named() -> None:
    check_isolation(on_d1, EXAMPLES)
