"""Schema 6: what an insert changes besides its rows (a scope's item and token counts,
its generation, the packed segments it falls in) is written once per statement by the
plans, no longer row by row by triggers. The golden file was written at schema 5, where
triggers kept all of it."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import FIXTURES, FixtureClock

from engramdb import HashEmbedder, Memory
from engramdb.backup import backup, restore
from engramdb.sqlite import SqliteStore
from engramdb.store import PackVectors
from engramdb.store._sqlite import writes
from engramdb.store._sqlite.schema import MIGRATIONS

BEFORE = FIXTURES / "before-bookkeeping-v5.db"
ANSWERS = json.loads((FIXTURES / "before-bookkeeping-v5.json").read_text())
BIG = ("acme", "team", "notes")
BIG_KEY = '["acme","team","notes"]'
SPACE = HashEmbedder(dimensions=32).space.id


@pytest.fixture
def upgraded(tmp_path: Path) -> Path:
    path = tmp_path / "upgraded.db"
    shutil.copyfile(BEFORE, path)
    return path


@contextlib.contextmanager
def opened(path: Path) -> Iterator[Memory]:
    """The fixture's answers are the pure-Python kernel's: open it with that kernel."""
    memory = Memory(
        SqliteStore(path, vector_kernel="python"), HashEmbedder(dimensions=32), clock=FixtureClock()
    )
    try:
        yield memory
    finally:
        memory.close()


def read(path: Path, sql: str) -> list[Any]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return [list(row) for row in conn.execute(sql).fetchall()]


def counts(path: Path) -> list[Any]:
    """Each scope's (key, items, tokens) as stored."""
    return read(path, "SELECT scope_key, items, tokens FROM scopes ORDER BY scope_key")


def recounted(path: Path) -> list[Any]:
    """Each scope's (key, items, tokens) counted from its items."""
    return read(
        path,
        "SELECT scopes.scope_key, count(items.id), coalesce(sum(items.tokens), 0) FROM scopes "
        "LEFT JOIN items ON items.scope_key = scopes.scope_key "
        "GROUP BY scopes.scope_key ORDER BY scopes.scope_key",
    )


def generation(path: Path) -> int:
    (row,) = read(path, f"SELECT generation FROM scope_generations WHERE scope_key = '{BIG_KEY}'")
    return int(row[0])


def segments(path: Path) -> list[Any]:
    return read(path, "SELECT scope_key, first_id, last_id, items FROM vector_segments")


def vector_hits(memory: Memory, query: str) -> list[tuple[str, float]]:
    return [(h.memory.id, h.score) for h in memory.recall(query, [BIG], top_k=10, mode="vector")]


def test_a_schema_5_database_upgrades_with_its_counts_segments_and_answers(
    upgraded: Path,
) -> None:
    """Upgrading to 6 drops the per-row insert triggers and rewrites nothing: the counts
    the triggers kept, the segment, and every recorded recall (all modes, both scopes)
    are as schema 5 left them."""
    with opened(upgraded) as memory:
        assert memory.store.schema_version == len(MIGRATIONS) == 6
        for asked in ANSWERS["recalls"]:
            hits = memory.recall(
                asked["query"], scopes=[tuple(asked["scope"])], top_k=10, mode=asked["mode"]
            )
            # the ids exactly; the scores to the digits the Python versions share (the
            # pure-Python kernel takes sumprod on 3.12+, the fixture was written on 3.11)
            assert [h.memory.id for h in hits] == [hit[0] for hit in asked["hits"]]
            assert [h.score for h in hits] == pytest.approx([hit[1] for hit in asked["hits"]])
            assert hits.status == asked["status"]
    assert counts(upgraded) == recounted(upgraded) == ANSWERS["scopes"]
    assert len(segments(upgraded)) == ANSWERS["segments"] == 1
    triggers = {
        row[0] for row in read(upgraded, "SELECT name FROM sqlite_master WHERE type = 'trigger'")
    }
    assert "items_after_insert" in triggers  # the full-text row: still a trigger
    assert not triggers & {
        "items_count_insert",
        "items_unpack_insert",
        "vectors_after_insert",
        "vectors_unpack_insert",
    }


