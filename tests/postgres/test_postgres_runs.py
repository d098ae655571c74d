"""PostgresStore writes runs of RestoreItem and PutVector ops set-based (a restore's
thousands of them): a failure in the middle of such a write leaves nothing written, and
a run that fills a space builds the space's HNSW index again, as it was defined.

The stored state and answers of such runs, on every store, are the shipped checks
``many_restores_and_vectors_in_one_batch`` and ``a_refused_op_amid_many_restores_writes_nothing``
(tests/contract, collected in test_postgres_store_contract.py)."""

from __future__ import annotations

import random
from dataclasses import replace

import psycopg
import pytest
from test_postgres_vectors import unit

from engramdb import StoreError
from engramdb._base.types import EmbeddingSpace, Utility
from engramdb._vectors.codec import encode_f32
from engramdb.postgres import PostgresStore
from engramdb.postgres._items import REBUILD_AT
from engramdb.postgres._sql import hnsw_index
from engramdb.store import Op, PutVector, RegisterSpace, RestoreItem
from engramdb.testing._harness import NOW, record

SAM = ("acme", "user", "sam")
SPACE = EmbeddingSpace("test", "runs", 16)
TABLES = (
    "engramdb_items",
    "engramdb_item_revisions",
    "engramdb_utility",
    "engramdb_vectors",
    "engramdb_coverage",
)


def restore_ops(n: int, seed: int = 3) -> list[Op]:
    """What a restore of ``n`` memories writes: each item (every other with an earlier
    revision and evidence), then a vector of each text."""
    rng = random.Random(seed)
    items: list[Op] = []
    vectors: list[Op] = []
    for number in range(n):
        first = record(number, f"memory {number}", SAM)
        current = replace(record(number, f"memory {number}, changed", SAM), revision=2)
        odd = number % 2 == 1
        history = (first,) if odd else ()
        utility = Utility(exposures=number, eval_count=1, eval_sum=0.5) if odd else None
        items.append(RestoreItem(current if odd else first, NOW, history, utility))
        sha = (current if odd else first).content_sha256
        vectors.append(PutVector(SPACE.id, sha, encode_f32(unit(rng, SPACE.dimensions)), NOW))
    return [RegisterSpace(SPACE, NOW), *items, *vectors]


def rows(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}


def index_of(dsn: str) -> tuple[int, str] | None:
    """The OID and definition of the space's HNSW index (None: it has none)."""
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT c.oid::bigint, pg_get_indexdef(c.oid) FROM pg_class c WHERE c.relname = %s",
            (hnsw_index(SPACE.id),),
        ).fetchall()
    return (int(found[0][0]), str(found[0][1])) if found else None


@pytest.mark.parametrize("table", ["engramdb_items", "engramdb_vectors"])
def test_a_statement_failing_in_the_middle_of_a_set_based_run_writes_nothing(
    pg_dsn: str, table: str
) -> None:
    """The server refuses the 600th row of a run of 1,200 (a CHECK constraint the test
    adds: on the items, or on the vectors): the batch raises StoreError, and no item,
    revision, evidence, vector or coverage count is left; the space's index is as it was
    (the run had dropped it to build it again)."""
    ops = restore_ops(1_200)
    poisoned = record(600, "memory 600", SAM).content_sha256
    with PostgresStore(pg_dsn) as store:
        store.batch(ops[:1])
        before, index = rows(pg_dsn), index_of(pg_dsn)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                f"ALTER TABLE {table} ADD CONSTRAINT poisoned "
                f"CHECK (content_sha256 <> '{poisoned}')"
            )
        with pytest.raises(StoreError, match="poisoned"):
            store.batch(ops)
        assert rows(pg_dsn) == before == dict.fromkeys(TABLES, 0)
        assert index_of(pg_dsn) == index is not None


def test_a_run_that_fills_a_space_builds_its_index_again_as_defined(pg_dsn: str) -> None:
    """A run of ``REBUILD_AT`` vectors or more into an empty space drops the space's
    HNSW index and builds it again (a new OID, the same definition); a shorter run, or
    one into a space that already holds more vectors than the run adds, keeps it."""
    ops = restore_ops(3 * REBUILD_AT)
    items, vectors = ops[1 : 3 * REBUILD_AT + 1], ops[3 * REBUILD_AT + 1 :]
    with PostgresStore(pg_dsn) as store:
        store.batch([ops[0], *items])
        first = index_of(pg_dsn)
        store.batch(vectors[: REBUILD_AT - 1])  # too few: kept
        assert index_of(pg_dsn) == first
        store.batch(vectors[REBUILD_AT - 1 : 2 * REBUILD_AT + 1])  # 1,001 more than held
        second = index_of(pg_dsn)
        assert first is not None and second is not None
        assert second[0] != first[0] and second[1] == first[1]
        store.batch(vectors[2 * REBUILD_AT + 1 :])  # fewer than the space holds: kept
        assert index_of(pg_dsn) == second
    assert rows(pg_dsn)["engramdb_vectors"] == 3 * REBUILD_AT
