"""Packed vector segments (schema 5): the upgrade from schema 4, packing, and a cold load
from the segments answering exactly as a load from the rows."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import random
import shutil
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import FIXTURES, FixtureClock

from engramdb import HashEmbedder, Memory, ValidationError
from engramdb._vectors.index import VectorIndex, unit_f32
from engramdb._vectors.index_data import index_data_many
from engramdb.sqlite import SqliteStore
from engramdb.store import DropSpace, PackVectors, ScopeSet, SearchVectors, Stats
from engramdb.store._sqlite import batch, pack
from engramdb.store._sqlite.cache import CacheEntry
from engramdb.store._sqlite.schema import MIGRATIONS

BEFORE = FIXTURES / "before-segments-v4.db"
ANSWERS = json.loads((FIXTURES / "before-segments-v4.json").read_text())
BIG = ("acme", "team", "notes")
SPACE = HashEmbedder(dimensions=32).space.id


@pytest.fixture
def upgraded(tmp_path: Path) -> Path:
    path = tmp_path / "upgraded.db"
    shutil.copyfile(BEFORE, path)
    return path


KERNELS = ["python", *(["numpy"] if importlib.util.find_spec("numpy") else [])]


@contextlib.contextmanager
def opened(path: Path, kernel: str = "python") -> Iterator[Memory]:
    """A new store object on ``path``: a cold vector cache. The fixture's answers are
    the pure-Python kernel's (approximate above 1,000 vectors: the numpy kernel, exact,
    may rank other ties first)."""
    store = SqliteStore(path, vector_kernel=kernel)
    memory = Memory(store, HashEmbedder(dimensions=32), clock=FixtureClock())
    try:
        yield memory
    finally:
        memory.close()


@contextlib.contextmanager
def loads_counted() -> Iterator[list[int]]:
    """Record the number of vectors each packed segment a cache load used held."""
    real = CacheEntry.add_packed
    seen: list[int] = []

    def spy(entry: CacheEntry, keys: Any, *args: Any) -> None:
        seen.append(len(keys))
        real(entry, keys, *args)

    CacheEntry.add_packed = spy  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        CacheEntry.add_packed = real  # type: ignore[method-assign]


def answers(memory: Memory) -> list[dict[str, Any]]:
    """The fixture's recalls, asked again, in its JSON shape."""
    out = []
    for asked in ANSWERS["recalls"]:
        hits = memory.recall(
            asked["query"], scopes=[tuple(asked["scope"])], top_k=10, mode=asked["mode"]
        )
        out.append({**asked, "status": hits.status, "hits": [[h.memory.id, h.score] for h in hits]})
    return out


MODES = ("hybrid", "vector", "lexical")


def same(
    got: list[dict[str, Any]], expected: list[dict[str, Any]], modes: tuple[str, ...] = MODES
) -> None:
    """The same hits in the same order and status, with the same scores in ``modes``."""
    for mine, theirs in zip(got, expected, strict=True):
        assert [h[0] for h in mine["hits"]] == [h[0] for h in theirs["hits"]], theirs["query"]
        if theirs["mode"] in modes:
            assert [h[1] for h in mine["hits"]] == pytest.approx([h[1] for h in theirs["hits"]])
        assert mine["status"] == theirs["status"]


