"""PostgresStore's sources: a DSN, a connection or a pool, in either face; who closes
what; a batch inside the caller's transaction; eight writers at once on eight
connections and on one pool."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from engramdb import (
    AsyncMemory,
    ConfigurationError,
    EngramError,
    HashEmbedder,
    Memory,
    SchemaTooNewError,
    StoreError,
)
from engramdb.postgres import PostgresStore
from engramdb.postgres._schema import HEAD_VERSION
from engramdb.store import PutItem, Stats
from engramdb.testing._harness import NOW, record

SAM = ("acme", "user", "sam")
EMBEDDER = HashEmbedder(dimensions=32)


def count_items(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        (n,) = conn.execute("SELECT count(*) FROM engramdb_items").fetchone()  # type: ignore[misc]
        return int(n)


def test_a_given_connection_serves_batch_only_and_stays_open(pg_dsn: str) -> None:
    """A psycopg Connection (here without autocommit) is used as it is: writes are
    committed, the store is sync only, and closing the store leaves the connection open."""
    conn = psycopg.connect(pg_dsn)
    try:
        store = PostgresStore(conn)
        assert (store.capabilities.supports_sync, store.capabilities.supports_async) == (
            True,
            False,
        )
        with Memory(store, HashEmbedder(dimensions=16)) as memory:
            memory.remember("the deploy window is Tuesday", scope=SAM)
        assert not conn.closed
        assert count_items(pg_dsn) == 1  # committed, seen from another connection
        with pytest.raises(StoreError, match="closed"):
            store.batch([Stats("x", NOW)])
        with pytest.raises(StoreError, match="use batch"):
            asyncio.run(PostgresStore(conn).abatch([Stats("x", NOW)]))
    finally:
        conn.close()


def test_a_batch_inside_the_callers_transaction_commits_or_rolls_back_with_it(
    pg_dsn: str,
) -> None:
    """On a connection the caller left inside a transaction a batch is a savepoint of it:
    rolled back with it, or committed with it."""
    with psycopg.connect(pg_dsn) as conn:
        store = PostgresStore(conn)
        with pytest.raises(RuntimeError), conn.transaction():
            store.batch([PutItem(record(1, "rolled back with the caller"), NOW)])
            raise RuntimeError("the caller's work failed")
        assert count_items(pg_dsn) == 0
        with conn.transaction():
            store.batch([PutItem(record(2, "committed with the caller"), NOW)])
            assert count_items(pg_dsn) == 0  # not yet: the caller has not committed
        assert count_items(pg_dsn) == 1


def remember_from_eight_threads(memory_of: Callable[[int], Memory]) -> None:
    """Writer ``n`` remembers 1,000 notes in scope ``("acme", "user", f"w{n}")`` through
    ``memory_of(n)``, all eight at once; then every note must be there with its vector,
    and each of a sample of 200 must be recalled first in its scope."""
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            memory = memory_of(n)
            for i in range(1000):
                memory.remember(f"note w{n}x{i} of writer {n}", scope=("acme", "user", f"w{n}"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    memory = memory_of(0)
    (stats,) = memory.store.batch([Stats(EMBEDDER.space.id, NOW)])
    assert (stats.items, stats.pending, stats.scopes) == (8000, 0, 8)
    for n, i in random.Random(7).sample([(n, i) for n in range(8) for i in range(1000)], 200):
        hits = memory.recall(f"w{n}x{i}", [("acme", "user", f"w{n}")], top_k=1)
        assert hits[0].memory.text == f"note w{n}x{i} of writer {n}"


def test_eight_connections_remembering_at_once_lose_nothing(pg_dsn: str) -> None:
    """Eight stores, each on its own connection, one per thread."""
    PostgresStore(pg_dsn).close()
    memories = [Memory(PostgresStore(pg_dsn), EMBEDDER) for _ in range(8)]
    try:
        remember_from_eight_threads(memories.__getitem__)
    finally:
        for memory in memories:
            memory.close()


def test_a_pool_serves_threads_at_once_and_is_left_open(pg_dsn: str) -> None:
    """ONE store on a pool of eight connections, shared by the eight threads; closing
    it leaves the pool open."""
    with ConnectionPool(pg_dsn, min_size=8, max_size=8, open=True) as pool:
        memory = Memory(PostgresStore(pool), EMBEDDER)
        remember_from_eight_threads(lambda _n: memory)
        memory.close()
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


async def test_an_async_pool_migrates_in_the_first_abatch_and_serves_tasks_at_once(
    pg_dsn: str,
) -> None:
    """An AsyncConnectionPool: building the store does no I/O; the first abatch migrates;
    forty concurrent remembers all land."""
    async with AsyncConnectionPool(pg_dsn, min_size=2, max_size=4, open=False) as pool:
        store = PostgresStore(pool)
        assert "not read yet" in repr(store)
        assert (store.capabilities.supports_sync, store.capabilities.supports_async) == (
            False,
            True,
        )
        with pytest.raises(StoreError, match="use abatch"):
            store.batch([Stats("x", NOW)])
        memory = AsyncMemory(store, HashEmbedder(dimensions=16))
        await asyncio.gather(*(memory.remember(f"note {i}", scope=SAM) for i in range(40)))
        assert len(await memory.list(SAM, limit=100)) == 40
        assert f"schema v{HEAD_VERSION}" in repr(store)
        await memory.aclose()
        assert not pool.closed


async def test_an_async_connection_is_used_and_left_open(pg_dsn: str) -> None:
    aconn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        store = PostgresStore(aconn)
        memory = AsyncMemory(store, HashEmbedder(dimensions=16))
        await memory.remember("the deploy window is Tuesday", scope=SAM)
        await memory.aclose()
        assert not aconn.closed
        assert count_items(pg_dsn) == 1
    finally:
        await aconn.close()


async def test_an_async_source_refuses_a_newer_schema_in_the_first_abatch(pg_dsn: str) -> None:
    """The check an async source cannot make in the constructor happens before its first
    batch, which then writes nothing."""
    PostgresStore(pg_dsn).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO engramdb_schema_version (version, name) VALUES (%s, 'future')",
            (HEAD_VERSION + 1,),
        )
    async with AsyncConnectionPool(pg_dsn, min_size=1, max_size=2, open=False) as pool:
        store = PostgresStore(pool)
        with pytest.raises(SchemaTooNewError):
            await store.abatch([PutItem(record(1, "not written"), NOW)])
    assert count_items(pg_dsn) == 0


def test_anything_else_is_refused_with_what_is_accepted() -> None:
    target: Any = 5432
    with pytest.raises(ConfigurationError, match="DSN string, a psycopg Connection"):
        PostgresStore(target)


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"ef_search": 5000}, "ef_search=5000"),
        ({"ef_search": 0}, "ef_search=0"),
        ({"ef_search": 40.5}, "ef_search=40.5"),
        ({"ef_search": True}, "ef_search=True"),
        ({"ef_search": "100"}, "ef_search='100'"),
        ({"migrate": "no"}, "migrate='no'"),
    ],
)
def test_bad_options_are_configuration_errors_before_anything_connects(
    arguments: dict[str, Any], named: str
) -> None:
    """Every bad argument is a ConfigurationError (so ``except EngramError`` catches it)
    naming the value, raised before a connection is tried (this DSN reaches no server)."""
    with pytest.raises(ConfigurationError) as caught:
        PostgresStore("host=127.0.0.1 port=1 dbname=none connect_timeout=1", **arguments)
    assert isinstance(caught.value, EngramError)
    assert named in str(caught.value)


def test_a_string_that_is_no_dsn_is_a_configuration_error_that_shows_no_password() -> None:
    """libpq would quote the unparsable piece (here, after the password) in its message;
    the error names the accepted forms instead."""
    with pytest.raises(ConfigurationError, match="postgresql://") as caught:
        PostgresStore("host=db password=hunter2hunter2 tail-without-equals")
    assert "hunter2" not in str(caught.value) and caught.value.__cause__ is None


def test_a_store_error_hides_every_credential_option_of_the_dsn() -> None:
    """The DSN in a message is masked by the one rule of every face (``safe_label``):
    ``password`` quoted or not, ``sslpassword`` too, the rest as written."""
    dsn = (
        "host=127.0.0.1 port=1 user=nobody password='hunter 2' sslpassword=hunter3 "
        "connect_timeout=2"
    )
    with pytest.raises(StoreError) as caught:
        PostgresStore(dsn)
    message = str(caught.value)
    assert "hunter" not in message
    assert "password=*** sslpassword=*** connect_timeout=2" in message


def test_a_batch_that_gets_no_pooled_connection_in_time_is_a_store_error(pg_dsn: str) -> None:
    """The pool's only connection is taken: the batch waits the pool's timeout, then
    fails with a StoreError naming the pool (not the password), and writes nothing."""
    with ConnectionPool(pg_dsn, min_size=1, max_size=1, timeout=0.5, open=True) as pool:
        store = PostgresStore(pool)
        with pool.connection(), pytest.raises(StoreError, match="pool"):
            store.batch([PutItem(record(1, "never written"), NOW)])
        assert count_items(pg_dsn) == 0
