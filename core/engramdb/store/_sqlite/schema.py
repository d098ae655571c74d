"""The schema: the append-only list of migrations and the one algorithm that runs them.

Each :class:`Migration` is a tuple of single SQL statements, run with ``execute()`` one
by one, never ``executescript``. :func:`migrate` is a plan (see ``rows.Plan``): it reads
the version, refuses a database that is newer than this code (touching nothing) or whose
version is not a non-negative integer, and yields each pending step as ONE
:class:`~.rows.Transaction`: a statement that fails unless the database is still at the
step's starting version, the step's statements and its version bump. A driver only runs
the transaction (``BEGIN IMMEDIATE ... COMMIT`` in ``sqlite3``, one ``batch()`` in D1);
when it fails, the plan reads the version again: a step another process ran meanwhile
counts as done, anything else is a ``MigrationError`` and the database stays at the
version before the step.

The version lives where the database allows (:class:`VersionSource`): ``PRAGMA
user_version`` (``sqlite3``) or the one-row table ``engramdb_schema`` (D1 and Durable
Objects, which forbid that PRAGMA).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from engramdb._base.errors import MigrationError, SchemaTooNewError, StoreError
from engramdb.store._sqlite.rows import Rows, Statement, Transaction

__all__ = [
    "HEAD_VERSION",
    "MIGRATIONS",
    "SEGMENT_COVERING",
    "Migration",
    "VersionSource",
    "check_schema",
    "migrate",
    "migration_statements",
    "pending_migrations",
    "read_version",
    "write_version",
]


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
_FTS_DELETE_OLD = (
    "INSERT INTO items_fts (items_fts, rowid, text) VALUES ('delete', OLD.seq, OLD.text);"
)

_ITEM_FIELDS = (
    "scope_key TEXT NOT NULL, "
    "text TEXT NOT NULL, "
    "metadata TEXT NOT NULL DEFAULT '{}', "
    "labels TEXT NOT NULL DEFAULT '{}', "
    "importance REAL NOT NULL DEFAULT 0.5, "
    "created_at INTEGER NOT NULL, "
    "updated_at INTEGER NOT NULL, "
    "expires_at INTEGER, "
)
"""The columns an item and its earlier revisions share (``items``, ``item_revisions``)."""

m001_initial = Migration(
    1,
    "m001_initial",
    (
        # seq is the stable rowid the FTS5 index points at (VACUUM may renumber an
        # implicit rowid, never an INTEGER PRIMARY KEY).
        "CREATE TABLE items ("
        "seq INTEGER PRIMARY KEY, "
        "id TEXT NOT NULL UNIQUE, "
        f"{_ITEM_FIELDS}"
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

m002_revisions_scopes_narrow_writes = Migration(
    2,
    "m002_revisions_scopes_narrow_writes",
    (
        # Earlier revisions of items: the item columns, keyed by (id, revision).
        "CREATE TABLE item_revisions ("
        "id TEXT NOT NULL, "
        f"{_ITEM_FIELDS}"
        "revision INTEGER NOT NULL, "
        "content_sha256 TEXT NOT NULL, "
        "PRIMARY KEY (id, revision)) WITHOUT ROWID",
        # Every scope that held items, with its sort path (parts joined by U+001F).
        "CREATE TABLE scopes (scope_key TEXT PRIMARY KEY, path TEXT NOT NULL UNIQUE) WITHOUT ROWID",
        "INSERT INTO scopes (scope_key, path) WITH RECURSIVE parts (scope_key, n, path) AS ("
        "SELECT scope_key, 1, json_extract(scope_key, '$[0]') "
        "FROM (SELECT DISTINCT scope_key FROM items) "
        "UNION ALL SELECT scope_key, n + 1, "
        "path || char(31) || json_extract(scope_key, '$[' || n || ']') "
        "FROM parts WHERE n < json_array_length(scope_key)) "
        "SELECT scope_key, path FROM parts WHERE n = json_array_length(scope_key)",
        # Conditional writes: a plan inserts a row here only when its condition fails,
        # and the named CHECK aborts the statement and so the whole batch.
        "CREATE TABLE engramdb_guards ("
        "not_found INTEGER CONSTRAINT engramdb_not_found CHECK (not_found IS NULL), "
        "conflict INTEGER CONSTRAINT engramdb_conflict CHECK (conflict IS NULL), "
        "other_scope INTEGER CONSTRAINT engramdb_other_scope CHECK (other_scope IS NULL), "
        "wrong_dimensions INTEGER "
        "CONSTRAINT engramdb_wrong_dimensions CHECK (wrong_dimensions IS NULL))",
        # Derived index data of a vector (sign code and uint8 copy), loaded in bulk.
        "ALTER TABLE vectors ADD COLUMN index_data BLOB",
        # Narrow writes: the full-text row changes only with the text, the generation
        # only with what a vector search depends on (scope and content hash).
        "DROP TRIGGER items_after_update",
        "DROP TRIGGER items_after_delete",
        "CREATE TRIGGER items_after_text AFTER UPDATE OF text ON items "
        f"WHEN OLD.text IS NOT NEW.text BEGIN {_FTS_DELETE_OLD} "
        "INSERT INTO items_fts (rowid, text) VALUES (NEW.seq, NEW.text); END",
        "CREATE TRIGGER items_after_content AFTER UPDATE OF scope_key, content_sha256 "
        "ON items WHEN OLD.scope_key IS NOT NEW.scope_key "
        "OR OLD.content_sha256 IS NOT NEW.content_sha256 "
        f"BEGIN {_BUMP_OLD} {_BUMP_NEW} {_GC_OLD} END",
        "CREATE TRIGGER items_after_delete AFTER DELETE ON items BEGIN "
        f"{_FTS_DELETE_OLD} {_BUMP_OLD} {_GC_OLD} "
        "DELETE FROM item_revisions WHERE id = OLD.id; END",
        "CREATE TRIGGER vectors_after_update AFTER UPDATE OF vector ON vectors "
        f"WHEN OLD.vector IS NOT NEW.vector BEGIN {_BUMP_VECTOR.format(row='NEW')} END",
    ),
)

_COUNT = "UPDATE scopes SET items = items {sign} 1, tokens = tokens {sign} {row}.tokens "
_COUNT += "WHERE scope_key = {row}.scope_key;"

m003_scope_statistics = Migration(
    3,
    "m003_scope_statistics",
    (
        # BM25 with the statistics of the scopes a search selects: each item's number
        # of tokens (written by the plans with the text), the occurrences of the terms
        # of the full-text index, and per scope the number of items and tokens.
        "ALTER TABLE items ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0",
        "CREATE VIRTUAL TABLE items_terms USING fts5vocab(items_fts, 'instance')",
        "UPDATE items SET tokens = counted.n FROM (SELECT doc, count(*) AS n "
        "FROM items_terms GROUP BY doc) AS counted WHERE counted.doc = items.seq",
        "ALTER TABLE scopes ADD COLUMN items INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE scopes ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0",
        "UPDATE scopes SET items = counted.n, tokens = counted.t FROM (SELECT scope_key, "
        "count(*) AS n, sum(tokens) AS t FROM items GROUP BY scope_key) AS counted "
        "WHERE counted.scope_key = scopes.scope_key",
        # The plans write a scope's row before its first item, so these find it.
        "CREATE TRIGGER items_count_insert AFTER INSERT ON items BEGIN "
        f"{_COUNT.format(sign='+', row='NEW')} END",
        "CREATE TRIGGER items_count_delete AFTER DELETE ON items BEGIN "
        f"{_COUNT.format(sign='-', row='OLD')} END",
        "CREATE TRIGGER items_count_update AFTER UPDATE OF scope_key, tokens ON items "
        "WHEN OLD.scope_key IS NOT NEW.scope_key OR OLD.tokens IS NOT NEW.tokens BEGIN "
        f"{_COUNT.format(sign='-', row='OLD')} {_COUNT.format(sign='+', row='NEW')} END",
    ),
)

m004_policy = Migration(
    4,
    "m004_policy",
    (
        # The evidence of an item (aggregates only: no prompt, no conversation text).
        "CREATE TABLE item_utility ("
        "id TEXT PRIMARY KEY, "
        "exposures INTEGER NOT NULL DEFAULT 0, "
        "last_exposed_at INTEGER, "
        "eval_count INTEGER NOT NULL DEFAULT 0, "
        "eval_sum REAL NOT NULL DEFAULT 0, "
        "manual REAL, "
        "manual_updated_at INTEGER, "
        "reinforced_at INTEGER) WITHOUT ROWID",
        # Its evaluations per label context (the most recent few are kept).
        "CREATE TABLE item_contexts ("
        "id TEXT NOT NULL, "
        "key TEXT NOT NULL, "
        "eval_count INTEGER NOT NULL, "
        "eval_sum REAL NOT NULL, "
        "updated_at INTEGER NOT NULL, "
        "PRIMARY KEY (id, key)) WITHOUT ROWID",
        # Short-lived selection receipts: the ids a recall returned, for one evaluation.
        "CREATE TABLE selections ("
        "id TEXT PRIMARY KEY, "
        "scope_key TEXT NOT NULL, "
        "memory_ids TEXT NOT NULL, "
        "context TEXT NOT NULL, "
        "created_at INTEGER NOT NULL, "
        "expires_at INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE INDEX selections_scope ON selections (scope_key, created_at, id)",
        "CREATE INDEX selections_expiry ON selections (expires_at)",
        "CREATE TRIGGER items_forget_utility AFTER DELETE ON items BEGIN "
        "DELETE FROM item_utility WHERE id = OLD.id; "
        "DELETE FROM item_contexts WHERE id = OLD.id; END",
    ),
)

SEGMENT_COVERING: Final = (
    "(SELECT t.rowid FROM vector_segments AS t WHERE t.scope_key = {scope} "
    "AND t.space_id = {space} AND t.first_id <= {id} ORDER BY t.first_id DESC LIMIT 1)"
)
"""The rowid of the one segment of a scope and space that can hold an id (their ranges
are disjoint): the last that starts at or before it, found by a seek of the primary key.
A format string of the SQL expressions ``scope``, ``space`` and ``id``."""

_UNPACK = (
    "DELETE FROM vector_segments WHERE rowid IN (SELECT s.rowid FROM spaces "
    "JOIN vector_segments AS s ON s.rowid = "
    + SEGMENT_COVERING.format(scope="{row}.scope_key", space="spaces.id", id="{row}.id")
    + " WHERE s.last_id >= {row}.id);"
)
_UNPACK_HASH = (
    "DELETE FROM vector_segments WHERE rowid IN (SELECT s.rowid FROM items "
    "JOIN vector_segments AS s ON s.rowid = "
    + SEGMENT_COVERING.format(scope="items.scope_key", space="{row}.space_id", id="items.id")
    + " WHERE items.content_sha256 = {row}.content_sha256 AND s.last_id >= items.id);"
)

m005_vector_segments = Migration(
    5,
    "m005_vector_segments",
    (
        # A scope's vectors of one space packed into blobs (PackVectors), so that a cold
        # search reads a few rows instead of one per vector. A segment covers the ids
        # [first_id, last_id] of its scope: `items` counts the scope's items there when
        # it was packed (with a vector or not); it holds the JSON list of the ids with a
        # vector, their created_at (int64 little-endian), float32 vectors and index data,
        # each concatenated, the CRC-32 of the first three and that of the index data,
        # and the rows that did not decode (id: message).
        "CREATE TABLE vector_segments ("
        "scope_key TEXT NOT NULL, "
        "space_id TEXT NOT NULL, "
        "first_id TEXT NOT NULL, "
        "last_id TEXT NOT NULL, "
        "items INTEGER NOT NULL, "
        "checksum INTEGER NOT NULL, "
        "data_checksum INTEGER NOT NULL, "
        "ids TEXT NOT NULL, "
        "created BLOB NOT NULL, "
        "vectors BLOB NOT NULL, "
        "index_data BLOB NOT NULL, "
        "corrupt TEXT, "
        "PRIMARY KEY (scope_key, space_id, first_id))",
        # A write a vector search could see deletes the segments whose range it touches
        # (an item put, deleted, moved or rewritten there; a vector of a text used
        # there put, replaced or deleted): a segment is current or absent, and a
        # forgotten memory's vector does not stay behind in a blob. New ids (time
        # ordered) usually fall past every range, so most writes delete nothing.
        f"CREATE TRIGGER items_unpack_insert AFTER INSERT ON items BEGIN "
        f"{_UNPACK.format(row='NEW')} END",
        f"CREATE TRIGGER items_unpack_delete AFTER DELETE ON items BEGIN "
        f"{_UNPACK.format(row='OLD')} END",
        "CREATE TRIGGER items_unpack_update AFTER UPDATE OF id, scope_key, content_sha256, "
        f"created_at ON items BEGIN {_UNPACK.format(row='OLD')} {_UNPACK.format(row='NEW')} END",
        f"CREATE TRIGGER vectors_unpack_insert AFTER INSERT ON vectors BEGIN "
        f"{_UNPACK_HASH.format(row='NEW')} END",
        f"CREATE TRIGGER vectors_unpack_delete AFTER DELETE ON vectors BEGIN "
        f"{_UNPACK_HASH.format(row='OLD')} END",
        "CREATE TRIGGER vectors_unpack_update AFTER UPDATE OF space_id, content_sha256, vector "
        "ON vectors BEGIN "
        f"{_UNPACK_HASH.format(row='OLD')} {_UNPACK_HASH.format(row='NEW')} END",
    ),
)

m006_statement_bookkeeping = Migration(
    6,
    "m006_statement_bookkeeping",
    (
        # What an insert changes besides its row is written once per statement by the
        # plans that insert (engramdb.store._sqlite.writes: put_items, restore_items,
        # put_vectors), set-based, instead of row by row here: a scope's counts and
        # generation, and the segments a new id or a new vector of a text falls in.
        # Updates and deletes keep their triggers. The full-text row stays a trigger.
        "DROP TRIGGER items_after_insert",
        "CREATE TRIGGER items_after_insert AFTER INSERT ON items BEGIN "
        "INSERT INTO items_fts (rowid, text) VALUES (NEW.seq, NEW.text); END",
        "DROP TRIGGER items_count_insert",
        "DROP TRIGGER items_unpack_insert",
        "DROP TRIGGER vectors_after_insert",
        "DROP TRIGGER vectors_unpack_insert",
    ),
)

MIGRATIONS: list[Migration] = [
    m001_initial,
    m002_revisions_scopes_narrow_writes,
    m003_scope_statistics,
    m004_policy,
    m005_vector_segments,
    m006_statement_bookkeeping,
]
"""Every schema step, oldest first. Append only: never edit a released step."""

HEAD_VERSION: Final = len(MIGRATIONS)
"""The schema version this code creates and understands (when MIGRATIONS is unpatched)."""


class VersionSource(Enum):
    """Where a database records its schema version."""

    USER_VERSION = "user_version"  # PRAGMA user_version: stdlib sqlite3
    TABLE = "table"  # one-row table engramdb_schema: D1, Durable Objects


def _version_of(value: Any) -> int:
    """A stored version as an int, or ``MigrationError`` if it is not a non-negative
    integer (D1 hands numbers over as floats)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MigrationError(
            f"the database records schema version {value!r}, which is not a non-negative "
            "integer: it was not written by engramdb, or was damaged; check the path, or "
            "restore the file from a backup (it was left untouched)"
        )
    return value