def segments(path: Path) -> list[tuple[Any, ...]]:
    """(scope key, space id, first id, last id, items) of every segment."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT scope_key, space_id, first_id, last_id, items FROM vector_segments "
            "ORDER BY scope_key, first_id"
        ).fetchall()


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_schema_4_database_upgrades_and_answers_as_before_packed_or_not(
    upgraded: Path, kernel: str
) -> None:
    """The file written at schema 4 migrates to head; every recorded recall (every mode,
    both scopes) answers as schema 4 did (the pure-Python kernel's answers; the numpy
    kernel's own from the rows), before packing, after packing (warm), and from the
    packed segments in a new store object (cold)."""
    with opened(upgraded, kernel) as memory, loads_counted() as loads:
        assert memory.store.schema_version == len(MIGRATIONS) == 6
        expected = answers(memory)
        if kernel == "python":  # hybrid and lexical scores moved to an absolute scale
            same(expected, ANSWERS["recalls"], modes=("vector",))  # since: their order
        assert loads == []  # nothing packed yet: the rows were read
        (packed,) = memory.store.batch([PackVectors(SPACE, min_vectors=1000)])
        assert packed == 1500  # the big scope; the small one holds 3 items
        same(answers(memory), expected)
    ((scope, space, _first, _last, items),) = segments(upgraded)  # 1,500 x 32 floats
    assert (scope, space, items) == ('["acme","team","notes"]', SPACE, 1500)
    with opened(upgraded, kernel) as memory, loads_counted() as loads:
        same(answers(memory), expected)
        assert loads == [1500]  # the big scope came from its segment


def test_a_write_deletes_the_segments_whose_range_it_touches(upgraded: Path) -> None:
    """A forget deletes the segment that held the memory (its vector does not stay behind
    in a blob); a new memory (a newer id, past every range) deletes none, and a cold
    load reads it from its row; a custom id inside a range deletes that segment. A cold
    load answers as the long-lived store after each step."""
    with opened(upgraded) as memory:
        memory.store.batch([PackVectors(SPACE, min_vectors=1000)])
        (first,) = segments(upgraded)
        gone = memory.recall("cello lisbon", scopes=[BIG], top_k=3, mode="vector")[0].memory
        memory.forget(gone.id)
        assert segments(upgraded) == []
        assert memory.store.batch([PackVectors(SPACE, min_vectors=1000)]) == [1499]
        memory.remember("a brand new note about cello and lisbon", scope=BIG)
        assert len(segments(upgraded)) == 1  # the new id is past the range
        warm = memory.recall("cello lisbon", scopes=[BIG], top_k=10, mode="vector")
        with opened(upgraded) as cold, loads_counted() as loads:
            again = cold.recall("cello lisbon", scopes=[BIG], top_k=10, mode="vector")
            assert loads == [1499]  # the segment, and the new memory from its row
        assert [(h.memory.id, h.score) for h in again] == [(h.memory.id, h.score) for h in warm]
        assert gone.id not in {h.memory.id for h in warm}
        inside = first[2] + "-custom"  # sorts between the range's first and last ids
        assert first[2] < inside < first[3]
        memory.remember("a note with a custom id", scope=BIG, id=inside)
        assert segments(upgraded) == []


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_damaged_segment_is_ignored_and_the_rows_are_read(upgraded: Path, kernel: str) -> None:
    """A segment whose bytes no longer match its CRC-32 is not used: the load reads the
    rows and answers as before."""
    with opened(upgraded, kernel) as memory:
        expected = answers(memory)  # from the rows (nothing packed)
    with opened(upgraded, kernel) as memory:
        memory.store.batch([PackVectors(SPACE, min_vectors=1000)])
    with contextlib.closing(sqlite3.connect(upgraded)) as conn, conn:
        conn.execute(
            "UPDATE vector_segments SET vectors = "
            "substr(vectors, 1, 100) || x'7f7f7f7f' || substr(vectors, 105)"
        )
    with opened(upgraded, kernel) as memory, loads_counted() as loads:
        same(answers(memory), expected)
        assert loads == []


def test_a_corrupt_row_is_reported_the_same_from_the_segments(upgraded: Path) -> None:
    """A vector row that does not decode is left out of the pack and listed in it: a
    search from the segments skips the same item with the same report."""
    with contextlib.closing(sqlite3.connect(upgraded)) as conn, conn:
        (sha,) = conn.execute(
            "SELECT content_sha256 FROM items WHERE scope_key = ? ORDER BY id LIMIT 1",
            (json.dumps(list(BIG), separators=(",", ":")),),
        ).fetchone()
        conn.execute(
            "UPDATE vectors SET vector = zeroblob(length(vector)) WHERE content_sha256 = ?",
            (sha,),
        )
    query = SearchVectors(
        ScopeSet.of(BIG),
        SPACE,
        HashEmbedder(dimensions=32).embed(["cello"])[0],
        5,
        datetime(2026, 1, 1, 1, tzinfo=UTC),
    )
    with contextlib.closing(SqliteStore(upgraded)) as store:
        (rows_first,) = store.batch([query])
        (packed,) = store.batch([PackVectors(SPACE, min_vectors=1000)])
    assert packed == 1499 and len(rows_first.skipped) == 1
    with contextlib.closing(SqliteStore(upgraded)) as store, loads_counted() as loads:
        (from_segments,) = store.batch([query])
        assert loads == [1499]
    assert from_segments == rows_first


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("repeat", ["ascending", "out of order"])
def test_a_segment_repeating_a_held_id_is_refused_and_the_rows_are_read(
    upgraded: Path, kernel: str, repeat: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment whose ids repeat one an earlier segment of the scope held (a valid
    CRC-32 all the same) is refused, whether its ids still ascend (the held one first)
    or not: the load reads the rows and answers as before."""
    monkeypatch.setattr(pack, "SEGMENT_BYTES", 500 * 4 * 32)  # 500 vectors a segment
    with opened(upgraded, kernel) as memory:
        expected = answers(memory)  # from the rows (nothing packed)
        memory.store.batch([PackVectors(SPACE, min_vectors=1000)])
    with contextlib.closing(sqlite3.connect(upgraded)) as conn, conn:
        rows = conn.execute(
            "SELECT rowid, ids, created, vectors FROM vector_segments "
            "WHERE scope_key = ? ORDER BY first_id",
            (json.dumps(list(BIG), separators=(",", ":")),),
        ).fetchall()
        assert [len(json.loads(row[1])) for row in rows] == [500, 500, 500]
        held, (rowid, ids, created, vectors) = json.loads(rows[0][1]), rows[1]
        changed = json.loads(ids)
        if repeat == "ascending":  # still ascending, but not past the held ids
            changed[0] = held[-1]
        else:
            changed[-1] = held[0]
        text = json.dumps(changed)
        conn.execute(
            "UPDATE vector_segments SET ids = ?, checksum = ? WHERE rowid = ?",
            (text, pack._checksum(text.encode(), created, vectors), rowid),
        )
    with opened(upgraded, kernel) as memory, loads_counted() as loads:
        same(answers(memory), expected)
        assert loads == [500, 500]  # the second refused: then from the rows alone


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_cache_entry_orders_ties_by_the_created_at_of_segments_and_rows(kernel: str) -> None:
    """The created_at a packed segment gives its ids order ties (``newer``) as a row's
    do; a row added later for the same id wins, a removed id is forgotten, and a
    segment with more created_at than ids is refused and adds nothing."""
    d = 4
    if kernel == "python":
        index: Any = VectorIndex(d)
    else:
        index = importlib.import_module("engramdb._numpy_kernel").NumpyVectorIndex(d)
    blobs = [unit_f32([1.0, float(i), 0.0, 0.0]) for i in range(4)]
    records = index_data_many(blobs, d)

    def part(at: range) -> tuple[bytes, bytes | None]:
        data = b"".join(records[i] for i in at)
        return b"".join(blobs[i] for i in at), data if index.uses_index_data else None

    entry = CacheEntry(0, index)
    entry.add_packed(["a", "b"], [5, 7], *part(range(2)))
    with pytest.raises(ValueError, match="created_at"):
        entry.add_packed(["c"], [1, 2], *part(range(2, 3)))
    assert len(index) == 2 and "c" not in index and entry.newer("c") == (0, "c")
    assert (entry.newer("a"), entry.newer("b")) == ((5, "a"), (7, "b"))
    entry.add_rows([("b", blobs[1], None, 9)])
    entry.add_packed(["d"], [3], *part(range(3, 4)))
    assert entry.created == {"a": 5, "b": 9, "d": 3}
    entry.remove("a")
    assert entry.created == {"b": 9, "d": 3} and entry.newer("a") == (0, "a")
    assert sorted(index.keys()) == ["b", "d"]


def test_pack_vectors_comes_alone_and_packs_nothing_below_its_threshold(upgraded: Path) -> None:
    with contextlib.closing(SqliteStore(upgraded)) as store:
        with pytest.raises(ValidationError, match="PackVectors must be alone"):
            store.batch([PackVectors(SPACE), Stats(SPACE, datetime(2026, 1, 1, tzinfo=UTC))])
        assert store.batch([PackVectors(SPACE, min_vectors=1501)]) == [0]
        assert store.batch([PackVectors("no/such@1")]) == [0]
        assert store.batch([PackVectors(SPACE, min_vectors=1000)]) == [1500]
        assert store.batch([PackVectors(SPACE, min_vectors=1000)]) == [0]  # current already
    assert segments(upgraded)


def test_maintain_packs_one_large_scope_per_pass(tmp_path: Path) -> None:
    """``maintain()`` packs a scope of at least 4,096 memories once its vectors are
    written, reports it, and packs nothing more on the next pass."""
    path = tmp_path / "m.db"
    memory = Memory(SqliteStore(path), HashEmbedder(dimensions=8))
    memory.remember_many([{"text": f"note {i}", "scope": ("big",)} for i in range(4096)])
    memory.remember_many([{"text": f"note {i}", "scope": ("small",)} for i in range(10)])
    assert memory.maintain().packed == 4096
    assert memory.maintain().packed == 0
    memory.remember_many(
        [{"text": f"later {i}", "scope": ("big",)} for i in range(600)], defer_embedding=True
    )
    report = memory.maintain(max_items=500)  # texts still pending: nothing packed
    assert (report.embedded, report.pending, report.packed) == (500, 100, 0)
    report = memory.maintain(max_items=500)  # the last 100: then the 600 new ids
    assert (report.embedded, report.pending, report.packed) == (100, 0, 600)
    memory.close()
    assert {row[0] for row in segments(path)} == {'["big"]'}


@pytest.mark.parametrize("as_written", [False, True], ids=["packed-by-ops", "packed-as-written"])
@pytest.mark.parametrize("seed", range(3))
def test_random_writes_and_packs_cold_loads_answer_as_the_warm_store(
    tmp_path: Path, seed: int, as_written: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random remembers, updates and forgets in three scopes, with packs in between: after
    every step a cold store (a new object on the file, loading from segments where they
    are current) answers every vector search as the long-lived warm store does. With
    ``as_written``, segments of 4 vectors and every write packing from one item on, so
    that writes pack (and later writes unpack) all the time."""
    if as_written:
        monkeypatch.setattr(pack, "SEGMENT_BYTES", 4 * 16 * 4)
        monkeypatch.setitem(batch.run_batch.__kwdefaults__, "pack_from", 1)
    rng = random.Random(seed)
    path = tmp_path / "r.db"
    clock = [datetime(2026, 1, 1, tzinfo=UTC)]

    def now() -> datetime:
        clock[0] += timedelta(seconds=1)
        return clock[0]

    words = [
        "cello",
        "lisbon",
        "tea",
        "office",
        "wifi",
        "budget",
        "garden",
        "piano",
        "river",
        "winter",
    ]
    scopes = [("t", "a"), ("t", "b"), ("t", "a", "c")]
    warm = Memory(SqliteStore(path), HashEmbedder(dimensions=16), clock=now)
    ids: list[tuple[str, tuple[str, ...]]] = []
    packed_steps = 0  # steps after which segments existed
    for _step in range(25):
        action = rng.random()
        if action < 0.5 or not ids:
            for _ in range(rng.randint(1, 40)):
                scope = rng.choice(scopes)
                text = " ".join(rng.choices(words, k=3)) + f" {rng.randint(0, 99)}"
                ids.append((warm.remember(text, scope=scope).id, scope))
        elif action < 0.65:
            item, _scope = ids.pop(rng.randrange(len(ids)))
            warm.forget(item)
        elif action < 0.8:
            item, _scope = rng.choice(ids)
            warm.update(item, text=" ".join(rng.choices(words, k=2)))
        else:
            warm.store.batch([PackVectors(warm.status().spaces[0], min_vectors=1)])
        queries = [" ".join(rng.choices(words, k=2)) for _ in range(3)]
        packed_steps += bool(segments(path))
        with opened_at(path, now) as cold:
            for query in queries:
                for selected in ([scopes[0]], [scopes[1]], [("t",)]):
                    a = warm.recall(query, scopes=selected, top_k=8, mode="vector")
                    b = cold.recall(query, scopes=selected, top_k=8, mode="vector")
                    assert [(h.memory.id, h.score) for h in a] == [
                        (h.memory.id, h.score) for h in b
                    ]
    warm.close()
    assert packed_steps >= (20 if as_written else 1), packed_steps


@contextlib.contextmanager
def opened_at(path: Path, clock: Any) -> Iterator[Memory]:
    memory = Memory(SqliteStore(path), HashEmbedder(dimensions=16), clock=clock)
    try:
        yield memory
    finally:
        memory.close()


def test_a_vector_arriving_for_a_pending_memory_deletes_its_segment(tmp_path: Path) -> None:
    """Memories stored without their vectors (``defer_embedding``) are covered by a
    segment's range with no vector; when ``maintain()`` embeds them, the vectors' insert
    deletes that segment, and a cold load finds them (from their rows, or repacked)."""
    path = tmp_path / "p.db"
    memory = Memory(SqliteStore(path), HashEmbedder(dimensions=8))
    memory.remember_many([{"text": f"note {i} cello", "scope": ("s",)} for i in range(300)])
    memory.remember_many(
        [{"text": f"late {i} cello", "scope": ("s",)} for i in range(20)], defer_embedding=True
    )
    space = memory.status().spaces[0]
    assert memory.store.batch([PackVectors(space, min_vectors=1)]) == [300]
    assert [row[4] for row in segments(path)] == [320]  # the pending 20 are in its range
    memory.maintain(max_items=1000)  # embeds the 20: their vectors delete the segment
    assert memory.status().pending == 0
    assert segments(path) == []
    warm = memory.recall("late cello", scopes=[("s",)], top_k=400, mode="vector")
    with contextlib.closing(SqliteStore(path)) as store:
        cold = Memory(store, HashEmbedder(dimensions=8)).recall(
            "late cello", scopes=[("s",)], top_k=400, mode="vector"
        )
    assert [(h.memory.id, h.score) for h in cold] == [(h.memory.id, h.score) for h in warm]
    assert sum(h.memory.text.startswith("late") for h in cold) == 20
    assert memory.store.batch([PackVectors(space, min_vectors=1)]) == [320]
    memory.store.batch([DropSpace(space)])
    assert segments(path) == []
    memory.close()


def test_a_large_scope_is_packed_as_its_memories_arrive(tmp_path: Path) -> None:
    """At d=768 a segment holds 325 vectors. A scope's writes pack nothing below
    ``PACK_FROM`` items; from there each write packs the full segments past the scope's
    last one (8 at most), so a partial segment (< 325 ids) waits for maintenance, and a
    cold load answers as the warm store. Deferred texts are not packed on write (their
    vectors would delete the segment); another scope's writes pack nothing here."""
    path = tmp_path / "w.db"
    per = pack.segment_rows(768)
    assert per == 325
    memory = Memory(SqliteStore(path), HashEmbedder(dimensions=768))
    first = pack.PACK_FROM - 96
    texts = [{"text": f"note {i} w{i % 97}", "scope": BIG} for i in range(first + 1200)]
    memory.remember_many(texts[:first], batch_size=500)
    assert segments(path) == []  # below PACK_FROM: rows only
    memory.remember_many(texts[first : first + 100])  # the scope reaches 4,100 items
    covered = [row[4] for row in segments(path)]  # 12 full segments; a write packs 8
    assert covered == [per] * min(pack.PACK_SEGMENTS, (first + 100) // per)
    memory.remember_many(texts[first + 100 :], batch_size=200)
    covered = [row[4] for row in segments(path)]
    assert covered == [per] * (len(texts) // per)  # contiguous, each full
    assert len(texts) - sum(covered) < per  # the tail waiting for more
    memory.remember_many([{"text": f"other {i}", "scope": ("other",)} for i in range(400)])
    assert {row[0] for row in segments(path)} == {'["acme","team","notes"]'}
    memory.remember_many(
        [{"text": f"later {i}", "scope": BIG} for i in range(2 * per)], defer_embedding=True
    )
    assert sum(row[4] for row in segments(path)) == sum(covered)  # deferred: not packed
    memory.maintain(max_items=5000)
    warm = memory.recall("note w5", scopes=[BIG], top_k=50, mode="vector")
    with loads_counted() as seen, contextlib.closing(SqliteStore(path)) as store:
        cold = Memory(store, HashEmbedder(dimensions=768))
        hits = cold.recall("note w5", scopes=[BIG], top_k=50, mode="vector")
    assert [(h.memory.id, h.score) for h in hits] == [(h.memory.id, h.score) for h in warm]
    assert sum(seen) >= sum(covered)  # the cold load read segments
    memory.close()


def test_a_large_unpacked_scope_is_packed_a_few_segments_per_write_and_per_pass(
    tmp_path: Path,
) -> None:
    """A scope that was not packed as it was written (its texts deferred, then embedded
    by ``reindex()``, as a database from before packing on write) is packed at most
    ``PACK_SEGMENTS`` segments by a write and by each maintenance pass, so neither holds
    more than a few segments whatever the scope's size (50,000 vectors read at once took
    an object past its 128 MB); ``work_left`` brings the next pass at once."""
    path = tmp_path / "m.db"
    memory = Memory(SqliteStore(path), HashEmbedder(dimensions=768))
    texts = [{"text": f"note {i}", "scope": BIG} for i in range(6000)]
    memory.remember_many(texts, batch_size=1000, defer_embedding=True)
    assert memory.reindex() == 6000
    assert segments(path) == []
    bound = pack.PACK_SEGMENTS * pack.segment_rows(768)
    memory.remember("one more", scope=BIG)  # 6,001 past the last segment: 8 of 18 packed
    assert sum(row[4] for row in segments(path)) == bound
    first = memory.maintain(max_items=6000)
    assert (first.packed, first.work_left) == (bound, True)
    second = memory.maintain(max_items=6000)
    assert (second.packed, second.work_left) == (6001 - 2 * bound, True)
    assert memory.maintain(max_items=6000).packed == 0
    assert sum(row[4] for row in segments(path)) == 6001
    memory.close()


def test_after_a_model_switch_writes_pack_nothing_while_old_texts_wait_for_vectors(
    tmp_path: Path,
) -> None:
    """A write packs only the space its vectors go to, and only a tail whose every item
    has a vector there: after a model switch the scope's older texts wait for vectors in
    the new space (whose arrival would delete a segment over them), so the new space
    gets its segments from maintenance once nothing is pending."""
    path = tmp_path / "s.db"
    old = Memory(SqliteStore(path), HashEmbedder(dimensions=768))
    old.remember_many([{"text": f"note {i}", "scope": BIG} for i in range(4200)])
    old_space = old.status().spaces[0]
    assert {row[1] for row in segments(path)} == {old_space}
    old.close()
    new = Memory(SqliteStore(path), HashEmbedder(dimensions=384))
    new.remember_many([{"text": f"later {i}", "scope": BIG} for i in range(700)])
    assert {row[1] for row in segments(path)} == {old_space}  # the tail waits in the new space
    while new.status().pending:
        new.maintain(max_items=5000)
    while new.maintain(max_items=5000).packed:
        pass
    new_space = next(space for space in new.status().spaces if space != old_space)
    assert sum(row[4] for row in segments(path) if row[1] == new_space) == 4900
    new.close()
