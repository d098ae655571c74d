"""``D1Store``: engramdb on Cloudflare D1, from a Python Worker.

The schema, migrations and query plans are the core's SQLite dialect
(``engramdb.driver``), the same ones ``engramdb.sqlite.SqliteStore`` runs with
``sqlite3``, through the same trampoline. This module only executes them through the D1
binding:

* a yielded list of one statement runs as ``db.prepare(sql).bind(*params).raw()``
  (rows as arrays, exactly in column order);
* a longer list runs as ONE ``db.batch([...])``: D1 runs a batch as one transaction, so
  every write of a store batch (which the dialect yields as one list) is atomic. D1 has
  no interactive transactions (``BEGIN`` is refused), so this is the only way.
  ``batch()`` returns rows as objects; the dialect keeps result column names distinct
  and non-numeric, so the object's values are the row in column order.
* the schema version lives in the one-row table ``engramdb_schema``
  (``VersionSource.TABLE``): D1 refuses ``PRAGMA user_version``. Migrations (the core's
  one algorithm, ``engramdb.driver.migrate``) run once per store object (keep one per isolate), on
  first use; each step and its version bump are one ``batch()``.
* D1 returns BLOBs as arrays of numbers: they become ``bytes`` again here. Python
  ``bytes`` parameters are sent as ``Uint8Array``; ``None`` as JS ``null``.
* At most 100 bound parameters per statement, 2,000,000 bytes per row: the dialect
  chunks long ``IN`` lists and the memory layer bounds texts and metadata; a row D1
  still refuses surfaces as ``StoreError``.

Works with the binding as a Python Worker sees it (``self.env.DB``, wrapped by the
``workers`` SDK) and with a raw ``JsProxy`` of a ``D1Database``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from engramdb import ConfigurationError, StoreError, driver
from engramdb.driver import (
    OPS,
    Migration,
    Rows,
    SqliteVectorCache,
    Statement,
    Transaction,
    VersionSource,
    arun,
    migrate,
    read_version,
    run_batch,
    schema_gate,
)
from engramdb.store import Op, StoreCapabilities

from ._js_values import bind_value, is_js, py_value, sql_error, to_py
from .durable import CACHE_BYTES

try:  # Pyodide; absent on CPython, where only the wrapped (pure Python) path is usable
    from pyodide.ffi import JsException, to_js
except ImportError:  # pragma: no cover - CPython
    JsException = None  # type: ignore[assignment,misc]
    to_js = None  # type: ignore[assignment]

__all__ = ["D1Store"]

_SOURCE = VersionSource.TABLE


class D1Store:
    """A durable store in a Cloudflare D1 database (async only).

    ``D1Store(self.env.DB)`` inside a Worker. Building it does no I/O; the first
    ``abatch`` reads the schema version (``engramdb_schema``), refuses a database written
    by a newer engramdb with ``SchemaTooNewError`` (leaving it untouched) and, unless
    ``migrate=False``, runs the pending migrations. Keep one store per isolate (e.g. in a
    module-level cache): its in-process vector cache then serves many requests and is
    invalidated by the per-scope generation counters every write batch bumps, so writes
    of other isolates are seen. ``cache_bytes``: what that cache's indexes of all scopes
    may hold together (the isolate's budget, as an object's: ``CACHE_BYTES``; None: no
    bound).
    """

    capabilities = StoreCapabilities(
        supports_sync=False, supports_async=True, durable=True, supports_policy=True
    )
    OPS: ClassVar[frozenset[type]] = OPS
    """The op types its batch answers: those of the SQLite dialect."""

    def __init__(
        self,
        db: Any,
        *,
        migrate: bool = True,
        name: str = "DB",
        cache_bytes: int | None = CACHE_BYTES,
        migrations: Sequence[Migration] | None = None,
    ) -> None:
        if db is None:
            raise ConfigurationError(
                f"D1Store got no D1 binding ({name} is None); add a d1_databases entry with "
                f'"binding": "{name}" to wrangler.jsonc and pass self.env.{name}'
            )
        self._db = db
        self._name = name
        self._raw = is_js(db)
        self._migrate = bool(migrate)
        self._migrations = tuple(driver.MIGRATIONS if migrations is None else migrations)
        self._cache = SqliteVectorCache(budget=cache_bytes)
        self._version: int | None = None
        self._lock: asyncio.Lock | None = None  # created on first use, never at import
        self._closed = False

    def __repr__(self) -> str:
        state = (
            "closed"
            if self._closed
            else ("not opened" if self._version is None else f"schema v{self._version}")
        )
        return f"D1Store({self._name}, {state})"

    @property
    def binding(self) -> Any:
        """The D1 binding this store runs on."""
        return self._db

    # -- schema -----------------------------------------------------------------------

    async def schema_version(self) -> int:
        """The schema version recorded in the database (read now; 0 if none)."""
        self._check_open()
        return int(await arun(read_version(_SOURCE), self._perform))

    async def migrate(self) -> int:
        """Bring the database to the current schema; return how many steps ran here.

        Each step and its version bump are one ``batch()`` (atomic). A step another
        isolate ran at the same moment counts as done; any other failure raises
        ``MigrationError`` and the database stays at the version before that step.
        """
        self._check_open()
        async with self._get_lock():
            return await self._migrate_locked()

    async def _migrate_locked(self) -> int:
        plan = migrate(_SOURCE, f"D1 database {self._name}", self._migrations)
        ran, self._version = await arun(plan, self._perform)
        self._cache.clear()
        return int(ran)

    async def _ready(self) -> int:
        if self._version == len(self._migrations):
            return self._version
        async with self._get_lock():
            if self._version != len(self._migrations):
                gate = schema_gate(
                    _SOURCE,
                    f"the D1 database {self._name}",
                    self._migrations,
                    migrating=self._migrate,
                    fix="call await store.migrate() (or build the store with migrate=True)",
                )
                self._version = await arun(gate, self._perform)
                self._cache.clear()
        return self._version

    # -- the store protocol -----------------------------------------------------------

    async def abatch(self, ops: Sequence[Op]) -> list[Any]:
        """Run ``ops``; every write of the batch is one atomic D1 ``batch()``."""
        self._check_open()
        version = await self._ready()
        if not ops:
            return []
        try:
            # pack_from=None: D1 keeps no packed segments (it does not ``packs_vectors``: a
            # BLOB comes back as an array of numbers, and a 1 MB segment as a million).
            plan = run_batch(ops, self._cache, schema_version=version, pack_from=None)
            return list(await arun(plan, self._perform))
        except BaseException:
            # The cache may hold rows read in this run; forget them rather than reason
            # about which D1 batches committed.
            self._cache.clear()
            raise

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        """D1 can only be awaited: use ``AsyncMemory`` (``await store.abatch(ops)``)."""
        raise StoreError("D1Store is async only; use AsyncMemory and await its methods")

    async def aclose(self) -> None:
        """Forget the cache; the binding itself needs no closing. A closed store raises."""
        self._closed = True
        self._cache.clear()

    def close(self) -> None:
        self._closed = True
        self._cache.clear()

    # -- executing dialect plans ------------------------------------------------------

    async def _perform(self, request: Sequence[Statement] | Transaction) -> list[Rows]:
        """Run a plan's request: a list of statements, or a migration step (one
        ``batch()`` either way when it holds more than one statement: D1 runs a batch as
        one transaction)."""
        if isinstance(request, Transaction):
            return await self._execute(request.statements)
        return await self._execute(request)

    async def _execute(self, statements: Sequence[Statement]) -> list[Rows]:
        if not statements:
            return []
        try:
            if len(statements) == 1:
                raw = await self._prepare(statements[0]).raw()
                return [_rows_from_arrays(to_py(raw))]
            prepared = [self._prepare(statement) for statement in statements]
            results = await self._db.batch(to_js(prepared) if self._raw else prepared)
            return [_rows_from_result(result) for result in to_py(results)]
        except Exception as exc:
            if JsException is not None and isinstance(exc, JsException):
                raise sql_error(f"the D1 database {self._name}", exc, statements) from exc
            raise

    def _prepare(self, statement: Statement) -> Any:
        prepared = self._db.prepare(statement.sql)
        if not statement.params:
            return prepared
        where = f"D1 database {self._name}"
        return prepared.bind(*[bind_value(v, where, raw=self._raw) for v in statement.params])

    def _get_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"this D1Store ({self._name}) is closed; build a new one")


def _rows_from_arrays(rows: Any) -> Rows:
    if rows is None:
        return []
    return [tuple(py_value(v) for v in row) for row in rows]


def _rows_from_result(result: Any) -> Rows:
    rows = result["results"] if isinstance(result, Mapping) else getattr(result, "results", None)
    if rows is None:
        return []
    return [tuple(py_value(v) for v in row.values()) for row in rows]
