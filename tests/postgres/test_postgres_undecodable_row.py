"""One item row that does not decode costs that memory only, on PostgreSQL too (its
metadata is text, so a hand edit can leave it unreadable): recall and list answer with
the others, the recall says degraded, get names it, forget removes it."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import psycopg
import pytest

from engramdb import CorruptDataError, HashEmbedder, Memory
from engramdb.backup import backup
from engramdb.postgres import PostgresStore
from engramdb.store import ScopeSet, UnreadableItems

SCOPE = ("acme", "user", "sam")


@pytest.mark.parametrize("mode", ["hybrid", "vector", "lexical"])
def test_an_undecodable_row_is_skipped_and_reported(pg_dsn: str, mode: str) -> None:
    with Memory(PostgresStore(pg_dsn), HashEmbedder()) as memory:
        good = memory.remember("Sam likes green tea in the morning", SCOPE)
        bad = memory.remember("Sam likes black tea in the evening", SCOPE)
        with psycopg.connect(pg_dsn, autocommit=True) as db:
            db.execute("UPDATE engramdb_items SET metadata = '{not json' WHERE id = %s", (bad.id,))
        hits = memory.recall("tea", [SCOPE], mode=mode)
        assert [hit.memory.id for hit in hits] == [good.id]
        assert (hits.status, hits.error) == ("degraded", "CorruptDataError")
        assert [record.id for record in memory.list(SCOPE)] == [good.id]
        with pytest.raises(CorruptDataError, match=bad.id):
            memory.get(bad.id)
        assert memory.forget(bad.id)
        after = memory.recall("tea", [SCOPE], mode=mode)
        assert [hit.memory.id for hit in after] == [good.id] and after.status != "degraded"


def test_unreadable_items_names_the_row_and_a_backup_reports_it(pg_dsn: str) -> None:
    """``UnreadableItems`` finds the row every listing leaves out; a backup of the
    database names it in its report instead of leaving it out silently."""
    store = PostgresStore(pg_dsn)
    with Memory(store, HashEmbedder()) as memory:
        memory.remember("Sam likes green tea in the morning", SCOPE)
        bad = memory.remember("Sam likes black tea in the evening", SCOPE)
        with psycopg.connect(pg_dsn, autocommit=True) as db:
            db.execute("UPDATE engramdb_items SET metadata = '{not json' WHERE id = %s", (bad.id,))
        now = datetime.now(UTC)
        found = store.batch([UnreadableItems(ScopeSet(prefixes=(("acme",),)), now)])
        assert found == [[bad.id]]
        report = backup(store, io.StringIO())
        assert (report.items, report.unreadable) == (1, (bad.id,))
