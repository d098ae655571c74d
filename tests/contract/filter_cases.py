"""A store's SQL for a filter selects exactly the records ``Filter.matches`` accepts: the
awkward values of every JSON type, seeded generators of records and filters (a failure
repeats), and the tests, collected by ``tests/sqlite/test_filter_sql.py`` and
``tests/postgres/test_postgres_filters.py`` with their store's ``make_filter_table``.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from engramdb._base.types import MemoryRecord
from engramdb.store._filter import Filter, Not, parse_filter


def as_json(value: object) -> str:
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
        metadata=json.loads(as_json(metadata)),
        labels=json.loads(as_json(labels)),
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


def random_filters(seed: int, count: int) -> Iterator[Filter]:
    rng = random.Random(seed)
    for _ in range(count):
        spec = parse_filter(random_filter(rng))
        assert spec is not None
        yield spec


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
    ("1.0 equals 1", 1.0, {"n": 1}, True),
    ("true equals only true", True, {"n": True}, True),
    ("false is not 0", False, {"n": 0}, False),
    ("0 is not false", 0, {"n": False}, False),
    ("null is not false", None, {"n": False}, False),
    ("a null value does not match $ne null", None, {"n": {"$ne": None}}, False),
    ("a missing key matches $nin", "absent", {"n": {"$nin": [None, 1]}}, True),
    ("a missing key is not below anything", "absent", {"n": {"$lt": 1e300}}, False),
    # A float's JSON text is a short decimal, not its exact value: 4.611686018427388e18
    # is exactly 2**62 (jsonb, reading the text as numeric, would find them unequal).
    ("2**62 equals the float 2.0**62", 2**62, {"n": 4.611686018427388e18}, True),
    ("the float 2.0**62 equals 2**62 as a float", 4.611686018427388e18,
     {"n": 4.611686018427388e18}, True),
    ("2**62 is not the float's short decimal", 4611686018427388000, {"n": 4.611686018427388e18},
     False),
    ("2**62 + 1 is above the float 2.0**62", 2**62 + 1, {"n": {"$gt": 4.611686018427388e18}},
     True),
    ("2**53 - 1 equals itself", 2**53 - 1, {"n": 2**53 - 1}, True),
    ("2**53 + 1 is not 2.0**53", 2**53 + 1, {"n": 9007199254740992.0}, False),
    ("2**53 equals 2.0**53", 2**53, {"n": {"$gte": 9007199254740992.0, "$lte": 2.0**53}}, True),
    ("-(2**53) - 1 is below -(2.0**53)", -(2**53) - 1, {"n": {"$lt": -9007199254740992.0}},
     True),
    ("0.1 + 0.2 is not 0.3", 0.1 + 0.2, {"n": 0.3}, False),
    ("0.30000000000000004 equals itself", 0.1 + 0.2, {"n": 0.30000000000000004}, True),
    ("0.1 is above the double nearest 0.1 from below", 0.1, {"n": {"$gt": 0.09999999999999999}},
     True),
    ("1e300 equals itself", 1e300, {"n": {"$in": [1, 1e300]}}, True),
    ("the smallest subnormal equals itself", 5e-324, {"n": 5e-324}, True),
    ("the smallest subnormal is above 0", 5e-324, {"n": {"$gt": 0}}, True),
    ("-0.0 is not below 0", -0.0, {"n": {"$lt": 0}}, False),
    ("the largest double equals itself", 1.7976931348623157e308,
     {"n": {"$gte": 1.7976931348623157e308}}, True),
    ("a code point above the BMP is above U+FFFF", "\U0001f600", {"n": {"$gt": "\uffff"}}, True),
    ("U+10FFFF is above every other string", "\U0010ffff", {"n": {"$gt": "\U0001f600"}}, True),
    ("Z is below a, by code point", "Z", {"n": {"$lt": "a"}}, True),
    ("é (precomposed) is not e + combining accent", "é", {"n": "e\u0301"}, False),
    ("a string is compared as written", "o'k \\ 50% %s \"q\"", {"n": "o'k \\ 50% %s \"q\""},
     True),
    ("a string holding its JSON escapes", "tab\tline\nend\u2028", {"n": "tab\tline\nend\u2028"},
     True),
    ("the string 'true' is not true", "true", {"n": True}, False),
    ("the string '1' is not 1", "1", {"n": {"$in": [1, 1.0]}}, False),
    ("a string is never in a number range", "5", {"n": {"$gt": 1}}, False),
    ("an array holding the value is not the value", [1], {"n": 1}, False),
]  # fmt: skip


class FilterTable:
    """Records in a database table, and a store's SQL for filters over it: a store's
    tests give ``sql`` and ``ids_where`` (and ``close``)."""

    def __init__(self, records: list[MemoryRecord]) -> None:
        self.records = records

    def sql(self, spec: Filter) -> str:
        """The store's SQL expression of ``spec``."""
        raise NotImplementedError

    def ids_where(self, condition: str) -> set[str]:
        """The ids of the records ``WHERE condition`` selects."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def selected(self, spec: Filter) -> set[str]:
        return self.ids_where(self.sql(spec))

    def nulls(self, spec: Filter) -> int:
        return len(self.ids_where(f"({self.sql(spec)}) IS NULL"))


def matching(records: list[MemoryRecord], spec: Filter) -> set[str]:
    """The ids of the records ``spec.matches``."""
    return {record.id for record in records if spec.matches(record)}


# --- the tests: a store's test module imports them with the fixtures below, and gives
# --- them ``open_filter_table``, a function of records to a new FilterTable.


@pytest.fixture
def make_filter_table(
    open_filter_table: Callable[[list[MemoryRecord]], FilterTable],
) -> Iterator[Callable[[list[MemoryRecord]], FilterTable]]:
    """``open_filter_table``, with every table it opens closed after the test."""
    made: list[FilterTable] = []

    def make(records: list[MemoryRecord]) -> FilterTable:
        made.append(open_filter_table(records))
        return made[-1]

    yield make
    for table in made:
        table.close()


@pytest.fixture
def filter_table(make_filter_table: Callable[[list[MemoryRecord]], FilterTable]) -> FilterTable:
    """300 random records."""
    rng = random.Random(20260101)
    return make_filter_table([random_record(rng, number) for number in range(300)])


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_sql_selects_exactly_the_records_that_match(filter_table: FilterTable, seed: int) -> None:
    """For random filters over awkward records, WHERE <sql> selects the ids that
    ``matches`` accepts: same JSON type family, exact numbers, code point order, missing
    keys and empty label lists, through any nesting of $and, $or and $not."""
    selective = 0
    for spec in random_filters(seed, 400):
        expected = matching(filter_table.records, spec)
        got = filter_table.selected(spec)
        differ = [(r.metadata, r.labels) for r in filter_table.records if r.id in got ^ expected]
        assert got == expected, (
            f"filter {spec}\nSQL {filter_table.sql(spec)}\nrecords that differ {differ}"
        )
        selective += 0 < len(expected) < len(filter_table.records)
    assert selective > 120  # many filters split the records, so the test can see a mistake


@pytest.mark.parametrize("seed", [5, 6])
def test_sql_is_never_null(filter_table: FilterTable, seed: int) -> None:
    """Every filter expression is true or false on every record, never NULL, so NOT (...)
    is exact: the records of Not(spec) are precisely the others."""
    everyone = {record.id for record in filter_table.records}
    for spec in random_filters(seed, 200):
        assert filter_table.nulls(spec) == 0, filter_table.sql(spec)
        assert filter_table.selected(spec) | filter_table.selected(Not(spec)) == everyone


@pytest.mark.parametrize(("stored", "condition", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_named_cases_agree(
    make_filter_table: Callable[[list[MemoryRecord]], FilterTable],
    stored: object,
    condition: dict[str, Any],
    expected: bool,
) -> None:
    """The sharp edges of the value domain, one by one, in Python and in SQL, and their
    negation."""
    metadata = {} if stored == "absent" else {"n": stored}
    record = MemoryRecord(id="1", scope=("test",), text="", metadata=metadata)
    spec = parse_filter({"metadata": condition})
    assert spec is not None
    table = make_filter_table([record])
    assert spec.matches(record) is expected
    assert table.selected(spec) == ({"1"} if expected else set())
    assert table.selected(Not(spec)) == (set() if expected else {"1"})
