"""The SQLite dialect: schema, migrations and query plans as pure data and functions.

Nothing here performs I/O. Drivers (``engramdb.sqlite`` over stdlib ``sqlite3``, the D1
store over Cloudflare D1) execute what this module yields:

* :data:`MIGRATIONS` is the append-only list of schema steps. Each step is a tuple of
  single SQL statements, run with ``execute()`` one by one, never ``executescript``;
  a step and its version bump commit together (one transaction in ``sqlite3``, one
  ``batch()`` in D1). :func:`write_version` gives the bump for either *version source*:
  ``PRAGMA user_version`` (``sqlite3``) or the one-row table ``engramdb_schema``
  (D1 and Durable Objects, which forbid that PRAGMA).
* :func:`run_batch` executes a batch of store ops as a generator: it yields lists of
  :class:`Statement` and receives, per statement, its rows as a list of tuples (BLOBs
  as ``bytes``, NULL as ``None``). Every write of a batch is in ONE yielded list unless
  a ``SearchVectors`` op precedes a write in the same batch, so a D1 driver can send each
  list as one atomic ``db.batch()``; the ``sqlite3`` driver runs the whole generator in
  one ``BEGIN IMMEDIATE`` transaction.

:class:`SqliteVectorCache` holds decoded vectors per (scope, space) for the vector leg,
tagged with the scope's generation; a stale entry is reloaded page by page (about
4 MB of blobs per statement) before it answers. The batch's own writes are applied to the
cached entries in place (see ``_CacheDelta``), so only another writer's changes force a
reload.

Triggers on ``items`` keep the FTS5 row in sync, bump the per-scope generation counter
and drop vectors whose content hash no item uses any more, so writes never need a read
first. Integers stay far below 2**53 (D1 binds numbers as doubles), no statement binds
more than :data:`MAX_PARAMS` parameters (D1's limit), and ``None`` is never bound
(older Pyodide cannot send JS ``null``): a NULL is written as a literal instead. Runs of
item writes bind one JSON array of rows per statement (:data:`_PUT_ITEMS`), and many
hashes travel as one JSON array too; both stay under D1's 2,000,000-byte value limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from itertools import groupby
from typing import Any

from ._clock import from_ms, to_ms
from ._errors import CorruptDataError, MigrationError, SchemaTooNewError, ValidationError
from ._filter import Filter, FilterValue
from ._lexical import fts5_query
from ._store import (
    DeleteItem,
    DeleteScope,
    FindVectors,
    GetItems,
    ListItems,
    Op,
    PendingTexts,
    PutItem,
    PutVector,
    RegisterSpace,
    SearchLexical,
    SearchVectors,
    Stats,
    StoredItem,
    StoreStats,
)
from ._types import MemoryRecord, scope_from_key, scope_key
from ._vectors import VectorIndex

__all__ = [
    "HEAD_VERSION",
    "MAX_PARAMS",
    "MIGRATIONS",
    "Migration",
    "Plan",
    "Rows",
    "SqliteVectorCache",
    "Statement",
    "VersionSource",
    "is_write",
    "migration_statements",
    "pending_migrations",
    "read_version",
    "run_batch",
    "write_version",
]

MAX_PARAMS = 100
"""The most parameters one statement binds (D1 refuses more)."""

Rows = list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement and its positional ``?`` parameters."""

    sql: str
    params: tuple[Any, ...] = ()


Plan = Generator[list[Statement], list[Rows], Any]


# --- schema -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``statements`` bring a database from ``version - 1`` to ``version``."""

    version: int
    name: str
    statements: tuple[str, ...]


_BUMP_NEW = (
    "INSERT INTO scope_generations (scope_key, generation) VALUES (NEW.scope_key, 1) "
    "ON CONFLICT (scope_key) DO UPDATE SET generation = generation + 1;"
)
_BUMP_OLD = _BUMP_NEW.replace("NEW.", "OLD.")
_GC_OLD = (
    "DELETE FROM vectors WHERE content_sha256 = OLD.content_sha256 "
    "AND NOT EXISTS (SELECT 1 FROM items WHERE content_sha256 = OLD.content_sha256);"
)
_BUMP_VECTOR = (
    "UPDATE scope_generations SET generation = generation + 1 WHERE scope_key IN "
    "(SELECT scope_key FROM items WHERE content_sha256 = {row}.content_sha256);"
)

