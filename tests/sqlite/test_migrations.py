"""Schema migrations of the SQLite store: golden fixtures, refusal, rollback, opt-out."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import FIXTURES, NOW, make_fixtures

from engramdb import HashEmbedder, Memory, MigrationError, SchemaTooNewError, StoreError
from engramdb._base.types import scope_from_key
from engramdb.flows._trampoline import run
from engramdb.sqlite import SqliteStore
from engramdb.store import GetItems, ScopeSet, SearchLexical, SearchVectors, Stats
from engramdb.store._sqlite.rows import Statement
from engramdb.store._sqlite.schema import (
    MIGRATIONS,
    Migration,
    VersionSource,
    migration_statements,
    read_version,
)
from engramdb.store.rows import ITEM_COLUMNS

GOLDEN = sorted(FIXTURES.glob("schema-v*.db"))
RELEASE = FIXTURES / "release-0.1.0.db"
HEAD = len(MIGRATIONS)


def fixture_version(path: Path) -> int:
    return int(re.fullmatch(r"schema-v(\d+)\.db", path.name).group(1))  # type: ignore[union-attr]


def schema_of(path: Path) -> list[tuple[str, str, str]]:
    """(type, name, normalised SQL) of every schema object, sorted."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    return sorted((kind, name, " ".join((sql or "").split())) for kind, name, sql in rows)


