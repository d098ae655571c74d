"""``PostgresStore``: engramdb on PostgreSQL with pgvector, through psycopg 3.

The ops are written once (``_sql.batch_flow`` runs those of ``_items``, ``_search`` and
``_policy``), and so is migration (``_migrate``); this module only runs those flows and
draws the transaction boundary: one store batch is one transaction, committed whole or
rolled back whole, on a psycopg ``Connection`` (``batch``) or ``AsyncConnection``
(``abatch``) from the store's source (``_connections``: a DSN, a connection or a pool).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, ClassVar

import psycopg

from engramdb import ConfigurationError, EngramError, MigrationError, StoreError
from engramdb.driver import arun, check_schema, pending_migrations, run
from engramdb.store import Op, StoreCapabilities, is_write

from ._connections import Source, source_of
from ._coverage import lock_hashes
from ._items import HANDLERS as _ITEM_OPS
from ._items import RUNS as _ITEM_RUNS
from ._migrate import backfill_flow, step_flow, version_flow
from ._policy import HANDLERS as _POLICY_OPS
from ._policy import RUNS as _POLICY_RUNS
from ._schema import MIGRATIONS, Migration
from ._search import HANDLERS as _SEARCH_OPS
from ._sql import Context, Flow, Query, Rows, batch_flow

__all__ = ["PostgresStore"]

_HANDLERS: dict[type, Any] = {**_ITEM_OPS, **_SEARCH_OPS, **_POLICY_OPS}
_RUNS: dict[type, Any] = {**_ITEM_RUNS, **_POLICY_RUNS}

_Failure = Callable[[Exception], EngramError]  # the error a failed transaction raises

# A batch of reads runs at REPEATABLE READ: every statement of it sees the snapshot of
# its first, as a SQLite read transaction does (at PostgreSQL's default READ COMMITTED
# each statement sees the commits before it, so a backup's page could read an item at
# one revision and its history at the next). Read only, it never fails to serialise.
_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


def _reads(ops: Sequence[Op]) -> bool:
    """Whether ``ops`` only read (and so run on one snapshot)."""
    return not any(map(is_write, ops))


def _idle(conn: Any) -> bool:
    """Whether ``conn`` is outside a transaction, so the batch's is the outermost: in a
    caller's own transaction, the batch is a savepoint of it and keeps its isolation."""
    return bool(conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE)


def _check_options(migrate: object, ef_search: object) -> None:
    """``ConfigurationError`` for a bad option, before anything connects."""
    if not isinstance(migrate, bool):
        raise ConfigurationError(f"PostgresStore: migrate={migrate!r} must be True or False")
    if ef_search is not None and (
        not isinstance(ef_search, int) or isinstance(ef_search, bool) or not 1 <= ef_search <= 1000
    ):
        raise ConfigurationError(
            f"PostgresStore: ef_search={ef_search!r} must be a whole number from 1 to 1000, "
            "or None for the default (100)"
        )