m001_initial = Migration(
    1,
    "m001_initial",
    (
        # seq is the stable rowid the FTS5 index points at (VACUUM may renumber an
        # implicit rowid, never an INTEGER PRIMARY KEY).
        "CREATE TABLE items ("
        "seq INTEGER PRIMARY KEY, "
        "id TEXT NOT NULL UNIQUE, "
        "scope_key TEXT NOT NULL, "
        "text TEXT NOT NULL, "
        "metadata TEXT NOT NULL DEFAULT '{}', "
        "labels TEXT NOT NULL DEFAULT '{}', "
        "importance REAL NOT NULL DEFAULT 0.5, "
        "created_at INTEGER NOT NULL, "
        "updated_at INTEGER NOT NULL, "
        "expires_at INTEGER, "
        "revision INTEGER NOT NULL DEFAULT 1, "
        "content_sha256 TEXT NOT NULL)",
        "CREATE INDEX items_scope_id ON items (scope_key, id)",
        "CREATE INDEX items_content_sha256 ON items (content_sha256)",
        "CREATE INDEX items_scope_expiring ON items (scope_key, expires_at) "
        "WHERE expires_at IS NOT NULL",
        "CREATE TABLE spaces ("
        "id TEXT PRIMARY KEY, "
        "provider TEXT NOT NULL, "
        "model TEXT NOT NULL, "
        "dimensions INTEGER NOT NULL, "
        "variant TEXT, "
        "created_at INTEGER NOT NULL)",
        "CREATE TABLE vectors ("
        "space_id TEXT NOT NULL, "
        "content_sha256 TEXT NOT NULL, "
        "dimensions INTEGER NOT NULL, "
        "embedded_at INTEGER NOT NULL, "
        "vector BLOB NOT NULL, "
        "PRIMARY KEY (space_id, content_sha256))",
        "CREATE INDEX vectors_content_sha256 ON vectors (content_sha256)",
        "CREATE TABLE scope_generations ("
        "scope_key TEXT PRIMARY KEY, "
        "generation INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE VIRTUAL TABLE items_fts USING fts5("
        "text, content='items', content_rowid='seq', "
        "tokenize='porter unicode61 remove_diacritics 2')",
        "CREATE TRIGGER items_after_insert AFTER INSERT ON items BEGIN "
        "INSERT INTO items_fts (rowid, text) VALUES (NEW.seq, NEW.text); "
        f"{_BUMP_NEW} END",
        "CREATE TRIGGER items_after_update AFTER UPDATE ON items BEGIN "
        "INSERT INTO items_fts (items_fts, rowid, text) VALUES ('delete', OLD.seq, OLD.text); "
        "INSERT INTO items_fts (rowid, text) VALUES (NEW.seq, NEW.text); "
        f"{_BUMP_OLD} {_BUMP_NEW} {_GC_OLD} END",
        "CREATE TRIGGER items_after_delete AFTER DELETE ON items BEGIN "
        "INSERT INTO items_fts (items_fts, rowid, text) VALUES ('delete', OLD.seq, OLD.text); "
        f"{_BUMP_OLD} {_GC_OLD} END",
        "CREATE TRIGGER vectors_after_insert AFTER INSERT ON vectors BEGIN "
        f"{_BUMP_VECTOR.format(row='NEW')} END",
        "CREATE TRIGGER vectors_after_delete AFTER DELETE ON vectors BEGIN "
        f"{_BUMP_VECTOR.format(row='OLD')} END",
    ),
)

MIGRATIONS: list[Migration] = [m001_initial]
"""Every schema step, oldest first. Append only: never edit a released step."""

HEAD_VERSION = len(MIGRATIONS)
"""The schema version this code creates and understands (when MIGRATIONS is unpatched)."""


class VersionSource(Enum):
    """Where a database records its schema version."""

    USER_VERSION = "user_version"  # PRAGMA user_version: stdlib sqlite3
    TABLE = "table"  # one-row table engramdb_schema: D1, Durable Objects


def read_version(source: VersionSource) -> Generator[list[Statement], list[Rows], int]:
    """Read the schema version (0 for a database engramdb never touched)."""
    if source is VersionSource.USER_VERSION:
        (rows,) = yield [Statement("PRAGMA user_version")]
        return int(rows[0][0]) if rows else 0
    (rows,) = yield [
        Statement(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'engramdb_schema'"
        )
    ]
    if not rows or not int(rows[0][0]):
        return 0
    (rows,) = yield [Statement("SELECT version FROM engramdb_schema WHERE id = 1")]
    return int(rows[0][0]) if rows else 0


def write_version(source: VersionSource, version: int) -> list[Statement]:
    """The statements that record ``version``; run them in the step's transaction."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"schema version {version!r} must be a non-negative int")
    if source is VersionSource.USER_VERSION:
        return [Statement(f"PRAGMA user_version = {version}")]
    return [
        Statement(
            "CREATE TABLE IF NOT EXISTS engramdb_schema ("
            "id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
        ),
        Statement(
            "INSERT INTO engramdb_schema (id, version) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET version = excluded.version",
            (version,),
        ),
    ]


def pending_migrations(
    current: int, migrations: Sequence[Migration] | None = None
) -> list[Migration]:
    """The steps that bring a database at ``current`` to head, oldest first.

    Raises ``SchemaTooNewError`` when ``current`` is newer than head (touch nothing then).
    """
    steps = MIGRATIONS if migrations is None else migrations
    head = len(steps)
    for position, step in enumerate(steps, start=1):
        if step.version != position:
            raise MigrationError(
                f"migration {step.name!r} has version {step.version} at position {position}; "
                "the MIGRATIONS list must be numbered 1, 2, 3 ... without gaps"
            )
    if current > head:
        raise SchemaTooNewError(
            f"the database has schema version {current} but this engramdb supports up to "
            f"{head}; upgrade engramdb (the database was left untouched)",
            found=current,
            supported=head,
        )
    return list(steps[current:])


def migration_statements(step: Migration, source: VersionSource) -> list[Statement]:
    """A step's statements followed by its version bump: commit them together."""
    return [Statement(sql) for sql in step.statements] + write_version(source, step.version)


# --- reading rows -----------------------------------------------------------------------

_ITEM_COLUMNS = (
    "items.id, items.scope_key, items.text, items.metadata, items.labels, items.importance, "
    "items.created_at, items.updated_at, items.expires_at, items.revision, "
    "items.content_sha256"
)
_ITEM_WIDTH = 11


