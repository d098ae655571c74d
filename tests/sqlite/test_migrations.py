"""Schema migrations of the SQLite store: golden fixtures, refusal, rollback, opt-out."""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlite_helpers import FIXTURES, NOW, make_fixtures

from engramdb import MigrationError, SchemaTooNewError, StoreError
from engramdb import _sqlite_dialect as dialect
from engramdb._sqlite_dialect import (
    MIGRATIONS,
    Migration,
    Statement,
    VersionSource,
    migration_statements,
    read_version,
)
from engramdb._store import GetItems, SearchLexical, SearchVectors, Stats
from engramdb._types import scope_from_key
from engramdb.sqlite import SqliteStore

GOLDEN = sorted(FIXTURES.glob("schema-v*.db"))
HEAD = len(MIGRATIONS)


def fixture_version(path: Path) -> int:
    return int(re.fullmatch(r"schema-v(\d+)\.db", path.name).group(1))  # type: ignore[union-attr]


def schema_of(path: Path) -> list[tuple[str, str, str]]:
    """(type, name, normalised SQL) of every schema object, sorted."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    finally:
        conn.close()
    return sorted((kind, name, " ".join((sql or "").split())) for kind, name, sql in rows)


def user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def table_names(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()


def copy_fixture(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    shutil.copyfile(source, target)
    return target


def test_there_is_a_golden_fixture_for_every_released_version() -> None:
    """Each schema version up to head has its committed database file."""
    assert [fixture_version(p) for p in GOLDEN] == list(range(1, HEAD + 1))


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_a_golden_fixture_upgrades_to_head_and_keeps_its_rows(golden: Path, tmp_path: Path) -> None:
    """Opening an old database migrates it to head; its items stay findable both ways."""
    fixtures = make_fixtures()
    path = copy_fixture(golden, tmp_path)
    with SqliteStore(path) as store:
        assert store.schema_version == HEAD
        ids = tuple(row[0] for row in fixtures.FIXTURE_ROWS)
        (items,) = store.batch([GetItems(ids, NOW, fixtures.SPACE_ID)])
        assert [item.record.text for item in items] == [r[2] for r in fixtures.FIXTURE_ROWS]
        assert all(item.embedded_at is not None for item in items)
        sam = scope_from_key(fixtures.FIXTURE_ROWS[0][1])
        lexical, vector, stats = store.batch(
            [
                SearchLexical((sam,), "vegetarian", 5, NOW),
                SearchVectors((sam,), fixtures.SPACE_ID, (1.0, 0.0, 0.0, 0.0), 5, NOW),
                Stats(fixtures.SPACE_ID, NOW),
            ]
        )
    assert [i for i, _ in lexical] == [ids[0]]
    assert vector[0][0] == ids[0] and vector[0][1] == pytest.approx(1.0)
    assert (stats.items, stats.vectors, stats.schema_version) == (3, 3, HEAD)


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_fresh_schema_equals_upgraded_schema(golden: Path, tmp_path: Path) -> None:
    """A database created at head and one upgraded from a fixture have the same schema."""
    fresh = tmp_path / "fresh.db"
    SqliteStore(fresh).close()
    upgraded = copy_fixture(golden, tmp_path)
    SqliteStore(upgraded).close()
    assert schema_of(fresh) == schema_of(upgraded)
    assert user_version(fresh) == user_version(upgraded) == HEAD


def test_a_newer_database_is_refused_and_left_byte_for_byte_untouched(db_path: Path) -> None:
    """SchemaTooNewError names both versions; the file, and the absence of a WAL, stay."""
    SqliteStore(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute(f"PRAGMA user_version = {HEAD + 5}")
    conn.close()
    before = db_path.read_bytes()
    for migrate in (True, False):
        with pytest.raises(SchemaTooNewError) as caught:
            SqliteStore(db_path, migrate=migrate)
        assert (caught.value.found, caught.value.supported) == (HEAD + 5, HEAD)
        assert "upgrade engramdb" in str(caught.value)
    assert db_path.read_bytes() == before
    assert sorted(p.name for p in db_path.parent.iterdir()) == [db_path.name]


def test_a_failing_migration_step_rolls_back_and_keeps_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A good step commits; the failing step after it leaves no trace; the error says so."""
    path = copy_fixture(FIXTURES / "schema-v1.db", tmp_path)
    good = Migration(HEAD + 1, "m900_add_notes", ("CREATE TABLE notes (id TEXT PRIMARY KEY)",))
    bad = Migration(
        HEAD + 2,
        "m901_broken",
        ("CREATE TABLE half_done (x)", "ALTER TABLE no_such_table ADD COLUMN y"),
    )
    monkeypatch.setattr(dialect, "MIGRATIONS", [*MIGRATIONS, good, bad])
    with pytest.raises(MigrationError) as caught:
        SqliteStore(path)
    assert "m901_broken" in str(caught.value)
    assert f"stays at schema version {HEAD + 1}" in str(caught.value)
    assert user_version(path) == HEAD + 1
    assert "notes" in table_names(path)
    assert "half_done" not in table_names(path)