def test_a_new_vector_of_a_packed_item_unpacks_its_segment_after_the_upgrade(
    upgraded: Path,
) -> None:
    """The fixture packed its last memory before embedding it. Embedding it now (a new
    vector row of a text inside the segment's range) must delete the segment and move
    the scope's generation: a cold search then finds the memory by its vector."""
    before = generation(upgraded)
    with opened(upgraded) as memory:
        assert memory.status().pending == 1
        memory.maintain()
        assert memory.status().pending == 0
    assert segments(upgraded) == []
    assert generation(upgraded) > before
    with opened(upgraded) as cold:
        (top, *_) = cold.recall("a deferred note about cello and lisbon", [BIG], mode="vector")
        assert top.memory.text == "a deferred note about cello and lisbon"


def test_a_new_id_inside_a_packed_range_unpacks_and_is_counted(upgraded: Path) -> None:
    """A memory whose given id falls inside the segment's range: the segment goes, the
    scope's generation moves, its counts match its items; a forget and a new memory past
    the range keep them exact too, and the new id past the range deletes nothing (a
    new store object answers as the warm one)."""
    ((_, first, last, _),) = segments(upgraded)
    inside = first + "x"  # after the first id, before the second
    assert first < inside < last
    before = generation(upgraded)
    with opened(upgraded) as memory:
        memory.remember_many([{"text": "a memory with its own id", "scope": BIG, "id": inside}])
        assert segments(upgraded) == []
        assert generation(upgraded) > before
        assert counts(upgraded) == recounted(upgraded)
        memory.store.batch([PackVectors(SPACE, min_vectors=1000)])
        assert len(segments(upgraded)) == 1
        memory.forget(inside)  # a delete in the range: its trigger unpacks
        assert counts(upgraded) == recounted(upgraded)
        assert segments(upgraded) == []
        memory.store.batch([PackVectors(SPACE, min_vectors=1000)])
        memory.remember("a brand new note about cello and lisbon", scope=BIG)
        assert counts(upgraded) == recounted(upgraded)
        assert len(segments(upgraded)) == 1  # the new id is past the range
        warm = vector_hits(memory, "cello lisbon")
    with opened(upgraded) as cold:  # a new store object: from the segment and the rows
        assert vector_hits(cold, "cello lisbon") == warm
    big = [row for row in counts(upgraded) if row[0] == BIG_KEY]
    assert big[0][1] == ANSWERS["scopes"][0][1] + 1  # one in, one out, one in


def test_a_backup_restored_into_a_new_file_has_the_counts_the_triggers_kept(
    upgraded: Path, tmp_path: Path
) -> None:
    """Restored items are counted by the restore plan: a new file holding the upgraded
    file's backup has the same per-scope counts as schema 5's triggers kept."""
    with opened(upgraded) as memory:
        lines = io.StringIO()
        backup(memory.store, lines)
    target = tmp_path / "restored.db"
    with contextlib.closing(SqliteStore(target)) as store:
        restore(store, lines.getvalue().splitlines(keepends=True))
    assert counts(target) == recounted(target) == ANSWERS["scopes"]


def test_the_bookkeeping_of_a_large_run_travels_in_payloads_d1_can_bind(tmp_path: Path) -> None:
    """A run whose new rows would make one JSON value over the insert's payload limit
    (D1 binds at most 2,000,000 bytes per value) is counted in several statements, each
    payload under the limit, and the counts stay exact."""
    scope = ("acme", "x" * 200, "y" * 200)  # long scope keys: a few rows per kilobyte
    items = [{"text": f"note {i}", "scope": scope} for i in range(3000)]
    path = tmp_path / "large.db"
    with Memory(SqliteStore(path), HashEmbedder(dimensions=32)) as memory:
        statements: list[Any] = []
        real = writes._new_in

        def spy(marks: str) -> list[Any]:
            statements.append(marks)
            return real(marks)

        writes._new_in = spy  # type: ignore[assignment]
        try:
            memory.remember_many(items, batch_size=3000)
        finally:
            writes._new_in = real  # type: ignore[assignment]
    assert len(statements) > 1
    assert all(len(marks.encode()) <= writes._PUT_BYTES for marks in statements)
    assert sum(len(json.loads(marks)) for marks in statements) == 3000
    assert counts(path) == recounted(path)
    assert counts(path)[0][1] == 3000