def _record(row: Sequence[Any]) -> MemoryRecord:
    try:
        metadata = json.loads(row[3])
        labels = json.loads(row[4])
        return MemoryRecord(
            id=str(row[0]),
            scope=scope_from_key(row[1]),
            text=str(row[2]),
            metadata=metadata,
            labels=labels,
            importance=float(row[5]),
            created_at=from_ms(int(row[6])),
            updated_at=from_ms(int(row[7])),
            expires_at=None if row[8] is None else from_ms(int(row[8])),
            revision=int(row[9]),
            content_sha256=str(row[10]),
        )
    except (TypeError, ValueError) as exc:
        raise CorruptDataError(
            f"the stored item {row[0]!r} does not decode ({exc}); delete or rewrite it"
        ) from exc


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _chunks(values: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    size = max(1, size)
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _live(now_ms: int, table: str = "items") -> tuple[str, tuple[Any, ...]]:
    return f"({table}.expires_at IS NULL OR {table}.expires_at > ?)", (now_ms,)


def _json_path(key: str) -> str:
    return '$."' + key + '"'


def _filter_sql(spec: Filter | None) -> tuple[str, tuple[Any, ...]]:
    """A WHERE fragment (starting with `` AND``) equal to ``Filter.matches``."""
    if spec is None:
        return "", ()
    parts: list[str] = []
    params: list[Any] = []
    for key, value in spec.metadata:
        parts.extend(_metadata_condition(value))
        params.extend(_metadata_params(key, value))
    for key, label in spec.labels:
        parts.append("EXISTS (SELECT 1 FROM json_each(items.labels, ?) WHERE value = ?)")
        params.extend((_json_path(key), label))
    return "".join(" AND " + part for part in parts), tuple(params)


def _metadata_condition(value: FilterValue) -> list[str]:
    # json_type is NULL for a missing key; json_extract turns JSON true into 1, so booleans
    # are compared by type name and numbers/strings by type family, as Filter.matches does.
    if isinstance(value, bool):
        return ["json_type(items.metadata, ?) = ?"]
    if isinstance(value, str):
        return ["json_type(items.metadata, ?) = 'text'", "json_extract(items.metadata, ?) = ?"]
    return [
        "json_type(items.metadata, ?) IN ('integer', 'real')",
        "json_extract(items.metadata, ?) = ?",
    ]


def _metadata_params(key: str, value: FilterValue) -> tuple[Any, ...]:
    path = _json_path(key)
    if isinstance(value, bool):
        return (path, "true" if value else "false")
    return (path, path, value)


# --- the vector cache -------------------------------------------------------------------


@dataclass(slots=True)
class _CacheEntry:
    generation: int
    index: VectorIndex
    expiring: dict[str, int] = field(default_factory=dict)  # id -> expires_at ms


class _Excluding:
    """The container of every key except ``excluded``."""

    __slots__ = ("excluded",)

    def __init__(self, excluded: frozenset[str]) -> None:
        self.excluded = excluded

    def __contains__(self, key: object) -> bool:
        return key not in self.excluded


class _EntryBuilder:
    """Decodes loaded rows into a new :class:`VectorIndex` (corrupt rows raise)."""

    __slots__ = ("dimensions", "expiring", "index", "space_id")

    def __init__(self, space_id: str, dimensions: int) -> None:
        self.space_id = space_id
        self.dimensions = dimensions
        self.index = VectorIndex(dimensions)
        self.expiring: dict[str, int] = {}

    def add_rows(self, rows: Rows) -> None:
        """Add ``(id, vector blob, expires_at ms | None)`` rows."""
        size = 4 * self.dimensions
        pairs: list[tuple[str, bytes]] = []
        for item_id, blob, expires_at in rows:
            data = bytes(blob)
            key = str(item_id)
            if len(data) != size:
                raise CorruptDataError(
                    f"the vector of item {key!r} in space {self.space_id!r} has {len(data)} "
                    f"bytes, not {size}; the row is corrupt: re-embed it with reindex()"
                )
            pairs.append((key, data))
            if expires_at is not None:
                self.expiring[key] = int(expires_at)
        try:
            self.index.add_many(pairs)  # decodes: CorruptDataError on NaN/infinity
        except ValidationError as exc:  # not a unit vector
            raise CorruptDataError(
                f"a vector in space {self.space_id!r} is unusable ({exc}); re-embed it "
                "with reindex()"
            ) from exc


class SqliteVectorCache:
    """Decoded vectors per (scope key, space id), each tagged with its scope generation.

    An entry is used only while the scope's generation in the database equals the one it
    was built at; every write to a scope (by any connection or process) bumps that
    generation, so a stale entry is rebuilt before it can answer. One cache belongs to one
    store object; it is not shared between databases.
    """

    __slots__ = ("_entries", "_page_bytes", "loads")

    def __init__(self, *, page_bytes: int = 4_000_000) -> None:
        self._entries: dict[tuple[str, str], _CacheEntry] = {}
        self._page_bytes = page_bytes
        self.loads = 0
        """How many entries were (re)built from the database: a statistic for tests."""

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry (the next search reloads)."""
        self._entries.clear()

    def generation(self, key: str, space_id: str) -> int | None:
        """The generation the entry of (``key``, ``space_id``) was built at, if cached."""
        entry = self._entries.get((key, space_id))
        return None if entry is None else entry.generation

    def page_rows(self, dimensions: int) -> int:
        """How many vectors one load statement reads (about ``page_bytes`` of blobs)."""
        return max(1, self._page_bytes // (4 * max(1, dimensions)))

    def builder(self, space_id: str, dimensions: int) -> _EntryBuilder:
        """A new, empty entry to fill with :meth:`_EntryBuilder.add_rows`."""
        return _EntryBuilder(space_id, dimensions)

    def install(self, key: str, space_id: str, generation: int, builder: _EntryBuilder) -> None:
        """Make ``builder``'s vectors the entry of (``key``, ``space_id``) at ``generation``."""
        self._entries[(key, space_id)] = _CacheEntry(generation, builder.index, builder.expiring)
        self.loads += 1

    def cached(self) -> list[tuple[str, str]]:
        """The (scope key, space id) of every entry."""
        return list(self._entries)

    def patch(
        self, key: str, space_id: str, generation: int, delta: _CacheDelta, rows: Rows
    ) -> None:
        """Apply ``delta`` and its read-back ``rows`` for this entry; tag ``generation``.

        If the rows do not decode, the entry is dropped (the next search reloads it and
        reports the corrupt row).
        """
        entry = self._entries.get((key, space_id))
        if entry is None:
            return
        try:
            if key in delta.cleared:
                entry.index = VectorIndex(entry.index.dimensions)
                entry.expiring = {}
            index, expiring = entry.index, entry.expiring
            for item_id in delta.removed:
                index.remove(item_id)
                expiring.pop(item_id, None)
            if rows:
                builder = _EntryBuilder(space_id, index.dimensions)
                builder.index = index
                builder.add_rows(rows)
                for item_id, _blob, expires_at in rows:
                    if expires_at is None:
                        expiring.pop(str(item_id), None)
                expiring.update(builder.expiring)
        except (CorruptDataError, ValidationError):
            self.drop(key, space_id)
            return
        entry.generation = generation

    def drop(self, key: str, space_id: str) -> None:
        """Forget the entry of (``key``, ``space_id``), if any."""
        self._entries.pop((key, space_id), None)

    def search(
        self,
        key: str,
        space_id: str,
        query: Sequence[float],
        k: int,
        *,
        now_ms: int,
        exact: bool,
        allowed: Container[str] | None,
    ) -> list[tuple[str, float]]:
        """Search one cached (scope, space); expired items never score."""
        entry = self._entries.get((key, space_id))
        if entry is None:
            return []
        if allowed is None and entry.expiring:
            expired = frozenset(i for i, at in entry.expiring.items() if at <= now_ms)
            if expired:
                allowed = _Excluding(expired)
        return entry.index.search(query, k, exact=exact, allowed=allowed)


# --- plans ------------------------------------------------------------------------------

_WRITES = (PutItem, PutVector, RegisterSpace, DeleteItem, DeleteScope)


def is_write(op: Op) -> bool:
    """Whether ``op`` changes the database."""
    return isinstance(op, _WRITES)


# A planned op: its statements and a function from their rows to the op's result.
_Finish = Callable[[list[Rows]], Any]


_ITEM_FIELDS = (
    "id, scope_key, text, metadata, labels, importance, created_at, updated_at, "
    "expires_at, revision, content_sha256"
)
# Items are put many at a time, as one JSON array of rows bound to ONE statement: a
# per-row INSERT fires the FTS5 trigger inside its own statement savepoint, and FTS5
# flushes its pending index at every savepoint (10k rows: 2.6x slower one per statement,
# ``python -m bench.writes``). ``WHERE true`` keeps ON CONFLICT from being read
# as a join constraint (SQLite's documented upsert parsing rule).
_PUT_ITEMS = (
    f"INSERT INTO items ({_ITEM_FIELDS}) SELECT "
    + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(11))
    + " FROM json_each(?) WHERE true ON CONFLICT (id) DO UPDATE SET "
    "scope_key = excluded.scope_key, text = excluded.text, metadata = excluded.metadata, "
    "labels = excluded.labels, importance = excluded.importance, "
    "created_at = excluded.created_at, updated_at = excluded.updated_at, "
    "expires_at = excluded.expires_at, revision = excluded.revision, "
    "content_sha256 = excluded.content_sha256"
)
# UTF-8 bytes of JSON per _PUT_ITEMS statement, well under D1's 2,000,000-byte limit on
# one bound value (a single larger row goes alone).
_PUT_ITEMS_BYTES = 1_000_000
_HASHES_PER_STATEMENT = 10_000
_PUT_VECTOR = (
    "INSERT INTO vectors (space_id, content_sha256, dimensions, embedded_at, vector) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (space_id, content_sha256) DO NOTHING"
)


