"""Migration as flows: reading the version, one schema step, one chunk of the terms
backfill. Each flow runs in ONE transaction, drawn by ``PostgresStore`` on a sync or an
async connection, so both faces migrate with the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engramdb.driver import pending_migrations
from engramdb.store import terms

from ._schema import ADVISORY_LOCK, VERSION_TABLE, Migration
from ._sql import Flow, Query

__all__ = ["backfill_flow", "step_flow", "version_flow"]


def version_flow() -> Flow:
    """The recorded schema version (0 when there is no version table)."""
    (exists,) = yield Query("SELECT to_regclass('engramdb_schema_version') IS NOT NULL")
    if not exists[0]:
        return 0
    (row,) = yield Query("SELECT coalesce(max(version), 0) FROM engramdb_schema_version")
    return int(row[0])


def step_flow(step: Migration, migrations: Sequence[Migration]) -> Flow:
    """Apply ``step`` unless it is already recorded; return whether it ran here.

    It first takes ``pg_advisory_xact_lock`` and reads the version again under it: of
    several processes migrating at once, one applies the step and the others wait and
    find it done.
    """
    yield Query("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK,))
    yield Query(VERSION_TABLE)
    current = yield from version_flow()
    pending_migrations(current, migrations)  # SchemaTooNewError: touch nothing
    if current >= step.version:
        return False
    for statement in step.statements:
        yield Query(statement)
    yield Query(
        "INSERT INTO engramdb_schema_version (version, name) VALUES (%s, %s)",
        (step.version, step.name),
    )
    return True


def backfill_flow() -> Flow:
    """Compute the lexical terms of up to a thousand rows written before schema version 3
    (none in a database created at 3 or later); return how many."""
    rows = yield Query(
        "SELECT id, text FROM engramdb_items WHERE terms IS NULL "
        "ORDER BY id LIMIT 1000 FOR UPDATE SKIP LOCKED"
    )
    for item_id, words in _terms_of(rows):
        yield Query(
            "UPDATE engramdb_items SET terms = %s, term_count = %s WHERE id = %s",
            (words, len(words), item_id),
        )
    return len(rows)


def _terms_of(rows: Sequence[tuple[Any, ...]]) -> list[tuple[str, list[str]]]:
    return [(str(item_id), terms(str(text))) for item_id, text in rows]
