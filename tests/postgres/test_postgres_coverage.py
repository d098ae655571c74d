"""PostgresStore's coverage counters (``_coverage``): after any sequence of writes they
equal a count from the tables; a repair scan rebuilds them; migration 4 computes them
for a database written before it."""

from __future__ import annotations

import random

import psycopg

from engramdb import HashEmbedder, Memory
from engramdb._base.types import scope_key
from engramdb.postgres import PostgresStore
from engramdb.store import DropSpace, RepairVectors, ScopeSet, SearchVectors
from engramdb.testing._harness import NOW

SCOPES = [("acme", "user", "sam"), ("acme", "user", "kim"), ("globex",)]
WORDS = ["deploy", "window", "lunch", "order", "cello", "budget"]

_FROM_TABLES = """
    SELECT scope_key, '' AS space_id, count(*) FROM engramdb_items GROUP BY scope_key
    UNION ALL
    SELECT i.scope_key, v.space_id, count(*) FROM engramdb_items i JOIN engramdb_vectors v
    ON v.content_sha256 = i.content_sha256 GROUP BY i.scope_key, v.space_id
"""


def counters(dsn: str) -> dict[tuple[str, str], int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT scope_key, space_id, n FROM engramdb_coverage").fetchall()
    return {(key, space): int(n) for key, space, n in rows if n}


def from_tables(dsn: str) -> dict[tuple[str, str], int]:
    with psycopg.connect(dsn) as conn:
        return {(key, space): int(n) for key, space, n in conn.execute(_FROM_TABLES).fetchall()}


def test_the_counters_equal_a_count_from_the_tables_after_random_writes(pg_dsn: str) -> None:
    """300 random writes (remember with shared texts, text changes, forgets, a scope's
    forget, a second embedder's reindex, a dropped space) keep every counter exact."""
    rng = random.Random(5)
    store = PostgresStore(pg_dsn)
    first, second = HashEmbedder(dimensions=16), HashEmbedder(dimensions=24)
    memories = {"first": Memory(store, first), "second": Memory(store, second)}
    ids: list[str] = []
    for step in range(300):
        memory = memories["second" if step % 50 > 40 else "first"]
        roll = rng.random()
        if roll < 0.55 or not ids:
            text = " ".join(rng.sample(WORDS, 2))  # few texts: many share a vector
            ids.append(memory.remember(text, scope=rng.choice(SCOPES), dedupe=False).id)
        elif roll < 0.75:
            memory.update(rng.choice(ids), text=" ".join(rng.sample(WORDS, 3)))
        elif roll < 0.93:
            memory.forget(ids.pop(rng.randrange(len(ids))))
        elif roll < 0.96:
            memory.reindex()
        elif roll < 0.98:
            memory.forget_scope(rng.choice(SCOPES))
            ids = [i for i in ids if memory.get(i) is not None]
        else:
            memories["second"].reindex()
        if step % 25 == 0:
            assert counters(pg_dsn) == from_tables(pg_dsn), f"after step {step}"
    store.batch([DropSpace(second.space.id)])
    assert counters(pg_dsn) == from_tables(pg_dsn)
    store.close()


def test_a_repair_scan_rebuilds_the_counts_of_its_space(pg_dsn: str) -> None:
    embedder = HashEmbedder(dimensions=16)
    with PostgresStore(pg_dsn) as store, Memory(store, embedder) as memory:
        for i in range(20):
            memory.remember(f"note {i}", scope=SCOPES[i % 3])
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("UPDATE engramdb_coverage SET n = n + 7 WHERE space_id <> ''")
        assert counters(pg_dsn) != from_tables(pg_dsn)
        store.batch([RepairVectors(embedder.space.id, 100)])
        assert counters(pg_dsn) == from_tables(pg_dsn)


def test_migration_4_computes_the_counts_of_a_database_written_before_it(pg_dsn: str) -> None:
    embedder = HashEmbedder(dimensions=16)
    with PostgresStore(pg_dsn) as store, Memory(store, embedder) as memory:
        for i in range(30):
            memory.remember(f"note {i % 12}", scope=SCOPES[i % 3], dedupe=False)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to schema version 3
        conn.execute("DROP TABLE engramdb_coverage")
        conn.execute("DELETE FROM engramdb_schema_version WHERE version = 4")
    store = PostgresStore(pg_dsn, migrate=False)
    assert store.schema_version == 3
    assert store.migrate() == 1
    assert counters(pg_dsn) == from_tables(pg_dsn)
    query = tuple(embedder.embed(["note 3"], "query")[0])
    search = SearchVectors(ScopeSet(prefixes=(("acme",),)), embedder.space.id, query, 5, NOW)
    (result,) = store.batch([search])
    assert result.coverage == (20, 20)
    store.close()


def test_an_item_and_the_new_vector_of_its_text_written_at_once_count_each_other(
    pg_dsn: str,
) -> None:
    """One transaction stores an item (no vector yet) and stays open; another stores the
    vector of its text meanwhile. The second waits for the first's hash lock, so it
    counts the item once the first commits (without the lock each would miss the
    other's uncommitted row and the space's count would stay one short)."""
    import threading

    from engramdb._vectors.codec import encode_f32
    from engramdb.store import PutItem, PutVector, RegisterSpace
    from engramdb.testing._harness import record

    embedder = HashEmbedder(dimensions=16)
    item = record(1, "the deploy window", SCOPES[0])
    (vector,) = embedder.embed([item.text])
    with psycopg.connect(pg_dsn) as conn, PostgresStore(pg_dsn) as other:
        other.batch([RegisterSpace(embedder.space, NOW)])
        mine = PostgresStore(conn)
        put = PutVector(embedder.space.id, item.content_sha256, encode_f32(vector), NOW)
        writer = threading.Thread(target=other.batch, args=([put],))
        with conn.transaction():
            mine.batch([PutItem(item, NOW)])
            writer.start()
            writer.join(timeout=1.0)
            waited = writer.is_alive()
        writer.join()
        assert waited
        key = scope_key(item.scope)
        assert (
            counters(pg_dsn) == from_tables(pg_dsn) == {(key, ""): 1, (key, embedder.space.id): 1}
        )
