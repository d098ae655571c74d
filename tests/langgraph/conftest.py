"""LangGraph's own store tests, run unchanged against ``EngramStore``.

``upstream/`` holds verbatim copies (MIT, their LICENSE beside them) of the store tests
of two pinned source distributions (see ``upstream/README.md``):
``langgraph-checkpoint`` (``tests/test_store.py``, which builds ``InMemoryStore()``
inline) and ``langgraph-checkpoint-sqlite`` (``tests/test_store.py``,
``tests/test_async_store.py`` and ``tests/test_ttl.py``, which build
``SqliteStore``/``AsyncSqliteStore`` with ``from_conn_string``). An autouse
fixture, parametrised over engramdb backends (``InMemoryStore``, ``SqliteStore`` on a
real file, and ``PostgresStore`` on a fresh database when the postgres extra and a
server are there), replaces those names in each test module with an ``EngramStore``
class over that backend; nothing in the tests is edited (the async stand-in's
``sweep_ttl`` is a coroutine, as ``AsyncSqliteStore``'s is). ``DESELECTED`` lists the
tests that inspect a LangGraph backend's internals or its sweeper, each with its reason.

Each upstream package is its own ``tests`` package, so each runs in its own pytest
session, with pytest-asyncio in auto mode as LangGraph runs them
(``-o asyncio_mode=auto -o asyncio_default_fixture_loop_scope=function``; the root
pyproject does not name pytest-asyncio's options, which the other envs lack): see the
tox env ``langgraph`` and docs/langgraph.md.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "contract"))  # fakes: ManualClock

try:
    from engramdb.langgraph import EngramStore
except ImportError:  # without the langgraph extra these tests are not collected
    collect_ignore_glob = ["test_*.py", "upstream/*"]
else:
    from engramdb import InMemoryStore
    from engramdb.sqlite import SqliteStore

DESELECTED = {
    # test id (relative to its upstream package): why it does not apply to EngramStore
    "sqlite/tests/test_store.py::test_vector_store_initialization": (
        "looks for LangGraph's vector tables in store.conn (sqlite_master)"
    ),
    "sqlite/tests/test_store.py::test_nonnull_migrations": (
        "checks LangGraph's SqliteStore.MIGRATIONS statements"
    ),
    "sqlite/tests/test_store.py::test_escape_glob_literal": (
        "tests a helper of LangGraph's SQLite SQL builder, not a store"
    ),
    "sqlite/tests/test_store.py::test_namespace_match_pattern": (
        "tests a helper of LangGraph's SQLite SQL builder, not a store"
    ),
    "sqlite/tests/test_store.py::test_list_namespaces_prefix_uses_indexable_condition": (
        "inspects the SQL LangGraph's BaseSqliteStore builds, not a store"
    ),
    "sqlite/tests/test_ttl.py::test_ttl_sweeper": (
        "starts LangGraph's background sweeper thread; EngramStore has none (no threads): "
        "it sweeps when sweep_ttl() is called"
    ),
    "sqlite/tests/test_ttl.py::test_async_ttl_sweeper": (
        "starts LangGraph's background sweeper task; EngramStore sweeps when asweep_ttl() is called"
    ),
    "sqlite/tests/test_async_store.py::test_no_running_loop": (
        "AsyncSqliteStore refuses sync calls on its event loop's thread; EngramStore's "
        "sync methods work there by design (they never start a loop)"
    ),
}

try:  # with the postgres extra and a server (PG_DSN, or pg_server's): PostgresStore too
    from engramdb.postgres import PostgresStore

    sys.path.insert(0, str(Path(__file__).parent.parent / "postgres"))
    import pg_server
except ImportError:
    BACKENDS: tuple[str, ...] = ("inmemory", "sqlite")
else:
    BACKENDS = ("inmemory", "sqlite", "postgres")


def _upstream_id(item: pytest.Item) -> str | None:
    path = Path(str(item.path))
    parts = path.parts
    if "upstream" not in parts:
        return None
    rest = "/".join(parts[parts.index("upstream") + 1 :])
    return f"{rest}::{item.originalname if isinstance(item, pytest.Function) else item.name}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        (dropped if _upstream_id(item) in DESELECTED else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_admin_dsn() -> Iterator[str]:
    """A PostgreSQL server for the postgres backend: ``PG_DSN``'s, or a throwaway one
    from tests/postgres/pg_server.py (started only when a test asks)."""
    with pg_server.admin_dsn() as dsn:
        yield dsn


def _engram_classes(
    backend: str,
    directory: Path,
    cleanups: list[Callable[[], None]],
    request: pytest.FixtureRequest,
) -> dict[str, type]:
    """Classes named like LangGraph's stores, building EngramStore over ``backend``
    (``cleanups`` gets what closes each store, and drops its database)."""

    def new_store() -> Any:
        if backend == "inmemory":
            return InMemoryStore()
        if backend == "sqlite":
            sqlite = SqliteStore(directory / f"store-{next(_counter)}.db")
            cleanups.append(sqlite.close)
            return sqlite
        admin = request.getfixturevalue("pg_admin_dsn")
        name = f"engramdb_lg_{os.getpid()}_{next(_counter)}"
        store = PostgresStore(pg_server.create_database(admin, name))
        cleanups.extend([store.close, lambda: pg_server.drop_database(admin, name)])
        return store

    class Engram(EngramStore):
        def __init__(self, *, index: Any = None, ttl: Any = None) -> None:
            super().__init__(new_store(), index=index, ttl=ttl)

        @classmethod
        @contextlib.contextmanager
        def from_conn_string(
            cls, conn_string: str, *, index: Any = None, ttl: Any = None
        ) -> Iterator[Any]:
            yield cls(index=index, ttl=ttl)

        def setup(self) -> None:
            pass

    class AsyncEngram(Engram):
        @classmethod
        @contextlib.asynccontextmanager
        async def from_conn_string(  # type: ignore[override]
            cls, conn_string: str, *, index: Any = None, ttl: Any = None
        ) -> AsyncIterator[Any]:
            yield cls(index=index, ttl=ttl)

        async def setup(self) -> None:  # type: ignore[override]
            pass

        async def sweep_ttl(self, batch_size: int = 1000) -> int:  # type: ignore[override]
            return await self.asweep_ttl(batch_size)  # AsyncSqliteStore's is a coroutine

    for cls, name in ((Engram, "EngramStore"), (AsyncEngram, "AsyncEngramStore")):
        cls.__name__ = cls.__qualname__ = f"{name}[{backend}]"
    return {"InMemoryStore": Engram, "SqliteStore": Engram, "AsyncSqliteStore": AsyncEngram}


def _is_upstream(module: Any) -> bool:
    return "upstream" in Path(str(module.__file__)).parts


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every upstream test runs once per backend."""
    if _is_upstream(metafunc.module) and "engram_backend" in metafunc.fixturenames:
        metafunc.parametrize("engram_backend", BACKENDS, indirect=True)


@pytest.fixture(autouse=True)
def engram_backend(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[str | None]:
    """In an upstream test module, LangGraph's store classes become EngramStore over
    the backend; the value is the backend's name (None elsewhere).

    Its directory comes from ``tmp_path_factory``, not ``tmp_path``: LangGraph marks
    its timing-sensitive TTL tests ``flaky`` (pytest-retry), and the teardown of a
    retried test that used ``tmp_path`` raises ``KeyError`` (pytest-retry runs a
    teardown between attempts, which consumes the item's ``tmp_path`` record), turning
    a test that passed on its retry into an error."""
    if not _is_upstream(request.module):
        yield None
        return
    tmp_path = tmp_path_factory.mktemp("engram")
    cleanups: list[Callable[[], None]] = []
    for name, cls in _engram_classes(request.param, tmp_path, cleanups, request).items():
        if hasattr(request.module, name):
            monkeypatch.setattr(request.module, name, cls)
    yield request.param
    for cleanup in cleanups:
        cleanup()
