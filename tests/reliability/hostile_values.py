"""Known-nasty values and hypothesis strategies for the hostile-input tests."""

from __future__ import annotations

import string
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

# Characters that break naive code: NUL and other controls, lone surrogates, RTL marks and
# overrides, combining marks, zero-width joiners, BOM, non-characters, astral emoji.
NASTY_CHARS = (
    "\x00\x01\x1b\x7f\t\n\r\x0b\x0c\x1c\x85\u00a0\u2028\u2029"
    "\ud800\udbff\udc00\udfff"
    "\u200e\u200f\u202a\u202b\u202d\u202e\u2066\u2067\u2069"
    "\u0301\u0302\u0336\u20dd\u034f"
    "\u200b\u200c\u200d\ufeff\ufffe\uffff"
    "\U0001f600\U0001f468\u200d\U0001f469\U0010ffff"
    "\u05d0\u05d1\u0627\u0644"
)
# FTS5 and SQL syntax, as whole tokens.
SYNTAX = [
    '"',
    '""',
    "*",
    "NEAR(",
    "NEAR",
    ")",
    "(",
    "AND",
    "OR",
    "NOT",
    "^",
    ":",
    "col:",
    "text:",
    "-",
    "+",
    "{",
    "}",
    ",",
    "'",
    "''",
    ";",
    "--",
    "/*",
    "*/",
    "%",
    "_",
    "\\",
    "'; DROP TABLE memories; --",
    '"; DELETE FROM memories; --',
    "' OR '1'='1",
    "$.a",
    "?",
    "?1",
    ":name",
    "@x",
]
MB = 1 << 20
NASTY_TEXTS = [
    *SYNTAX,
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfff",
    "\u202eevil\u202c",
    "e\u0301\u0301\u0301",
    "\u200b",
    " \t\n",
    "x" * MB,
    "é" * (MB // 2),
    "x" * (32 * 1024),
    "x" * (32 * 1024 + 1),
]
NASTY_SCOPE_PARTS = [
    "%",
    "_",
    "%%",
    "a%",
    "a_b",
    "/",
    "a/b",
    "..",
    "",
    " ",
    "x" * 256,
    "x" * 257,
    "x" * MB,
    "\x00",
    "\ud800",
    "\u202e",
    '"',
    "'",
    "[",
    "]",
    ",",
    '["a"]',
    "*",
    "\\",
]

scope_parts = st.one_of(
    st.sampled_from(NASTY_SCOPE_PARTS),
    st.text(alphabet=st.sampled_from("%_/\\*'\",[]a" + NASTY_CHARS), max_size=6),
    st.text(max_size=12),
)
scopes = st.lists(scope_parts, min_size=0, max_size=18).map(tuple)

hostile_texts = st.one_of(
    st.sampled_from(NASTY_TEXTS),
    st.text(alphabet=st.sampled_from(NASTY_CHARS + "ab "), max_size=40),
    st.lists(st.sampled_from(SYNTAX), min_size=1, max_size=6).map(" ".join),
    st.text(max_size=60),
)

JSON_NUMBERS = [
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    5e-324,
    1.7976931348623157e308,
    2**63 - 1,
    -(2**63),
    2**63,
    -(2**63) - 1,
    2**64,
    10**400,
    2**53 + 1,
]
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(JSON_NUMBERS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_texts,
)
json_values = st.recursive(
    json_leaves | st.just([]) | st.just({}),
    # min_size=1: an extension always draws from ``inner`` (hypothesis warns, now and then,
    # of one that drew an empty list or dict as if it could not recurse)
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3),
        st.dictionaries(hostile_texts, inner, min_size=1, max_size=3),
    ),
    max_leaves=12,
)
metadata = st.dictionaries(hostile_texts, json_values, max_size=4)


def nested(levels: int, leaf: Any = 1) -> dict[str, Any]:
    """A metadata object nested ``levels`` deep (the object itself is the first)."""
    value: Any = leaf
    for _ in range(levels - 1):
        value = {"k": value}
    return {"k": value}


offsets = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
aware_datetimes = st.one_of(
    st.datetimes(timezones=offsets),
    st.datetimes(min_value=datetime(9999, 12, 30), timezones=offsets),
    st.datetimes(max_value=datetime(1, 1, 2), timezones=offsets),
)
FIRST = datetime(1, 1, 1, tzinfo=UTC)
LAST = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)

# Filter keys and values a caller might send; the key alphabet leans on JSON-path syntax.
filter_keys = st.one_of(
    st.sampled_from(['a"b', "a'b", "a.b", "$", "$.a", "a[0]", "a\\b", "", " ", "\x00", "%"]),
    st.text(alphabet=st.sampled_from("$.[]'\"\\*%_ab" + NASTY_CHARS), max_size=8),
)
filter_values = st.one_of(json_leaves, st.lists(json_leaves, max_size=3))
filter_ops = st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$x"])
filters = st.one_of(
    st.dictionaries(
        st.sampled_from(["metadata", "labels", "text", "$and", "$or", "id", ""]),
        st.dictionaries(filter_keys, filter_values, max_size=3),
        max_size=2,
    ),
    st.builds(
        lambda key, op, value: {"metadata": {key: {op: value}}},
        filter_keys,
        filter_ops,
        filter_values,
    ),
    json_values,
)
words = st.text(alphabet=string.ascii_lowercase, min_size=6, max_size=10)