_scope_key = lru_cache(maxsize=4096)(scope_key)
_to_ms = lru_cache(maxsize=64)(to_ms)  # a batch's records share a few timestamps


def _no_result(rows: list[Rows]) -> None:
    return None


def _json_object(value: dict[str, Any]) -> str:
    return "{}" if not value else _json(value)


def _put_items(ops: Sequence[PutItem]) -> list[Statement]:
    """:data:`_PUT_ITEMS` statements for ``ops``: up to 4,096 rows per JSON payload,
    halved until a payload is at most ``_PUT_ITEMS_BYTES`` of UTF-8 (or holds one row).
    Few statements matter: FTS5 writes out a segment at every statement's savepoint."""
    rows: list[list[Any]] = []
    for op in ops:
        r = op.record
        if not 0 < r.revision < 2**63:  # JSON would carry a bigger one as a float
            raise ValidationError(
                f"revision={r.revision} of item {r.id!r} does not fit SQLite's 64-bit integer"
            )
        if "\x00" in r.text:  # json_extract would end the text there: refuse, never cut
            raise ValidationError(
                f"the text of item {r.id!r} contains U+0000, which cannot be stored; "
                "update it with a text without that character"
            )
        created = _to_ms(r.created_at)
        rows.append(
            [
                r.id,
                _scope_key(r.scope),
                r.text,
                _json_object(r.metadata),
                _json_object(r.labels),
                float(r.importance),
                created,
                created if r.updated_at is r.created_at else _to_ms(r.updated_at),
                None if r.expires_at is None else _to_ms(r.expires_at),
                r.revision,
                r.content_sha256,
            ]
        )
    statements: list[Statement] = []
    pending = [rows[start : start + 4096] for start in range(0, len(rows), 4096)][::-1]
    while pending:  # reversed: pop() takes the chunks in order
        chunk = pending.pop()
        payload = _json(chunk)
        size = len(payload) if payload.isascii() else len(payload.encode("utf-8"))
        if size > _PUT_ITEMS_BYTES and len(chunk) > 1:
            half = len(chunk) // 2
            pending += [chunk[half:], chunk[:half]]
            continue
        statements.append(Statement(_PUT_ITEMS, (payload,)))
    return statements