class PostgresStore:
    """A durable, shared store in a PostgreSQL database with the pgvector extension.

    ``PostgresStore(target)`` takes a DSN (``"postgresql://user@host/db"``: the store
    opens one sync and one async connection on first use and keeps them), a psycopg
    ``Connection`` or ``AsyncConnection`` (used as it is, left open), or a
    ``psycopg_pool`` ``ConnectionPool`` or ``AsyncConnectionPool`` (a connection per
    batch, so batches run in parallel; left open). A sync source serves ``batch``, an
    async one ``abatch``, a DSN both.

    It refuses a database written by a newer engramdb with ``SchemaTooNewError``
    (leaving it untouched) and migrates it to the current schema (``migrate=False``: it
    only checks; batches then raise ``StoreError`` until :meth:`migrate`), with
    ``migrations`` (None: engramdb's own, ``engramdb.postgres.MIGRATIONS``; a test of a
    step not yet released hands its list in). With a sync source that happens here; with
    an async connection or pool, in the first ``abatch`` (or :meth:`amigrate`). Vector
    searches go through each space's HNSW index with ``ef_search`` candidates (None:
    100; never fewer than the search takes: a head of 100 with slack whatever ``k`` up
    to 100, ``k + 100`` with slack above); ``exact=True`` scans exactly.

    Thread-safe: a lock serialises a single connection; a pool serves threads at once.
    Several processes and servers may share one database.
    """

    OPS: ClassVar[frozenset[type]] = frozenset(_HANDLERS)
    """The op types its batch answers: those with a handler."""

    def __init__(
        self,
        target: Any,
        *,
        migrate: bool = True,
        ef_search: int | None = None,
        migrations: Sequence[Migration] | None = None,
    ) -> None:
        _check_options(migrate, ef_search)
        self._source: Source = source_of(target)
        self._ef_search = ef_search
        self._migrate = migrate
        self._migrations = MIGRATIONS if migrations is None else tuple(migrations)
        self._version: int | None = None  # None: not read yet (an async source)
        self._opening: asyncio.Lock | None = None
        self.capabilities = StoreCapabilities(
            supports_sync=self._source.sync,
            supports_async=self._source.async_,
            durable=True,
            thread_safe=True,
            supports_policy=True,
        )
        if not self._source.sync:
            return
        try:
            self._version = self._sync(version_flow())
            pending_migrations(self._version, self._migrations)  # too new: touch nothing
            if migrate:
                self.migrate()
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        if self._source.closed:
            state = "closed"
        elif self._version is None:
            state = "schema not read yet"
        else:
            state = f"schema v{self._version}"
        return f"PostgresStore({self._source.label}, {state})"

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- schema -----------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """The schema version recorded in the database (read now; sync sources)."""
        self._version = self._sync(version_flow())
        return self._version

    def migrate(self) -> int:
        """Bring the database to the current schema; return how many steps ran here.

        Each step runs in its own transaction under ``pg_advisory_xact_lock``: of several
        processes migrating at once, one applies a step and the others find it done. A
        failing step is rolled back (``MigrationError``) and the database stays at the
        version before it. Rows written before schema version 3 then get their lexical
        terms, a thousand per transaction.
        """
        ran = 0
        for step in self._migrations:
            flow = step_flow(step, self._migrations)
            ran += self._sync(flow, _migration_error(step.name, self._source))
        self._version = self._sync(version_flow())
        while self._sync(backfill_flow()):
            pass
        return ran

    async def amigrate(self) -> int:
        """:meth:`migrate` on the async connection."""
        ran = 0
        for step in self._migrations:
            flow = step_flow(step, self._migrations)
            ran += await self._async(flow, _migration_error(step.name, self._source))
        self._version = await self._async(version_flow())
        while await self._async(backfill_flow()):
            pass
        return ran

    # -- the store protocol -----------------------------------------------------------

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        """Run ``ops`` in one transaction; return their results in order."""
        if not self._source.sync:
            raise StoreError(
                f"PostgresStore({self._source.label}) is async: use abatch (AsyncMemory)"
            )
        self._check_version()
        if not ops:
            return []
        results: list[Any] = self._sync(_batch(ops, self._context()), snapshot=_reads(ops))
        return results

    async def abatch(self, ops: Sequence[Op]) -> list[Any]:
        """Run ``ops`` in one transaction on an async connection (on one connection,
        concurrent calls take turns; on a pool, they run at once)."""
        if not self._source.async_:
            raise StoreError(f"PostgresStore({self._source.label}) is sync: use batch (Memory)")
        if self._version is None:
            await self._open()
        self._check_version()
        if not ops:
            return []
        results: list[Any] = await self._async(_batch(ops, self._context()), snapshot=_reads(ops))
        return results

    def close(self) -> None:
        """Close the connections the store opened (a caller's connection or pool stays
        open). Closing twice is fine; a closed store raises ``StoreError``."""
        self._source.close()

    async def aclose(self) -> None:
        """Close the connections the store opened, awaiting the async one."""
        await self._source.aclose()

    # -- internals --------------------------------------------------------------------

    def _sync(self, flow: Flow, error: _Failure | None = None, *, snapshot: bool = False) -> Any:
        """Run ``flow`` in one transaction on a sync connection (a pool's timeout is a
        failure like any other: ``StoreError``, nothing written); with ``snapshot``, a
        read-only one that sees one snapshot (see :func:`_snapshot`)."""
        try:
            with self._source.connection() as conn:

                def perform(query: Query) -> Rows:
                    if query.many is not None:
                        conn.cursor().executemany(query.sql, query.many)
                        return []
                    cursor = conn.execute(query.sql, query.params)
                    return cursor.fetchall() if cursor.description else []

                outer = snapshot and _idle(conn)
                with conn.transaction():
                    if outer:
                        conn.execute(_SNAPSHOT)
                    return run(flow, perform)
        except psycopg.Error as exc:
            raise (error or self._batch_error)(exc) from exc

    async def _async(
        self, flow: Flow, error: _Failure | None = None, *, snapshot: bool = False
    ) -> Any:
        """Run ``flow`` in one transaction on an async connection (``snapshot``: as in
        :meth:`_sync`)."""
        try:
            async with self._source.aconnection() as conn:

                async def perform(query: Query) -> Rows:
                    if query.many is not None:
                        await conn.cursor().executemany(query.sql, query.many)
                        return []
                    cursor = await conn.execute(query.sql, query.params)
                    return await cursor.fetchall() if cursor.description else []

                outer = snapshot and _idle(conn)
                async with conn.transaction():
                    if outer:
                        await conn.execute(_SNAPSHOT)
                    return await arun(flow, perform)
        except psycopg.Error as exc:
            raise (error or self._batch_error)(exc) from exc

    def _batch_error(self, exc: Exception) -> EngramError:
        return StoreError(
            f"PostgreSQL at {self._source.label} failed ({exc}); the batch was rolled back"
        )

    async def _open(self) -> None:
        """Read (and migrate) the schema of an async source, once."""
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._version is not None:
                return
            version = await self._async(version_flow())
            pending_migrations(version, self._migrations)  # too new: touch nothing
            if self._migrate:
                await self.amigrate()
            else:
                self._version = version

    def _context(self) -> Context:
        return Context(self._version or 0, self._ef_search)

    def _check_version(self) -> None:
        check_schema(
            self._version or 0,
            self._migrations,
            where=f"the database at {self._source.label}",
            fix="call store.migrate() (or open it with migrate=True)",
        )


def _batch(ops: Sequence[Op], context: Context) -> Flow:
    """A store batch: the content hashes it stores locked first (``_coverage``), then
    its ops (runs of restores and vectors set-based)."""
    yield from lock_hashes(ops)
    return (yield from batch_flow(ops, context, _HANDLERS, _RUNS))


def _migration_error(name: str, source: Source) -> _Failure:
    def error(exc: Exception) -> MigrationError:
        return MigrationError(
            f"migration {name!r} failed on {source.label} ({exc}); it was rolled back. "
            "May the role CREATE EXTENSION vector (or is pgvector installed)?"
        )

    return error
