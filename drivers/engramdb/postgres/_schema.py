"""The PostgreSQL schema: an append-only list of migrations and the version table.

Each :class:`Migration` is a tuple of single statements. A step runs in ONE transaction
that first takes ``pg_advisory_xact_lock`` (so processes migrating at once queue up: one
applies the step, the others find it done), reads the version again under the lock, and
records the step in ``engramdb_schema_version`` with its statements. A database whose
version is newer than this code is refused before anything is written.

Layout (version 1): an item row holds the same columns as SQLite's (times in integer
milliseconds, metadata and labels as compact JSON text, so a record reads back exactly as
written) plus ``scope_path`` (the scope's parts joined by U+001F, ``COLLATE "C"``: its
byte order is the order of scope tuples, and a prefix's descendants are one range).
Identifiers and hashes are ``COLLATE "C"`` too, so ``ORDER BY id`` breaks ties as Python
does. Vectors are pgvector ``vector`` values keyed by (space id, content hash).
Version 2 adds the policy tables: selection receipts (consumed with an atomic
``DELETE ... RETURNING``, so exactly one of two consumers wins) and per-item evidence.
Version 3 adds each item's lexical terms (computed in Python by the core's tokenizer, so
BM25 agrees with every other store) with a GIN index; ``PostgresStore.migrate`` fills
them in for rows written before it. Version 4 adds per-scope coverage counters
(``_coverage``), computed from the tables when it is applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["ADVISORY_LOCK", "HEAD_VERSION", "MIGRATIONS", "Migration"]

ADVISORY_LOCK: Final = 0x656E6772616D  # "engram": the key migrations serialise on


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``statements`` bring a database from ``version - 1`` to ``version``."""

    version: int
    name: str
    statements: tuple[str, ...]


_ITEM_COLUMNS = """
    id text COLLATE "C" NOT NULL,
    scope_key text COLLATE "C" NOT NULL,
    text text NOT NULL,
    metadata text NOT NULL,
    labels text NOT NULL,
    importance double precision NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    expires_at bigint,
    revision bigint NOT NULL,
    content_sha256 text COLLATE "C" NOT NULL
"""

MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        1,
        "m001_items_vectors_spaces",
        (
            "CREATE EXTENSION IF NOT EXISTS vector",
            f"""CREATE TABLE engramdb_items ({_ITEM_COLUMNS},
                scope_path text COLLATE "C" NOT NULL,
                PRIMARY KEY (id))""",
            "CREATE INDEX engramdb_items_scope ON engramdb_items (scope_path, created_at, id)",
            "CREATE INDEX engramdb_items_hash ON engramdb_items (content_sha256)",
            """CREATE INDEX engramdb_items_expiring ON engramdb_items (expires_at, id)
                WHERE expires_at IS NOT NULL""",
            f"""CREATE TABLE engramdb_item_revisions ({_ITEM_COLUMNS},
                PRIMARY KEY (id, revision))""",
            """CREATE TABLE engramdb_spaces (
                space_id text COLLATE "C" PRIMARY KEY,
                dimensions integer NOT NULL,
                registered_at bigint NOT NULL)""",
            """CREATE TABLE engramdb_vectors (
                space_id text COLLATE "C" NOT NULL,
                content_sha256 text COLLATE "C" NOT NULL,
                embedding vector NOT NULL,
                embedded_at bigint NOT NULL,
                PRIMARY KEY (space_id, content_sha256))""",
            "CREATE INDEX engramdb_vectors_hash ON engramdb_vectors (content_sha256)",
        ),
    ),
    Migration(
        2,
        "m002_policy_receipts_and_evidence",
        (
            """CREATE TABLE engramdb_receipts (
                id text COLLATE "C" PRIMARY KEY,
                scope_key text COLLATE "C" NOT NULL,
                memory_ids text NOT NULL,
                context text NOT NULL,
                created_at bigint NOT NULL,
                expires_at bigint NOT NULL)""",
            "CREATE INDEX engramdb_receipts_scope ON engramdb_receipts (scope_key, created_at, id)",
            "CREATE INDEX engramdb_receipts_expiry ON engramdb_receipts (expires_at)",
            """CREATE TABLE engramdb_utility (
                id text COLLATE "C" PRIMARY KEY,
                exposures bigint NOT NULL,
                last_exposed_at bigint,
                eval_count bigint NOT NULL,
                eval_sum double precision NOT NULL,
                manual double precision,
                manual_updated_at bigint,
                reinforced_at bigint,
                contexts text NOT NULL)""",
        ),
    ),
    Migration(
        3,
        "m003_lexical_terms",
        (
            # The core's index terms of the text (tokens, Porter-stemmed, repeats kept)
            # and their number: BM25's tf and |d|. NULL until the backfill computes them.
            "ALTER TABLE engramdb_items ADD COLUMN terms text[]",
            "ALTER TABLE engramdb_items ADD COLUMN term_count integer",
            "CREATE INDEX engramdb_items_terms ON engramdb_items USING gin (terms)",
        ),
    ),
    Migration(
        4,
        "m004_coverage_counters",
        (
            # Per scope: its items (space_id '') and those with a vector in each space,
            # kept in step by every write (_coverage), so a vector search reads its
            # coverage from a row per scope.
            """CREATE TABLE engramdb_coverage (
                scope_key text COLLATE "C" NOT NULL,
                space_id text COLLATE "C" NOT NULL,
                scope_path text COLLATE "C" NOT NULL,
                n bigint NOT NULL,
                PRIMARY KEY (scope_key, space_id))""",
            "CREATE INDEX engramdb_coverage_path ON engramdb_coverage (scope_path)",
            """INSERT INTO engramdb_coverage (scope_key, space_id, scope_path, n)
                SELECT scope_key, '', min(scope_path), count(*) FROM engramdb_items
                GROUP BY scope_key""",
            """INSERT INTO engramdb_coverage (scope_key, space_id, scope_path, n)
                SELECT i.scope_key, v.space_id, min(i.scope_path), count(*)
                FROM engramdb_items i JOIN engramdb_vectors v
                ON v.content_sha256 = i.content_sha256 GROUP BY i.scope_key, v.space_id""",
        ),
    ),
)
"""Append only: a released step never changes; a new one goes at the end."""

HEAD_VERSION: Final = len(MIGRATIONS)

VERSION_TABLE: Final = """CREATE TABLE IF NOT EXISTS engramdb_schema_version (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())"""
