"""One item row that does not decode (its metadata is not JSON, as a bad hand edit or a
damaged page leaves it) costs that memory only: recall and list of its scope answer
with the others, the recall says ``degraded`` / ``CorruptDataError``, ``get`` of it names
it, and ``forget`` removes it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engramdb import CorruptDataError, HashEmbedder, Memory
from engramdb.sqlite import SqliteStore

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
