"""PostgresStore's vector leg: a partial HNSW index per space, used by searches, close to
the exact answers; exact=True and spaces too large to index scan exactly."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from engramdb import ConfigurationError
from engramdb._base.types import EmbeddingSpace
from engramdb._vectors.codec import encode_f32
from engramdb.postgres import PostgresStore
from engramdb.postgres._sql import hnsw_index
from engramdb.store import (
    DropSpace,
    Op,
    PutItem,
    PutVector,
    RegisterSpace,
    ScopeSet,
    SearchVectors,
)
from engramdb.testing._harness import NOW, record

SAM = ("acme", "user", "sam")


def unit(rng: random.Random, d: int) -> list[float]:
    values = [rng.gauss(0, 1) for _ in range(d)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def near(rng: random.Random, center: list[float], spread: float) -> list[float]:
    """A unit vector around ``center``: real embeddings cluster by topic (uniformly
    random vectors in thousands of dimensions are all nearly orthogonal, a case no
    approximate index is built for)."""
    values = [c + rng.gauss(0, spread) for c in center]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def fill(
    store: PostgresStore, space: EmbeddingSpace, n: int, seed: int = 7, clusters: int = 0
) -> tuple[random.Random, list[list[float]]]:
    """``n`` items in SAM, each with its own random unit vector in ``space`` (around one
    of ``clusters`` random centres, when given); the generator and the centres."""
    rng = random.Random(seed)
    d = space.dimensions
    centers = [unit(rng, d) for _ in range(clusters)]
    spread = 1.2 / d**0.5  # a vector's own part slightly outweighs its centre's
    ops: list[Op] = [RegisterSpace(space, NOW)]
    for number in range(n):
        item = record(number, f"memory number {number}", SAM)
        values = near(rng, rng.choice(centers), spread) if centers else unit(rng, d)
        vector = encode_f32(values)
        ops += [PutVector(space.id, item.content_sha256, vector, NOW), PutItem(item, NOW)]
    store.batch(ops)
    return rng, centers


@contextlib.contextmanager
def index_path_store(dsn: str, **options: Any) -> Iterator[PostgresStore]:
    """A store whose connection tells the planner to avoid sequential scans and sorts
    where it can: at the few thousand vectors of a test it rightly prefers an exact
    scan to an index walk of the 112 candidates a search asks for (its head of 100,
    with slack), so this is how a test reaches the index path."""
    options_sql = "-c enable_seqscan=off -c enable_sort=off"
    with (
        psycopg.connect(dsn, options=options_sql) as connection,
        PostgresStore(connection, **options) as store,
    ):
        yield store


def indexes(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'engramdb_vectors'"
        ).fetchall()
    return {r[0] for r in rows}


def index_scans(dsn: str, index: str) -> int:
    """The scans of ``index`` the statistics report (waiting up to 10 s for them: they
    arrive shortly after the scan)."""
    deadline = time.monotonic() + 10
    scans = 0
    while time.monotonic() < deadline and not scans:
        with psycopg.connect(dsn) as conn:
            (row,) = conn.execute(
                "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes "
                "WHERE indexrelname = %s",
                (index,),
            ).fetchall()
        scans = int(row[0])
        time.sleep(0.2)
    return scans


def test_a_space_gets_its_hnsw_index_when_registered_and_loses_it_when_dropped(
    pg_dsn: str,
) -> None:
    space = EmbeddingSpace("test", "hnsw", 8)
    with PostgresStore(pg_dsn) as store:
        store.batch([RegisterSpace(space, NOW)])
        assert hnsw_index(space.id) in indexes(pg_dsn)
        store.batch([DropSpace(space.id)])
        assert hnsw_index(space.id) not in indexes(pg_dsn)


@pytest.mark.parametrize(("d", "n", "clusters"), [(32, 3000, 0), (3072, 1500, 20)])
def test_searches_use_the_index_and_find_nearly_what_an_exact_scan_finds(
    pg_dsn: str, d: int, n: int, clusters: int
) -> None:
    """On ``n`` random vectors in one scope (d = 32 uniform; d = 3,072 clustered, as
    embeddings are), the top 10 through the HNSW index hold at least 95% of the exact
    top 10 over 20 queries, with the same scores for shared hits (computed from the
    stored float32 vector even when the index holds ``halfvec``, as it does above 2,000
    dimensions); the index was scanned (``index_path_store``: the planner would rightly
    scan exactly at these sizes)."""
    space = EmbeddingSpace("test", "hnsw", d)
    with index_path_store(pg_dsn, ef_search=40) as store:
        rng, centers = fill(store, space, n, clusters=clusters)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("ANALYZE")  # as autovacuum would: the planner then sees the sizes
        found = total = 0
        for _ in range(20):
            query = tuple(near(rng, rng.choice(centers), 1.2 / d**0.5) if centers else unit(rng, d))
            ann, exact = (
                store.batch([SearchVectors(ScopeSet.of(SAM), space.id, query, 10, NOW, exact=e)])[0]
                for e in (False, True)
            )
            exact_scores = {h.record.id: h.score for h in exact.hits}
            shared = [h for h in ann.hits if h.record.id in exact_scores]
            assert all(abs(h.score - exact_scores[h.record.id]) < 1e-6 for h in shared)
            found += len(shared)
            total += len(exact.hits)
        print(f"d={d}: recall@10 {found / total:.3f}")  # docs/postgres.md quotes it (-s)
        assert found / total >= 0.95
    assert index_scans(pg_dsn, hnsw_index(space.id)) >= 1


def test_a_space_too_large_to_index_is_searched_exactly(pg_dsn: str) -> None:
    """pgvector indexes ``halfvec`` up to 4,000 dimensions; a 4,096-dimensional space
    gets no index and its searches scan exactly."""
    space = EmbeddingSpace("test", "large", 4096)
    with PostgresStore(pg_dsn) as store:
        rng, _ = fill(store, space, 20)
        assert hnsw_index(space.id) not in indexes(pg_dsn)
        query = tuple(unit(rng, 4096))
        (approximate,) = store.batch([SearchVectors(ScopeSet.of(SAM), space.id, query, 5, NOW)])
        (exact,) = store.batch(
            [SearchVectors(ScopeSet.of(SAM), space.id, query, 5, NOW, exact=True)]
        )
        assert approximate == exact
        assert len(exact.hits) == 5


def test_ef_search_is_checked_and_used(pg_dsn: str) -> None:
    """ef_search must lie in pgvector's range; a store with a larger one answers too."""
    with pytest.raises(ConfigurationError, match="ef_search"):
        PostgresStore(pg_dsn, ef_search=0)
    space = EmbeddingSpace("test", "hnsw", 8)
    with PostgresStore(pg_dsn, ef_search=200) as store:
        rng, _ = fill(store, space, 50)
        query = tuple(unit(rng, 8))
        (result,) = store.batch([SearchVectors(ScopeSet.of(SAM), space.id, query, 5, NOW)])
        assert len(result.hits) == 5


