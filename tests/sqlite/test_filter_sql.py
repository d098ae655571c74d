"""SQLite answers every filter exactly as ``Filter.matches`` does: a differential test.

Random records (the awkward values of every JSON type) sit in an in-memory ``sqlite3``
table, written as the stores write them; random filters select ids with
``WHERE <filter_sql>``, and the ids must equal those ``matches`` accepts. The generators
are seeded, so a failure repeats; the message shows the filter, its SQL and the records.
"""

from __future__ import annotations

import json
import random
import sqlite3
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from engramdb._filter import Filter, Not, parse_filter
from engramdb._sqlite.filters import filter_sql
from engramdb._types import MemoryRecord


def _json(value: object) -> str:
    """The stores' JSON text of a column."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _tiny_floats() -> list[float]:
    """Floats near 1e-300, where SQLite 3.40 reads SQL literals wrong (and one at -982)."""
    rng = random.Random(7)
    values = [-982.898162064009, -2.2606631148481385e-299, 1.829402849984213e-298]
    while len(values) < 8:
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if 1e-308 < abs(value) < 1e-290:
            values.append(value)
    return values


# Numbers a filter may use (integers strictly inside ±2**53), and their neighbours.
FILTER_NUMBERS: list[int | float] = [
    0, -0.0, 0.0, 1, 1.0, -1, 2, 2.5, 0.1, 0.30000000000000004, 1e300, -1e300, 5e-324,
    1.7976931348623157e308, 2**53 - 1, -(2**53 - 1), 9007199254740992.0, 9007199254740994.0,
    9.223372036854776e18, -9.223372036854776e18, *_tiny_floats(),
]  # fmt: skip
FILTER_STRINGS = [
    "", "1", "a", "b", "A", "ab", "a b", "é", "e\u0301", "😀", "\uffff", "\U0010ffff",
    "o'k", 'q"', "back\\slash", "line\nfeed", "\x7f", "\u2028", "[1]", "true", "null",
]  # fmt: skip
FILTER_VALUES: list[object] = [*FILTER_NUMBERS, *FILTER_STRINGS, True, False, None]
# Stored values a filter cannot name: containers and integers from 2**53 to the int64 ends.
STORED_VALUES: list[object] = [
    *FILTER_VALUES, 2**53, 2**53 + 1, -(2**53) - 1, 2**62, 2**63 - 1, -(2**63), 2**63 - 2,
    [], [1], ["a"], [True], {}, {"k": 1}, [None],
]  # fmt: skip
FILTER_KEYS = ["k", "n", "é", "o'k", "x.y", "a b", "$", "[0]", "K"]
# Keys a filter cannot name; they must not be confused with "k".
STORED_KEYS = [*FILTER_KEYS, 'k"', "k\\", "k\n", "k ", ""]
LABEL_NAMES = ["t", "u", "é", "o'k", "t.u"]
LABEL_VALUES = ["x", "y", "é", "😀", "o'k", "1", " ", "x y", "\u2028"]

METADATA_OPS = ["$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists"]
LABEL_OPS = ["$eq", "$ne", "$in", "$nin", "$exists"]
RANGE_VALUES: list[object] = [*FILTER_NUMBERS, *FILTER_STRINGS]


def random_record(rng: random.Random, number: int) -> MemoryRecord:
    """A record as a store holds it: metadata and labels after a JSON round trip."""
    metadata = {key: rng.choice(STORED_VALUES) for key in STORED_KEYS if rng.random() < 0.4}
    labels = {
        name: sorted(set(rng.sample(LABEL_VALUES, rng.randint(0, 3))))
        for name in LABEL_NAMES
        if rng.random() < 0.5
    }
    return MemoryRecord(
        id=str(number),
        scope=("test",),
        text="",
        metadata=json.loads(_json(metadata)),
        labels=json.loads(_json(labels)),
    )


def random_condition(rng: random.Random, section: str) -> object:
    """A condition in the user's syntax: a bare value or one or two operators."""
    values = FILTER_VALUES if section == "metadata" else LABEL_VALUES
    if rng.random() < 0.2:
        return rng.choice(values)
    condition: dict[str, object] = {}
    for op in rng.sample(METADATA_OPS if section == "metadata" else LABEL_OPS, rng.randint(1, 2)):
        if op in ("$in", "$nin"):
            condition[op] = rng.sample(values, rng.randint(0, 4))
        elif op == "$exists":
            condition[op] = rng.random() < 0.5
        elif op in ("$eq", "$ne"):
            condition[op] = rng.choice(values)
        else:
            condition[op] = rng.choice(RANGE_VALUES)
    return condition


