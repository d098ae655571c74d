"""D1Store on miniflare's D1: version table, migrations, chunking, BLOBs, atomicity."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from typing import Any

import engramdb_harness
import pytest
from workers.rpc import _BindingWrapper

from engramdb import AsyncMemory, ConfigurationError, HashEmbedder, SchemaTooNewError, StoreError
from engramdb._base.types import MemoryRecord
from engramdb.store import FindVectors, GetItems, PutItem
from engramdb.store._sqlite import MAX_PARAMS, Statement, schema
from engramdb_workers.d1 import D1Store
from fakes import CountingEmbedder

SCOPE = ("acme", "user", "sam")
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Recorder:
    """A D1 binding in front of the real one that records what D1Store sends."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.statements: list[tuple[str, tuple[Any, ...]]] = []
        self.batches: list[list[str]] = []
        self.calls = 0

    def prepare(self, sql: str) -> Any:
        return _RecStatement(self, sql, (), self.db.prepare(sql))

    async def batch(self, statements: list[Any]) -> Any:
        self.calls += 1
        self.batches.append([s.sql for s in statements])
        for s in statements:
            self.statements.append((s.sql, s.params))
        return await self.db.batch([s.inner for s in statements])


class _RecStatement:
    def __init__(self, rec: Recorder, sql: str, params: tuple[Any, ...], inner: Any) -> None:
        self.rec, self.sql, self.params, self.inner = rec, sql, params, inner

    def bind(self, *params: Any) -> _RecStatement:
        return _RecStatement(self.rec, self.sql, params, self.inner.bind(*params))

    async def raw(self, **kwargs: Any) -> Any:
        self.rec.calls += 1
        self.rec.statements.append((self.sql, self.params))
        return await self.inner.raw(**kwargs)


