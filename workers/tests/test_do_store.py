"""``DurableObjectStore`` itself: what the conformance suites do not say about running on
a Durable Object's SQLite database (real, in miniflare; reached through the SDK's
``ctx.storage`` as a Python object sees it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engramdb import HashEmbedder, Memory
from engramdb._base.errors import ConfigurationError, SchemaTooNewError, StoreError
from engramdb.store import GetItems
from engramdb.store._sqlite import Statement, schema
from engramdb.store._sqlite.cache import CacheEntry
from engramdb_workers.durable import DurableObjectStore
from objects import new_object_state, storage_of

MODES = ("vector", "hybrid")
PROBE = GetItems(("absent",), datetime(2026, 1, 1, tzinfo=UTC))


def test_first_batch_migrates_and_records_the_version_in_a_table(object_storage: Any) -> None:
    store = DurableObjectStore(object_storage)
    assert store.schema_version() == 0
    assert store.batch([PROBE]) == [[None]]
    assert store.schema_version() == len(schema.MIGRATIONS)
    assert store._exec(Statement("SELECT version FROM engramdb_schema")) == [
        (len(schema.MIGRATIONS),)
    ]
    assert "schema v" in repr(store)


def test_a_database_from_a_newer_engramdb_is_refused_untouched(object_storage: Any) -> None:
    store = DurableObjectStore(object_storage)
    store.migrate()
    newer = len(schema.MIGRATIONS) + 1
    store._exec(Statement("UPDATE engramdb_schema SET version = ?", (newer,)))
    with pytest.raises(SchemaTooNewError):
        DurableObjectStore(object_storage).batch([PROBE])
    assert store._exec(Statement("SELECT version FROM engramdb_schema")) == [(newer,)]


def test_vectors_round_trip_as_bytes_and_a_restarted_object_recalls_the_same(
    object_state: Any,
) -> None:
    embedder = HashEmbedder(dimensions=64)
    memory = Memory(DurableObjectStore(storage_of(object_state)), embedder)
    texts = ["tea with Sam", "coffee with Kim", "the deploy window is Friday"]
    memory.remember_many([{"text": t, "scope": ("acme",)} for t in texts])
    warm = memory.recall("deploy window Friday", [("acme",)], mode="vector")
    (blob,) = memory.store._exec(Statement("SELECT vector FROM vectors LIMIT 1"))[0]
    assert isinstance(blob, bytes) and len(blob) == 64 * 4
    # The object after a restart: a new store on the same storage, a cold vector cache.
    restarted = new_object_state(str(object_state.id.name))
    cold_memory = Memory(DurableObjectStore(storage_of(restarted)), embedder)
    cold = cold_memory.recall("deploy window Friday", [("acme",)], mode="vector")
    assert [(h.memory.id, h.similarity) for h in cold] == [
        (h.memory.id, h.similarity) for h in warm
    ]


def test_maintain_packs_a_large_scope_and_a_restarted_object_recalls_the_same(
    object_state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scope of 4,696 memories is packed into segments (one Durable Object row each,
    under its 2 MB) as it is written, a full segment at a time (3,906 vectors at d=64),
    and the object's maintenance packs the other 790; the object after a restart loads them
    and recalls exactly what the warm object recalls, in every mode."""
    embedder = HashEmbedder(dimensions=64)
    memory = Memory(DurableObjectStore(storage_of(object_state)), embedder)
    words = ["tea", "coffee", "deploy", "window", "friday", "cello", "lisbon", "garden"]
    texts = [f"note {i} {words[i % 8]} {words[(i * 3) % 8]}" for i in range(4696)]
    memory.remember_many([{"text": t, "scope": ("acme",)} for t in texts])
    (written,) = memory.store._exec(Statement("SELECT sum(items) FROM vector_segments"))[0]
    assert written == 3906
    assert memory.maintain().packed == 4696 - 3906
    (segments,) = memory.store._exec(Statement("SELECT count(*) FROM vector_segments"))[0]
    assert segments >= 1
    warm = [memory.recall("deploy window friday", [("acme",)], top_k=20, mode=m) for m in MODES]
    restarted = new_object_state(str(object_state.id.name))
    cold_memory = Memory(DurableObjectStore(storage_of(restarted)), embedder)
    packed_loads: list[int] = []
    real = CacheEntry.add_packed

    def spy(entry: CacheEntry, keys: Any, *args: Any) -> None:
        packed_loads.append(len(keys))
        real(entry, keys, *args)

    monkeypatch.setattr(CacheEntry, "add_packed", spy)
    cold = [
        cold_memory.recall("deploy window friday", [("acme",)], top_k=20, mode=m) for m in MODES
    ]
    assert [[(h.memory.id, h.score) for h in hits] for hits in cold] == [
        [(h.memory.id, h.score) for h in hits] for hits in warm
    ]
    assert sum(packed_loads) == 4696  # the cold object read the segments, not the rows


