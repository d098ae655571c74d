"""Filters as PostgreSQL expressions that answer exactly like ``Filter.matches``.

:func:`filter_sql` turns a parsed filter into one boolean SQL expression over the item
row's two JSON text columns, metadata and labels, each written by ``json.dumps(value,
ensure_ascii=False, separators=(",", ":"), allow_nan=False)``. Keys and values are
written into the SQL as literals; it binds no parameters.

Why each construct is there:

* The columns are read as ``json``, not ``jsonb``: ``json`` keeps each number's text as
  written, ``jsonb`` turns it into a ``numeric`` and forgets whether it was a Python
  ``int`` or ``float``. The difference matters: the float ``4.611686018427388e18`` is
  exactly 2**62 and equals the integer 2**62, but its text is the decimal
  4611686018427388000, which does not.
* ``json_typeof(metadata -> 'key')`` decides the JSON type of the stored value before
  anything is compared: ``string``, ``number``, ``boolean``, ``null``, ``array`` or
  ``object``, and NULL only for a missing key. ``CASE json_typeof(..) WHEN 'string'
  THEN .. WHEN 'number' THEN .. ELSE false END`` compares only within the filter value's
  family; other families and a missing key fall to ``ELSE false``.
* Numbers compare exactly, as Python compares ``int`` and ``float``. A stored float (its
  text holds ``.``, ``e`` or ``E``, as Python's ``repr`` of a float always does) is read
  as ``float8`` and compared with the filter value as ``float8``: both are doubles, and
  PostgreSQL reads decimal text correctly rounded, so ``1e+300`` is the double it was
  written from. A stored integer is read as ``numeric`` and compared with the filter
  value's exact decimal expansion (``Decimal(value)``), so ``2**53 + 1 > 2.0**53`` and
  ``2**62 == 4.611686018427388e18``. Every filter number is a double exactly (integers
  lie strictly inside ±2**53), so both readings are exact.
* Strings compare ``COLLATE "C"``: byte order of UTF-8, which is code point order, as
  Python's ``<`` on ``str``, whatever the database's collation. Booleans and null are
  decided by the type and text alone: ``'true'`` equals only ``true``, never 1.
* A label condition is ``EXISTS (SELECT 1 FROM json_array_elements_text(labels ->
  'name') ..)``: a missing name has no rows, so ``$in`` and ``$exists`` are false there.
* So every expression is true or false and never NULL, which keeps ``NOT (..)`` exact for
  ``$ne``, ``$nin``, ``$exists False`` and ``$not``: in SQL's three-valued logic ``NOT
  NULL`` is NULL, and a NULL condition would drop a record that ``matches`` keeps.
* Keys and string values are ``E''`` literals (``sql_literal``: quotes and backslashes
  doubled, ``%`` written ``\\x25`` so psycopg's placeholders never see it).
* ``And(())`` is ``TRUE``; ``Or(())`` and an empty ``$in`` list are ``FALSE``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal

from engramdb.store import Filter, FilterValue, LabelCondition, MetadataCondition
from engramdb.store.rows import combined_sql

from ._sql import sql_literal

__all__ = ["filter_sql", "where_filter"]

_SQL_OPERATORS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_FLOAT_TEXT = "'[.eE]'"  # a pattern only the JSON text of a Python float matches


def filter_sql(spec: Filter, metadata: str = "i.metadata", labels: str = "i.labels") -> str:
    """A PostgreSQL expression, true or false and never NULL, equal to
    ``spec.matches(record)``.

    ``metadata`` and ``labels`` are the SQL expressions of the two JSON text columns.
    """

    def condition_sql(condition: MetadataCondition | LabelCondition) -> str:
        if isinstance(condition, MetadataCondition):
            return _metadata_sql(condition, f"({metadata})::json")
        return _label_sql(condition, f"({labels})::json")

    return combined_sql(spec, condition_sql, "TRUE", "FALSE")


def where_filter(spec: Filter | None) -> str:
    """`` AND <filter>`` for a WHERE clause over ``engramdb_items i``, or nothing."""
    return "" if spec is None else f" AND {filter_sql(spec)}"


def _metadata_sql(condition: MetadataCondition, document: str) -> str:
    key = sql_literal(condition.key)
    if condition.op == "$exists":
        return f"({document} -> {key} IS NOT NULL)"
    stored = f"({document} ->> {key})"
    if condition.op == "$in":
        tests = _equal_tests(condition.values, stored)
    else:
        (value,) = condition.values
        operator = _SQL_OPERATORS[condition.op]
        if isinstance(value, str):
            tests = {"string": f'{stored} COLLATE "C" {operator} {sql_literal(value)}'}
        else:
            tests = {"number": _number_test(stored, operator, _numbers([value]))}
    if not tests:  # an empty $in list
        return "FALSE"
    whens = " ".join(f"WHEN '{json_type}' THEN {test}" for json_type, test in tests.items())
    return f"(CASE json_typeof({document} -> {key}) {whens} ELSE FALSE END)"


def _equal_tests(values: tuple[FilterValue, ...], stored: str) -> dict[str, str]:
    """The test of each JSON type that some of ``values`` may equal."""
    tests: dict[str, str] = {}
    texts = [sql_literal(value) for value in values if isinstance(value, str)]
    if texts:
        tests["string"] = f'{stored} COLLATE "C" IN ({", ".join(texts)})'
    numbers = _numbers(values)
    if numbers:
        tests["number"] = _number_test(stored, "IN", numbers)
    flags = sorted({f"'{json.dumps(value)}'" for value in values if isinstance(value, bool)})
    if flags:
        tests["boolean"] = f"{stored} IN ({', '.join(flags)})"
    if None in values:
        tests["null"] = "TRUE"
    return tests


def _numbers(values: Sequence[FilterValue]) -> list[int | float]:
    return [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _number_test(stored: str, operator: str, values: list[int | float]) -> str:
    """``stored`` (the JSON text of a number) ``operator`` the value (``IN``: the
    values), exactly: a stored float as a double, a stored integer as a decimal."""
    doubles = ", ".join(f"float8 '{float(value)!r}'" for value in values)
    decimals = ", ".join(f"numeric '{Decimal(value):f}'" for value in values)
    if operator == "IN":
        doubles, decimals = f"({doubles})", f"({decimals})"
    return (
        f"(CASE WHEN {stored} ~ {_FLOAT_TEXT} THEN {stored}::float8 {operator} {doubles} "
        f"ELSE {stored}::numeric {operator} {decimals} END)"
    )


def _label_sql(condition: LabelCondition, document: str) -> str:
    rows = (
        f"SELECT 1 FROM json_array_elements_text({document} -> {sql_literal(condition.name)}) "
        "AS label(value)"
    )
    if condition.op == "$exists":
        return f"EXISTS ({rows})"
    if not condition.values:  # an empty $in list
        return "FALSE"
    values = ", ".join(map(sql_literal, condition.values))
    return f'EXISTS ({rows} WHERE label.value COLLATE "C" IN ({values}))'