def test_a_space_id_with_quotes_and_backslashes_is_indexed_and_searched(pg_dsn: str) -> None:
    """The space id is written into the index's predicate and the query as a literal:
    quotes, backslashes and % (a placeholder to psycopg) in it are escaped, and it is
    found again."""
    from engramdb.postgres._sql import sql_literal

    space = EmbeddingSpace("it's", "a\\b 50%s%", 8)
    with psycopg.connect(pg_dsn) as conn:
        (value,) = conn.execute(f"SELECT {sql_literal(space.id)}").fetchone()  # type: ignore[misc]
    assert value == space.id
    with PostgresStore(pg_dsn) as store:
        rng, _ = fill(store, space, 30)
        assert hnsw_index(space.id) in indexes(pg_dsn)
        query = tuple(unit(rng, 8))
        (approximate,) = store.batch([SearchVectors(ScopeSet.of(SAM), space.id, query, 5, NOW)])
        (exact,) = store.batch(
            [SearchVectors(ScopeSet.of(SAM), space.id, query, 5, NOW, exact=True)]
        )
        assert [h.record.id for h in approximate.hits] == [h.record.id for h in exact.hits]


def test_vectors_that_tie_at_the_cut_come_newest_first_through_the_index(pg_dsn: str) -> None:
    """Forty texts share one vector (a tie the index scan may cut anywhere); one more is
    farther. Through the HNSW index, a search for k = 1, 5 and 20 answers the newest of
    the tied items first, as the exact scan does: the index path reads on while the
    last vector it read is as near as the k-th."""
    space = EmbeddingSpace("test", "ties", 8)
    shared = encode_f32([1.0] + [0.0] * 7)
    farther = encode_f32([0.6, 0.8] + [0.0] * 6)
    ops: list[Op] = [RegisterSpace(space, NOW)]
    for number in range(41):
        item = record(number, f"tied text {number}", SAM)
        vector = farther if number == 40 else shared
        ops += [PutVector(space.id, item.content_sha256, vector, NOW), PutItem(item, NOW)]
    query = (1.0,) + (0.0,) * 7
    with PostgresStore(pg_dsn) as store:
        store.batch(ops)
        assert hnsw_index(space.id) in indexes(pg_dsn)
        for k in (1, 5, 20):
            ann, exact = (
                store.batch([SearchVectors(ScopeSet.of(SAM), space.id, query, k, NOW, exact=e)])[0]
                for e in (False, True)
            )
            newest = [f"r{number:06d}" for number in range(39, 39 - k, -1)]
            assert [h.record.id for h in exact.hits] == newest
            assert [h.record.id for h in ann.hits] == newest, k


def test_a_larger_k_only_appends_through_the_index(pg_dsn: str) -> None:
    """Through the HNSW index at its smallest ``ef_search`` (3,000 uniform vectors at
    d = 32: an approximate search, whose answer would depend on how many it is asked
    for), the first 10 hits for k = 10 are those for k = 100 and the first 100 for
    k = 400 those for k = 100, scores never rising: the index is asked for a head of 100
    whatever k, and a deeper search only extends it (the head rule of every store).
    ``index_path_store``: every search goes through the index."""
    space = EmbeddingSpace("test", "hnsw", 32)
    with index_path_store(pg_dsn, ef_search=1) as store:
        rng, _ = fill(store, space, 3000, seed=11)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("ANALYZE")  # as autovacuum would: the planner then sees the sizes
        for _ in range(10):
            query = tuple(unit(rng, 32))
            hits = {
                k: store.batch([SearchVectors(ScopeSet.of(SAM), space.id, query, k, NOW)])[0].hits
                for k in (10, 100, 400)
            }
            ids = {k: [hit.record.id for hit in found] for k, found in hits.items()}
            assert len(ids[400]) == 400
            assert ids[100][:10] == ids[10]
            assert ids[400][:100] == ids[100]
            scores = [hit.score for hit in hits[400]]
            assert scores == sorted(scores, reverse=True)
    assert index_scans(pg_dsn, hnsw_index(space.id)) >= 1
