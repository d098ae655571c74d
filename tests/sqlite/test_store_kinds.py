"""``engramdb.stores``: the one registry of what a database setting names, which every
face (settings, ``engramdb serve``, the CLI) asks instead of testing the text itself."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from engramdb import ConfigurationError
from engramdb.settings import resolve
from engramdb.sqlite import SqliteStore
from engramdb.stores import open_store, store_kind


@pytest.mark.parametrize(
    "db, name",
    [
        (":memory:", "SQLite in memory"),
        ("postgresql://app@db.internal/notes", "PostgreSQL"),
        ("postgres://db/notes", "PostgreSQL"),
        ("host=db dbname=notes", "PostgreSQL"),
        ("notes.sqlite3", "SQLite"),
        ("data/host=a.db", "SQLite"),
        ("./a folder/m.db", "SQLite"),
    ],
)
def test_each_setting_has_one_kind(db: str, name: str) -> None:
    assert store_kind(db).name == name


def test_a_file_is_opened_where_it_is_named_and_exists_once_written(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    kind = store_kind(db)
    assert kind.is_file and not kind.exists(db)
    store = open_store(db)
    try:
        assert isinstance(store, SqliteStore)
    finally:
        store.close()
    assert kind.exists(db)
    memory = open_store(":memory:")
    memory.close()
    assert store_kind(":memory:").exists(":memory:")
    assert store_kind("postgresql://db/notes").exists("postgresql://db/notes")


def test_each_tenant_gets_its_own_file_beside_the_setting(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    kind = store_kind(db)
    alice, bob = kind.tenant_db(db, "alice"), kind.tenant_db(db, "bob")
    assert alice != bob and alice == kind.tenant_db(db, "alice")
    digest = hashlib.sha256(b"../../etc").hexdigest()
    assert kind.tenant_db(db, "../../etc") == str(Path(db + ".d") / f"{digest}.sqlite3")
    # an in-memory database is a new one at each open: tenants never meet in it
    assert store_kind(":memory:").tenant_db(":memory:", "alice") == ":memory:"


def test_a_postgres_database_holds_one_tenant() -> None:
    db = "postgresql://app:hunter2@db/notes"
    with pytest.raises(ConfigurationError, match="run a server per tenant") as raised:
        store_kind(db).tenant_db(db, "alice")
    assert "hunter2" not in str(raised.value)


def test_settings_keep_a_file_path_normalised_and_other_kinds_as_given(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)}  # no config file
    assert resolve(db="./x/../m.db", environ=env).db == str(Path("./x/../m.db"))
    assert resolve(db="host=db dbname=n", environ=env).db == "host=db dbname=n"
    assert resolve(db=":memory:", environ=env).db == ":memory:"


def test_a_postgres_setting_without_the_extra_names_the_extra() -> None:
    """Without psycopg, ``import engramdb.postgres`` says which extra to install, and a
    face opening a PostgreSQL setting says it as a ConfigurationError, not a traceback
    of a missing module."""
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['psycopg'] = None\n"  # as if it were not installed
        "from engramdb import ConfigurationError\n"
        "from engramdb.stores import open_store\n"
        "try:\n    import engramdb.postgres\nexcept ImportError as e:\n    print(e)\n"
        "try:\n    open_store('postgresql://app:hunter2@db/notes')\n"
        "except ConfigurationError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == "engramdb.postgres needs psycopg 3: pip install 'engramdb[postgres]'"
    assert "pip install 'engramdb[postgres]'" in out[1] and "hunter2" not in out[1]
