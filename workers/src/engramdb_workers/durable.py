"""``DurableObjectStore``: engramdb in a Durable Object's own SQLite database.

A Durable Object with SQLite storage has a private database reached synchronously
through ``ctx.storage.sql``. This store runs the core's SQLite dialect
(``engramdb.driver``: the schema, migrations and plans ``SqliteStore`` and ``D1Store``
run) on it, through the same trampoline:

* each statement runs as ``sql.exec(sql, *params)``, its rows read at once with
  ``cursor.raw().toArray()`` (a cursor left open would lock its table);
* a list with a write, and every migration step, runs inside ONE
  ``ctx.storage.transactionSync(...)``: committed when the list has run, rolled back if
  any statement fails. ``BEGIN`` and ``SAVEPOINT`` are refused by the object, so this is
  its only transaction boundary. A list of reads runs as it is: the object runs this
  synchronous code alone, so nothing can come between them;
* the schema version lives in the one-row table ``engramdb_schema``
  (``VersionSource.TABLE``), as on D1: ``PRAGMA user_version`` is refused;
* BLOBs go in as ``Uint8Array`` and come back as ``ArrayBuffer``, converted as a whole
  (never element by element); integers must stay below 2**53 (numbers are doubles).

The store is sync (a Durable Object runs one request at a time and its SQL API does not
await) with an ``abatch`` that runs the same batch, so ``Memory`` and ``AsyncMemory``
both work on it. Keep ONE store per object instance (its vector cache then stays warm
between requests, which is the point of an object per tenant).
"""

from __future__ import annotations

from collections.abc import Sequence
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
    migrate,
    read_version,
    run,
    run_batch,
    schema_gate,
)
from engramdb.store import Op, StoreCapabilities

from ._js_values import bind_value, py_value, sql_error, to_py

try:  # Pyodide; absent on CPython
    from pyodide.ffi import JsException
except ImportError:  # pragma: no cover - CPython
    JsException = None  # type: ignore[assignment,misc]

__all__ = ["DurableObjectStore"]

_SOURCE = VersionSource.TABLE

FLOATS_UP_TO = 4096
"""How many vectors a scope's index keeps as float32 by default; past it, only their codes
(about d + 150 bytes a vector instead of 5d) and a search reads the float32 rows of the
candidates it scores exactly (docs/workers.md, "Memory and storage")."""

CACHE_BYTES = 24 * 2**20
"""What the vector indexes of all of an object's scopes (or of a D1 isolate's) may hold
together by default (``SqliteVectorCache``'s budget), beside a fresh Pyodide's ~29 MiB
and what writes and recalls allocate for a moment, in an isolate of 128 MB (measured:
docs/workers.md, "One budget per object")."""


