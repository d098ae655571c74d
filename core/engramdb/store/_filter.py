"""Recall filters: a small language over metadata fields and labels.

A filter is a mapping; every key it holds must hold (AND)::

    {
        "metadata": {"src": "chat", "turn": {"$gte": 3, "$lt": 10}},
        "labels": {"topic": {"$in": ["food", "drink"]}},
        "$or": [{"metadata": {"lang": "en"}}, {"$not": {"metadata": {"lang": {"$exists": True}}}}],
    }

``metadata`` maps a top-level metadata key to a condition, ``labels`` a label name to a
condition; ``$and`` and ``$or`` take a non-empty list of filters, ``$not`` one filter.
A condition is a value (short for ``{"$eq": value}``) or a mapping of operators that must
all hold:

========================  ===================================================================
``$eq v`` / ``$ne v``     metadata: the key holds a value equal to ``v`` in the same JSON type
                          family (a bool equals only a bool, ``None`` only null, a string only
                          a string, numbers numerically: ``1 == 1.0``); labels: the list holds
                          ``v``. ``$ne`` is its negation, so a missing key matches ``$ne``.
``$in [..]`` / ``$nin``   ``$eq`` any of the values / none of them (``[]``: nothing / all)
``$gt $gte $lt $lte v``   metadata only; ``v`` is a number or a string and the stored value of
                          the same family compares so (strings by code point)
``$exists b``             metadata: the key is present (even as null); labels: the name has at
                          least one value. ``False`` negates it.
========================  ===================================================================

Values are strings, integers strictly between -2**53 and 2**53, finite floats, booleans or
``None`` (label values: strings only). Anything else raises one ``ValidationError`` naming
the bad part and the fix.

:func:`parse_filter` turns the mapping into a tree of hashable nodes: :class:`And`,
:class:`Or`, :class:`Not`, :class:`MetadataCondition` and :class:`LabelCondition`. The
negative operators become :class:`Not` (``$ne v`` is ``Not($in (v,))``, ``$nin`` is
``Not($in)``, ``$exists false`` is ``Not($exists)``), and ``$eq v`` is ``$in (v,)``, so a
condition is one of ``$in``, the four comparisons and ``$exists``. ``node.matches(record)``
answers in Python; ``engramdb.store._sqlite.filters.filter_sql(node)`` answers the same in SQLite.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, cast

from engramdb._base.errors import ValidationError, shown
from engramdb._base.types import check_unicode

__all__ = [
    "And",
    "Filter",
    "FilterValue",
    "LabelCondition",
    "MetadataCondition",
    "Not",
    "Or",
    "Record",
    "json_family",
    "parse_filter",
]

FilterValue: TypeAlias = str | int | float | bool | None
MetadataOperator: TypeAlias = Literal["$in", "$gt", "$gte", "$lt", "$lte", "$exists"]
LabelOperator: TypeAlias = Literal["$in", "$exists"]

MAX_SIZE = 256
MAX_DEPTH = 8
_MAX_INT = 2**53  # past it integers are not exact as doubles (D1 and JavaScript numbers)
_KEYS = ("metadata", "labels", "$and", "$or", "$not")
_METADATA_OPERATORS = ("$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists")
_LABEL_OPERATORS = ("$eq", "$ne", "$in", "$nin", "$exists")
# Each user operator as the positive condition it tests; $ne, $nin and $exists False
# wrap that condition in Not.
_POSITIVE: dict[str, MetadataOperator] = {
    "$eq": "$in",
    "$ne": "$in",
    "$in": "$in",
    "$nin": "$in",
    "$gt": "$gt",
    "$gte": "$gte",
    "$lt": "$lt",
    "$lte": "$lte",
    "$exists": "$exists",
}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


class Record(Protocol):
    """What a filter reads: a :class:`~engramdb.MemoryRecord` or anything shaped so."""

    @property
    def metadata(self) -> Mapping[str, object]: ...

    @property
    def labels(self) -> Mapping[str, Sequence[str]]: ...


def json_family(value: object) -> str:
    """The JSON type family in which ``value`` compares: null, bool, number, text or other.

    ``True == 1`` in Python but not in a filter, and a list never equals a scalar.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    return "other"


@dataclass(frozen=True, slots=True)
class And:
    """Every part holds (no parts: always true)."""

    parts: tuple[Filter, ...]

    def matches(self, record: Record) -> bool:
        return all(part.matches(record) for part in self.parts)


@dataclass(frozen=True, slots=True)
class Or:
    """At least one part holds (no parts: never true)."""

    parts: tuple[Filter, ...]

    def matches(self, record: Record) -> bool:
        return any(part.matches(record) for part in self.parts)


