"""The filter language: what parses, what is refused and why, and what each operator means.

These run in Pyodide too; the SQL side is tested against sqlite3 in
tests/sqlite/test_filter_sql.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from engramdb._base.errors import ValidationError
from engramdb._base.types import MemoryRecord
from engramdb.store._filter import (
    And,
    LabelCondition,
    MetadataCondition,
    Not,
    Or,
    parse_filter,
)


def rec(metadata: dict[str, Any] | None = None, labels: dict[str, list[str]] | None = None) -> Any:
    return MemoryRecord(id="1", scope=("t",), text="", metadata=metadata or {}, labels=labels or {})


def matches(spec: object, record: MemoryRecord) -> bool:
    parsed = parse_filter(spec)
    assert parsed is not None
    return parsed.matches(record)


# --- parsing ----------------------------------------------------------------------------


def test_no_filter_is_none() -> None:
    """None, {} and filters with no condition at all mean "no filter"."""
    assert parse_filter(None) is None
    assert parse_filter({}) is None
    assert parse_filter({"metadata": {}, "labels": {}}) is None
    assert parse_filter({"$and": [{}]}) is None


def test_the_tree_holds_positive_conditions_and_not() -> None:
    """$eq is $in of one value; $ne, $nin and $exists False are Not of the positive."""
    assert parse_filter({"metadata": {"n": 1}}) == MetadataCondition("n", "$in", (1,))
    assert parse_filter({"metadata": {"n": {"$ne": 1}}}) == Not(MetadataCondition("n", "$in", (1,)))
    assert parse_filter({"metadata": {"n": {"$nin": [1, "a"]}}}) == Not(
        MetadataCondition("n", "$in", (1, "a"))
    )
    assert parse_filter({"metadata": {"n": {"$exists": False}}}) == Not(
        MetadataCondition("n", "$exists")
    )
    assert parse_filter({"labels": {"t": {"$exists": True}}}) == LabelCondition("t", "$exists")
    assert parse_filter({"metadata": {"n": {"$lt": 5, "$gte": 1}}}) == And(
        (MetadataCondition("n", "$gte", (1,)), MetadataCondition("n", "$lt", (5,)))
    )
    assert parse_filter({"$or": [{"labels": {"t": "a"}}, {"labels": {"t": "b"}}]}) == Or(
        (LabelCondition("t", "$in", ("a",)), LabelCondition("t", "$in", ("b",)))
    )


def test_key_order_does_not_change_the_tree() -> None:
    """Fields, label names and operators are put in one order, so equal filters are equal
    nodes whatever order the mapping had."""
    one = parse_filter({"labels": {"b": "x", "a": "y"}, "metadata": {"z": {"$lt": 3, "$gt": 1}}})
    two = parse_filter({"metadata": {"z": {"$gt": 1, "$lt": 3}}, "labels": {"a": "y", "b": "x"}})
    assert one == two
    assert hash(one) == hash(two)


def test_true_and_one_are_different_filters() -> None:
    """1 == True in Python, but {"n": 1} and {"n": True} select different records, so
    their nodes differ and hash apart (a cache keyed by filter must not mix them)."""
    number = parse_filter({"metadata": {"n": 1}})
    flag = parse_filter({"metadata": {"n": True}})
    assert number != flag
    assert len({number, flag}) == 2
    assert number == parse_filter({"metadata": {"n": {"$in": [1]}}})


def test_nodes_are_frozen() -> None:
    """A parsed filter cannot be changed after validation."""
    node = parse_filter({"metadata": {"n": 1}})
    with pytest.raises(AttributeError):
        node.key = "m"  # type: ignore[union-attr, misc]


BAD: list[tuple[object, str]] = [
    ("src=chat", "must be a mapping"),
    ([("metadata", {})], "must be a mapping"),
    ({"meta": {}}, r"unknown key\(s\) \['meta'\]; use one or more of \['metadata', 'labels'"),
    ({"metadata": [("a", 1)]}, "must be a mapping of field to condition"),
    ({"labels": "t"}, "must be a mapping of label name to condition"),
    ({"metadata": {"a": {"$regex": "^x"}}},
     r"filter metadata\.a uses unknown operator\(s\) \['\$regex'\]; the supported operators"),
    ({"metadata": {"a": {1: 2}}}, r"unknown operator\(s\) \['1'\]"),
    ({"labels": {"t": {"$gt": "a"}}}, "unknown operator.*labels compare strings by equality"),
    ({"metadata": {"a": {}}}, r"filter metadata\.a has no operator"),
    ({"$and": []}, r"filter \$and is empty"),
    ({"$or": []}, r"filter \$or is empty"),
    ({"$or": {"metadata": {}}}, "must be a non-empty list of filters"),
    ({"$and": "metadata"}, "must be a non-empty list of filters"),
    ({"$not": [{"metadata": {"a": 1}}]}, r"filter \$not=.* must be a mapping"),
    ({"$and": [{"metadata": {"a": 1}}, "x"]}, r"filter \$and\[1\]='x' must be a mapping"),
    ({"$or": [{"$not": {"metadata": {"a": {"$regex": 1}}}}]},
     r"filter \$or\[0\]\.\$not\.metadata\.a uses unknown operator"),
    ({"metadata": {"": 1}}, "key '' must be a non-empty string without quotes"),
    ({"metadata": {'a"b': 1}}, "without quotes, backslashes or control characters"),
    ({"metadata": {"a\\b": 1}}, "without quotes, backslashes or control characters"),
    ({"metadata": {"a\x00": 1}}, "without quotes, backslashes or control characters"),
    ({"labels": {"t\n": "x"}}, "name 't\\\\n' must be a non-empty string"),
    ({"metadata": {1: 1}}, "key 1 must be a non-empty string"),
    ({"metadata": {"\ud800": 1}}, "lone surrogate"),
    ({"metadata": {"a": [1]}}, r"filter metadata\.a=\[1\] must be a string, number or boolean"),
    ({"metadata": {"a": {"$eq": {"b": 1}}}}, "string, number or boolean"),
    ({"metadata": {"a": b"x"}}, "string, number or boolean"),
    ({"metadata": {"a": {"$in": [1, [2]]}}}, r"filter metadata\.a \$in=\[2\] must be a string"),
    ({"metadata": {"a": math.nan}}, "must be a finite number"),
    ({"metadata": {"a": {"$lt": -math.inf}}}, "must be a finite number"),
    ({"metadata": {"n": 2**53}}, r"too large; integers must lie strictly between -2\*\*53 and 2"),
    ({"metadata": {"n": -(2**53)}}, r"2\*\*53"),
    ({"metadata": {"n": {"$in": [1, 2**64]}}}, r"2\*\*53"),
    ({"metadata": {"n": {"$gt": 2**60}}}, r"2\*\*53"),
    ({"metadata": {"s": "a\x00b"}}, r"contains a NUL character \(U\+0000\)"),
    ({"labels": {"t": {"$in": ["\x00"]}}}, "NUL character"),
    ({"metadata": {"s": "\udfff"}}, "lone surrogate"),
    ({"labels": {"t": 1}}, "must be a string label value"),
    ({"labels": {"t": {"$in": ["a", None]}}}, "must be a string label value"),
    ({"metadata": {"n": {"$gt": True}}}, "must be a number or a string: ranges compare"),
    ({"metadata": {"n": {"$lte": None}}}, "must be a number or a string"),
    ({"metadata": {"n": {"$in": "abc"}}}, r"filter metadata\.n \$in='abc' must be a list"),
    ({"metadata": {"n": {"$nin": {"a": 1}}}}, "must be a list of values"),
    ({"metadata": {"n": {"$exists": 1}}}, "must be True or False"),
    ({"labels": {"t": {"$exists": "yes"}}}, "must be True or False"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "message"), BAD, ids=[str(n) for n in range(len(BAD))])
def test_bad_filters_raise_one_validation_error_naming_the_part(spec: object, message: str) -> None:
    """Each mistake raises a ValidationError (a ValueError) whose message names the bad
    part, the bad value and what to use instead."""
    with pytest.raises(ValidationError, match=message):
        parse_filter(spec)


def test_the_size_limit_counts_conditions_list_values_and_sub_filters() -> None:
    """Every operator, every $in/$nin value and every sub-filter counts one; the default
    limit is 256 and the message says it and what to do."""
    assert parse_filter({"metadata": {"n": {"$in": list(range(255))}}}) is not None  # 1 + 255
    with pytest.raises(ValidationError, match="over 256 conditions, list values and sub-filters"):
        parse_filter({"metadata": {"n": {"$in": list(range(256))}}})
    many = {
        "metadata": {f"k{n}": n for n in range(128)},
        "labels": {f"t{n}": "x" for n in range(128)},
    }
    assert parse_filter(many) is not None
    with pytest.raises(ValidationError, match="use fewer, or split the recall"):
        parse_filter({**many, "$not": {}})  # the sub-filter is the 257th
    with pytest.raises(ValidationError, match="too large"):
        parse_filter({"$or": [{}] * 257})
    assert parse_filter({"metadata": {"n": 1, "m": 2}}, max_size=2) is not None
    with pytest.raises(ValidationError, match="over 1 conditions"):
        parse_filter({"metadata": {"n": 1, "m": 2}}, max_size=1)


def test_the_size_limit_is_checked_before_the_values() -> None:
    """A huge list is refused for its length before its values are looked at."""
    with pytest.raises(ValidationError, match="too large"):
        parse_filter({"metadata": {"n": {"$in": [object()] * 1_000_000}}})


def nested(levels: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"metadata": {"n": 1}}
    for _ in range(levels):
        spec = {"$not": spec}
    return spec


def test_the_depth_limit_bounds_nesting_of_and_or_not() -> None:
    """$and/$or/$not may nest 8 levels by default; the 9th is refused with the limit and
    the fix, before any recursion could run deep."""
    assert parse_filter(nested(8)) is not None
    with pytest.raises(ValidationError, match=r"deeper than 8 levels; flatten the filter"):
        parse_filter(nested(9))
    with pytest.raises(ValidationError, match="deeper than 8 levels"):
        parse_filter(nested(200))
    assert parse_filter({"$and": [nested(1)]}, max_depth=2) is not None
    with pytest.raises(ValidationError, match="deeper than 1 levels"):
        parse_filter({"$and": [nested(1)]}, max_depth=1)
    with pytest.raises(ValidationError, match="deeper than 0 levels"):
        parse_filter({"$or": [{"metadata": {"n": 1}}]}, max_depth=0)


# --- meaning ----------------------------------------------------------------------------

ABSENT = object()

METADATA_CASES: list[tuple[object, object, bool]] = [
    # stored value, condition on key "n", matches?
    ("chat", "chat", True),
    ("chat", "Chat", False),
    ("", "", True),
    ("1", 1, False),
    (1, "1", False),
    (1, 1, True),
    (1, 1.0, True),
    (1.0, 1, True),
    (-0.0, 0, True),
    (0.1 + 0.2, 0.3, False),
    (2**53 + 1, 9007199254740992.0, False),
    (2**63 - 1, 9.223372036854776e18, False),
    (True, True, True),
    (True, 1, False),
    (1, True, False),
    (False, 0, False),
    (0, False, False),
    (False, False, True),
    (None, None, True),
    (ABSENT, None, False),
    (None, "null", False),
    ([1], 1, False),
    (["a"], "a", False),
    ({"a": 1}, "a", False),
    ([], None, False),
    (ABSENT, {"$eq": 1}, False),
    (1, {"$ne": 1}, False),
    (2, {"$ne": 1}, True),
    (True, {"$ne": 1}, True),
    (ABSENT, {"$ne": 1}, True),
    (None, {"$ne": None}, False),
    (2, {"$in": [1, 2]}, True),
    (True, {"$in": [1, "true"]}, False),
    (True, {"$in": [1, True]}, True),
    (None, {"$in": ["a", None]}, True),
    (2, {"$in": []}, False),
    (ABSENT, {"$in": []}, False),
    (2, {"$nin": [1, 2]}, False),
    (3, {"$nin": [1, 2]}, True),
    (ABSENT, {"$nin": [1]}, True),
    (ABSENT, {"$nin": []}, True),
    (5, {"$gt": 4}, True),
    (5, {"$gt": 5}, False),
    (5, {"$gte": 5.0}, True),
    (5, {"$lt": 5.5}, True),
    (5, {"$lte": 4.99}, False),
    (2**53 + 1, {"$gt": 9007199254740992.0}, True),
    (-1e300, {"$lt": -(2**53 - 1)}, True),
    (5, {"$gt": "4"}, False),
    ("5", {"$gt": 4}, False),
    (True, {"$gt": 0}, False),
    (None, {"$lt": 0}, False),
    ([5], {"$gt": 4}, False),
    (ABSENT, {"$lt": 10}, False),
    ("b", {"$gt": "a"}, True),
    ("B", {"$gt": "a"}, False),
    ("ab", {"$gt": "a"}, True),
    ("é", {"$gt": "z"}, True),
    ("\uffff", {"$lt": "😀"}, True),  # code points, not UTF-16 units
    ("", {"$gte": ""}, True),
    (3, {"$gte": 1, "$lt": 5}, True),
    (5, {"$gte": 1, "$lt": 5}, False),
    (None, {"$exists": True}, True),
    (ABSENT, {"$exists": True}, False),
    (ABSENT, {"$exists": False}, True),
    (0, {"$exists": False}, False),
]


@pytest.mark.parametrize(("stored", "condition", "expected"), METADATA_CASES, ids=str)
def test_metadata_operators(stored: object, condition: object, expected: bool) -> None:
    """Each metadata operator on one stored value: equality by JSON type family
    (bool, null, number, string), numbers exactly across int and float, strings by code
    point; a missing key fails every positive test and passes $ne, $nin, $exists False."""
    metadata = {} if stored is ABSENT else {"n": stored}
    assert matches({"metadata": {"n": condition}}, rec(metadata)) is expected


LABEL_CASES: list[tuple[list[str] | None, object, bool]] = [
    # stored list for name "t" (None: absent), condition, matches?
    (["a", "b"], "a", True),
    (["a", "b"], "c", False),
    (["ab"], "a", False),
    (None, "a", False),
    ([], "a", False),
    (["a"], {"$ne": "a"}, False),
    (["b"], {"$ne": "a"}, True),
    (None, {"$ne": "a"}, True),
    (["a", "b"], {"$in": ["c", "b"]}, True),
    (["a"], {"$in": []}, False),
    (["a", "b"], {"$nin": ["c", "b"]}, False),
    (["a"], {"$nin": ["c"]}, True),
    (None, {"$nin": ["c"]}, True),
    (["a"], {"$exists": True}, True),
    ([], {"$exists": True}, False),
    (None, {"$exists": True}, False),
    ([], {"$exists": False}, True),
    (["a", "b"], {"$eq": "a", "$ne": "b"}, False),
]


@pytest.mark.parametrize(("stored", "condition", "expected"), LABEL_CASES, ids=str)
def test_label_operators(stored: list[str] | None, condition: object, expected: bool) -> None:
    """A label condition tests membership in the name's list of strings: $eq contains,
    $ne does not contain (a missing name passes), $exists has at least one value."""
    labels = {} if stored is None else {"t": stored}
    assert matches({"labels": {"t": condition}}, rec(labels=labels)) is expected


def test_every_key_of_a_filter_must_hold() -> None:
    """metadata, labels, $and, $or and $not side by side are ANDed."""
    record = rec({"src": "chat", "turn": 3}, {"topic": ["food"]})
    spec: dict[str, Any] = {
        "metadata": {"src": "chat"},
        "labels": {"topic": "food"},
        "$and": [{"metadata": {"turn": {"$gte": 3}}}],
        "$or": [{"metadata": {"turn": 99}}, {"labels": {"topic": "food"}}],
        "$not": {"metadata": {"src": "email"}},
    }
    assert matches(spec, record)
    for key, value in [
        ("metadata", {"src": "email"}),
        ("labels", {"topic": "drink"}),
        ("$and", [{"metadata": {"turn": {"$gt": 3}}}]),
        ("$or", [{"metadata": {"turn": 99}}, {"labels": {"topic": "drink"}}]),
        ("$not", {"metadata": {"src": "chat"}}),
    ]:
        assert not matches({**spec, key: value}, record), key


def test_and_or_not_combine_as_logic() -> None:
    """$and needs all, $or any one, $not the opposite; an empty filter inside matches all."""
    record = rec({"a": 1, "b": 2})
    yes, no = {"metadata": {"a": 1}}, {"metadata": {"a": 2}}
    assert matches({"$and": [yes, yes]}, record)
    assert not matches({"$and": [yes, no]}, record)
    assert matches({"$or": [no, yes]}, record)
    assert not matches({"$or": [no, no]}, record)
    assert matches({"$not": no}, record)
    assert not matches({"$not": yes}, record)
    assert not matches({"$not": {}}, record)
    assert matches({"$not": {"$not": yes}}, record)
    assert And(()).matches(record) and not Or(()).matches(record)
