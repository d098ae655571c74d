"""Helpers for the SQLite-only tests: records, unit vectors, a fixed time, a plan recorder,
other processes, fixtures."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from engramdb._base.errors import StoreError
from engramdb._base.types import EmbeddingSpace, MemoryRecord, Scope
from engramdb.flows._trampoline import run
from engramdb.store import Op, PutItem, PutVector
from engramdb.store._sqlite import SqliteVectorCache, Statement, run_batch
from engramdb.store._sqlite.schema import MIGRATIONS, VersionSource, migration_statements
from engramdb.testing._harness import (  # noqa: F401 - re-exported for the SQLite tests
    NOW,
    SPACE,
    record,
    sha256,
    unit,
    unit_blob,
)


class FixtureClock:
    """The time of the golden files written through the API at schemas 4 and 5
    (``before-segments-v4``, ``before-bookkeeping-v5``): their writes ended before
    2026-01-01T01:00Z, and none of their memories has expired by then."""

    def __call__(self) -> datetime:
        return datetime(2026, 1, 1, 1, tzinfo=UTC)


SAM: Scope = ("acme", "user", "sam")
KIM: Scope = ("acme", "user", "kim")
ROOT = Path(__file__).resolve().parents[2]
blob = unit_blob  # the stored bytes of a vector scaled to unit length


def put(rec: MemoryRecord, vector: Sequence[float], space: EmbeddingSpace = SPACE) -> list[Op]:
    """The ops ``Memory`` sends for one new item: its vector, then the item."""
    return [PutVector(space.id, rec.content_sha256, blob(vector), NOW), PutItem(rec, NOW)]


@contextlib.contextmanager
def plain(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain ``sqlite3`` connection to ``path`` (another tool), committed and closed."""
    conn = sqlite3.connect(path)
    try:
        yield conn
        conn.commit()
    finally:
        conn.close()


class Recorder:
    """Drives ``run_batch`` on a plain ``sqlite3`` connection, as a D1 driver would, and
    records every statement list the plan yields.

    ``conn`` holds a database migrated to head (schema version in ``engramdb_schema``,
    as on D1). Each yielded list runs as one transaction, as D1 runs one ``batch()``;
    ``between(statements)`` runs before it: a place for another writer to step in.
    """

    def __init__(
        self, cache: SqliteVectorCache | None = None, conn: sqlite3.Connection | None = None
    ) -> None:
        if conn is None:
            conn = sqlite3.connect(":memory:", isolation_level=None)
            for step in MIGRATIONS:
                for statement in migration_statements(step, VersionSource.TABLE):
                    conn.execute(statement.sql, statement.params)
        self.conn = conn
        self.cache = SqliteVectorCache() if cache is None else cache
        self.yields: list[list[Statement]] = []

    def run(
        self, ops: Sequence[Op], between: Callable[[list[Statement]], None] | None = None
    ) -> list[Any]:
        """Run ``ops``; return their results."""

        def perform(statements: list[Statement]) -> list[list[tuple[Any, ...]]]:
            assert isinstance(statements, list), statements
            self.yields.append(statements)
            if between is not None:
                between(statements)
            try:
                self.conn.execute("BEGIN")
                rows = [self.conn.execute(s.sql, s.params).fetchall() for s in statements]
                self.conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self.conn.execute("ROLLBACK")
                raise StoreError(str(exc)) from exc
            return rows

        return run(run_batch(ops, self.cache, schema_version=len(MIGRATIONS)), perform)

    def statements(self) -> list[Statement]:
        """Every statement recorded so far."""
        return [statement for batch in self.yields for statement in batch]


def python_env() -> dict[str, str]:
    """The environment of a child Python that imports this checkout's engramdb."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "core"), str(ROOT / "drivers"), env.get("PYTHONPATH", "")]
    )
    return env


def other_process(db_path: Path, code: str, *, dimensions: int = 64) -> str:
    """Run ``code`` in a fresh Python process with ``memory`` open on ``db_path``; return
    what it printed."""
    script = (
        "from engramdb import HashEmbedder, Memory\n"
        "from engramdb.sqlite import SqliteStore\n"
        f"memory = Memory(SqliteStore({str(db_path)!r}), HashEmbedder(dimensions={dimensions}))\n"
        f"{code}\n"
        "memory.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=python_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def race(
    tmp_path: Path, code: str, args: Sequence[str], workers: int = 2, timeout: float = 60
) -> list[str]:
    """Start ``workers`` Python processes running ``code`` with ``sys.argv[1:]`` =
    ``[*args, ready_flag, go_flag]`` (ready flags ``ready-0`` ... in ``tmp_path``); once
    each has touched its ready flag (set up and waiting for ``go_flag``), start them at
    once. Return what each printed, failing if one fails or outlasts ``timeout`` s."""
    go = tmp_path / "go"
    ready = [tmp_path / f"ready-{n}" for n in range(workers)]
    started = [
        subprocess.Popen(
            [sys.executable, "-c", code, *args, str(flag), str(go)],
            env=python_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for flag in ready
    ]
    try:
        deadline = time.monotonic() + 30
        while not all(flag.exists() for flag in ready):
            assert time.monotonic() < deadline, "the workers did not start"
            assert all(w.poll() is None for w in started), [w.communicate() for w in started]
            time.sleep(0.005)
        go.touch()  # all are open and waiting: start them at once
        outputs = [w.communicate(timeout=timeout) for w in started]
    finally:
        for worker in started:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert [w.returncode for w in started] == [0] * workers, [err for _, err in outputs]
    return [out.strip() for out, _ in outputs]


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def make_fixtures() -> ModuleType:
    """The fixture-writing script, imported by path (it knows the golden rows)."""
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