@dataclass(frozen=True, slots=True)
class Not:
    """The part does not hold."""

    part: Filter

    def matches(self, record: Record) -> bool:
        return not self.part.matches(record)


@dataclass(frozen=True, slots=True, eq=False)
class MetadataCondition:
    """One test of the top-level metadata field ``key``; a missing key never passes.

    ``$in``: the stored value equals one of ``values`` in its type family; ``$gt``,
    ``$gte``, ``$lt``, ``$lte``: it compares so with ``values[0]`` in its family;
    ``$exists``: the key is present (``values`` is empty).
    """

    key: str
    op: MetadataOperator
    values: tuple[FilterValue, ...] = ()

    def matches(self, record: Record) -> bool:
        if self.key not in record.metadata:
            return False
        stored = record.metadata[self.key]
        if self.op == "$exists":
            return True
        if self.op == "$in":
            return any(_equal(stored, value) for value in self.values)
        wanted = self.values[0]
        return json_family(stored) == json_family(wanted) and _COMPARE[self.op](stored, wanted)

    # 1 == True in Python, so the generated __eq__ would make {"n": 1} and {"n": True}
    # equal (and hash alike) though they select different records; compare typed values.
    def _identity(self) -> tuple[object, ...]:
        return (self.key, self.op, tuple((type(value), value) for value in self.values))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetadataCondition):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())


@dataclass(frozen=True, slots=True)
class LabelCondition:
    """One test of the label ``name``: ``$in`` its list holds one of ``values``;
    ``$exists`` it holds at least one value (``values`` is empty)."""

    name: str
    op: LabelOperator
    values: tuple[str, ...] = ()

    def matches(self, record: Record) -> bool:
        stored = record.labels.get(self.name, ())
        if self.op == "$exists":
            return len(stored) > 0
        return any(value in stored for value in self.values)


Filter: TypeAlias = And | Or | Not | MetadataCondition | LabelCondition


def _equal(stored: object, wanted: FilterValue) -> bool:
    return json_family(stored) == json_family(wanted) and stored == wanted


def parse_filter(
    spec: object, *, max_size: int = MAX_SIZE, max_depth: int = MAX_DEPTH
) -> Filter | None:
    """Validate a user filter and return its tree; ``None`` or ``{}`` mean no filter.

    ``max_size`` bounds the conditions, list values and sub-filters counted together;
    ``max_depth`` bounds how deeply ``$and``/``$or``/``$not`` nest.
    """
    if spec is None:
        return None
    node = _Parser(max_size, max_depth).filter(spec, "", 0)
    return None if node == And(()) else node


