"""SQLite answers every filter exactly as ``Filter.matches`` does: a differential test.

Random records (the awkward values of every JSON type) sit in an in-memory ``sqlite3``
table, written as the stores write them; random filters select ids with
``WHERE <filter_sql>``, and the ids must equal those ``matches`` accepts (the tests shared
with every SQL store, in ``tests/contract/filter_cases.py``). Then what SQLite itself
cannot agree on, which the write side must refuse.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

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

from engramdb._base.types import MemoryRecord
from engramdb.store._filter import Filter, parse_filter
from engramdb.store._sqlite.filters import filter_sql


class Table(FilterTable):
    """Records in an in-memory SQLite table shaped like ``items`` (id, metadata, labels)."""

    def __init__(self, records: list[MemoryRecord]) -> None:
        super().__init__(records)
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute("CREATE TABLE items (id TEXT, metadata TEXT, labels TEXT)")
        self.conn.executemany(
            "INSERT INTO items VALUES (?, ?, ?)",
            [(r.id, as_json(r.metadata), as_json(r.labels)) for r in records],
        )

    def sql(self, spec: Filter) -> str:
        return filter_sql(spec)

    def ids_where(self, condition: str) -> set[str]:
        return {row[0] for row in self.conn.execute(f"SELECT id FROM items WHERE {condition}")}

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def open_filter_table() -> Callable[[list[MemoryRecord]], Table]:
    return Table


def test_the_sql_binds_nothing_and_quotes_what_it_writes() -> None:
    """Keys and values with quotes become SQL string literals with ' doubled; the text
    has no parameter marks, so it runs with no bound values."""
    spec = parse_filter({"metadata": {"o'k": "it's"}, "labels": {"t'": {"$in": ["a'b"]}}})
    assert spec is not None
    sql = filter_sql(spec, metadata="m", labels="l")
    assert "?" not in sql
    assert "'$.\"o''k\"'" in sql and "it''s" in sql and "a''b" in sql
    conn = sqlite3.connect(":memory:")
    try:
        row = conn.execute(
            f"SELECT {sql} FROM (SELECT ? AS m, ? AS l)",
            (as_json({"o'k": "it's"}), as_json({"t'": ["a'b"]})),
        ).fetchone()
    finally:
        conn.close()
    assert row == (1,)


# --- what SQLite cannot agree on: the write side must refuse these -----------------------


def _disagreements(records: list[MemoryRecord], specs: list[dict[str, Any]]) -> list[str]:
    table = Table(records)
    try:
        found = []
        for raw in specs:
            spec = parse_filter(raw)
            assert spec is not None
            if table.selected(spec) != matching(table.records, spec):
                found.append(str(raw))
        return found
    finally:
        table.close()


def test_sqlite_reads_integers_beyond_int64_as_doubles() -> None:
    """SQLite's JSON reader turns an integer outside int64 into the nearest double, so
    2**64 + 1 equals 2**64 in SQL and not in Python: metadata must refuse integers
    outside -2**63 .. 2**63 - 1."""
    records = [
        MemoryRecord(id="1", scope=("t",), text="", metadata={"n": 2**64 + 1}),
        MemoryRecord(id="2", scope=("t",), text="", metadata={"n": -(2**63) - 1}),
    ]
    specs: list[dict[str, Any]] = [
        {"metadata": {"n": 1.8446744073709552e19}},
        {"metadata": {"n": {"$lt": -(2.0**63)}}},
    ]
    assert _disagreements(records, specs) == [str(spec) for spec in specs]


def test_sqlite_mishandles_nul_in_json_text() -> None:
    """SQLite 3.40 cuts a JSON string at an escaped NUL ("x\\u0000y" reads as "x");
    SQLite 3.54 keeps the string but finds the key "k\\u0000" under the path "k". Either
    way a filter disagrees: metadata keys and strings, and label names and values, must
    refuse U+0000."""
    records = [
        MemoryRecord(id="1", scope=("t",), text="", metadata={"s": "x\x00y", "k\x00": 1}),
        MemoryRecord(id="2", scope=("t",), text="", labels={"t": ["x\x00y"], "u\x00": ["x"]}),
    ]
    specs: list[dict[str, Any]] = [
        {"metadata": {"s": "x"}},
        {"metadata": {"k": 1}},
        {"labels": {"t": "x"}},
        {"labels": {"u": "x"}},
    ]
    assert _disagreements(records, specs) != []
