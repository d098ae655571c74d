"""PostgreSQL answers every filter exactly as ``Filter.matches`` does.

Random records (the awkward values of every JSON type) sit in a temporary table shaped
like ``engramdb_items``, written as the store writes them; random filters select ids with
``WHERE <filter_sql>``, and the ids must equal those ``matches`` accepts; so must the
sharp edges, one by one (the tests shared with every SQL store, in
``tests/contract/filter_cases.py``). Then literals with quotes, ``%`` and astral
characters.
"""

from __future__ import annotations

import functools
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

from engramdb._filter import Filter, parse_filter
from engramdb._types import MemoryRecord
from engramdb.postgres._filters import filter_sql


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