class _Parser:
    """One parse: the running size, checked as it grows so a huge input fails early."""

    def __init__(self, max_size: int, max_depth: int) -> None:
        self.max_size = max_size
        self.max_depth = max_depth
        self.size = 0

    def spend(self, count: int, where: str) -> None:
        self.size += count
        if self.size > self.max_size:
            raise ValidationError(
                f"{_name(where)} makes the filter too large: over {self.max_size} conditions, "
                "list values and sub-filters; use fewer, or split the recall"
            )

    def filter(self, spec: object, where: str, depth: int) -> Filter:
        if not isinstance(spec, Mapping):
            raise ValidationError(
                f"{_name(where)}={shown(spec)} must be a mapping like "
                "{'metadata': {'src': 'chat'}}"
            )
        unknown = [key for key in spec if key not in _KEYS]
        if unknown:
            raise ValidationError(
                f"{_name(where)} has unknown key(s) {shown(unknown)}; use one or more of "
                f"{list(_KEYS)}"
            )
        parts: list[Filter] = []
        for section in ("metadata", "labels"):
            if section in spec:
                parts += self.section(section, spec[section], _at(where, section))
        for key in ("$and", "$or"):
            if key in spec:
                parts.append(self.combination(key, spec[key], _at(where, key), depth))
        if "$not" in spec:
            parts.append(Not(self.child(spec["$not"], _at(where, "$not"), depth)))
        return _all(parts)

    def combination(self, key: str, specs: object, where: str, depth: int) -> Filter:
        if isinstance(specs, (str, bytes, Mapping)) or not isinstance(specs, Sequence):
            raise ValidationError(
                f"{_name(where)}={shown(specs)} must be a non-empty list of filters"
            )
        if not specs:
            raise ValidationError(
                f"{_name(where)} is empty; give at least one filter or leave {key} out"
            )
        children = [self.child(spec, f"{where}[{n}]", depth) for n, spec in enumerate(specs)]
        return _all(children) if key == "$and" else _any(children)

    def child(self, spec: object, where: str, depth: int) -> Filter:
        """A filter inside $and, $or or $not of a filter at ``depth``."""
        if depth + 1 > self.max_depth:
            raise ValidationError(
                f"{_name(where)} nests $and/$or/$not deeper than {self.max_depth} levels; "
                "flatten the filter (an $and inside an $and can be merged into it)"
            )
        self.spend(1, where)
        return self.filter(spec, where, depth + 1)

    def section(self, section: str, conditions: object, where: str) -> list[Filter]:
        if not isinstance(conditions, Mapping):
            raise ValidationError(
                f"{_name(where)}={shown(conditions)} must be a mapping of "
                f"{'field' if section == 'metadata' else 'label name'} to condition"
            )
        checked = {
            _check_name(section, where, name): condition for name, condition in conditions.items()
        }
        parts: list[Filter] = []
        for name in sorted(checked):
            parts += self.condition(section, name, checked[name], f"{where}.{name}")
        return parts

    def condition(self, section: str, name: str, condition: object, where: str) -> list[Filter]:
        operators = _METADATA_OPERATORS if section == "metadata" else _LABEL_OPERATORS
        if not isinstance(condition, Mapping):
            condition = {"$eq": condition}
        unknown = [op for op in condition if op not in operators]
        if unknown:
            hint = "; labels compare strings by equality only" if section == "labels" else ""
            raise ValidationError(
                f"{_name(where)} uses unknown operator(s) {sorted(map(str, unknown))}; the "
                f"supported operators are {list(operators)}{hint}"
            )
        if not condition:
            raise ValidationError(
                f"{_name(where)} has no operator; give at least one, e.g. {{'$eq': 'chat'}}"
            )
        self.spend(len(condition), where)
        return [
            self.operator(section, name, op, condition[op], where)
            for op in operators
            if op in condition
        ]

    def operator(self, section: str, name: str, op: str, operand: object, where: str) -> Filter:
        where = where if op == "$eq" else f"{where} {op}"
        values: tuple[FilterValue, ...] = ()
        if op == "$exists":
            if not isinstance(operand, bool):
                raise ValidationError(f"{_name(where)}={shown(operand)} must be True or False")
        elif op in ("$in", "$nin"):
            if isinstance(operand, (str, bytes, Mapping)) or not isinstance(operand, Sequence):
                raise ValidationError(
                    f"{_name(where)}={shown(operand)} must be a list of values, e.g. ['a', 'b']"
                )
            self.spend(len(operand), where)
            values = tuple(_check_value(section, where, value) for value in operand)
        else:
            values = (_check_value(section, where, operand),)
            if op in _COMPARE and json_family(values[0]) not in ("number", "text"):
                raise ValidationError(
                    f"{_name(where)}={shown(operand)} must be a number or a string: ranges "
                    "compare numbers with numbers and strings with strings"
                )
        positive = _POSITIVE[op]
        node: Filter
        if section == "metadata":
            node = MetadataCondition(name, positive, values)
        else:  # only $in and $exists reach here; every value was checked to be a str
            node = LabelCondition(
                name, "$exists" if positive == "$exists" else "$in", cast(tuple[str, ...], values)
            )
        negated = op in ("$ne", "$nin") or (op == "$exists" and operand is False)
        return Not(node) if negated else node


def _check_name(section: str, where: str, name: object) -> str:
    what = "key" if section == "metadata" else "name"
    if not isinstance(name, str) or not name or any(c in '"\\' or ord(c) < 0x20 for c in name):
        raise ValidationError(
            f"{_name(where)} {what} {shown(name)} must be a non-empty string without quotes, "
            "backslashes or control characters"
        )
    return check_unicode(name, f"{_name(where)} {what} {shown(name)}")


def _check_value(section: str, where: str, value: object) -> FilterValue:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(f"{_name(where)}={shown(value)} must be a finite number")
    if section == "labels" and not isinstance(value, str):
        raise ValidationError(f"{_name(where)}={shown(value)} must be a string label value")
    if value is not None and not isinstance(value, (str, int, float)):
        raise ValidationError(
            f"{_name(where)}={shown(value)} must be a string, number or boolean, or None for null"
        )
    if (
        json_family(value) == "number"
        and isinstance(value, int)
        and not -_MAX_INT < value < _MAX_INT
    ):
        raise ValidationError(
            f"{_name(where)}={shown(value)} is too large; integers must lie strictly "
            "between -2**53 and 2**53 (compare as a string or float instead)"
        )
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(
                f"{_name(where)}={shown(value)} contains a NUL character (U+0000); remove it"
            )
        check_unicode(value, _name(where))
    return value


def _all(parts: list[Filter]) -> Filter:
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def _any(parts: list[Filter]) -> Filter:
    return parts[0] if len(parts) == 1 else Or(tuple(parts))


def _at(where: str, part: str) -> str:
    return f"{where}.{part}" if where else part


def _name(where: str) -> str:
    return f"filter {where}" if where else "filter"