def test_migrate_false_opens_an_old_database_but_refuses_batches_until_migrate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With migrate=False nothing is changed until you call migrate()."""
    path = copy_fixture(FIXTURES / "schema-v1.db", tmp_path)
    step = Migration(HEAD + 1, "m900_add_notes", ("CREATE TABLE notes (id TEXT PRIMARY KEY)",))
    monkeypatch.setattr(dialect, "MIGRATIONS", [*MIGRATIONS, step])
    store = SqliteStore(path, migrate=False)
    try:
        assert store.schema_version == HEAD
        with pytest.raises(StoreError, match=r"call store\.migrate\(\)"):
            store.batch([Stats("x", NOW)])
        assert store.migrate() == 1
        assert store.schema_version == HEAD + 1
        (stats,) = store.batch([Stats("x", NOW)])
        assert stats.schema_version == HEAD + 1
        assert store.migrate() == 0
    finally:
        store.close()


def test_migrate_false_on_a_new_file_creates_no_tables(db_path: Path) -> None:
    """A fresh database opened with migrate=False stays empty and at version 0."""
    store = SqliteStore(db_path, migrate=False)
    assert store.schema_version == 0
    with pytest.raises(StoreError, match="migrate"):
        store.batch([Stats("x", NOW)])
    store.close()
    assert table_names(db_path) == set()


def test_a_closed_store_raises_store_error(db_path: Path) -> None:
    store = SqliteStore(db_path)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.batch([Stats("x", NOW)])
    with pytest.raises(StoreError, match="closed"):
        store.migrate()


def _run(conn: sqlite3.Connection, plan: object) -> object:
    """Drive a dialect generator on a plain connection (what a D1 driver does remotely)."""
    try:
        statements = next(plan)  # type: ignore[call-overload]
        while True:
            statements = plan.send(  # type: ignore[attr-defined]
                [conn.execute(s.sql, s.params).fetchall() for s in statements]
            )
    except StopIteration as stop:
        return stop.value


def test_the_table_version_source_records_versions_without_pragma(db_path: Path) -> None:
    """D1 forbids PRAGMA user_version; the one-row engramdb_schema table replaces it."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    assert _run(conn, read_version(VersionSource.TABLE)) == 0
    for step in MIGRATIONS:
        statements = migration_statements(step, VersionSource.TABLE)
        assert not any("PRAGMA" in s.sql.upper() for s in statements)
        conn.execute("BEGIN")
        for statement in statements:
            conn.execute(statement.sql, statement.params)
        conn.execute("COMMIT")
    assert _run(conn, read_version(VersionSource.TABLE)) == HEAD
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    conn.close()


def test_every_migration_statement_is_a_single_statement() -> None:
    """Steps run with execute(), which refuses more than one statement."""
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        for step in MIGRATIONS:
            for sql in step.statements:
                assert isinstance(Statement(sql), Statement)
                conn.execute(sql)  # raises ProgrammingError for two statements
    assert [step.version for step in MIGRATIONS] == list(range(1, HEAD + 1))
    assert all(re.fullmatch(r"m\d{3}_[a-z0-9_]+", step.name) for step in MIGRATIONS)