def _put_vectors(ops: Sequence[PutVector]) -> list[Statement]:
    """One :data:`_PUT_VECTOR` per op (the ``sqlite3`` driver runs them as one
    ``executemany``; a blob cannot travel inside JSON)."""
    return [
        Statement(
            _PUT_VECTOR,
            (
                op.space_id,
                op.content_sha256,
                len(op.vector) // 4,
                _to_ms(op.embedded_at),
                bytes(op.vector),
            ),
        )
        for op in ops
    ]


def _register_space(op: RegisterSpace) -> tuple[list[Statement], _Finish]:
    s = op.space
    variant = "NULL" if s.variant is None else "?"
    params: list[Any] = [s.id, s.provider, s.model, s.dimensions]
    if s.variant is not None:
        params.append(s.variant)
    params.append(to_ms(op.now))
    sql = (
        "INSERT INTO spaces (id, provider, model, dimensions, variant, created_at) "
        f"VALUES (?, ?, ?, ?, {variant}, ?) ON CONFLICT (id) DO NOTHING"
    )
    return [Statement(sql, tuple(params))], lambda rows: None


def _get_items(op: GetItems) -> tuple[list[Statement], _Finish]:
    live, live_params = _live(to_ms(op.now))
    if op.space_id is None:
        head = f"SELECT {_ITEM_COLUMNS}, NULL FROM items"
        head_params: tuple[Any, ...] = ()
    else:
        head = (
            f"SELECT {_ITEM_COLUMNS}, vectors.embedded_at FROM items LEFT JOIN vectors "
            "ON vectors.space_id = ? AND vectors.content_sha256 = items.content_sha256"
        )
        head_params = (op.space_id,)
    distinct = list(dict.fromkeys(op.ids))
    room = MAX_PARAMS - len(head_params) - len(live_params)
    statements = [
        Statement(
            f"{head} WHERE items.id IN ({_marks(len(chunk))}) AND {live}",
            (*head_params, *chunk, *live_params),
        )
        for chunk in _chunks(distinct, room)
    ]

    def finish(results: list[Rows]) -> list[StoredItem | None]:
        found: dict[str, StoredItem] = {}
        for rows in results:
            for row in rows:
                embedded = row[_ITEM_WIDTH]
                found[str(row[0])] = StoredItem(
                    _record(row), None if embedded is None else from_ms(int(embedded))
                )
        return [found.get(item_id) for item_id in op.ids]

    return statements, finish


def _find_vectors(op: FindVectors) -> tuple[list[Statement], _Finish]:
    # The hashes travel as one JSON array per statement (10,000 hashes ≈ 670 KB, under
    # D1's 2,000,000-byte value limit): one lookup per remember_many, not one per 99.
    distinct = list(dict.fromkeys(op.hashes))
    statements = [
        Statement(
            "SELECT content_sha256 FROM vectors WHERE space_id = ? "
            "AND content_sha256 IN (SELECT value FROM json_each(?))",
            (op.space_id, _json(list(chunk))),
        )
        for chunk in _chunks(distinct, _HASHES_PER_STATEMENT)
    ]

    def finish(results: list[Rows]) -> frozenset[str]:
        return frozenset(str(row[0]) for rows in results for row in rows)

    return statements, finish


def _list_items(op: ListItems) -> tuple[list[Statement], _Finish]:
    # Newest first by (created_at, id); a cursor that is unknown or of another scope
    # compares with NULL and so yields nothing, as in the in-memory store.
    key = scope_key(op.scope)
    live, live_params = _live(to_ms(op.now))
    before = ""
    before_params: tuple[Any, ...] = ()
    if op.before is not None:
        before = (
            " AND (items.created_at, items.id) < (SELECT cursor.created_at, cursor.id "
            "FROM items AS cursor WHERE cursor.id = ? AND cursor.scope_key = ?)"
        )
        before_params = (op.before, key)
    sql = (
        f"SELECT {_ITEM_COLUMNS} FROM items WHERE items.scope_key = ? AND {live}{before} "
        "ORDER BY items.created_at DESC, items.id DESC LIMIT ?"
    )
    params = (key, *live_params, *before_params, max(0, int(op.limit)))

    def finish(results: list[Rows]) -> list[MemoryRecord]:
        return [_record(row) for row in results[0]]

    return [Statement(sql, params)], finish


