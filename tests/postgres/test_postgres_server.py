"""The test server itself: it runs on every x86-64 machine (no AVX-512 outside run-time
dispatch), it never outlives the session that started it, a crash behind a store is a
``StoreError``, and ``stop()`` escalates and removes its directory only once the server
is gone."""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import pg_server
import psycopg
import pytest
from portability import avx512_problems

from engramdb import HashEmbedder, Memory, StoreError


def _server_file(admin: str, name: str, below: str) -> Path:
    with psycopg.connect(admin) as conn:
        row = conn.execute("SELECT setting FROM pg_config WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return Path(row[0]) / below


@pytest.mark.skipif(platform.machine() != "x86_64", reason="an x86-64 check")
def test_the_servers_vector_and_postgres_binaries_use_avx512_only_behind_dispatch(
    pg_admin_dsn: str,
) -> None:
    """The vector.so and postgres binary of the server in use (or the file named by
    ENGRAMDB_CHECK_SERVER_BINARY) would not crash on an x86-64 CPU without AVX-512."""
    given = os.environ.get("ENGRAMDB_CHECK_SERVER_BINARY")
    files = (
        [Path(given)]
        if given
        else [
            _server_file(pg_admin_dsn, "PKGLIBDIR", "vector.so"),
            _server_file(pg_admin_dsn, "BINDIR", "postgres"),
        ]
    )
    if os.environ.get("PG_DSN") and not given and not all(path.is_file() for path in files):
        pytest.skip("PG_DSN's server is not on this machine: its binaries cannot be read")
    for path in files:
        assert path.is_file(), path
        assert avx512_problems(path) == [], f"{path} needs AVX-512; run {pg_server.SETUP}"


_KERNEL = """
float dot(const float *a, const float *b, int n) {
    float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s;
}
"""

_DISPATCHED = """
#include <cpuid.h>
__attribute__((target("avx512f"))) static float DotAvx512(const float *a, const float *b,
                                                           int n) {
    float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s;
}
static float DotDefault(const float *a, const float *b, int n) {
    float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s;
}
float dot(const float *a, const float *b, int n) {
    unsigned int eax, ebx, ecx, edx;
    __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx);
    return (ebx & (1u << 16)) ? DotAvx512(a, b, n) : DotDefault(a, b, n);
}
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="an x86-64 check")
@pytest.mark.parametrize(
    ("source", "flags", "portable"),
    [
        (_KERNEL, ["-mavx512f", "-mprefer-vector-width=512"], False),
        (_KERNEL, ["-march=x86-64-v3"], True),
        (_DISPATCHED, ["-mprefer-vector-width=512"], True),
    ],
    ids=["avx512-everywhere", "x86-64-v3", "avx512-behind-cpuid"],
)
def test_the_check_finds_avx512_code_that_is_not_dispatched(
    tmp_path: Path, source: str, flags: list[str], portable: bool
) -> None:
    """The check fails on a library compiled for AVX-512 (as -march=native does on such a
    machine) and passes one that picks its AVX-512 kernel after asking the CPU."""
    gcc = shutil.which("gcc")
    assert gcc, f"gcc is needed for this check; run {pg_server.SETUP}"
    (tmp_path / "k.c").write_text(source)
    library = tmp_path / "k.so"
    command = [gcc, "-O3", "-ffast-math", "-shared", "-fPIC", *flags]
    subprocess.run([*command, "-o", str(library), str(tmp_path / "k.c")], check=True)
    problems = avx512_problems(library)
    assert (problems == []) is portable, problems


def _gone(pid: int) -> bool:
    """No such process, or only its exit status left (a zombie: PID 1 of a container
    may never reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


_SESSION = """
import sys, time
sys.path.insert(0, {here!r})
import pg_server
server = pg_server.start()
print(server.root, server.process.pid, flush=True)
time.sleep(600)
"""


def test_a_session_killed_with_sigkill_leaves_no_server_running() -> None:
    """The postmaster follows its starting process when that dies without cleaning up;
    the next start removes the directory left behind."""
    script = _SESSION.format(here=str(Path(__file__).parent))
    session = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert session.stdout is not None
        root, pid = session.stdout.readline().split()
        data = Path(root) / "data"
        assert pg_server._processes_in(data), "the server should be running"
        session.send_signal(signal.SIGKILL)
        session.wait()
        deadline = time.monotonic() + 30
        while pg_server._processes_in(data) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pg_server._processes_in(data) == [], "server processes outlived the session"
        assert _gone(int(pid))
        assert Path(root).exists()  # its files stay until the next start sweeps them
        pg_server.start().stop()
        assert not Path(root).exists()
    finally:
        session.kill()
        session.wait()
        session.stdout.close()


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_sigkilled_postmaster_is_a_store_error_and_the_helper_still_stops(face: str) -> None:
    """Killing the server behind a running store: writes and reads raise StoreError
    (never a raw psycopg error), and stop() then finds nothing left and cleans up."""
    import asyncio

    from engramdb.postgres import PostgresStore

    server = pg_server.start()
    try:
        scope = ("acme", "user", "sam")
        store = PostgresStore(server.dsn)
        if face == "sync":
            memory = Memory(store, HashEmbedder())
            memory.remember("Sam is vegetarian", scope=scope)
        else:
            from engramdb import AsyncMemory

            amemory = AsyncMemory(store, HashEmbedder())
            asyncio.run(amemory.remember("Sam is vegetarian", scope=scope))
        postmaster = server.postmaster_pid()
        assert postmaster is not None
        os.kill(postmaster, signal.SIGKILL)
        # The backend serving the store outlives the postmaster until it notices: wait
        # for it to go, or a query may still be answered (a race, not the behaviour).
        deadline = time.monotonic() + 15
        while server.processes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.processes() == [], "the server's backends outlived the postmaster"
        for attempt in ("remember", "list"):
            with pytest.raises(StoreError) as caught:
                if face == "sync":
                    if attempt == "remember":
                        memory.remember("Sam likes risotto", scope=scope)
                    else:
                        memory.list(scope)
                elif attempt == "remember":
                    asyncio.run(amemory.remember("Sam likes risotto", scope=scope))
                else:
                    asyncio.run(amemory.list(scope))
            assert not isinstance(caught.value, psycopg.Error)
    finally:
        with suppress(StoreError, NameError):  # a store whose server died: closed, or this
            store.close() if face == "sync" else asyncio.run(store.aclose())
        server.stop()
    assert not server.root.exists()
    assert server.processes() == []


def test_stop_escalates_past_a_pg_ctl_that_cannot_stop_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With pg_ctl failing at every mode, stop() kills the server by PID; while the
    server still runs the directory is kept and stop() raises."""
    server = pg_server.start()
    real_bin = server.bin_dir
    broken = tmp_path / "bin"
    broken.mkdir()
    (broken / "pg_ctl").write_text("#!/bin/sh\necho 'pg_ctl: could not stop' >&2\nexit 1\n")
    (broken / "pg_ctl").chmod(0o755)  # run as postgres it may not even be reachable
    server.bin_dir = broken
    try:
        with monkeypatch.context() as patch:
            patch.setattr(pg_server, "_STOP_TIMEOUT", 1.0)
            patch.setattr(pg_server.os, "kill", lambda pid, sig: None)
            with pytest.raises(RuntimeError, match="did not stop"):
                server.stop()
        assert server.root.exists() and server.running()
        server.stop()  # pg_ctl still fails: SIGKILL by PID
        assert not server.root.exists()
        assert server.processes() == []
    finally:
        server.bin_dir = real_bin
        if server.root.exists():
            server.stop()


def test_a_server_that_does_not_start_raises_with_its_log() -> None:
    """A bad setting: start() raises with the server log's last lines and leaves no
    directory behind."""
    before = set(Path(pg_server.tempfile.gettempdir()).glob("engramdb-pg-*"))
    with pytest.raises(RuntimeError) as caught:
        pg_server.start({"shared_buffers": "plenty"})
    message = str(caught.value)
    assert "shared_buffers" in message and "log ends" in message, message
    assert set(Path(pg_server.tempfile.gettempdir()).glob("engramdb-pg-*")) <= before