def test_an_object_past_floats_up_to_recalls_what_one_that_keeps_floats_recalls(
    object_state: Any,
) -> None:
    """Past ``floats_up_to`` a scope's index keeps only codes and a recall reads the
    float32 rows of its exact candidates: the same hits with the same scores as an object
    on the same storage that keeps the floats, cold, and warm after writes that went
    through the codes-only index."""
    embedder = HashEmbedder(dimensions=64)
    words = ["tea", "coffee", "deploy", "window", "friday", "cello", "lisbon", "garden"]
    texts = [f"note {i} {words[i % 8]} {words[(i * 3) % 8]}" for i in range(600)]
    name = str(object_state.id.name)

    def restart(limit: int | None) -> Memory:
        store = DurableObjectStore(storage_of(new_object_state(name)), floats_up_to=limit)
        return Memory(store, embedder)

    def answers(memory: Memory) -> list[list[tuple[str, float]]]:
        queries = ["deploy window friday", "cello in lisbon", "note 7 tea"]
        return [
            [(h.memory.id, h.score) for h in memory.recall(q, [("acme",)], top_k=20, mode=m)]
            for q in queries
            for m in MODES
        ]

    floats = Memory(DurableObjectStore(storage_of(object_state), floats_up_to=None), embedder)
    floats.remember_many([{"text": t, "scope": ("acme",)} for t in texts[:300]])
    codes = restart(100)
    assert answers(codes) == answers(floats)
    cache = codes.store._cache
    assert not cache.entry(*cache.cached()[0]).index.keeps_floats
    codes.remember_many([{"text": t, "scope": ("acme",)} for t in texts[300:]])
    codes.forget(codes.recall("note 7", [("acme",)], top_k=1)[0].memory.id)
    warm = answers(codes)  # the entry updated in place by the writes
    assert cache.loads == 1
    assert all(warm)
    assert warm == answers(restart(None))


def test_an_exact_search_of_a_codes_only_object_names_its_rows_in_bounded_statements(
    object_state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exact search of an object that keeps only codes reads every eligible row, its
    ids in statements of at most ``IDS_PER_STATEMENT`` (one SQL value of a Durable
    Object is at most 2 MB): 120 rows in statements of 25 answer as an object that keeps
    the floats."""
    from engramdb.store._sqlite import search

    embedder = HashEmbedder(dimensions=32)
    texts = [{"text": f"note {i} about tea and toast", "scope": ("acme",)} for i in range(120)]
    floats = Memory(DurableObjectStore(storage_of(object_state), floats_up_to=None), embedder)
    floats.remember_many(texts)
    name = str(object_state.id.name)
    codes = Memory(DurableObjectStore(storage_of(new_object_state(name)), floats_up_to=0), embedder)
    monkeypatch.setattr(search, "IDS_PER_STATEMENT", 25)
    asked = {"mode": "vector", "exact": True, "top_k": 120}
    expected = [(h.memory.id, h.score) for h in floats.recall("tea", [("acme",)], **asked)]
    assert len(expected) == 120
    assert [(h.memory.id, h.score) for h in codes.recall("tea", [("acme",)], **asked)] == expected


def test_a_failed_write_batch_leaves_nothing(object_storage: Any) -> None:
    memory = Memory(DurableObjectStore(object_storage), HashEmbedder(dimensions=16))
    kept = memory.remember("kept", ("a",))
    store = memory.store
    with pytest.raises(StoreError):
        store._perform(
            [
                Statement("DELETE FROM items"),
                Statement("INSERT INTO no_such_table VALUES (1)"),
            ]
        )
    assert memory.get(kept.id) is not None


def test_integers_beyond_doubles_are_refused_with_a_clear_error(object_storage: Any) -> None:
    store = DurableObjectStore(object_storage)
    with pytest.raises(StoreError, match="2\\*\\*53"):
        store._perform([Statement("SELECT ?", (2**60,))])


def test_storage_that_is_not_a_sqlite_object_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="new_sqlite_classes"):
        DurableObjectStore(None)


def test_a_closed_store_raises(object_storage: Any) -> None:
    store = DurableObjectStore(object_storage)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.batch([PROBE])
