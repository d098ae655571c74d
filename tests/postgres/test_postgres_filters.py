"""PostgreSQL answers every filter exactly as ``Filter.matches`` does.

Random records (the awkward values of every JSON type) sit in a temporary table shaped
like ``engramdb_items``, written as the store writes them; random filters select ids with
``WHERE <filter_sql>``, and the ids must equal those ``matches`` accepts; so must the
sharp edges, one by one (the tests shared with every SQL store, in
``tests/contract/filter_cases.py``). Then literals with quotes, ``%`` and astral
characters, and a filtered search through the HNSW index that must scan far past
``ef_search``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable

import psycopg
import pytest
from filter_cases import (  # noqa: F401 (the shared tests and their fixtures)
    FilterTable,
    as_json,
    filter_table,
    make_filter_table,
    matching,
    test_named_cases_agree,
    test_sql_is_never_null,
    test_sql_selects_exactly_the_records_that_match,
)
from test_postgres_vectors import index_path_store, index_scans, unit

from engramdb._base.types import EmbeddingSpace, MemoryRecord
from engramdb._vectors.codec import encode_f32
from engramdb.postgres._filters import filter_sql
from engramdb.postgres._sql import hnsw_index
from engramdb.store import (
    ListItems,
    Op,
    PutItem,
    PutVector,
    RegisterSpace,
    ScopeSet,
    SearchVectors,
)
from engramdb.store._filter import Filter, parse_filter
from engramdb.testing._harness import NOW, record


class Table(FilterTable):
    """Records in a temporary table shaped like ``engramdb_items`` (id, metadata, labels),
    on its own connection."""

    def __init__(self, dsn: str, records: list[MemoryRecord]) -> None:
        super().__init__(records)
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(
            "CREATE TEMPORARY TABLE engramdb_items (id text, metadata text, labels text)"
        )
        with self.conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO engramdb_items VALUES (%s, %s, %s)",
                [(r.id, as_json(r.metadata), as_json(r.labels)) for r in records],
            )

    def sql(self, spec: Filter) -> str:
        return filter_sql(spec)

    def ids_where(self, condition: str) -> set[str]:
        # With a parameter, as the store's queries have: psycopg then reads every % as
        # a placeholder, so a % in the filter's literals would break the query.
        sql = f"SELECT i.id FROM engramdb_items i WHERE i.id <> %s AND {condition}"
        return {row[0] for row in self.conn.execute(sql, ("",)).fetchall()}

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def open_filter_table(pg_admin_dsn: str) -> Callable[[list[MemoryRecord]], Table]:
    return functools.partial(Table, pg_admin_dsn)


def test_keys_labels_and_values_with_quotes_percent_and_unicode(pg_admin_dsn: str) -> None:
    """Keys, label names and values holding quotes, backslashes (values only: keys may
    not), ``%``, ``%s`` and characters outside the BMP are written as literals that read
    back as themselves, in a query that also binds parameters; other keys stay apart."""
    awkward = "it's 50% %s \\ 😀"
    records = [
        MemoryRecord(
            id="1",
            scope=("t",),
            text="",
            metadata={"o'k %s": awkward, "😀": 1},
            labels={"l'%": [awkward, "x"]},
        ),
        MemoryRecord(
            id="2",
            scope=("t",),
            text="",
            metadata={"o'k": awkward, "o'k %s ": awkward},
            labels={"l'": [awkward], "l'%": ["y"]},
        ),
    ]
    table = Table(pg_admin_dsn, records)
    try:
        for raw, expected in [
            ({"metadata": {"o'k %s": awkward}}, {"1"}),
            ({"metadata": {"o'k": {"$gte": awkward}}}, {"2"}),
            ({"metadata": {"😀": {"$exists": True}}}, {"1"}),
            ({"labels": {"l'%": awkward}}, {"1"}),
            ({"labels": {"l'%": {"$nin": ["x", "y"]}}}, set()),
            ({"labels": {"l'": {"$exists": True}}}, {"2"}),
            ({"metadata": {"o'k %s": {"$ne": awkward}}}, {"2"}),
        ]:
            spec = parse_filter(raw)
            assert spec is not None
            assert table.selected(spec) == matching(table.records, spec) == expected, raw
    finally:
        table.close()


def test_the_sql_binds_nothing() -> None:
    """Keys and values are written into the SQL, never as placeholders; a % is written
    as the escape \\x25."""
    spec = parse_filter({"metadata": {"50%": "%s"}, "labels": {"t": {"$in": ["%"]}}})
    assert spec is not None
    sql = filter_sql(spec)
    assert "%" not in sql
    assert "E'50\\x25'" in sql and "E'\\x25s'" in sql


def test_a_filtered_hnsw_search_scans_on_until_it_has_k_hits(pg_dsn: str) -> None:
    """A filter that 1 item in 50 passes, with ef_search 40 and k = 10: the index scan
    goes on past its first candidates (iteratively, filtering as it scans) and returns
    the same 10 hits as an exact scan, each passing the filter; the index was used
    (``index_path_store``: the planner would rightly scan exactly at this size)."""
    space = EmbeddingSpace("test", "filtered", 16)
    scope = ("acme", "user", "sam")
    rng = random.Random(11)
    ops: list[Op] = [RegisterSpace(space, NOW)]
    for number in range(2000):
        item = record(number, f"memory number {number}", scope, metadata={"n": number % 50})
        vector = encode_f32(unit(rng, space.dimensions))
        ops += [PutVector(space.id, item.content_sha256, vector, NOW), PutItem(item, NOW)]
    spec = parse_filter({"metadata": {"n": 7}})
    assert spec is not None
    with index_path_store(pg_dsn) as store:
        store.batch(ops)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("ANALYZE")  # as autovacuum would: the planner then sees the sizes
        (listed,) = store.batch([ListItems(ScopeSet.of(scope), 100, NOW, filter=spec)])
        assert len(listed) == 40
        for _ in range(5):
            query = tuple(unit(rng, space.dimensions))
            ann, exact = (
                store.batch([SearchVectors(ScopeSet.of(scope), space.id, query, 10, NOW, e, spec)])[
                    0
                ]
                for e in (False, True)
            )
            assert len(ann.hits) == 10
            assert all(hit.record.metadata == {"n": 7} for hit in ann.hits)
            assert [h.record.id for h in ann.hits] == [h.record.id for h in exact.hits]
    assert index_scans(pg_dsn, hnsw_index(space.id)) >= 1