def read_version(source: VersionSource) -> Generator[list[Statement], list[Rows], int]:
    """Read the schema version (0 for a database engramdb never touched)."""
    if source is VersionSource.USER_VERSION:
        (rows,) = yield [Statement("PRAGMA user_version")]
        return _version_of(rows[0][0]) if rows else 0
    (rows,) = yield [
        Statement(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'engramdb_schema'"
        )
    ]
    if not rows or not int(rows[0][0]):
        return 0
    (rows,) = yield [Statement("SELECT version FROM engramdb_schema WHERE id = 1")]
    return _version_of(rows[0][0]) if rows else 0


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


def assert_version(source: VersionSource, version: int) -> Statement:
    """A statement that fails unless the database is at ``version`` (SQLite raises
    "malformed JSON" for ``json('x')``; nothing else here can fail that way)."""
    if source is VersionSource.USER_VERSION:
        current = "(SELECT user_version FROM pragma_user_version)"
    elif version == 0:
        return Statement(
            "SELECT json(CASE WHEN EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' "
            "AND name = 'engramdb_schema') THEN 'x' ELSE '0' END)"
        )
    else:
        current = "(SELECT version FROM engramdb_schema WHERE id = 1)"
    return Statement(f"SELECT json(CASE WHEN {current} = {int(version)} THEN '0' ELSE 'x' END)")


