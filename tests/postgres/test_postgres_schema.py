"""PostgresStore's schema: migrations, refusal of a newer schema, opt-out, closing, and
the processes and connections that share one database."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import psycopg
import pytest

from engramdb import HashEmbedder, SchemaTooNewError, StoreError
from engramdb.postgres import MIGRATIONS, PostgresStore
from engramdb.postgres._schema import HEAD_VERSION
from engramdb.store import Stats
from engramdb.testing._harness import NOW

SAM = ("acme", "user", "sam")


def snapshot(dsn: str) -> list[Any]:
    """Every table of the public schema with its columns, and the recorded versions."""
    with psycopg.connect(dsn) as conn:
        tables = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
        ).fetchall()
        versions: list[Any] = []
        if any(t[0] == "engramdb_schema_version" for t in tables):
            versions = conn.execute(
                "SELECT version, name FROM engramdb_schema_version ORDER BY version"
            ).fetchall()
        return [tables, versions]


def test_a_fresh_database_migrates_to_head_once(pg_dsn: str) -> None:
    """The first store runs every step; a second store on the database runs none."""
    with PostgresStore(pg_dsn) as store:
        assert store.schema_version == HEAD_VERSION
    with PostgresStore(pg_dsn, migrate=False) as again:
        assert again.migrate() == 0
    assert snapshot(pg_dsn)[1] == [(m.version, m.name) for m in MIGRATIONS]


def test_a_newer_schema_is_refused_and_left_untouched(pg_dsn: str) -> None:
    """A database at a version this code does not know raises SchemaTooNewError, and no
    table, column or version row changes."""
    PostgresStore(pg_dsn).close()
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(
            "INSERT INTO engramdb_schema_version (version, name) VALUES (%s, 'm999_future')",
            (HEAD_VERSION + 1,),
        )
    before = snapshot(pg_dsn)
    with pytest.raises(SchemaTooNewError) as caught:
        PostgresStore(pg_dsn)
    assert (caught.value.found, caught.value.supported) == (HEAD_VERSION + 1, HEAD_VERSION)
    assert snapshot(pg_dsn) == before


def test_the_migrations_are_a_parameter_and_the_gate_is_the_drivers(pg_dsn: str) -> None:
    """``migrations=`` is the list a store migrates with and checks against (no module
    global to patch): a store given the first steps only stops there, a batch is refused
    with the shared gate's words (``engramdb.driver.check_schema``), and a store given one
    step fewer than the database holds refuses it as too new, touching nothing."""
    with PostgresStore(pg_dsn, migrations=MIGRATIONS[:3]) as early:
        assert early.schema_version == 3
    assert snapshot(pg_dsn)[1] == [(m.version, m.name) for m in MIGRATIONS[:3]]
    with PostgresStore(pg_dsn, migrate=False) as behind:
        behind_head = rf"schema version 3 but this engramdb needs {HEAD_VERSION}; call store"
        with pytest.raises(StoreError, match=behind_head):
            behind.batch([Stats("s", NOW)])
    PostgresStore(pg_dsn).close()
    before = snapshot(pg_dsn)
    with pytest.raises(SchemaTooNewError) as caught:
        PostgresStore(pg_dsn, migrations=MIGRATIONS[:-1])
    assert (caught.value.found, caught.value.supported) == (HEAD_VERSION, HEAD_VERSION - 1)
    assert snapshot(pg_dsn) == before


def test_migrate_false_creates_nothing_and_refuses_batches_until_migrate(pg_dsn: str) -> None:
    """With migrate=False an empty database stays empty; batches raise StoreError naming
    the fix, and after migrate() they run."""
    before = snapshot(pg_dsn)
    store = PostgresStore(pg_dsn, migrate=False)
    try:
        assert snapshot(pg_dsn) == before == [[], []]
        with pytest.raises(StoreError, match=r"migrate\(\)"):
            store.batch([Stats("s", NOW)])
        assert store.migrate() == HEAD_VERSION
        (stats,) = store.batch([Stats("s", NOW)])
        assert stats.schema_version == HEAD_VERSION
    finally:
        store.close()


def test_a_closed_store_raises_store_error(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.batch([Stats("s", NOW)])


def test_a_bad_dsn_is_a_store_error_without_the_password() -> None:
    with pytest.raises(StoreError) as caught:
        PostgresStore("host=127.0.0.1 port=1 user=nobody password=hunter2 connect_timeout=2")
    assert "hunter2" not in str(caught.value)


_MIGRATE = "from engramdb.postgres import PostgresStore; PostgresStore({dsn!r}).close()"


def test_four_processes_migrating_at_once_end_with_one_schema(pg_dsn: str) -> None:
    """The advisory lock serialises the steps: every process succeeds and each step is
    recorded once."""
    code = _MIGRATE.format(dsn=pg_dsn)
    processes = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(4)]
    assert [p.wait(timeout=60) for p in processes] == [0, 0, 0, 0]
    assert snapshot(pg_dsn)[1] == [(m.version, m.name) for m in MIGRATIONS]


async def test_concurrent_abatch_calls_on_one_store_take_turns(pg_dsn: str) -> None:
    """Twenty coroutines remembering at once through one AsyncMemory (one async
    connection) all succeed: each batch is its own transaction."""
    import asyncio

    from engramdb import AsyncMemory

    store = PostgresStore(pg_dsn)
    memory = AsyncMemory(store, HashEmbedder(dimensions=16))
    try:
        await asyncio.gather(*(memory.remember(f"note {i}", scope=SAM) for i in range(20)))
        assert len(await memory.list(SAM, limit=50)) == 20
    finally:
        await memory.aclose()


_CONSUME = """
import json, sys
from engramdb.store import ConsumeSelection
from engramdb.postgres import PostgresStore
from engramdb.testing._harness import NOW
with PostgresStore({dsn!r}) as store:
    sys.stdin.readline()  # start together
    wins = [store.batch([ConsumeSelection(f"s{{n}}", {scope!r}, 1.0, NOW, 4, False)])[0]
            for n in range(30)]
