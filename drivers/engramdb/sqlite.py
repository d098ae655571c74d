"""``SqliteStore``: engramdb on a SQLite file, through the standard library's ``sqlite3``.

The schema, migrations and query plans live in the core (``engramdb._sqlite_dialect``);
this module only executes them. Every batch runs in one transaction (``BEGIN IMMEDIATE``
when it writes), so it is applied completely or not at all. See ``docs/stores.md`` and
``docs/migrations.md``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Generator, Sequence
from types import TracebackType
from typing import Any

from engramdb import _sqlite_dialect as _dialect
from engramdb._errors import MigrationError, StoreError
from engramdb._sqlite_dialect import (
    Rows,
    SqliteVectorCache,
    Statement,
    VersionSource,
    is_write,
    migration_statements,
    pending_migrations,
    read_version,
    run_batch,
)
from engramdb._store import Op, StoreCapabilities

__all__ = ["SqliteStore"]

_SOURCE = VersionSource.USER_VERSION


class SqliteStore:
    """A durable store in a SQLite database file (or ``":memory:"``).

    ``SqliteStore("memory.db")`` opens (creating if needed) the file, refuses a database
    written by a newer engramdb with ``SchemaTooNewError`` (leaving it untouched),
    switches it to WAL and migrates it to the current schema. With ``migrate=False`` an
    older database is opened as it is and every batch raises ``StoreError`` until you
    call :meth:`migrate`. ``busy_timeout`` is how many seconds a write waits for another
    connection's lock before failing.

    Use one store object from one thread at a time; several processes may share a file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        migrate: bool = True,
        busy_timeout: float = 5.0,
    ) -> None:
        self._path = os.fspath(path)
        self.capabilities = StoreCapabilities(durable=self._path != ":memory:")
        self._cache = SqliteVectorCache()
        self._busy_timeout = float(busy_timeout)
        self._conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(self._path, timeout=self._busy_timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot open the SQLite database {self._path!r} ({exc}); check the path "
                "and its permissions"
            ) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            # Check the version before anything that could write (WAL switch, migration):
            # a database from a newer engramdb must be left byte for byte as it was.
            version = int(_drive(conn, read_version(_SOURCE)))
            pending_migrations(version, _dialect.MIGRATIONS)  # raises SchemaTooNewError
            if self._path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL").fetchall()
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(
                f"cannot open the SQLite database {self._path!r} ({exc}); is it a SQLite "
                "file, and writable?"
            ) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._version: int = version
        if migrate:
            try:
                self.migrate()
            except BaseException:
                self.close()
                raise

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else f"schema v{self._version}"
        return f"SqliteStore({self._path!r}, {state})"

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- schema -----------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The database path as given."""
        return self._path

    @property
    def schema_version(self) -> int:
        """The schema version recorded in the database (read now)."""
        conn = self._open_connection()
        try:
            self._version = int(_drive(conn, read_version(_SOURCE)))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the schema version of {self._path!r} ({exc})") from exc
        return self._version

    def migrate(self) -> int:
        """Bring the database to the current schema; return how many steps ran.

        Each step and its version bump commit together. A failing step is rolled back
        (``MigrationError``) and the database stays at the version before it.
        """
        conn = self._open_connection()
        ran = 0
        for step in pending_migrations(self._version, _dialect.MIGRATIONS):
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(
                    f"cannot lock {self._path!r} to migrate it ({exc}); retry when other "
                    "writers are done"
                ) from exc
            try:
                current = _drive(conn, read_version(_SOURCE))  # another process may have run it
                pending_migrations(current, _dialect.MIGRATIONS)
                if current < step.version:
                    for statement in migration_statements(step, _SOURCE):
                        conn.execute(statement.sql, statement.params).fetchall()
                    ran += 1
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise MigrationError(
                    f"migration {step.name} of {self._path!r} failed ({exc}); it was rolled "
                    f"back and the database stays at schema version {step.version - 1}"
                ) from exc
            except BaseException:
                _rollback(conn)
                raise
            self._version = max(current, step.version)
        self._cache.clear()
        return ran

    # -- the store protocol -----------------------------------------------------------

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        """Run ``ops`` in one transaction; return their results in order."""
        conn = self._open_connection()
        head = len(_dialect.MIGRATIONS)
        if self._version != head:
            raise StoreError(
                f"the database {self._path!r} has schema version {self._version} but this "
                f"engramdb needs {head}; call store.migrate() (or open it with migrate=True)"
            )
        if not ops:
            return []
        writes = any(is_write(op) for op in ops)
        plan = run_batch(ops, self._cache, schema_version=self._version)
        try:
            conn.execute("BEGIN IMMEDIATE" if writes else "BEGIN")
        except sqlite3.Error as exc:
            raise _store_error(self._path, exc) from exc
        try:
            results: list[Any] = _drive(conn, plan)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._abort(conn)
            raise _store_error(self._path, exc) from exc
        except BaseException:
            self._abort(conn)
            raise
        return results

    async def abatch(self, ops: Sequence[Op]) -> list[Any]:
        """Same as :meth:`batch` (SQLite calls are short; they run inline)."""
        return self.batch(ops)

    def close(self) -> None:
        """Close the connection. Closing twice is fine; a closed store raises StoreError."""
        conn, self._conn = self._conn, None
        self._cache.clear()
        if conn is not None:
            conn.close()

    async def aclose(self) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------

    def _open_connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"this SqliteStore ({self._path!r}) is closed; open a new one")
        return self._conn

    def _abort(self, conn: sqlite3.Connection) -> None:
        # The cache may hold rows of the rolled-back transaction tagged with a generation
        # another writer could reach next; forget it all.
        self._cache.clear()
        _rollback(conn)


def _drive(conn: sqlite3.Connection, plan: Generator[list[Statement], list[Rows], Any]) -> Any:
    """Run a dialect plan on ``conn``: execute each yielded list, send back the rows."""
    try:
        statements = next(plan)
        while True:
            statements = plan.send(_execute(conn, statements))
    except StopIteration as stop:
        return stop.value


def _execute(conn: sqlite3.Connection, statements: list[Statement]) -> list[Rows]:
    """Execute ``statements`` in order; runs of one INSERT go through ``executemany``."""
    rows: list[Rows] = []
    start = 0
    while start < len(statements):
        sql = statements[start].sql
        end = start + 1
        if sql.startswith("INSERT") and "RETURNING" not in sql:
            while end < len(statements) and statements[end].sql == sql:
                end += 1
        if end - start > 1:
            conn.executemany(sql, [s.params for s in statements[start:end]])
            rows.extend([] for _ in range(end - start))
        else:
            rows.append(conn.execute(sql, statements[start].params).fetchall())
        start = end
    return rows


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):  # the original error is more useful
            conn.execute("ROLLBACK")


def _store_error(path: str, exc: sqlite3.Error) -> StoreError:
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return StoreError(
            f"the SQLite database {path!r} stayed locked by another connection ({exc}); "
            "retry, or open the store with a longer busy_timeout"
        )
    return StoreError(f"the SQLite database {path!r} failed ({exc}); the batch was rolled back")