class DurableObjectStore:
    """A durable store in a Durable Object's SQLite database (sync, with ``abatch``).

    ``DurableObjectStore(self.ctx.storage)`` in the object's ``__init__``. Building it
    does no I/O; the first batch reads the schema version, refuses a database written by
    a newer engramdb with ``SchemaTooNewError`` (leaving it untouched) and, unless
    ``migrate=False``, runs the pending migrations. ``floats_up_to``: past that many
    vectors a scope's index keeps only their codes in memory (:data:`FLOATS_UP_TO`;
    None keeps the float32 copies however many there are). ``cache_bytes``: what the
    indexes of all scopes may hold together (:data:`CACHE_BYTES`; None: no bound);
    past it they drop their caches, least recently used first, then whole indexes.
    """

    capabilities = StoreCapabilities(
        supports_sync=True,
        supports_async=True,
        durable=True,
        supports_policy=True,
        packs_vectors=True,
    )
    OPS: ClassVar[frozenset[type]] = OPS
    """The op types its batch answers: those of the SQLite dialect."""

    def __init__(
        self,
        storage: Any,
        *,
        migrate: bool = True,
        name: str = "",
        floats_up_to: int | None = FLOATS_UP_TO,
        cache_bytes: int | None = CACHE_BYTES,
        migrations: Sequence[Migration] | None = None,
    ) -> None:
        if storage is None or getattr(storage, "sql", None) is None:
            raise ConfigurationError(
                "DurableObjectStore needs the object's ctx.storage of a SQLite-backed "
                'Durable Object class (a "new_sqlite_classes" migration in wrangler.jsonc); '
                f"got {type(storage).__name__}"
            )
        # The JS object itself: this module converts values once, in bulk.
        self._storage = getattr(storage, "_binding", storage)
        self._sql = self._storage.sql
        self._where = f"the Durable Object database{f' {name}' if name else ''}"
        self._migrate = bool(migrate)
        self._migrations = tuple(driver.MIGRATIONS if migrations is None else migrations)
        # A load reads about 1 MB a statement (one packed segment), not the 4 MB D1's
        # round trips want: an object's reads are in-process, and each page passes through
        # the wasm memory twice (JS buffer, then bytes), which keeps its peak.
        self._cache = SqliteVectorCache(
            floats_up_to=floats_up_to, budget=cache_bytes, page_bytes=1_000_000
        )
        self._version: int | None = None
        self._closed = False

    def __repr__(self) -> str:
        state = (
            "closed"
            if self._closed
            else ("not opened" if self._version is None else f"schema v{self._version}")
        )
        return f"DurableObjectStore({state})"

    @property
    def database_size(self) -> int:
        """The object's database size in bytes (``sql.databaseSize``)."""
        return int(self._sql.databaseSize)

    # -- schema -----------------------------------------------------------------------

    def schema_version(self) -> int:
        """The schema version recorded in the database (read now; 0 if none)."""
        self._check_open()
        return int(run(read_version(_SOURCE), self._perform))

    def migrate(self) -> int:
        """Bring the database to the current schema; return how many steps ran here.

        Each step and its version bump are one ``transactionSync`` (atomic); a failure
        raises ``MigrationError`` and the database stays at the version before that step.
        """
        self._check_open()
        plan = migrate(_SOURCE, self._where, self._migrations)
        ran, self._version = run(plan, self._perform)
        self._cache.clear()
        return int(ran)

    def _ready(self) -> int:
        if self._version != len(self._migrations):
            gate = schema_gate(
                _SOURCE,
                self._where,
                self._migrations,
                migrating=self._migrate,
                fix="call store.migrate() (or build the store with migrate=True)",
            )
            self._version = run(gate, self._perform)
            self._cache.clear()
        return self._version

    # -- the store protocol -----------------------------------------------------------

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        """Run ``ops``; every write of the batch is one ``transactionSync``."""
        self._check_open()
        version = self._ready()
        if not ops:
            return []
        try:
            return list(run(run_batch(ops, self._cache, schema_version=version), self._perform))
        except BaseException:
            self._cache.clear()  # it may hold rows read in a rolled-back transaction
            raise

    async def abatch(self, ops: Sequence[Op]) -> list[Any]:
        """The same batch (the object's SQL never awaits)."""
        return self.batch(ops)

    def close(self) -> None:
        """Forget the cache; the storage needs no closing. A closed store raises."""
        self._closed = True
        self._cache.clear()

    async def aclose(self) -> None:
        self.close()

    # -- executing dialect plans ------------------------------------------------------

    def _perform(self, request: Sequence[Statement] | Transaction) -> list[Rows]:
        statements = request.statements if isinstance(request, Transaction) else request
        try:
            if not isinstance(request, Transaction) and all(map(_reads_only, statements)):
                # The object runs this synchronous code alone: no other request's write
                # can come between these reads, so they need no transaction.
                return [self._exec(statement) for statement in statements]
            results: list[Rows] = []

            def body() -> None:
                results.extend(self._exec(statement) for statement in statements)

            self._storage.transactionSync(body)
            return results
        except Exception as exc:
            if JsException is not None and isinstance(exc, JsException):
                raise sql_error(self._where, exc, statements) from exc
            raise

    def _exec(self, statement: Statement) -> Rows:
        params = [bind_value(value, self._where, raw=True) for value in statement.params]
        rows = to_py(self._sql.exec(statement.sql, *params).raw().toArray())
        return [_row(row) for row in rows]

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this DurableObjectStore is closed; build a new one")


def _reads_only(statement: Statement) -> bool:
    return statement.sql.lstrip()[:6].upper() == "SELECT"


_PLAIN = frozenset({str, int, float, type(None)})


def _row(values: list[Any]) -> tuple[Any, ...]:
    """A row as the dialect expects it; most rows hold only plain values (one C-level
    scan), a BLOB (``memoryview``) or a JS ``null`` is converted."""
    if _PLAIN.issuperset(map(type, values)):
        return tuple(values)
    return tuple(map(_value, values))


def _value(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is memoryview:  # a BLOB: by type, before py_value's slower checks
        return value.tobytes()
    return py_value(value)
