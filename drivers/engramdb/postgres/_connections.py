"""Where a ``PostgresStore``'s batches get their connection.

:func:`source_of` turns what the caller passed into a :class:`Source`:

* a DSN (``str``): one sync and one async connection, each opened on first use and kept
  until the store is closed; a lock per face makes the batches on it take turns;
* a psycopg ``Connection`` or ``AsyncConnection``: used as it is, under a lock, and left
  open (the caller owns it); it serves one face only;
* a ``psycopg_pool.ConnectionPool`` or ``AsyncConnectionPool``: one connection from the
  pool per batch, so batches run in parallel up to the pool's size; the pool is left open.

A batch always runs inside ``conn.transaction()``: on an idle connection that is a
transaction of its own (with or without autocommit); on a connection the caller left
inside a transaction it is a savepoint of it, committed (or rolled back) with it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from engramdb import ConfigurationError, StoreError
from engramdb.config_file import safe_label

try:  # the extra installs psycopg-pool; without it, pools are simply not recognised
    from psycopg_pool import AsyncConnectionPool, ConnectionPool
except ImportError:  # pragma: no cover
    AsyncConnectionPool = ConnectionPool = None

__all__ = ["Source", "safe_dsn", "source_of"]


class Source:
    """The connections of one store: ``connection()`` for ``batch``, ``aconnection()``
    for ``abatch``, each a context manager around one batch."""

    def __init__(
        self,
        label: str,
        *,
        dsn: str | None = None,
        conn: psycopg.Connection[Any] | None = None,
        aconn: psycopg.AsyncConnection[Any] | None = None,
        pool: Any = None,
        apool: Any = None,
    ) -> None:
        self.label = label  # for messages: never holds a password
        self._dsn = dsn
        self._conn, self._aconn = conn, aconn
        self._pool, self._apool = pool, apool
        self._owned = dsn is not None  # only connections the store opened are closed by it
        self._lock = threading.RLock()
        self._alock: asyncio.Lock | None = None
        self.closed = False

    @property
    def sync(self) -> bool:
        return self._dsn is not None or self._conn is not None or self._pool is not None

    @property
    def async_(self) -> bool:
        return self._dsn is not None or self._aconn is not None or self._apool is not None

    @property
    def parallel(self) -> bool:
        """Whether batches may run at once (each on its own connection)."""
        return self._pool is not None or self._apool is not None

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        if self._pool is not None:
            self._check_open()
            with self._pool.connection() as conn:  # a PoolTimeout fails the batch
                yield conn
            return
        with self._lock:
            self._check_open()
            if self._conn is None and self._dsn is not None:
                with _connecting(self.label):
                    self._conn = psycopg.Connection.connect(self._dsn, autocommit=True)
            if self._conn is None:  # pragma: no cover - guarded by the store's faces
                raise StoreError(f"{self.label} has no sync connection; use abatch")
            yield self._conn

    @asynccontextmanager
    async def aconnection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._apool is not None:
            self._check_open()
            async with self._apool.connection() as conn:
                yield conn
            return
        if self._alock is None:
            self._alock = asyncio.Lock()
        async with self._alock:  # also makes the first calls share one connection
            self._check_open()
            if self._aconn is None and self._dsn is not None:
                with _connecting(self.label):
                    self._aconn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            if self._aconn is None:  # pragma: no cover - guarded by the store's faces
                raise StoreError(f"{self.label} has no async connection; use batch")
            yield self._aconn

    def close(self) -> None:
        """Close the connections this store opened (the async one without awaiting: its
        socket is simply shut); a caller's connection or pool stays open."""
        with self._lock:
            self.closed = True
            if not self._owned:
                return
            conn, self._conn = self._conn, None
            aconn, self._aconn = self._aconn, None
            if conn is not None:
                conn.close()
            if aconn is not None and not aconn.closed:
                aconn.pgconn.finish()

    async def aclose(self) -> None:
        if self._owned:
            aconn, self._aconn = self._aconn, None
            if aconn is not None:
                await aconn.close()
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise StoreError(f"this PostgresStore ({self.label}) is closed; open a new one")


def source_of(target: Any) -> Source:
    """The source for a DSN, a connection or a pool; anything else, or a string that is
    not a connection string, is a ``ConfigurationError``."""
    if isinstance(target, str):
        try:
            conninfo_to_dict(target)
        except psycopg.Error:
            # libpq's message may quote a piece of the string (a password too): not shown
            raise ConfigurationError(
                "PostgresStore: the DSN is not a PostgreSQL connection string; give a URI "
                "('postgresql://user@host:5432/db') or key=value pairs ('host=... dbname=...')"
            ) from None
        return Source(repr(safe_dsn(target)), dsn=target)
    if isinstance(target, psycopg.Connection):
        return Source(f"connection to {safe_dsn(target.info.dsn)!r}", conn=target)
    if isinstance(target, psycopg.AsyncConnection):
        return Source(f"async connection to {safe_dsn(target.info.dsn)!r}", aconn=target)
    if ConnectionPool is not None and isinstance(target, ConnectionPool):
        return Source(f"pool {target.name!r} of {safe_dsn(target.conninfo)!r}", pool=target)
    if AsyncConnectionPool is not None and isinstance(target, AsyncConnectionPool):
        return Source(f"async pool {target.name!r} of {safe_dsn(target.conninfo)!r}", apool=target)
    raise ConfigurationError(
        f"PostgresStore takes a DSN string, a psycopg Connection or AsyncConnection, or a "
        f"psycopg_pool ConnectionPool or AsyncConnectionPool, not {type(target).__name__}"
    )


@contextmanager
def _connecting(label: str) -> Iterator[None]:
    """Turn a failure to connect into a ``StoreError`` naming the target (no password)."""
    try:
        yield
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL at {label} ({exc}); check the DSN and that the "
            "server is running"
        ) from exc


def safe_dsn(dsn: object) -> str:
    """The DSN without its password (nor ``sslpassword``, nor another credential option),
    for messages: ``engramdb.config_file.safe_label``, the one rule of every face (a
    pool's conninfo may be a function: ``<dsn>``)."""
    return safe_label(dsn) if isinstance(dsn, str) else "<dsn>"