async def tables(db: Any) -> list[str]:
    rows = await db.prepare(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') "
        "AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).raw()
    return [row[0] for row in rows]


def record(n: int, text: str | None = None) -> MemoryRecord:
    import hashlib

    text = text if text is not None else f"memory number {n}"
    return MemoryRecord(
        id=f"id{n:05d}",
        scope=SCOPE,
        text=text,
        created_at=NOW,
        updated_at=NOW,
        content_sha256=hashlib.sha256(text.encode()).hexdigest(),
    )


async def test_schema_version_lives_in_a_table_because_d1_refuses_the_pragma(d1: Any) -> None:
    store = D1Store(d1)
    with pytest.raises(Exception, match="not authorized"):
        await d1.prepare("PRAGMA user_version").raw()
    assert await store.schema_version() == 0
    assert await store.abatch([]) == []  # first use migrates
    assert await store.schema_version() == len(schema.MIGRATIONS)
    assert await d1.prepare("SELECT id, version FROM engramdb_schema").raw() == [
        [1, len(schema.MIGRATIONS)]
    ]
    assert {"items", "items_fts", "vectors", "scope_generations"} <= set(await tables(d1))


async def test_migrations_run_once_per_store_object(d1: Any) -> None:
    rec = Recorder(d1)
    store = D1Store(rec)
    memory = AsyncMemory(store, HashEmbedder(dimensions=32))
    await memory.remember("first", scope=SCOPE)
    creates = [s for s, _ in rec.statements if s.startswith("CREATE TABLE items ")]
    version_reads = [s for s, _ in rec.statements if "engramdb_schema" in s]
    assert len(creates) == 1
    # The step and its version bump went in one batch (one transaction).
    (migration,) = [b for b in rec.batches if any("CREATE TABLE items " in s for s in b)]
    assert any("INSERT INTO engramdb_schema" in s for s in migration)
    before = len(rec.statements)
    await memory.remember("second", scope=SCOPE)
    await memory.recall("second", scopes=[SCOPE])
    later = [s for s, _ in rec.statements[before:]]
    assert not [s for s in later if "engramdb_schema" in s or s.startswith("CREATE")]
    assert version_reads  # read on first use only
    # A second store (another isolate) finds the schema in place and runs nothing.
    assert await D1Store(d1).migrate() == 0


async def test_concurrent_first_use_by_two_isolates_migrates_once(d1: Any) -> None:
    one, two = D1Store(d1), D1Store(d1)
    ran = await asyncio.gather(one.migrate(), two.migrate())
    assert sum(ran) == len(schema.MIGRATIONS)  # every step ran exactly once
    assert await one.schema_version() == len(schema.MIGRATIONS)
    memory = AsyncMemory(two, HashEmbedder(dimensions=32))
    await memory.remember("works", scope=SCOPE)


async def test_a_newer_database_is_refused_and_left_untouched(d1: Any) -> None:
    newer = len(schema.MIGRATIONS) + 1
    await d1.batch(
        [
            d1.prepare(
                "CREATE TABLE engramdb_schema (id INTEGER PRIMARY KEY CHECK (id = 1), "
                "version INTEGER NOT NULL)"
            ),
            d1.prepare("INSERT INTO engramdb_schema (id, version) VALUES (1, ?)").bind(newer),
        ]
    )
    store = D1Store(d1)
    with pytest.raises(SchemaTooNewError):
        await store.abatch([])
    with pytest.raises(SchemaTooNewError):
        await store.migrate()
    assert await tables(d1) == ["engramdb_schema"]
    assert await d1.prepare("SELECT version FROM engramdb_schema").raw() == [[newer]]


async def test_250_ids_travel_as_json_under_the_100_parameter_limit(d1: Any) -> None:
    """D1 refuses more than 100 bound parameters: long id, hash and scope lists travel as
    one JSON array, so one statement answers all 250 and none binds more than 100."""
    with pytest.raises(Exception, match="too many SQL variables"):
        await d1.prepare(f"SELECT 1 WHERE 1 IN ({', '.join('?' * 101)})").bind(*range(101)).raw()
    rec = Recorder(d1)
    store = D1Store(rec)
    memory = AsyncMemory(store, CountingEmbedder())
    records = await memory.remember_many(
        [{"text": f"fact number {n} about sam", "scope": SCOPE} for n in range(250)]
    )
    ids = tuple(r.id for r in records)
    (got,) = await store.abatch([GetItems(ids=ids, now=datetime.now(UTC))])
    assert [item.record.id for item in got] == list(ids)
    hashes = tuple(r.content_sha256 for r in records)
    (found,) = await store.abatch([FindVectors(CountingEmbedder().space.id, hashes)])
    assert found == frozenset(hashes)
    assert len(await memory.list(SCOPE, limit=300)) == 250
    assert await memory.forget_scope(SCOPE) == 250
    assert await memory.list(SCOPE, limit=300) == []
    assert max(len(params) for _, params in rec.statements) <= MAX_PARAMS
    reads = [sql for sql, _ in rec.statements if "items.id IN (SELECT value FROM json_each" in sql]
    assert reads  # the 250 ids went as one JSON array


async def test_blobs_come_back_as_bytes_and_none_binds_as_null(d1: Any) -> None:
    store = D1Store(d1)
    memory = AsyncMemory(store, HashEmbedder(dimensions=16))
    await memory.remember("blob check", scope=SCOPE)
    rows = (await store._execute([Statement("SELECT vector FROM vectors")]))[0]
    assert isinstance(rows[0][0], bytes) and len(rows[0][0]) == 4 * 16
    raw = await d1.prepare("SELECT vector FROM vectors").raw()
    assert isinstance(raw[0][0], list)  # what D1 itself returns: an array of numbers
    (rows,) = await store._execute([Statement("SELECT ? IS NULL, ?", (None, b"\x00\xff"))])
    assert rows == [(1, b"\x00\xff")]


async def test_a_failing_write_batch_rolls_back_entirely(d1: Any) -> None:
    store = D1Store(d1)
    too_big = "x" * 3_000_000  # bypasses the memory layer's limits: straight ops
    with pytest.raises(StoreError, match="2,000,000 bytes"):
        await store.abatch([PutItem(record(1), NOW), PutItem(record(2, too_big), NOW)])
    (got,) = await store.abatch([GetItems(ids=("id00001",), now=NOW)])
    assert got == [None]
    await store.abatch([PutItem(record(1), NOW)])
    (got,) = await store.abatch([GetItems(ids=("id00001",), now=NOW)])
    assert got[0].record.text == "memory number 1"


async def test_batch_result_columns_are_distinct_names(d1: Any) -> None:
    """D1's batch() returns rows as objects: duplicate or numeric column names would lose
    or reorder values. Check every multi-statement SELECT the dialect sends."""
    rec = Recorder(d1)
    memory = AsyncMemory(D1Store(rec), HashEmbedder(dimensions=32))
    one = await memory.remember("Sam likes green tea", scope=SCOPE, metadata={"k": 1})
    await memory.remember("Alex likes coffee", scope=("acme", "user", "alex"), labels={"t": ["x"]})
    await memory.recall(
        "tea", scopes=[SCOPE, ("acme", "user", "alex")], filter={"metadata": {"k": 1}}
    )
    await memory.recall("coffee", scopes=[SCOPE], mode="lexical")
    await memory.update(one.id, text="Sam likes black tea")
    await memory.list(SCOPE, limit=5, before=one.id)
    await memory.status()
    await memory.forget(one.id)
    batched = {sql for batch in rec.batches for sql in batch}
    checked = 0
    for sql, params in rec.statements:
        if sql not in batched or not sql.lstrip().upper().startswith("SELECT"):
            continue
        if sql.startswith("SELECT json(CASE"):  # a migration's version assertion
            continue
        names = (await d1.prepare(sql).bind(*params).raw(columnNames=True))[0]
        assert len(set(names)) == len(names), (sql, names)
        assert not [n for n in names if re.fullmatch(r"\d+", str(n))], (sql, names)
        checked += 1
    assert checked >= 5


async def test_configuration_and_lifecycle_errors(d1: Any) -> None:
    with pytest.raises(ConfigurationError, match="d1_databases"):
        D1Store(None)
    store = D1Store(d1)
    with pytest.raises(StoreError, match="async only"):
        store.batch([])
    with pytest.raises(StoreError, match="2\\*\\*53"):
        await store._execute([Statement("SELECT ?", (2**60,))])
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.abatch([])


async def test_raw_binding_without_the_sdk_wrapper() -> None:
    """miniflare's own object as a bare JsProxy: bytes -> Uint8Array, None -> null by hand."""
    raw = await engramdb_harness.rawD1()
    store = D1Store(raw)
    assert store._raw
    memory = AsyncMemory(store, HashEmbedder(dimensions=16))
    kept = await memory.remember("raw binding works", scope=SCOPE)
    hits = await memory.recall("raw binding", scopes=[SCOPE])
    assert [h.memory.id for h in hits] == [kept.id]
    (rows,) = await store._execute([Statement("SELECT ? IS NULL, ?", (None, b"\x01\x02"))])
    assert rows == [(1, b"\x01\x02")]
    assert await memory.forget(kept.id)


async def test_miniflare_binding_object_directly() -> None:
    """The other tests reach workerd's D1 through a one-request-per-call bridge; this one
    uses miniflare's binding object itself, SDK-wrapped, as env.DB would be."""
    db = _BindingWrapper(await engramdb_harness.proxyD1())
    memory = AsyncMemory(D1Store(db), HashEmbedder(dimensions=16))
    kept = await memory.remember("direct binding", scope=SCOPE, metadata={"a": None})
    hits = await memory.recall("direct", scopes=[SCOPE])
    assert [h.memory.id for h in hits] == [kept.id]
    assert hits[0].memory.metadata == {"a": None}
    assert await memory.forget(kept.id)
    assert await memory.get(kept.id) is None


async def test_d1_keeps_no_packed_segments_where_an_object_packs_as_written(
    d1: Any, object_state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """D1 does not ``packs_vectors`` (its BLOBs come back as arrays of numbers): its
    writes pack nothing, where the same writes into a Durable Object, with every store's
    packing threshold lowered to one item, leave full segments (the probe sees packing)."""
    from engramdb import Memory
    from engramdb.store._sqlite import batch
    from engramdb_workers.durable import DurableObjectStore
    from objects import storage_of

    monkeypatch.setitem(batch.run_batch.__kwdefaults__, "pack_from", 1)
    items = [{"text": f"note {i} about tea", "scope": SCOPE} for i in range(400)]
    store = D1Store(d1)
    await AsyncMemory(store, HashEmbedder(dimensions=768)).remember_many(items)
    rows = await d1.prepare("SELECT count(*) FROM vector_segments").raw()
    assert [list(row) for row in rows] == [[0]]
    durable = DurableObjectStore(storage_of(object_state))
    Memory(durable, HashEmbedder(dimensions=768)).remember_many(items)
    assert durable._exec(Statement("SELECT sum(items) FROM vector_segments")) == [(325,)]