def random_filter(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    """A filter in the user's syntax, nested at most three levels."""
    keys = ["metadata", "labels"] + (["$and", "$or", "$not"] if depth < 3 else [])
    spec: dict[str, Any] = {}
    for key in rng.sample(keys, rng.randint(1, 2)):
        if key == "metadata":
            fields = rng.sample(FILTER_KEYS, rng.randint(1, 2))
            spec[key] = {field: random_condition(rng, key) for field in fields}
        elif key == "labels":
            names = rng.sample(LABEL_NAMES, rng.randint(1, 2))
            spec[key] = {name: random_condition(rng, key) for name in names}
        elif key == "$not":
            spec[key] = random_filter(rng, depth + 1)
        else:
            spec[key] = [random_filter(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    return spec


class Table:
    """Records in an in-memory SQLite table shaped like ``items`` (id, metadata, labels)."""

    def __init__(self, records: list[MemoryRecord]) -> None:
        self.records = records
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute("CREATE TABLE items (id TEXT, metadata TEXT, labels TEXT)")
        self.conn.executemany(
            "INSERT INTO items VALUES (?, ?, ?)",
            [(r.id, _json(r.metadata), _json(r.labels)) for r in records],
        )

    def selected(self, spec: Filter) -> set[str]:
        sql = f"SELECT id FROM items WHERE {filter_sql(spec)}"
        return {row[0] for row in self.conn.execute(sql)}

    def matching(self, spec: Filter) -> set[str]:
        return {record.id for record in self.records if spec.matches(record)}

    def nulls(self, spec: Filter) -> int:
        sql = f"SELECT count(*) FROM items WHERE ({filter_sql(spec)}) IS NULL"
        return int(self.conn.execute(sql).fetchone()[0])

    def explain(self, spec: Filter, ids: set[str]) -> str:
        rows = [(r.metadata, r.labels) for r in self.records if r.id in ids]
        return f"filter {spec}\nSQL {filter_sql(spec)}\nrecords that differ {rows}"


@pytest.fixture
def table() -> Iterator[Table]:
    rng = random.Random(20260101)
    made = Table([random_record(rng, number) for number in range(300)])
    yield made
    made.conn.close()


def random_filters(seed: int, count: int) -> Iterator[Filter]:
    rng = random.Random(seed)
    for _ in range(count):
        spec = parse_filter(random_filter(rng))
        assert spec is not None
        yield spec


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_sql_selects_exactly_the_records_that_match(table: Table, seed: int) -> None:
    """For random filters over awkward records, WHERE <filter_sql> selects the ids that
    ``matches`` accepts: same JSON type family, exact numbers, code point order, missing
    keys and empty label lists, through any nesting of $and, $or and $not."""
    selective = 0
    for spec in random_filters(seed, 400):
        expected = table.matching(spec)
        got = table.selected(spec)
        assert got == expected, table.explain(spec, got ^ expected)
        selective += 0 < len(expected) < len(table.records)
    assert selective > 120  # many filters split the records, so the test can see a mistake


@pytest.mark.parametrize("seed", [5, 6])
def test_sql_is_never_null(table: Table, seed: int) -> None:
    """Every filter expression is 0 or 1 on every record, never NULL, so NOT (...) is
    exact: the records of Not(spec) are precisely the others."""
    for spec in random_filters(seed, 200):
        assert table.nulls(spec) == 0, filter_sql(spec)
        everyone = {record.id for record in table.records}
        assert table.selected(spec) | table.selected(Not(spec)) == everyone


CASES: list[tuple[str, object, dict[str, Any], bool]] = [
    ("true is not 1", True, {"n": 1}, False),
    ("1 is not true", 1, {"n": True}, False),
    ("null equals None", None, {"n": None}, True),
    ("a missing key is not null", "absent", {"n": None}, False),
    ("an array is not its JSON text", ["a"], {"n": '["a"]'}, False),
    ("an object is not its JSON text", {"a": 1}, {"n": '{"a":1}'}, False),
    ("1 equals 1.0", 1, {"n": 1.0}, True),
    ("-0.0 equals 0", -0.0, {"n": 0}, True),
    ("int64 max is below 2**63 as a float", 2**63 - 1, {"n": {"$lt": 9.223372036854776e18}}, True),
    ("2**53 + 1 is above 2**53 as a float", 2**53 + 1, {"n": {"$gt": 9007199254740992.0}}, True),
    ("a float equals itself though SQL reads its literal wrong", -982.898162064009,
     {"n": -982.898162064009}, True),
    ("strings compare by code point, not by UTF-16", "\uffff", {"n": {"$lt": "😀"}}, True),
    ("a string is not a number", "1", {"n": {"$gte": 0}}, False),
    ("a null value exists", None, {"n": {"$exists": True}}, True),
    ("a missing key matches $ne", "absent", {"n": {"$ne": 1}}, True),
    ("an empty $in matches nothing", 1, {"n": {"$in": []}}, False),
    ("an empty $nin matches everything", "absent", {"n": {"$nin": []}}, True),
]  # fmt: skip


@pytest.mark.parametrize(("stored", "condition", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_named_cases_agree(stored: object, condition: dict[str, Any], expected: bool) -> None:
    """The sharp edges of the value domain, one by one, in Python and in SQL."""
    metadata = {} if stored == "absent" else {"n": stored}
    record = MemoryRecord(id="1", scope=("test",), text="", metadata=metadata)
    spec = parse_filter({"metadata": condition})
    assert spec is not None
    table = Table([record])
    try:
        assert spec.matches(record) is expected
        assert table.selected(spec) == ({"1"} if expected else set())
    finally:
        table.conn.close()


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
            (_json({"o'k": "it's"}), _json({"t'": ["a'b"]})),
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
            if table.selected(spec) != table.matching(spec):
                found.append(str(raw))
        return found
    finally:
        table.conn.close()


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