def user_version(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def table_names(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def copy_fixture(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    shutil.copyfile(source, target)
    return target


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_there_is_a_golden_fixture_for_every_released_version() -> None:
    """Schema 1 was released (0.1.0); its fixtures are committed. Schema 2 is not released
    yet: its fixture is added with the release that ships it."""
    released = [fixture_version(p) for p in GOLDEN]
    assert released == list(range(1, len(released) + 1)) and released[-1] >= 1
    assert RELEASE.exists() and user_version(RELEASE) == 1


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
        sam = ScopeSet.of(scope_from_key(fixtures.FIXTURE_ROWS[0][1]))
        lexical, vector, stats = store.batch(
            [
                SearchLexical(sam, "vegetarian", 5, NOW),
                SearchVectors(sam, fixtures.SPACE_ID, (1.0, 0.0, 0.0, 0.0), 5, NOW),
                Stats(fixtures.SPACE_ID, NOW),
            ]
        )
    assert [hit.record.id for hit in lexical.hits] == [ids[0]]
    assert vector.hits[0].record.id == ids[0]
    assert vector.hits[0].score == pytest.approx(1.0)
    assert (stats.items, stats.vectors, stats.schema_version) == (3, 3, HEAD)


def _answers() -> dict[str, Any]:
    return dict(json.loads((FIXTURES / "release-0.1.0.json").read_text()))


_NEWER_EVIDENCE = ("rerank_score", "vector_share", "lexical_share")


def _evidence(evidence: Any) -> dict[str, Any]:
    at = evidence["embedded_at"]
    return {
        # the keys newer than the fixture (the rerank score, each leg's share) left out
        **{key: value for key, value in evidence.items() if key not in _NEWER_EVIDENCE},
        "scope": list(evidence["scope"]),
        "embedded_at": None if at is None else at.isoformat(),
    }


class _Later:
    """A clock well after the fixture was written (its items have not expired)."""

    def __call__(self) -> datetime:
        return datetime.fromisoformat("2026-06-01T00:00:00+00:00")


def test_the_release_database_upgrades_with_the_same_answers(tmp_path: Path) -> None:
    """A database written through the 0.1.0 API (two spaces, a pending item, an update,
    a custom id, an expiring item) opens at head and answers every recall with the
    evidence 0.1.0 gave, and its records are unchanged."""
    answers = _answers()
    path = copy_fixture(RELEASE, tmp_path)
    store = SqliteStore(path)
    assert store.schema_version == HEAD
    memories = {
        dimensions: Memory(store, HashEmbedder(dimensions=dimensions), clock=_Later())
        for dimensions in (32, 16)
    }
    for record in answers["records"]:
        got = memories[32].get(record["id"])
        assert got is not None
        assert got.text == record["text"] and got.revision == record["revision"]
        assert (got.metadata, got.labels) == (record["metadata"], record["labels"])
        assert got.created_at.isoformat() == record["created_at"]
        assert got.updated_at.isoformat() == record["updated_at"]
    for expected in answers["recalls"]:
        memory = memories[expected["dimensions"]]
        text = next(r["text"] for r in answers["records"] if r["id"] == expected["id"])
        scope = tuple(expected["evidence"]["scope"])
        hits = memory.recall(text, scopes=[scope], top_k=10)
        (hit,) = [h for h in hits if h.memory.id == expected["id"]]
        # 0.1.0 said "used" where the vector leg could not score every memory of the
        # scope (one is pending, some are in the other space); it says "partial" now.
        assert hits.coverage is not None
        honest = "partial" if hits.coverage < 1.0 else expected["status"]
        assert hits.status == honest
        assert hit.evidence["rerank_score"] is None  # newer than the fixture; no rerank ran
        assert _evidence(hit.evidence) == expected["evidence"]
    with contextlib.closing(sqlite3.connect(path)) as conn:  # an old file keeps its pages
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
    status = memories[32].status()
    assert (status.items, status.pending, list(status.spaces)) == (
        answers["status"]["items"],
        answers["status"]["pending"],
        answers["status"]["spaces"],
    )
    # The pending item is embedded by reindex(), and the upgraded file keeps working.
    assert memories[32].reindex() == 1
    assert memories[32].status().pending == 0
    store.close()


@pytest.mark.parametrize(
    "golden",
    [*GOLDEN, RELEASE, FIXTURES / "before-segments-v4.db", FIXTURES / "before-bookkeeping-v5.db"],
    ids=lambda p: p.name,
)
def test_fresh_schema_equals_upgraded_schema(golden: Path, tmp_path: Path) -> None:
    """A database created at head and one upgraded from a fixture have the same schema."""
    fresh = tmp_path / "fresh.db"
    SqliteStore(fresh).close()
    upgraded = copy_fixture(golden, tmp_path)
    SqliteStore(upgraded).close()
    assert schema_of(fresh) == schema_of(upgraded)
    assert user_version(fresh) == user_version(upgraded) == HEAD


def test_the_item_row_is_declared_once(tmp_path: Path) -> None:
    """items (after seq, and before the derived token count) and item_revisions have
    exactly the columns the dialect declares."""
    path = tmp_path / "fresh.db"
    SqliteStore(path).close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        items = [row[1] for row in conn.execute("PRAGMA table_info(items)")]
        revisions = [row[1] for row in conn.execute("PRAGMA table_info(item_revisions)")]
    assert items == ["seq", *ITEM_COLUMNS, "tokens"]
    assert revisions == list(ITEM_COLUMNS)


def test_a_newer_database_is_refused_and_left_byte_for_byte_untouched(db_path: Path) -> None:
    """SchemaTooNewError names both versions; the file, and the absence of a WAL, stay."""
    SqliteStore(db_path).close()
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute(f"PRAGMA user_version = {HEAD + 5}")
    before = db_path.read_bytes()
    for migrate in (True, False):
        with pytest.raises(SchemaTooNewError) as caught:
            SqliteStore(db_path, migrate=migrate)
        assert (caught.value.found, caught.value.supported) == (HEAD + 5, HEAD)
        assert "upgrade engramdb" in str(caught.value)
    assert db_path.read_bytes() == before
    assert sorted(p.name for p in db_path.parent.iterdir()) == [db_path.name]


@pytest.mark.parametrize("version", [-1, -(2**31)])
def test_a_negative_user_version_is_refused_untouched(db_path: Path, version: int) -> None:
    """A negative version was not written by engramdb: MigrationError, file unchanged."""
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        conn.execute("CREATE TABLE notes (x)")
        conn.execute(f"PRAGMA user_version = {version}")
    before = files_of(db_path.parent)
    for migrate in (True, False):
        with pytest.raises(MigrationError, match=f"version {version}, which is not"):
            SqliteStore(db_path, migrate=migrate)
    assert files_of(db_path.parent) == before


@pytest.mark.parametrize("stored", ["'two'", "1.5", "-3"])
def test_a_table_version_that_is_not_a_non_negative_integer_is_refused(stored: str) -> None:
    """The D1 version table gets the same check as user_version."""
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE TABLE engramdb_schema (id INTEGER PRIMARY KEY, version)")
        conn.execute(f"INSERT INTO engramdb_schema VALUES (1, {stored})")
        with pytest.raises(MigrationError, match="not a non-negative integer"):
            _run(conn, read_version(VersionSource.TABLE))


def test_migrate_false_changes_nothing_in_the_file(tmp_path: Path) -> None:
    """Opening an old database with migrate=False leaves every byte (and no WAL) as it was,
    even after reads are refused."""
    path = copy_fixture(RELEASE, tmp_path)
    before = files_of(tmp_path)
    store = SqliteStore(path, migrate=False)
    assert store.schema_version == 1
    with pytest.raises(StoreError, match=r"call store\.migrate\(\)"):
        store.batch([Stats("x", NOW)])
    store.close()
    assert files_of(tmp_path) == before


def test_a_foreign_database_whose_migration_fails_is_left_as_it_was(db_path: Path) -> None:
    """A SQLite file of another application whose tables clash with ours: the migration
    fails with MigrationError naming the step, and the file is byte for byte as before
    (still in its own journal mode: the switch to WAL comes only after a migration)."""
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        conn.execute("CREATE TABLE vectors (theirs TEXT)")
        conn.execute("INSERT INTO vectors VALUES ('their data')")
        conn.commit()
    before = files_of(db_path.parent)
    with pytest.raises(MigrationError, match="m001_initial"):
        SqliteStore(db_path)
    assert files_of(db_path.parent) == before


def test_a_failing_migration_step_rolls_back_and_keeps_the_version(tmp_path: Path) -> None:
    """A good step commits; the failing step after it leaves no trace; the error says so."""
    path = copy_fixture(FIXTURES / "schema-v1.db", tmp_path)
    good = Migration(HEAD + 1, "m900_add_notes", ("CREATE TABLE notes (id TEXT PRIMARY KEY)",))
    bad = Migration(
        HEAD + 2,
        "m901_broken",
        ("CREATE TABLE half_done (x)", "ALTER TABLE no_such_table ADD COLUMN y"),
    )
    with pytest.raises(MigrationError) as caught:
        SqliteStore(path, migrations=[*MIGRATIONS, good, bad])
    assert "m901_broken" in str(caught.value)
    assert f"stays at schema version {HEAD + 1}" in str(caught.value)
    assert user_version(path) == HEAD + 1
    assert "notes" in table_names(path)
    assert "half_done" not in table_names(path)


def test_a_step_another_process_ran_meanwhile_counts_as_done(db_path: Path) -> None:
    """Two stores open an old file: the second, finding the step applied when its own
    transaction starts, skips it instead of applying it twice."""
    SqliteStore(db_path).close()
    step = Migration(HEAD + 1, "m900_add_counter", ("CREATE TABLE counter (n INTEGER)",))
    first = SqliteStore(db_path, migrate=False, migrations=[*MIGRATIONS, step])
    second = SqliteStore(db_path, migrate=False, migrations=[*MIGRATIONS, step])
    assert first.migrate() == 1
    assert second.migrate() == 0  # its version assertion failed, the re-read says done
    assert second.schema_version == HEAD + 1
    first.close()
    second.close()


def test_migrate_false_opens_an_old_database_but_refuses_batches_until_migrate(
    tmp_path: Path,
) -> None:
    """With migrate=False nothing is changed until you call migrate()."""
    path = copy_fixture(FIXTURES / "schema-v1.db", tmp_path)
    step = Migration(HEAD + 1, "m900_add_notes", ("CREATE TABLE notes (id TEXT PRIMARY KEY)",))
    store = SqliteStore(path, migrate=False, migrations=[*MIGRATIONS, step])
    try:
        assert store.schema_version == 1
        with pytest.raises(StoreError, match=r"call store\.migrate\(\)"):
            store.batch([Stats("x", NOW)])
        assert store.migrate() == HEAD
        assert store.schema_version == HEAD + 1
        (stats,) = store.batch([Stats("x", NOW)])
        assert stats.schema_version == HEAD + 1
        assert store.migrate() == 0
    finally:
        store.close()


def test_migrate_false_creates_no_file_and_no_tables(db_path: Path) -> None:
    """migrate=False never creates a missing file (StoreError says how to create it); an
    empty existing file stays empty and at version 0, its batches refused."""
    with pytest.raises(StoreError, match="does not exist, and migrate=False creates nothing"):
        SqliteStore(db_path, migrate=False)
    assert not db_path.exists()
    db_path.touch()
    store = SqliteStore(db_path, migrate=False)
    assert store.schema_version == 0
    with pytest.raises(StoreError, match="migrate"):
        store.batch([Stats("x", NOW)])
    store.close()
    assert table_names(db_path) == set() and db_path.read_bytes() == b""


def test_a_closed_store_raises_store_error(db_path: Path) -> None:
    store = SqliteStore(db_path)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.batch([Stats("x", NOW)])
    with pytest.raises(StoreError, match="closed"):
        store.migrate()


def _run(conn: sqlite3.Connection, plan: Any) -> Any:
    """Drive a dialect plan on a plain connection (what a D1 driver does remotely)."""
    return run(
        plan, lambda statements: [conn.execute(s.sql, s.params).fetchall() for s in statements]
    )


def test_the_table_version_source_records_versions_without_pragma(db_path: Path) -> None:
    """D1 forbids PRAGMA user_version; the one-row engramdb_schema table replaces it."""
    with contextlib.closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
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


def test_every_migration_statement_is_a_single_statement() -> None:
    """Steps run with execute(), which refuses more than one statement."""
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        for step in MIGRATIONS:
            for sql in step.statements:
                assert isinstance(Statement(sql), Statement)
                conn.execute(sql)  # raises ProgrammingError for two statements
    assert [step.version for step in MIGRATIONS] == list(range(1, HEAD + 1))
    assert all(re.fullmatch(r"m\d{3}_[a-z0-9_]+", step.name) for step in MIGRATIONS)


def test_a_batch_runs_once_another_store_migrated_the_file(tmp_path: Path) -> None:
    """The gate before a batch reads the version again: a store opened with
    migrate=False on an old file works as soon as another one has migrated it."""
    path = copy_fixture(FIXTURES / "schema-v1.db", tmp_path)
    old = SqliteStore(path, migrate=False)
    try:
        with pytest.raises(StoreError, match=r"schema version 1 but this engramdb needs"):
            old.batch([Stats("x", NOW)])
        SqliteStore(path).close()  # another process's store migrates it
        (stats,) = old.batch([Stats("x", NOW)])
        assert stats.schema_version == HEAD
    finally:
        old.close()
