"""``engramdb`` on a database it may not write: ``--read-only``, and a SQLite file (or
its folder) the process cannot write, which it opens read-only by itself. The CLI runs
for real, in a subprocess."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engramdb import ConfigurationError, HashEmbedder, Memory
from engramdb.sqlite import SqliteStore
from engramdb.stores import open_store, unwritable
from unprivileged import make_read_only, run_python, shared_folder

PASTA = "sam eats pasta on fridays"
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("ENGRAMDB_")},
    "ENGRAMDB_EMBEDDER": "hash:64",
    "ENGRAMDB_SCOPE": "acme/user/sam",
    "XDG_CONFIG_HOME": "/nonexistent/engramdb-config",
}


def engramdb(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m engramdb.cli --db DB ARGS`` as this process's user."""
    return subprocess.run(
        [sys.executable, "-m", "engramdb.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        check=False,
    )


def fill(path: Path) -> None:
    with Memory(SqliteStore(path), HashEmbedder(64)) as memory:
        view = memory.bind(("acme", "user", "sam"))
        view.remember(PASTA)
        view.remember("sam plays chess")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_read_only_recalls_a_copy_and_refuses_a_write_naming_the_flag(tmp_path: Path) -> None:
    """``recall --read-only`` on a copy answers its hits (standard error says the recall
    is read-only: no receipt); ``remember --read-only`` exits 1 with one line naming
    ``--read-only``; the copy's bytes do not change."""
    fill(tmp_path / "memory.db")
    copy = tmp_path / "copy.db"
    shutil.copy(tmp_path / "memory.db", copy)
    before = digest(copy)
    recalled = engramdb(copy, "--read-only", "recall", "what does sam eat?")
    assert recalled.returncode == 0, recalled.stderr
    assert PASTA in recalled.stdout.splitlines()[0]
    assert "read-only: the store is open read-only" in recalled.stderr
    refused = engramdb(copy, "remember", "sam likes tea", "--read-only")
    assert refused.returncode == 1
    assert "is open read-only" in refused.stderr and "without --read-only" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert digest(copy) == before


def test_read_only_is_for_sqlite_files_and_says_so_for_postgresql() -> None:
    """``--read-only`` with a PostgreSQL URL is one ``ConfigurationError`` (before any
    connection) saying it is for SQLite files, without the URL's password."""
    url = "postgresql://app:hunter2@db.invalid/notes"
    with pytest.raises(ConfigurationError, match="read-only opening") as caught:
        open_store(url, read_only=True)
    assert "hunter2" not in str(caught.value)


def test_a_file_and_folder_nobody_may_write_open_read_only_by_themselves() -> None:
    """Without ``--read-only``, a database whose file and folder the user may not write
    (``chmod a-w``; as root, the command runs as ``nobody``) is opened read-only:
    ``recall`` answers (it used to fail writing its receipt), ``remember`` exits 1 naming
    the fix, and nothing beside the file appears."""
    with shared_folder() as folder:
        path = folder / "memory.db"
        fill(path)
        make_read_only(path, folder)
        before = digest(path)
        recalled = run_python(["-m", "engramdb.cli", "--db", str(path), "recall", "eat"], ENV)
        assert recalled.returncode == 0, recalled.stderr
        assert PASTA in recalled.stdout
        refused = run_python(["-m", "engramdb.cli", "--db", str(path), "remember", "tea"], ENV)
        assert refused.returncode == 1
        assert "is open read-only" in refused.stderr
        assert digest(path) == before
        assert sorted(p.name for p in folder.iterdir()) == ["memory.db"]


_UNWRITABLE = "import sys; from engramdb.stores import unwritable; print(unwritable(sys.argv[1]))"


def test_unwritable_names_the_file_or_the_folder_the_user_may_not_write() -> None:
    """``stores.unwritable`` is None for a file the user may write, else names what
    refuses it: the file itself, or (the file writable) its folder."""
    with shared_folder() as folder:
        path = folder / "memory.db"
        fill(path)
        assert unwritable(str(path)) is None
        path.chmod(0o666)  # anyone may write the file: only the folder refuses
        make_read_only(folder)
        answered = run_python(["-c", _UNWRITABLE, str(path)], ENV)
        assert answered.stdout.strip() == f"you may not write its folder {str(folder)!r}"
        make_read_only(path)
        answered = run_python(["-c", _UNWRITABLE, str(path)], ENV)
        assert answered.stdout.strip() == f"you may not write {str(path)!r}"


def test_commands_that_open_the_database_their_own_way_refuse_read_only(
    cli: Callable[..., tuple[int, str, str]],
) -> None:
    """``migrate``, ``demo``, ``serve`` and ``mcp`` do not open the database through the
    read-only path, so ``--read-only`` is a usage error (exit 2) rather than ignored
    (``migrate --read-only`` must not migrate): before the command, an error naming the
    command; after it, their help does not show the option and their parser refuses it."""
    for name in ("migrate", "demo", "serve", "mcp"):
        status, _out, err = cli("--read-only", name)
        assert status == 2, err
        assert f"--read-only is not for `engramdb {name}`" in err
        status, _out, err = cli(name, "--read-only")
        assert status == 2, err
        assert "unrecognized arguments: --read-only" in err
