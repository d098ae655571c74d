"""A real PostgreSQL with pgvector for the session, and a fresh database per test.

With ``PG_DSN`` set (a superuser's DSN, or one that may CREATE DATABASE), that server is
used; otherwise ``pg_server.start()`` starts a local one (``.ci/setup-postgres``) and stops it at
the end. Every test gets its own database, dropped afterwards.

The conformance suites of tests/contract are collected here unchanged
(``test_store_contract.py``), with ``target`` giving them a fresh ``PostgresStore`` in
each face, and on a connection pool.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "contract"))
sys.path.insert(0, str(Path(__file__).parent))

if importlib.util.find_spec("psycopg") is None:  # without the postgres extra
    collect_ignore_glob = ["test_*.py"]  # these tests are not collected

import pg_server
from fakes import ManualClock

from engramdb.testing import StoreUnderTest
from fixtures import (  # noqa: F401
    clock_fixture,
    embedder_fixture,
    memory_factory,
    memory_fixture,
)

_numbers = itertools.count()


@pytest.fixture(scope="session")
def pg_admin_dsn() -> Iterator[str]:
    """The DSN of a database on the test server from which databases are created."""
    with pg_server.admin_dsn() as dsn:
        yield dsn


@pytest.fixture
def pg_dsn(pg_admin_dsn: str) -> Iterator[str]:
    """The DSN of a new, empty database, dropped after the test."""
    name = f"engramdb_test_{os.getpid()}_{next(_numbers)}"
    yield pg_server.create_database(pg_admin_dsn, name)
    pg_server.drop_database(pg_admin_dsn, name)


@pytest.fixture(params=["sync", "async", "pool"])
def target(request: pytest.FixtureRequest, pg_dsn: str) -> Iterator[StoreUnderTest]:
    """A fresh, empty PostgresStore in one face (``pool``: the sync face on a
    ``psycopg_pool.ConnectionPool`` without autocommit, a connection per batch);
    ``another`` opens a second store on the same database (on the same pool)."""
    from psycopg_pool import ConnectionPool

    from engramdb.postgres import PostgresStore

    pool = None
    if request.param == "pool":
        pool = ConnectionPool(pg_dsn, min_size=1, max_size=4, open=True)
    source: Any = pool if pool is not None else pg_dsn
    store = PostgresStore(source)
    others: list[PostgresStore] = []

    def another() -> PostgresStore:
        others.append(PostgresStore(source))
        return others[-1]

    face = "async" if request.param == "async" else "sync"
    yield StoreUnderTest(store, face, another)
    for other in others:
        other.close()
    store.close()
    if pool is not None:
        pool.close()


@pytest.fixture(params=["sync", "async"])
def make_memory(
    request: pytest.FixtureRequest, pg_dsn: str, clock: ManualClock
) -> Iterator[Callable[..., Any]]:
    """Build memories over ONE PostgresStore, in the parametrised face."""
    from engramdb.postgres import PostgresStore

    store = PostgresStore(pg_dsn)
    yield memory_factory(store, request.param, clock)
    store.close()