def _delete_item(op: DeleteItem) -> tuple[list[Statement], _Finish]:
    return [
        Statement("SELECT count(*) FROM items WHERE id = ?", (op.id,)),
        Statement("DELETE FROM items WHERE id = ?", (op.id,)),
    ], lambda results: bool(results[0] and int(results[0][0][0]))


def _delete_scope(op: DeleteScope) -> tuple[list[Statement], _Finish]:
    key = scope_key(op.scope)
    return [
        Statement("SELECT count(*) FROM items WHERE scope_key = ?", (key,)),
        Statement("DELETE FROM items WHERE scope_key = ?", (key,)),
    ], lambda results: int(results[0][0][0]) if results[0] else 0


def _pending_texts(op: PendingTexts) -> tuple[list[Statement], _Finish]:
    sql = (
        "SELECT items.content_sha256, min(items.text) FROM items WHERE NOT EXISTS "
        "(SELECT 1 FROM vectors WHERE vectors.space_id = ? "
        "AND vectors.content_sha256 = items.content_sha256) "
        "GROUP BY items.content_sha256 ORDER BY min(items.seq) LIMIT ?"
    )

    def finish(results: list[Rows]) -> list[tuple[str, str]]:
        return [(str(row[0]), str(row[1])) for row in results[0]]

    return [Statement(sql, (op.space_id, max(0, int(op.limit))))], finish


def _stats(op: Stats, schema_version: int | None) -> tuple[list[Statement], _Finish]:
    now_ms = to_ms(op.now)
    live, live_params = _live(now_ms)
    statements = [
        Statement("SELECT count(*) FROM items WHERE " + live, live_params),
        Statement("SELECT count(DISTINCT scope_key) FROM items"),
        Statement("SELECT count(*) FROM items WHERE expires_at <= ?", (now_ms,)),
        Statement(
            f"SELECT count(*) FROM items WHERE {live} AND NOT EXISTS (SELECT 1 FROM vectors "
            "WHERE vectors.space_id = ? AND vectors.content_sha256 = items.content_sha256)",
            (*live_params, op.space_id),
        ),
        Statement("SELECT count(*) FROM vectors WHERE space_id = ?", (op.space_id,)),
        Statement("SELECT id FROM spaces UNION SELECT DISTINCT space_id FROM vectors ORDER BY 1"),
    ]

    def finish(results: list[Rows]) -> StoreStats:
        return StoreStats(
            items=int(results[0][0][0]),
            scopes=int(results[1][0][0]),
            expired=int(results[2][0][0]),
            pending=int(results[3][0][0]),
            vectors=int(results[4][0][0]),
            spaces=tuple(str(row[0]) for row in results[5]),
            schema_version=schema_version,
        )

    return statements, finish


def _room(fixed: int) -> int:
    """How many list parameters fit beside ``fixed`` others in one statement."""
    if fixed >= MAX_PARAMS:
        raise ValidationError(
            f"the filter has too many conditions ({fixed} parameters with the rest of the "
            f"query); use fewer, so that a query binds at most {MAX_PARAMS}"
        )
    return MAX_PARAMS - fixed


def _rank(pairs: Iterable[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    """Best first: score descending, ties by id ascending; at most ``k``."""
    return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))[: max(0, k)]


def _search_lexical(op: SearchLexical) -> tuple[list[Statement], _Finish]:
    match = fts5_query(op.query)
    keys = list(dict.fromkeys(scope_key(scope) for scope in op.scopes))
    if match is None or op.k <= 0 or not keys:
        return [], lambda results: []
    live, live_params = _live(to_ms(op.now))
    where, filter_params = _filter_sql(op.filter)
    room = _room(2 + len(live_params) + len(filter_params))
    statements = [
        Statement(
            "SELECT items.id, -bm25(items_fts) FROM items_fts "
            "JOIN items ON items.seq = items_fts.rowid "
            f"WHERE items_fts MATCH ? AND items.scope_key IN ({_marks(len(chunk))}) "
            f"AND {live}{where} ORDER BY bm25(items_fts), items.id LIMIT ?",
            (match, *chunk, *live_params, *filter_params, int(op.k)),
        )
        for chunk in _chunks(keys, room)
    ]

    def finish(results: list[Rows]) -> list[tuple[str, float]]:
        pairs = [(str(row[0]), float(row[1])) for rows in results for row in rows]
        return pairs if len(results) == 1 else _rank(pairs, op.k)

    return statements, finish


# Ops planned a run at a time: their results are all None, their statements shared.
_GROUPED: dict[type, Callable[[Any], list[Statement]]] = {
    PutItem: _put_items,
    PutVector: _put_vectors,
}
_SIMPLE: dict[type, Callable[[Any], tuple[list[Statement], _Finish]]] = {
    RegisterSpace: _register_space,
    GetItems: _get_items,
    FindVectors: _find_vectors,
    ListItems: _list_items,
    DeleteItem: _delete_item,
    DeleteScope: _delete_scope,
    PendingTexts: _pending_texts,
    SearchLexical: _search_lexical,
}


