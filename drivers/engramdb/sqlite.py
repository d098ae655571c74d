"""``SqliteStore``: engramdb on a SQLite file, through the standard library's ``sqlite3``.

The schema, migrations and query plans live in the core (``engramdb.driver``); this
module only executes them and draws the transaction boundary: every batch runs in one
transaction (``BEGIN IMMEDIATE`` when it writes), every migration step in its own. One
lock serialises the connection, so a store (and a ``Memory`` over it) may be shared by
threads and closed from any of them. See ``docs/stores.md`` and ``docs/migrations.md``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, ClassVar
from urllib.parse import quote

from engramdb import ConfigurationError, CorruptDataError, StoreError, driver
from engramdb.driver import (
    OPS,
    CacheIndex,
    Migration,
    Rows,
    SqliteVectorCache,
    Statement,
    Transaction,
    VersionSource,
    check_schema,
    migrate,
    pending_migrations,
    read_version,
    run,
    run_batch,
    schema_gate,
)
from engramdb.store import Op, StoreCapabilities, check_writable, is_write

__all__ = ["SqliteStore"]

_SOURCE = VersionSource.USER_VERSION
_PAGE_SIZE = 8192
_MMAP_SIZE = 1 << 30
_READONLY_DIRECTORY = 1544  # SQLITE_READONLY_DIRECTORY (sqlite3 names it from 3.11.4 on)
_KERNELS = ("auto", "numpy", "python", "codes")
"""The values of ``vector_kernel`` and of ``ENGRAMDB_VECTOR_KERNEL``."""


class SqliteStore:
    """A durable store in a SQLite database file (or ``":memory:"``).

    ``SqliteStore("memory.db")`` opens (creating if needed) the file, refuses a database
    written by a newer engramdb with ``SchemaTooNewError`` (leaving it untouched),
    migrates it to the current schema and then switches it to WAL. With
    ``migrate=False`` nothing in the file changes (a missing file is not created: that is
    a ``StoreError``); an older database opens, and every batch raises ``StoreError``
    until you call :meth:`migrate`. ``busy_timeout`` (30 s) is how many seconds a write
    waits for another connection's lock before failing.
    ``secure_delete`` (on by default) makes SQLite overwrite deleted content, so the text
    of a forgotten memory leaves the file (see ``docs/stores.md``).
    ``vector_kernel`` picks how vector searches run (default: ``ENGRAMDB_VECTOR_KERNEL``,
    else ``"auto"``): ``"numpy"`` scans a float32 matrix with numpy (``pip install
    'engramdb[fast]'``), ``"python"`` the pure-Python index, ``"auto"`` numpy when it
    imports. Both rank alike, score for score (``docs/performance-history.md``, "The numpy
    kernel"). ``"codes"`` is the pure-Python index keeping only each vector's codes in
    memory (about a fifth of the bytes) and reading from the file the float32 rows of the
    few candidates a search scores exactly: the same hits and scores as ``"python"``.
    ``migrations`` (default: engramdb's, ``engramdb.driver.MIGRATIONS``) is the schema's
    history, for a test of a migration not yet released.

    ``read_only=True`` opens the file read-only (SQLite's ``mode=ro``): a copy, a
    snapshot, a file or folder you may not write. Nothing is migrated (``migrate`` is not
    consulted): a database behind this engramdb's schema is refused at open with a
    ``StoreError`` naming the fix. ``capabilities.read_only`` is True; reads answer, and a
    batch that writes raises ``StoreError`` before anything runs; a recall writes no
    receipt (``Hits.selection_id`` is None). A WAL database in a folder you may not
    write (SQLite could not make its ``-shm`` file) is read as immutable: SQLite then
    takes no locks, so do not let another process write it meanwhile.

    Thread-safe: one lock serialises the connection. Several processes may share a file.
    """

    OPS: ClassVar[frozenset[type]] = OPS
    """The op types its batch answers: those of the SQLite dialect."""

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        migrate: bool = True,
        busy_timeout: float = 30.0,
        secure_delete: bool = True,
        vector_kernel: str | None = None,
        migrations: Sequence[Migration] | None = None,
        read_only: bool = False,
    ) -> None:
        self._path = os.fspath(path)
        self._migrations = tuple(driver.MIGRATIONS if migrations is None else migrations)
        if read_only is not True and read_only is not False:
            raise ConfigurationError(f"read_only={read_only!r} must be True or False")
        if read_only and self._path == ":memory:":
            raise ConfigurationError(
                "read_only=True needs a database file; ':memory:' starts empty, so there "
                "would be nothing to read: pass the path of a file"
            )
        self.capabilities = StoreCapabilities(
            durable=self._path != ":memory:",
            thread_safe=True,
            supports_policy=True,
            packs_vectors=True,
            read_only=read_only,
        )
        kernel, index = _vector_index(vector_kernel)
        self.vector_kernel = kernel
        """The vector kernel in use: ``"numpy"``, ``"python"`` or ``"codes"``."""
        if index is not None:
            self._cache = SqliteVectorCache(index=index)
        else:  # the pure-Python index; "codes" keeps no float32 copies at all
            self._cache = SqliteVectorCache(floats_up_to=0 if kernel == "codes" else None)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        # With migrate=False nothing may change, so a missing file is not created either.
        create = (migrate and not read_only) or self._path == ":memory:"
        mode = "ro" if read_only else "rw"
        target = self._path if create else f"file:{quote(os.path.abspath(self._path))}?mode={mode}"
        connect = functools.partial(
            sqlite3.connect,
            timeout=float(busy_timeout),
            isolation_level=None,
            check_same_thread=False,
            uri=not create,
        )
        try:
            conn = connect(target)
            if read_only and _unreadable_wal(conn):  # its folder refuses the -shm file
                conn.close()
                conn = connect(f"{target}&immutable=1")
        except sqlite3.Error as exc:
            hint = "check the path and its permissions"
            if not create and not os.path.exists(self._path):
                hint = "it does not exist, and migrate=False creates nothing: use migrate=True"
                if read_only:
                    hint = "it does not exist, and read_only=True creates nothing"
            raise StoreError(
                f"cannot open the SQLite database {self._path!r} ({exc}); {hint}"
            ) from exc
        try:
            # Connection settings only: none of them writes to the file.
            conn.execute(f"PRAGMA busy_timeout = {int(float(busy_timeout) * 1000)}")
            conn.execute(f"PRAGMA secure_delete = {'ON' if secure_delete else 'OFF'}")
            conn.execute("PRAGMA foreign_keys = ON")
            # A vector row with its index data is about 5 d + 0.1 KB: two do not fit a
            # 4 KiB page at d = 384, three fit 8 KiB. Only a new file takes the size.
            conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
            # Reads through a memory map: a cold vector load makes no read() per page.
            conn.execute(f"PRAGMA mmap_size = {_MMAP_SIZE}")
            version = run(read_version(_SOURCE), lambda s: _execute(conn, s))
            pending_migrations(version, self._migrations)  # SchemaTooNewError: untouched
            if read_only:
                check_schema(
                    version,
                    self._migrations,
                    where=f"the SQLite database {self._path!r}",
                    fix="read_only=True never migrates: migrate it first (engramdb migrate "
                    "--db PATH, or SqliteStore(path) once) where it may be written, or "
                    "open a copy you may write without read_only",
                )
        except sqlite3.Error as exc:
            conn.close()
            raise _damaged(self._path, exc) or StoreError(
                f"cannot open the SQLite database {self._path!r} ({exc}); is it a SQLite "
                "file, and readable?"
            ) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._version: int = version
        if migrate and not read_only:
            try:
                self.migrate()
            except BaseException:
                self.close()
                raise

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else f"schema v{self._version}"
        if self.capabilities.read_only:
            state += ", read-only"
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
        with self._lock:
            conn = self._open_connection()
            self._version = run(read_version(_SOURCE), lambda s: self._statements(conn, s))
            return self._version

    def migrate(self) -> int:
        """Bring the database to the current schema, then switch a file to WAL; return
        how many steps ran.

        Each step and its version bump commit together. A failing step is rolled back
        (``MigrationError``), the database stays at the version before it, and a file
        that was not in WAL mode stays out of it.
        """
        with self._lock:
            conn = self._open_connection()
            where = f"SQLite database {self._path!r}"
            if self.capabilities.read_only:
                raise StoreError(
                    f"the {where} is open read-only, so it cannot be migrated; nothing was "
                    "changed. Open it without read_only=True to migrate it"
                )

            def perform(request: list[Statement] | Transaction) -> list[Rows]:
                if isinstance(request, Transaction):
                    return self._transaction(conn, request.statements)
                return self._statements(conn, request)

            ran, self._version = run(migrate(_SOURCE, where, self._migrations), perform)
            if self._path != ":memory:":
                try:
                    conn.execute("PRAGMA journal_mode = WAL").fetchall()
                except sqlite3.Error as exc:
                    raise _store_error(self._path, exc) from exc
            self._cache.clear()
            return ran

    # -- the store protocol -----------------------------------------------------------

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        """Run ``ops`` in one transaction; return their results in order."""
        with self._lock:
            conn = self._open_connection()
            if self._version != len(self._migrations):  # read again: another may have
                gate = schema_gate(  # migrated it since
                    _SOURCE,
                    f"the SQLite database {self._path!r}",
                    self._migrations,
                    migrating=False,
                    fix="call store.migrate() (or open it with migrate=True)",
                )
                self._version = run(gate, lambda s: self._statements(conn, s))
            if not ops:
                return []
            if self.capabilities.read_only:
                check_writable(ops, f"the SQLite database {self._path!r}")
            plan = run_batch(ops, self._cache, schema_version=self._version)
            try:
                conn.execute("BEGIN IMMEDIATE" if any(map(is_write, ops)) else "BEGIN")
            except sqlite3.Error as exc:
                raise _store_error(self._path, exc) from exc
            try:
                results: list[Any] = run(plan, lambda s: self._atomic(conn, s))
                conn.execute("COMMIT")
            except BaseException:
                # The cache may hold rows of the rolled-back transaction tagged with a
                # generation another writer could reach next; forget it all.
                self._cache.clear()
                _rollback(conn)
                raise
            return results

    async def abatch(self, ops: Sequence[Op]) -> list[Any]:
        """Same as :meth:`batch` (SQLite calls are short; they run inline)."""
        return self.batch(ops)

    def close(self) -> None:
        """Close the connection (from any thread; waits for a running batch). Closing
        twice is fine; a closed store raises ``StoreError``."""
        with self._lock:
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

    def _statements(self, conn: sqlite3.Connection, statements: list[Statement]) -> list[Rows]:
        try:
            return _execute(conn, statements)
        except sqlite3.Error as exc:
            raise _store_error(self._path, exc) from exc

    def _atomic(self, conn: sqlite3.Connection, statements: list[Statement]) -> list[Rows]:
        """Run one list of a batch. A failure rolls the batch's transaction back before
        its error reaches the plan, and a fresh transaction follows for what the plan
        reads next (the explanation of a failed guard): every write of a batch is in one
        list (``run_batch``), so those reads see the database as it was before the
        batch, as on D1, where the failed list was one ``batch()``."""
        try:
            return _execute(conn, statements)
        except sqlite3.Error as exc:
            _rollback(conn)
            with contextlib.suppress(sqlite3.Error):
                conn.execute("BEGIN")
            raise _store_error(self._path, exc) from exc

    def _transaction(self, conn: sqlite3.Connection, statements: Sequence[Statement]) -> list[Rows]:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot lock {self._path!r} ({exc}); retry when other writers are done"
            ) from exc
        try:
            rows = _execute(conn, list(statements))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(conn)
            raise _store_error(self._path, exc) from exc
        except BaseException:
            _rollback(conn)
            raise
        return rows


def _vector_index(kernel: str | None = None) -> tuple[str, Callable[[int], CacheIndex] | None]:
    """The name of the vector kernel ``kernel`` resolves to (None:
    ``ENGRAMDB_VECTOR_KERNEL``, else ``"auto"``) and its index factory: numpy's, or None
    for the pure-Python ``VectorIndex`` (``"python"`` and ``"codes"``).

    Raises ``ConfigurationError`` for an unknown kernel, or for ``"numpy"`` without numpy.
    """
    source = "vector_kernel"
    if kernel is None:
        kernel = os.environ.get("ENGRAMDB_VECTOR_KERNEL") or "auto"
        source = "ENGRAMDB_VECTOR_KERNEL"
    if kernel not in _KERNELS:
        raise ConfigurationError(
            f"{source}={kernel!r} is not a vector kernel; use one of {', '.join(_KERNELS)}"
        )
    if kernel in ("python", "codes"):
        return kernel, None
    try:
        from ._numpy_kernel import NumpyVectorIndex
    except ImportError as exc:
        if kernel == "auto":
            return "python", None
        raise ConfigurationError(
            f"{source}='numpy' but numpy does not import ({exc}); install it with "
            "pip install 'engramdb[fast]', or use the pure-Python kernel: "
            f"{source}='python'"
        ) from exc
    return "numpy", NumpyVectorIndex


def _unreadable_wal(conn: sqlite3.Connection) -> bool:
    """Whether a read-only connection cannot read its database because it is in WAL mode
    and SQLite may not create the ``-shm`` file beside it (``SQLITE_READONLY_DIRECTORY``:
    a folder the process may not write)."""
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.Error as exc:  # any other failure is the version read's to explain
        return getattr(exc, "sqlite_errorcode", None) == _READONLY_DIRECTORY
    return False


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


def _damaged(path: str, exc: sqlite3.Error) -> StoreError | None:
    """The error for a file that is not SQLite, or a SQLite file that is damaged (SQLite
    refuses to read it: it never answers from a damaged page); None for other errors."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code == sqlite3.SQLITE_NOTADB:
        return StoreError(
            f"{path!r} is not a SQLite database ({exc}); check the path (--db, "
            "ENGRAMDB_DB): engramdb opens only SQLite files"
        )
    if code == sqlite3.SQLITE_CORRUPT:
        return CorruptDataError(
            f"the SQLite database {path!r} is damaged ({exc}); restore it from a backup, "
            f"or save what is left with `sqlite3 {path} .recover`"
        )
    return None


def _store_error(path: str, exc: sqlite3.Error) -> StoreError:
    damaged = _damaged(path, exc)
    if damaged is not None:
        return damaged
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return StoreError(
            f"the SQLite database {path!r} stayed locked by another connection ({exc}); "
            "retry, or open the store with a longer busy_timeout"
        )
    return StoreError(f"the SQLite database {path!r} failed ({exc}); the batch was rolled back")