def pending_migrations(current: int, migrations: Sequence[Any] | None = None) -> list[Any]:
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
    current = _version_of(current)
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


def migrate(
    source: VersionSource,
    where: str,
    migrations: Sequence[Migration] | None = None,
    *,
    target: int | None = None,
) -> Generator[Any, Any, tuple[int, int]]:
    """The plan that migrates a database to head (or to ``target``).

    Returns ``(steps run here, version now)``. ``where`` names the database in messages.
    """
    steps = MIGRATIONS if migrations is None else migrations
    current = yield from read_version(source)
    ran = 0
    for step in pending_migrations(current, steps):
        if target is not None and step.version > target:
            break
        try:
            yield Transaction(
                (
                    assert_version(source, step.version - 1),
                    *migration_statements(step, source),
                )
            )
        except StoreError as exc:
            again = yield from read_version(source)
            pending_migrations(again, steps)  # raises if it is now too new
            if again >= step.version:  # another process ran this step meanwhile
                current = again
                continue
            raise MigrationError(
                f"migration {step.name} of {where} failed ({exc}); it was rolled back and "
                f"the database stays at schema version {step.version - 1}"
            ) from exc
        ran += 1
        current = step.version
    return ran, current


def schema_gate(
    source: VersionSource,
    where: str,
    migrations: Sequence[Migration],
    *,
    migrating: bool,
    fix: str,
) -> Generator[Any, Any, int]:
    """The schema gate of a store of this dialect, before a batch runs on a database not
    known to be at head: migrate it (``migrating``), or read its version (one written by
    a newer engramdb raises ``SchemaTooNewError``, the database untouched); anything but
    head then raises ``StoreError`` naming ``where`` and ``fix``. Returns the version."""
    if migrating:
        _, version = yield from migrate(source, where, migrations)
    else:
        version = yield from read_version(source)
    check_schema(version, migrations, where=where, fix=fix)
    return version


def check_schema(version: int, migrations: Sequence[Any], *, where: str, fix: str) -> None:
    """The gate's verdict on a database at ``version``, for any store and dialect (each
    of ``migrations`` has a ``version`` and a ``name``): one written by a newer engramdb
    raises ``SchemaTooNewError`` (touch nothing), one behind head ``StoreError`` naming
    ``where`` and ``fix``."""
    pending_migrations(version, migrations)
    if version != len(migrations):
        raise StoreError(
            f"{where} has schema version {version} but this engramdb needs {len(migrations)}; {fix}"
        )