class _VectorSearch:
    """The multi-step plan of one SearchVectors op."""

    def __init__(self, op: SearchVectors) -> None:
        self.op = op
        self.keys = list(dict.fromkeys(scope_key(scope) for scope in op.scopes))
        self.dimensions = len(op.query)
        self.generations: dict[str, int] = {}
        self.eligible: set[str] | None = None

    def first(self) -> tuple[list[Statement], Callable[[list[Rows]], None]]:
        """Read the scope generations and, with a filter, the eligible ids."""
        if not self.keys or self.op.k <= 0 or not self.dimensions:
            return [], lambda results: None
        statements = [
            Statement(
                "SELECT scope_key, generation FROM scope_generations "
                f"WHERE scope_key IN ({_marks(len(chunk))})",
                tuple(chunk),
            )
            for chunk in _chunks(self.keys, MAX_PARAMS)
        ]
        generation_count = len(statements)
        if self.op.filter is not None:
            live, live_params = _live(to_ms(self.op.now))
            where, filter_params = _filter_sql(self.op.filter)
            room = _room(len(live_params) + len(filter_params))
            statements += [
                Statement(
                    f"SELECT items.id FROM items WHERE items.scope_key IN "
                    f"({_marks(len(chunk))}) AND {live}{where}",
                    (*chunk, *live_params, *filter_params),
                )
                for chunk in _chunks(self.keys, room)
            ]

        def take(results: list[Rows]) -> None:
            for rows in results[:generation_count]:
                for key, generation in rows:
                    self.generations[str(key)] = int(generation)
            if self.op.filter is not None:
                self.eligible = {str(row[0]) for rows in results[generation_count:] for row in rows}

        return statements, take

    def stale(self, cache: SqliteVectorCache) -> list[str]:
        stale = []
        for key in self.keys:
            generation = self.generations.get(key)
            if generation is None:  # never written: no items
                cache.drop(key, self.op.space_id)
            elif cache.generation(key, self.op.space_id) != generation:
                stale.append(key)
        return stale

    def load(
        self, cache: SqliteVectorCache, key: str
    ) -> Generator[list[Statement], list[Rows], None]:
        """Reload one scope's entry page by page (bounded memory and response size).

        Each page is read together with the scope's generation; if the generation moves
        between pages (possible on D1, where pages are separate batches), start over.
        """
        space_id = self.op.space_id
        page = cache.page_rows(self.dimensions)
        generation: int | None = None
        builder = cache.builder(space_id, self.dimensions)
        after = ""
        while True:
            generation_rows, rows = yield [
                Statement("SELECT generation FROM scope_generations WHERE scope_key = ?", (key,)),
                Statement(
                    "SELECT items.id, vectors.vector, items.expires_at FROM items "
                    "JOIN vectors ON vectors.space_id = ? "
                    "AND vectors.content_sha256 = items.content_sha256 "
                    "WHERE items.scope_key = ? AND items.id > ? ORDER BY items.id LIMIT ?",
                    (space_id, key, after, page),
                ),
            ]
            if not generation_rows:
                cache.drop(key, space_id)
                return
            seen = int(generation_rows[0][0])
            if generation is not None and seen != generation:
                builder = cache.builder(space_id, self.dimensions)
                generation, after = seen, ""
                continue
            generation = seen
            builder.add_rows(rows)
            if len(rows) < page:
                break
            after = str(rows[-1][0])
        assert generation is not None
        cache.install(key, space_id, generation, builder)

    def answer(self, cache: SqliteVectorCache) -> list[tuple[str, float]]:
        if not self.generations:
            return []
        now_ms = to_ms(self.op.now)
        pairs: list[tuple[str, float]] = []
        for key in self.keys:
            if key not in self.generations:
                continue
            pairs += cache.search(
                key,
                self.op.space_id,
                self.op.query,
                self.op.k,
                now_ms=now_ms,
                exact=self.op.exact,
                allowed=self.eligible,
            )
        return pairs if len(self.keys) == 1 else _rank(pairs, self.op.k)


_READ_BACK = (
    "SELECT items.scope_key, items.id, vectors.vector, items.expires_at FROM items "
    "JOIN vectors ON vectors.space_id = ? AND vectors.content_sha256 = items.content_sha256 "
    "WHERE items.{column} IN ({marks})"
)


