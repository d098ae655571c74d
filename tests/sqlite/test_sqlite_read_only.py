"""``SqliteStore(path, read_only=True)``: a SQLite file opened with ``mode=ro`` answers
recalls and refuses writes; a file or folder the process may not write is read too (a
WAL database whose folder refuses the ``-shm`` file is read as immutable)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from engramdb import ConfigurationError, HashEmbedder, Memory, StoreError
from engramdb.driver import MIGRATIONS
from engramdb.sqlite import SqliteStore
from unprivileged import make_read_only, run_python, shared_folder

SAM = ("acme", "user", "sam")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fill(path: Path, **options: object) -> None:
    """A database at ``path`` holding two memories of SAM (a WAL file, closed)."""
    with Memory(SqliteStore(path, **options), HashEmbedder(64)) as memory:
        view = memory.bind(SAM)
        view.remember("sam eats pasta on fridays")
        view.remember("sam plays chess")


def test_a_file_nobody_may_write_recalls_through_mode_ro_and_stays_byte_for_byte(
    tmp_path: Path,
) -> None:
    """A ``chmod a-w`` file opened with ``read_only=True`` recalls (no receipt:
    ``selection_id`` None), refuses a write with the fix, and its bytes do not change.
    SQLite's ``mode=ro`` refuses writes for root too, so this holds for every user."""
    path = tmp_path / "memory.db"
    fill(path)
    make_read_only(path)
    before = digest(path)
    with Memory(SqliteStore(path, read_only=True), HashEmbedder(64)) as memory:
        assert memory.store.capabilities.read_only
        assert "read-only" in repr(memory.store)
        view = memory.bind(SAM)
        hits = view.recall("what does sam eat?")
        assert [hit.memory.text for hit in hits][:1] == ["sam eats pasta on fridays"]
        assert hits.selection_id is None
        assert hits.error is not None and hits.error.startswith("read-only:")
        with pytest.raises(StoreError, match=r"open read-only, and \w+ would change it"):
            view.remember("sam likes tea")
    assert digest(path) == before


def test_a_schema_behind_head_is_one_error_naming_the_fix_and_nothing_changes(
    tmp_path: Path,
) -> None:
    """``read_only=True`` never migrates: a database one step behind is refused at open
    with ``StoreError`` naming both versions and how to migrate; the file is unchanged."""
    path = tmp_path / "old.db"
    SqliteStore(path, migrations=MIGRATIONS[:-1]).close()
    before = digest(path)
    with pytest.raises(StoreError) as caught:
        SqliteStore(path, read_only=True)
    message = str(caught.value)
    assert f"schema version {len(MIGRATIONS) - 1} but this engramdb needs" in message
    assert "read_only=True never migrates: migrate it first (engramdb migrate" in message
    assert digest(path) == before


def test_read_only_opens_only_an_existing_file_and_never_migrates(tmp_path: Path) -> None:
    """A missing file is a ``StoreError`` and is not created; ``:memory:`` and a
    read_only that is not a bool are ``ConfigurationError``; ``migrate()`` on a read-only
    store is a ``StoreError`` naming the fix."""
    missing = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="read_only=True creates nothing"):
        SqliteStore(missing, read_only=True)
    assert not missing.exists()
    with pytest.raises(ConfigurationError, match="read_only=True needs a database file"):
        SqliteStore(":memory:", read_only=True)
    with pytest.raises(ConfigurationError, match="read_only='yes' must be True or False"):
        SqliteStore(tmp_path / "x.db", read_only="yes")  # type: ignore[arg-type]
    path = tmp_path / "memory.db"
    fill(path)
    with (
        SqliteStore(path, read_only=True) as store,
        pytest.raises(StoreError, match="open read-only, so it cannot be migrated"),
    ):
        store.migrate()


_RECALL = """
import json, sys
from engramdb import HashEmbedder, Memory
from engramdb.sqlite import SqliteStore
with Memory(SqliteStore(sys.argv[1], read_only=True), HashEmbedder(64)) as memory:
    hits = memory.bind(("acme", "user", "sam")).recall("what does sam eat?")
    print(json.dumps([[hit.memory.text for hit in hits], hits.selection_id]))
"""


def test_a_wal_database_in_a_folder_nobody_may_write_is_read_as_immutable() -> None:
    """A WAL database (closed, so without its ``-wal`` and ``-shm`` files) in a folder
    the user may not write: SQLite's ``mode=ro`` alone cannot read it (it would make the
    ``-shm`` file), so the store reads it as immutable, and the recall answers."""
    with shared_folder() as folder:
        path = folder / "memory.db"
        fill(path)
        assert not (folder / "memory.db-shm").exists()
        make_read_only(path, folder)
        done = run_python(["-c", _RECALL, str(path)], dict(os.environ))
        assert done.returncode == 0, done.stderr
        texts, selection_id = json.loads(done.stdout)
        assert texts[0] == "sam eats pasta on fridays"
        assert selection_id is None
        assert sorted(p.name for p in folder.iterdir()) == ["memory.db"]
