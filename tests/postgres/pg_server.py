"""A throwaway PostgreSQL with pgvector for the tests, eval and benchmarks: Debian's
PostgreSQL 15 with a portable pgvector built by ``.ci/setup-postgres`` (docs/testing.md).

:func:`start` runs ``initdb`` in a fresh directory and the postmaster itself as a child
of this process, listening on 127.0.0.1 and a free port. The child is asked to receive
SIGQUIT (PostgreSQL's immediate shutdown) when its parent dies, so a test session killed
with SIGKILL leaves no server running; :meth:`Server.stop` escalates from a fast shutdown
to an immediate one to SIGKILL of the postmaster's PID, and removes the directory only
once the server is gone. Run as root, the server runs as the ``postgres`` OS user
(PostgreSQL refuses root). :func:`admin_dsn` gives ``PG_DSN``'s server or such a
throwaway one; :func:`create_database` and :func:`drop_database` give each test, eval or
benchmark store its own database.

``ENGRAMDB_PG_BINDIR`` names another server's ``bin`` directory (its ``postgres`` must
find pgvector among its extensions).
"""

from __future__ import annotations

import ctypes
import os
import pwd
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

SETUP = "bash .ci/setup-postgres (as root)"
_PREFIX = "engramdb-pg-"
_PR_SET_PDEATHSIG = 1
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 30.0
_PG_CTL_STOP = ["stop", "-w", "-t", str(int(_STOP_TIMEOUT))]


