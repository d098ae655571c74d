"""``PostgresStore``: engramdb on PostgreSQL with pgvector, through psycopg 3.

The ops are written once (``_sql.batch_flow`` runs those of ``_items``, ``_search`` and
``_policy``); this module only runs them and draws the transaction boundary: one store
batch is one transaction, committed whole or rolled back whole, on a psycopg
``Connection`` (``batch``) or ``AsyncConnection`` (``abatch``), each opened from the DSN
when first used. Migrations (``_schema``) run one step per
transaction under an advisory lock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from engramdb._errors import EngramError, MigrationError, SchemaTooNewError, StoreError
from engramdb._lexical import terms
from engramdb._store import Op, StoreCapabilities
from engramdb._trampoline import arun, run

from ._items import HANDLERS as _ITEM_OPS
from ._policy import HANDLERS as _POLICY_OPS
from ._schema import ADVISORY_LOCK, HEAD_VERSION, MIGRATIONS, VERSION_TABLE
from ._search import HANDLERS as _SEARCH_OPS
from ._sql import Context, Query, Rows, batch_flow

try:
    import psycopg
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "engramdb.postgres needs psycopg 3: pip install 'engramdb[postgres]'"
    ) from exc

__all__ = ["PostgresStore"]

_HANDLERS: dict[type, Any] = {**_ITEM_OPS, **_SEARCH_OPS, **_POLICY_OPS}

_HAS_VERSION_TABLE = "SELECT to_regclass('engramdb_schema_version') IS NOT NULL"
_READ_VERSION = "SELECT coalesce(max(version), 0) FROM engramdb_schema_version"


class PostgresStore:
    """A durable, shared store in a PostgreSQL database with the pgvector extension.

    ``PostgresStore("postgresql://user@host/db")`` connects, refuses a database written by
    a newer engramdb with ``SchemaTooNewError`` (leaving it untouched) and migrates it to
    the current schema (``migrate=False``: it only checks; batches then raise
    ``StoreError`` until :meth:`migrate`). ``batch`` uses a sync psycopg connection,
    ``abatch`` an async one; each is opened on first use and kept. Vector searches go
    through each space's HNSW index with ``ef_search`` candidates (None: pgvector's 40;
    never fewer than ``k``); ``exact=True`` scans exactly.

    Thread-safe: one lock serialises the sync connection. Several processes and servers
    may share one database.
    """

    capabilities = StoreCapabilities(durable=True, thread_safe=True, supports_policy=True)

    def __init__(self, dsn: str, *, migrate: bool = True, ef_search: int | None = None) -> None:
        if ef_search is not None and not 1 <= ef_search <= 1000:
            raise ValueError(f"ef_search={ef_search!r} must be between 1 and 1000 (or None)")
        self._dsn = dsn
        self._ef_search = ef_search
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        self._aconn: psycopg.AsyncConnection[Any] | None = None
        self._alock: asyncio.Lock | None = None  # serialises abatch on the async connection
        self._closed = False
        with self._lock:
            conn = self._connection()
            self._version = self._read_version(conn)
            if self._version > HEAD_VERSION:
                self.close()
                raise _too_new(self._version)
        if migrate:
            try:
                self.migrate()
            except BaseException:
                self.close()
                raise

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"schema v{self._version}"
        return f"PostgresStore({_safe(self._dsn)!r}, {state})"

    def __enter__(self) -> PostgresStore:
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
    def schema_version(self) -> int:
        """The schema version recorded in the database (read now)."""
        with self._lock:
            self._version = self._read_version(self._connection())
            return self._version

    def migrate(self) -> int:
        """Bring the database to the current schema; return how many steps ran here.

        Each step runs in its own transaction under ``pg_advisory_xact_lock``: of several
        processes migrating at once, one applies a step and the others find it done. A
        failing step is rolled back (``MigrationError``) and the database stays at the
        version before it.
        """
        with self._lock:
            conn = self._connection()
            ran = 0
            for step in MIGRATIONS:
                try:
                    with conn.transaction():
                        conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK,))
                        conn.execute(VERSION_TABLE)
                        current = self._read_version(conn)
                        if current > HEAD_VERSION:
                            raise _too_new(current)
                        if current >= step.version:
                            continue
                        for statement in step.statements:
                            conn.execute(statement)
                        conn.execute(
                            "INSERT INTO engramdb_schema_version (version, name) VALUES (%s, %s)",
                            (step.version, step.name),
                        )
                        ran += 1
                except psycopg.Error as exc:
                    raise MigrationError(
                        f"migration {step.name!r} failed on {_safe(self._dsn)!r} ({exc}); it "
                        "was rolled back. Does the role may CREATE EXTENSION vector (or is "
                        "pgvector installed)?"
                    ) from exc
            self._version = self._read_version(conn)
            if self._version >= 3:
                self._backfill_terms(conn)
            return ran

    def _backfill_terms(self, conn: psycopg.Connection[Any]) -> None:
        """Compute the lexical terms of rows written before schema version 3 (none in a
        database created at 3 or later), a thousand per transaction."""
        while True:
            with conn.transaction():
                rows = conn.execute(
                    "SELECT id, text FROM engramdb_items WHERE terms IS NULL "
                    "ORDER BY id LIMIT 1000 FOR UPDATE SKIP LOCKED"
                ).fetchall()
                if not rows:
                    return
                with conn.cursor() as cursor:
                    cursor.executemany(
                        "UPDATE engramdb_items SET terms = %s, term_count = %s WHERE id = %s",
                        [(words, len(words), item_id) for item_id, words in _terms_of(rows)],
                    )

    # -- the store protocol -----------------------------------------------------------

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        """Run ``ops`` in one transaction; return their results in order."""
        with self._lock:
            conn = self._connection()
            self._check_version()
            if not ops:
                return []

            def perform(query: Query) -> Rows:
                cursor = conn.execute(query.sql, query.params)
                return cursor.fetchall() if cursor.description else []

            try:
                with conn.transaction():
                    results: list[Any] = run(batch_flow(ops, self._context(), _HANDLERS), perform)
            except psycopg.Error as exc:
                raise _store_error(self._dsn, exc) from exc
            return results

    async def abatch(self, ops: Sequence[Op]) -> list[Any]:
        """Run ``ops`` in one transaction on the async connection (concurrent calls
        take turns: one connection holds one transaction at a time)."""
        if self._alock is None:
            self._alock = asyncio.Lock()
        async with self._alock:  # also makes the first calls share one connection
            conn = await self._aconnection()
            self._check_version()
            if not ops:
                return []

            async def perform(query: Query) -> Rows:
                cursor = await conn.execute(query.sql, query.params)
                return await cursor.fetchall() if cursor.description else []

            try:
                async with conn.transaction():
                    results: list[Any] = await arun(
                        batch_flow(ops, self._context(), _HANDLERS), perform
                    )
            except psycopg.Error as exc:
                raise _store_error(self._dsn, exc) from exc
            return results

    def close(self) -> None:
        """Close both connections (the async one without awaiting: its socket is simply
        shut). Closing twice is fine; a closed store raises ``StoreError``."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            aconn, self._aconn = self._aconn, None
            if conn is not None:
                conn.close()
            if aconn is not None and not aconn.closed:
                aconn.pgconn.finish()

    async def aclose(self) -> None:
        """Close both connections."""
        aconn, self._aconn = self._aconn, None
        if aconn is not None:
            await aconn.close()
        self.close()

    # -- internals --------------------------------------------------------------------

    def _context(self) -> Context:
        return Context(self._version, self._ef_search)

    def _check_version(self) -> None:
        if self._version != HEAD_VERSION:
            raise StoreError(
                f"the database {_safe(self._dsn)!r} has schema version {self._version} but "
                f"this engramdb needs {HEAD_VERSION}; call store.migrate() (or open it with "
                "migrate=True)"
            )

    def _closed_error(self) -> StoreError:
        return StoreError(f"this PostgresStore ({_safe(self._dsn)!r}) is closed; open a new one")

    def _connection(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise self._closed_error()
        if self._conn is None:
            self._conn = _connect(self._dsn, psycopg.Connection.connect)
        return self._conn

    async def _aconnection(self) -> psycopg.AsyncConnection[Any]:
        if self._closed:
            raise self._closed_error()
        if self._aconn is None:
            try:
                self._aconn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            except psycopg.Error as exc:
                raise _connect_error(self._dsn, exc) from exc
        return self._aconn

    def _read_version(self, conn: psycopg.Connection[Any]) -> int:
        try:
            row = conn.execute(_HAS_VERSION_TABLE).fetchone()
            if not row or not row[0]:
                return 0
            row = conn.execute(_READ_VERSION).fetchone()
        except psycopg.Error as exc:
            raise _store_error(self._dsn, exc) from exc
        return int(row[0]) if row else 0


def _terms_of(rows: Sequence[tuple[Any, ...]]) -> list[tuple[str, list[str]]]:
    return [(str(item_id), terms(str(text))) for item_id, text in rows]


def _connect(dsn: str, connect: Callable[..., Any]) -> Any:
    try:
        return connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise _connect_error(dsn, exc) from exc


def _connect_error(dsn: str, exc: Exception) -> StoreError:
    return StoreError(
        f"cannot connect to PostgreSQL at {_safe(dsn)!r} ({exc}); check the DSN and that "
        "the server is running"
    )


def _too_new(found: int) -> SchemaTooNewError:
    return SchemaTooNewError(
        f"the database has schema version {found} but this engramdb supports up to "
        f"{HEAD_VERSION}; upgrade engramdb (the database was left untouched)",
        found=found,
        supported=HEAD_VERSION,
    )


def _store_error(dsn: str, exc: psycopg.Error) -> EngramError:
    return StoreError(f"PostgreSQL at {_safe(dsn)!r} failed ({exc}); the batch was rolled back")


def _safe(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(dsn)
    except Exception:
        return "<dsn>"
    if "password" in params:
        params["password"] = "***"
    return str(make_conninfo("", **params))