class _CacheDelta:
    """Keeps cached entries current across this batch's own writes, without a reload.

    The write list is wrapped: its FIRST statements read the cached scopes' generations
    and its LAST statements read back the final rows the writes touched (items put, items
    sharing a newly put vector's hash) and the generations again, all in the one
    transaction (sqlite3) or ``batch()`` (D1) of the writes. An entry whose generation
    equals the "before" value saw no other writer, so the batch's effect is applied to it
    exactly (scopes deleted are emptied, items put or deleted are removed, the read-back
    rows re-added) and it is tagged with the "after" generation. Any other entry is left
    to the generation check of the next search.
    """

    def __init__(self, ops: Iterable[Op], cache: SqliteVectorCache) -> None:
        self.cache = cache
        cached = cache.cached()
        self.keys = sorted({key for key, _ in cached})
        self.spaces = sorted({space for _, space in cached})
        self.removed: set[str] = set()
        self.cleared: set[str] = set()
        put: dict[str, str] = {}  # item id -> content hash
        vector_hashes: dict[str, set[str]] = {space: set() for space in self.spaces}
        for op in ops:
            if isinstance(op, PutItem):
                put[op.record.id] = op.record.content_sha256
            elif isinstance(op, PutVector):
                if op.space_id in vector_hashes:
                    vector_hashes[op.space_id].add(op.content_sha256)
            elif isinstance(op, DeleteItem):
                self.removed.add(op.id)
            elif isinstance(op, DeleteScope):
                self.cleared.add(scope_key(op.scope))
        self.removed.update(put)
        # Read back, per cached space: every item holding a hash whose vector was put
        # (new items and older ones that gain a vector), and the other items put.
        self.reads: list[tuple[str, Statement]] = []
        for space in self.spaces:
            hashes = sorted(vector_hashes[space])
            ids = [i for i, sha in put.items() if sha not in vector_hashes[space]]
            for column, values in (("content_sha256", hashes), ("id", ids)):
                for chunk in _chunks(values, MAX_PARAMS - 1):
                    sql = _READ_BACK.format(column=column, marks=_marks(len(chunk)))
                    self.reads.append((space, Statement(sql, (space, *chunk))))

    @staticmethod
    def wanted(ops: Iterable[Op], cache: SqliteVectorCache) -> bool:
        """Whether the segment changes items or vectors while something is cached."""
        return bool(len(cache)) and any(
            isinstance(op, (PutItem, PutVector, DeleteItem, DeleteScope)) for op in ops
        )

    def generations(self) -> list[Statement]:
        return [
            Statement(
                "SELECT scope_key, generation FROM scope_generations "
                f"WHERE scope_key IN ({_marks(len(chunk))})",
                tuple(chunk),
            )
            for chunk in _chunks(self.keys, MAX_PARAMS)
        ]

    def tail(self) -> list[Statement]:
        return [statement for _, statement in self.reads] + self.generations()

    def apply(self, before_rows: list[Rows], tail_rows: list[Rows]) -> None:
        before = {str(k): int(g) for rows in before_rows for k, g in rows}
        after = {str(k): int(g) for rows in tail_rows[len(self.reads) :] for k, g in rows}
        found: dict[str, dict[str, Rows]] = {}
        for (space, _), rows in zip(self.reads, tail_rows, strict=False):
            by_key = found.setdefault(space, {})
            for key, item_id, blob, expires_at in rows:
                by_key.setdefault(str(key), []).append((item_id, blob, expires_at))
        for key, space in self.cache.cached():
            start, end = before.get(key), after.get(key)
            if start is None or end is None or start == end:
                continue
            if self.cache.generation(key, space) != start:
                continue  # stale already: the next search reloads it
            rows = found.get(space, {}).get(key, [])
            self.cache.patch(key, space, end, self, rows)


def _segments(ops: Sequence[Op]) -> list[list[int]]:
    """Split op positions so that writes after a SearchVectors start a new segment."""
    segments: list[list[int]] = [[]]
    searched = False
    for position, op in enumerate(ops):
        if searched and is_write(op):
            segments.append([])
            searched = False
        segments[-1].append(position)
        if isinstance(op, SearchVectors):
            searched = True
    return [segment for segment in segments if segment]


def _plan(
    op: Op,
    position: int,
    searches: list[tuple[int, _VectorSearch]],
    schema_version: int | None,
) -> tuple[list[Statement], _Finish]:
    """Plan one op not in ``_GROUPED``; a SearchVectors is also queued on ``searches``."""
    if isinstance(op, SearchVectors):
        search = _VectorSearch(op)
        searches.append((position, search))
        return search.first()
    if isinstance(op, Stats):
        return _stats(op, schema_version)
    planner = _SIMPLE.get(type(op))
    if planner is None:
        raise TypeError(f"unknown store op {op!r}")
    return planner(op)


def run_batch(
    ops: Sequence[Op], cache: SqliteVectorCache, *, schema_version: int | None
) -> Generator[list[Statement], list[Rows], list[Any]]:
    """Execute ``ops``: yield statement lists, receive their rows, return the op results.

    The driver sends every yielded list and answers with one row list per statement, in
    order (an empty list for statements that return nothing). All yields of one call
    belong to one atomic batch: the ``sqlite3`` driver wraps the whole run in one
    transaction; D1 sends each list as one ``batch()``, and every write of ``ops`` is in
    one list unless a ``SearchVectors`` precedes a write (see :func:`is_write`).
    """
    results: list[Any] = [None] * len(ops)
    for segment in _segments(ops):
        statements: list[Statement] = []
        spans: list[tuple[int, int, int, _Finish]] = []  # position, start, stop, finish
        searches: list[tuple[int, _VectorSearch]] = []
        delta: _CacheDelta | None = None
        if _CacheDelta.wanted((ops[p] for p in segment), cache):
            delta = _CacheDelta((ops[p] for p in segment), cache)
            statements += delta.generations()  # FIRST: the generations before the writes
        head = len(statements)
        for kind, run in groupby(segment, key=lambda p: type(ops[p])):
            grouped = _GROUPED.get(kind)
            if grouped is not None:  # a run of puts is planned at once (see _PUT_ITEMS)
                positions = list(run)
                spans += [(p, len(statements), len(statements), _no_result) for p in positions]
                statements += grouped([ops[p] for p in positions])
                continue
            for position in run:
                planned, finish = _plan(ops[position], position, searches, schema_version)
                spans.append((position, len(statements), len(statements) + len(planned), finish))
                statements += planned
        body = len(statements)
        if delta is not None:
            statements += delta.tail()  # LAST: read-back rows and generations after
        rows: list[Rows] = []
        if statements:
            rows = yield statements
            if len(rows) != len(statements):
                raise CorruptDataError(
                    f"the driver answered {len(rows)} row lists for {len(statements)} "
                    "statements; this is a driver bug"
                )
        if delta is not None:
            delta.apply(rows[:head], rows[body:])
        for position, start, stop, finish in spans:
            results[position] = finish(list(rows[start:stop]))
        for _position, search in searches:
            for key in search.stale(cache):
                yield from search.load(cache, key)
        for position, search in searches:
            results[position] = search.answer(cache)
    return results