def bin_dir() -> Path:
    """``ENGRAMDB_PG_BINDIR``, else the newest ``/usr/lib/postgresql/N/bin`` whose server
    has pgvector installed."""
    given = os.environ.get("ENGRAMDB_PG_BINDIR")
    if given:
        return Path(given)
    found = sorted(
        (path for path in Path("/usr/lib/postgresql").glob("*/bin") if _has_vector(path)),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    if not found:
        raise RuntimeError(f"no PostgreSQL with pgvector under /usr/lib/postgresql: run {SETUP}")
    return found[-1]


def _has_vector(bin_path: Path) -> bool:
    share = Path("/usr/share/postgresql") / bin_path.parent.name
    return (bin_path / "postgres").exists() and (share / "extension" / "vector.control").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as(user: str | None) -> dict[str, object]:
    """subprocess arguments that run a command as ``user`` (None: as ourselves)."""
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _die_with_parent() -> None:
    """In the child, after its user changed (a credential change clears the setting):
    SIGQUIT when the parent dies, PostgreSQL's immediate shutdown."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() == 1:  # the parent died before the setting took effect
        os._exit(1)


class _Launcher:
    """Starts servers from one daemon thread that lives as long as the process: the
    kernel sends a child its parent-death signal when the *thread* that forked it ends,
    so a server started from a short-lived thread would die with that thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.Queue[tuple[dict[str, Any], queue.Queue[Any]]] = queue.Queue()
        self._thread: threading.Thread | None = None

    def popen(self, command: list[str], **options: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True)
                self._thread.start()
        answer: queue.Queue[Any] = queue.Queue()
        self._requests.put(({"args": command, **options}, answer))
        result = answer.get()
        if isinstance(result, BaseException):
            raise result
        return cast("subprocess.Popen[bytes]", result)

    def _serve(self) -> None:
        while True:
            options, answer = self._requests.get()
            try:
                answer.put(subprocess.Popen(**options))
            except BaseException as exc:  # handed to the caller
                answer.put(exc)


_launcher = _Launcher()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@dataclass
class Server:
    root: Path
    port: int
    user: str | None
    bin_dir: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def dsn(self) -> str:
        return self.dsn_of("postgres")

    def dsn_of(self, dbname: str) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    @property
    def data(self) -> Path:
        return self.root / "data"

    def postmaster_pid(self) -> int | None:
        """The PID in ``postmaster.pid`` (None once the server removed it)."""
        try:
            first = (self.data / "postmaster.pid").read_text().split("\n", 1)[0]
        except FileNotFoundError:
            return None
        return int(first) if first.strip().isdigit() else None

    def processes(self) -> list[int]:
        """The PIDs of this server's processes: the postmaster and its children all run
        in the data directory (an orphaned backend too, until it notices the postmaster
        is gone)."""
        return _processes_in(self.data)

    def running(self) -> bool:
        if self.process is not None and self.process.poll() is None:
            return True
        return bool(self.processes())

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join((self.root / "log").read_text().splitlines()[-lines:])
        except FileNotFoundError:
            return "(no server log)"

    def stop(self) -> None:
        """Stop the server: ``pg_ctl stop -m fast``, then ``-m immediate``, then SIGKILL
        of its processes by PID (the postmaster's from ``postmaster.pid``); the directory
        is removed only once no process of the server is left (else it stays, and this
        raises)."""
        for mode in ("fast", "immediate"):
            if not self.running():
                break
            with suppress(OSError):  # a pg_ctl that cannot run: escalate as on failure
                subprocess.run(
                    [str(self.bin_dir / "pg_ctl"), *_PG_CTL_STOP, "-m", mode, "-D", str(self.data)],
                    capture_output=True,
                    check=False,
                    **_as(self.user),  # type: ignore[call-overload]
                )
            _wait_until(lambda: not self.running(), 2.0)
        if self.running():
            postmaster = self.postmaster_pid()
            for pid in {*self.processes(), *([postmaster] if postmaster else [])}:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _wait_until(lambda: not self.running(), _STOP_TIMEOUT)
        if self.process is not None and self.process.poll() is not None:
            self.process.wait()
        if self.running():
            raise RuntimeError(f"PostgreSQL {self.processes()} did not stop; {self.root} is kept")
        shutil.rmtree(self.root, ignore_errors=True)


def _processes_in(directory: Path) -> list[int]:
    """PIDs of the processes whose working directory is ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") == str(directory):
                found.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def _sweep_stale() -> None:
    """Remove the directories of servers whose starting process died (a killed session):
    their server followed it (SIGQUIT on the parent's death), their files stayed."""
    for root in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        try:
            owner = int((root / "owner").read_text())
        except (OSError, ValueError):
            continue  # still starting, or not ours
        if not _alive(owner) and not _processes_in(root / "data"):
            shutil.rmtree(root, ignore_errors=True)


def start(settings: Mapping[str, str] | None = None) -> Server:
    """Start a server in a new temporary directory; the caller stops it. ``settings``
    are server settings (``-c name=value``) beyond the defaults (e.g. ``shared_buffers``
    for a benchmark). A server that does not start raises with its log's last lines."""
    user = "postgres" if os.geteuid() == 0 else None
    binaries = bin_dir()
    _sweep_stale()
    root = Path(tempfile.mkdtemp(prefix=_PREFIX))
    server = Server(root, _free_port(), user, binaries)
    try:
        (root / "owner").write_text(str(os.getpid()))
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        initdb = [str(binaries / "initdb"), "-D", str(server.data), "-A", "trust", "-U"]
        done = subprocess.run(
            [*initdb, "postgres", "-E", "UTF8", "--locale=C"],
            capture_output=True,
            text=True,
            check=False,
            **_as(user),  # type: ignore[call-overload]
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{done.stdout}\n{done.stderr}")
        options = {
            "listen_addresses": "127.0.0.1",
            "port": str(server.port),
            "unix_socket_directories": str(root),
            "fsync": "off",
            **(settings or {}),
        }
        command = [str(binaries / "postgres"), "-D", str(server.data)]
        for name, value in options.items():
            command += ["-c", f"{name}={value}"]
        with open(root / "log", "ab") as log:
            if user is not None:
                os.chown(root / "log", pwd.getpwnam(user).pw_uid, -1)
            server.process = _launcher.popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
                **_as(user),
            )
        if not _wait_until(lambda: _ready(server), _START_TIMEOUT):
            raise RuntimeError(f"PostgreSQL did not start; its log ends:\n{server.log_tail()}")
    except BaseException:
        if server.process is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return server


def _ready(server: Server) -> bool:
    """``postmaster.pid`` says ``ready`` (as ``pg_ctl -w`` reads it); raises if the
    postmaster already exited."""
    assert server.process is not None
    if server.process.poll() is not None:
        raise RuntimeError(
            f"PostgreSQL exited with {server.process.returncode} at start; its log ends:\n"
            + server.log_tail()
        )
    try:
        lines = (server.data / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return False
    return len(lines) >= 8 and lines[7].strip() == "ready"


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

    drop_database(admin, name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_dsn(admin, name)


def database_dsn(admin: str, name: str) -> str:
    """The DSN of database ``name`` on ``admin``'s server."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return str(make_conninfo(**{**conninfo_to_dict(admin), "dbname": name}))


def drop_database(admin: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
