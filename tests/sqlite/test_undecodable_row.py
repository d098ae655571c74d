"""One item row that does not decode (its metadata is not JSON, as a bad hand edit or a
damaged page leaves it) costs that memory only: recall and list of its scope answer
with the others, the recall says ``degraded`` / ``CorruptDataError``, ``get`` of it names
it, and ``forget`` removes it."""

from __future__ import annotations

import io
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engramdb import CorruptDataError, HashEmbedder, Memory
from engramdb.backup import backup
from engramdb.sqlite import SqliteStore
from engramdb.store import DeleteItem, ScopeSet, UnreadableItems

SCOPE = ("acme", "user", "sam")


@pytest.mark.parametrize("mode", ["hybrid", "vector", "lexical"])
def test_an_undecodable_row_is_skipped_and_reported(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "m.db"
    with Memory(SqliteStore(path), HashEmbedder()) as memory:
        good = memory.remember("Sam likes green tea in the morning", SCOPE)
        bad = memory.remember("Sam likes black tea in the evening", SCOPE)
    db = sqlite3.connect(path)
    with db:  # commits; the connection is closed below (sqlite3's with does not close)
        db.execute("UPDATE items SET metadata = '{not json' WHERE id = ?", (bad.id,))
    db.close()
    with Memory(SqliteStore(path), HashEmbedder()) as memory:
        hits = memory.recall("tea", [SCOPE], mode=mode)
        assert [hit.memory.id for hit in hits] == [good.id]
        assert (hits.status, hits.error) == ("degraded", "CorruptDataError")
        assert [record.id for record in memory.list(SCOPE)] == [good.id]
        with pytest.raises(CorruptDataError, match=bad.id):
            memory.get(bad.id)
        assert memory.forget(bad.id)
        after = memory.recall("tea", [SCOPE], mode=mode)
        assert [hit.memory.id for hit in after] == [good.id] and after.status != "degraded"


def test_unreadable_items_names_the_row_that_does_not_decode(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``UnreadableItems`` finds exactly the live rows every listing leaves out, in its
    scope and under a prefix, and none once the row is forgotten; a backup names it."""
    path = tmp_path / "m.db"
    with Memory(SqliteStore(path), HashEmbedder()) as memory:
        memory.remember("Sam likes green tea in the morning", SCOPE)
        bad = memory.remember("Sam likes black tea in the evening", SCOPE)
        memory.remember("Kim likes coffee", ("acme", "user", "kim"))
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE items SET labels = '[1' WHERE id = ?", (bad.id,))
    db.close()
    store = SqliteStore(path)
    request.addfinalizer(store.close)
    now = datetime.now(UTC)
    found = store.batch(
        [
            UnreadableItems(ScopeSet.of(SCOPE), now),
            UnreadableItems(ScopeSet(prefixes=(("acme",),)), now),
            UnreadableItems(ScopeSet.of(("acme", "user", "kim")), now),
        ]
    )
    assert found == [[bad.id], [bad.id], []]
    report = backup(store, io.StringIO())
    assert (report.items, report.unreadable) == (2, (bad.id,))
    store.batch([DeleteItem(bad.id)])
    assert store.batch([UnreadableItems(ScopeSet.of(SCOPE), now)]) == [[]]