print(json.dumps(wins))
"""


def test_two_processes_consuming_the_same_receipts_win_each_once(pg_dsn: str) -> None:
    """Two processes race to consume the same 30 receipts: every receipt is consumed
    exactly once, and its evaluation applied once."""
    import json
    from datetime import timedelta

    from engramdb.store import GetUtility, PutItem, RecordSelection
    from engramdb.testing._harness import record

    with PostgresStore(pg_dsn) as store:
        store.batch([PutItem(record(1, "the deploy window"), NOW)])
        store.batch(
            [
                RecordSelection(f"s{n}", SAM, ("r000001",), "", NOW, NOW + timedelta(hours=1), 100)
                for n in range(30)
            ]
        )
    code = _CONSUME.format(dsn=pg_dsn, scope=SAM)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    for p in processes:  # both are connected and waiting: release them together
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outputs = [p.communicate(timeout=60)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0]
    wins = [won for output in outputs for won in json.loads(output)]
    assert sorted(wins) == [False] * 30 + [True] * 30
    with PostgresStore(pg_dsn) as store:
        (utility,) = store.batch([GetUtility(("r000001",))])
        assert (utility["r000001"].exposures, utility["r000001"].eval_count) == (30, 30)


def test_migrate_computes_the_lexical_terms_of_rows_written_before_version_3(
    pg_dsn: str,
) -> None:
    """A row without terms (as schema version 2 wrote it) gets them from migrate(), and
    a lexical search then finds it with the same score as a row written now."""
    from engramdb.store import PutItem, ScopeSet, SearchLexical
    from engramdb.store.rows import ITEM_COLUMNS, item_row, scope_path
    from engramdb.testing._harness import record

    old, new = record(1, "the deploy window moved"), record(2, "the deploy window moved again")
    with PostgresStore(pg_dsn) as store:
        store.batch([PutItem(new, NOW)])
        with psycopg.connect(pg_dsn) as conn:
            conn.execute(
                f"INSERT INTO engramdb_items ({', '.join(ITEM_COLUMNS)}, scope_path) "
                f"VALUES ({', '.join(['%s'] * (len(ITEM_COLUMNS) + 1))})",
                (*item_row(old), scope_path(old.scope)),
            )
        search = SearchLexical(ScopeSet.of(old.scope), "deploy window", 10, NOW)
        (before,) = store.batch([search])
        assert [h.record.id for h in before.hits] == [new.id]
        store.migrate()
        (after,) = store.batch([search])
        assert sorted(h.record.id for h in after.hits) == [old.id, new.id]
        with psycopg.connect(pg_dsn) as conn:
            (count,) = conn.execute(
                "SELECT count(*) FROM engramdb_items WHERE terms IS NULL"
            ).fetchone()  # type: ignore[misc]
        assert count == 0
