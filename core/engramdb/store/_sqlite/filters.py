"""Filters as SQLite expressions that answer exactly like ``Filter.matches``.

:func:`filter_sql` turns a parsed filter into one boolean SQL expression over two JSON
text columns, the metadata object and the labels object, each written by
``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)``. It binds
no parameters: keys and values are written into the SQL as literals, so a filter never
counts against a driver's parameter limit (D1 allows 100 per statement).

Why each construct is there:

* ``json_type(metadata, '$."key"')`` decides the JSON type of the stored value before
  anything is compared. ``json_extract`` alone cannot: it turns ``true`` into 1 and
  ``false`` into 0 (so ``true`` would equal the number 1), returns an array or object as
  its JSON text (so ``["a"]`` would equal the string ``'["a"]'``) and returns SQL NULL
  both for JSON null and for a missing key. ``json_type`` names ``integer``, ``real``,
  ``text``, ``true``, ``false``, ``null``, ``array`` or ``object``, and is NULL only for a
  missing key.
* ``CASE WHEN json_type(..) IN (<the types of one family>) THEN <comparison> .. ELSE 0
  END``: a comparison runs only on a stored value of the filter value's family, where
  ``json_extract`` is never NULL; other families and a missing key fall to ``ELSE 0``.
  Booleans and null are decided by the type name alone (``WHEN .. IN ('true') THEN 1``).
* So every expression is 0 or 1 and never NULL, which keeps ``NOT (..)`` exact for
  ``$ne``, ``$nin``, ``$exists False`` and ``$not``: in SQL's three-valued logic
  ``NOT NULL`` is NULL, and a NULL condition would drop a record that ``matches`` keeps.
* Filter values reach SQL as JSON text read by SQLite's JSON reader, the reader that reads
  the stored side: ``json_extract('<json>', '$')`` for one value and ``(SELECT value FROM
  json_each('<json array>'))`` for a list. Never as SQL number literals: SQLite's literal
  parser is not always exact (SQLite 3.40 reads ``SELECT -982.898162064009`` as
  ``-982.8981620640091``; its JSON reader reads the same text exactly), so a float filter
  would miss the very value it was written from.
* ``integer`` and ``real`` values compare numerically and exactly, as Python's ``int``
  and ``float`` do (``1 = 1.0``, ``-0.0 = 0``, ``9007199254740993 > 9007199254740992.0``).
  Text compares with the BINARY collation, byte-wise UTF-8, which is code point order,
  as Python's ``<`` on ``str``.
* A key becomes the path ``'$."key"'``: the quotes make dots, brackets and spaces plain
  characters. ``parse_filter`` refuses keys holding ``"``, ``\\`` or control characters,
  which the path cannot quote or which ``json.dumps`` escapes in the stored text. A ``'``
  in a key or value is doubled inside the SQL string literal.
* A label condition is ``EXISTS (SELECT 1 FROM json_each(labels, '$."name"') ..)``: a
  missing name has no rows, so ``$in`` and ``$exists`` are false there, and ``EXISTS`` is
  never NULL.
* ``And(())`` is ``1``; ``Or(())`` and an empty ``$in`` list are ``0``.
"""

from __future__ import annotations

from collections.abc import Sequence

from engramdb.store._filter import (
    Filter,
    FilterValue,
    LabelCondition,
    MetadataCondition,
    json_family,
)
from engramdb.store.rows import as_json, combined_sql

__all__ = ["MAX_FILTER_SQL_BYTES", "filter_sql"]

MAX_FILTER_SQL_BYTES = 90_000
"""The longest filter expression, in UTF-8 bytes: D1 refuses statements over 100,000 bytes
and the rest of a query is far shorter than the 10,000 left. The flows' filter limits keep
every filter they accept well under it."""

_SQL_OPERATORS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_JSON_TYPES = {"number": ("integer", "real"), "text": ("text",)}  # compared by value


def filter_sql(spec: Filter, metadata: str = "items.metadata", labels: str = "items.labels") -> str:
    """A SQLite expression, 0 or 1 and never NULL, equal to ``spec.matches(record)``.

    ``metadata`` and ``labels`` are the SQL expressions of the two JSON columns.
    """

    def condition_sql(condition: MetadataCondition | LabelCondition) -> str:
        if isinstance(condition, MetadataCondition):
            return _metadata_sql(condition, metadata)
        return _label_sql(condition, labels)

    return combined_sql(spec, condition_sql, "1", "0")


def _metadata_sql(condition: MetadataCondition, column: str) -> str:
    path = _string(f'$."{condition.key}"')
    json_type = f"json_type({column}, {path})"
    if condition.op == "$exists":
        return f"({json_type} IS NOT NULL)"
    stored = f"json_extract({column}, {path})"
    branches: list[tuple[tuple[str, ...], str]] = []  # (JSON types, test on those)
    if condition.op == "$in":
        for name, types in _JSON_TYPES.items():
            values = [value for value in condition.values if json_family(value) == name]
            if values:
                branches.append((types, f"{stored} IN {_json_rows(values)}"))
        # true, false and null: the JSON type name is the JSON text of the value
        decided = sorted(
            {as_json(v) for v in condition.values if json_family(v) in ("bool", "null")}
        )
        if decided:
            branches.append((tuple(decided), "1"))
    else:
        (value,) = condition.values
        test = f"{stored} {_SQL_OPERATORS[condition.op]} {_json_value(value)}"
        branches.append((_JSON_TYPES[json_family(value)], test))
    if not branches:  # an empty $in list
        return "0"
    whens = " ".join(f"WHEN {json_type} IN {_tuple(types)} THEN {test}" for types, test in branches)
    return f"(CASE {whens} ELSE 0 END)"


def _label_sql(condition: LabelCondition, column: str) -> str:
    path = _string(f'$."{condition.name}"')
    rows = f"SELECT 1 FROM json_each({column}, {path}) AS label"
    if condition.op == "$exists":
        return f"EXISTS ({rows})"
    return f"EXISTS ({rows} WHERE label.value IN {_json_rows(condition.values)})"


def _json_value(value: FilterValue) -> str:
    """``value`` as SQLite's JSON reader reads it (the reader of the stored side)."""
    return f"json_extract({_string(as_json(value))}, '$')"


def _json_rows(values: Sequence[FilterValue]) -> str:
    """A subquery of ``values`` as SQLite's JSON reader reads them."""
    return f"(SELECT value FROM json_each({_string(as_json(list(values)))}))"


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _tuple(names: tuple[str, ...]) -> str:
    return "(" + ", ".join(_string(name) for name in names) + ")"
