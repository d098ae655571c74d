"""Recall filters: equality on metadata fields and labels.

A filter is a mapping with up to two keys::

    {"metadata": {"src": "chat", "turn": 3}, "labels": {"topic": "food"}}

``metadata`` keys match a top-level metadata field equal to the value; ``labels`` keys
match when the label list contains the value. A value may also be written
``{"$eq": value}``. Values are strings, integers, finite floats or booleans. Every
condition must hold (AND). Anything else is a ``ValidationError`` naming the bad part.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ._errors import ValidationError
from ._types import MemoryRecord, check_unicode

__all__ = ["Filter", "FilterValue", "parse_filter"]

FilterValue = str | int | float | bool
_SECTIONS = ("metadata", "labels")
_OPERATORS = ("$eq",)
_MAX_INT = 2**53  # SQL stores bind 64-bit (sqlite3) or double (D1) integers


@dataclass(frozen=True, slots=True)
class Filter:
    """A validated filter: equality conditions on metadata fields and labels."""

    metadata: tuple[tuple[str, FilterValue], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()

    def matches(self, record: MemoryRecord) -> bool:
        """Whether ``record`` satisfies every condition."""
        for key, value in self.metadata:
            if key not in record.metadata or not _same(record.metadata[key], value):
                return False
        return all(value in record.labels.get(key, ()) for key, value in self.labels)


def _same(stored: object, wanted: FilterValue) -> bool:
    # JSON has no separate bool type in SQLite's json_extract (true -> 1), so compare
    # bools and numbers by type family to keep the in-memory and SQL answers equal.
    if isinstance(wanted, bool) or isinstance(stored, bool):
        return isinstance(stored, bool) and isinstance(wanted, bool) and stored == wanted
    if isinstance(wanted, str) or isinstance(stored, str):
        return stored == wanted
    return isinstance(stored, (int, float)) and stored == wanted


def _check_key(section: str, key: object) -> str:
    if (
        not isinstance(key, str)
        or not key
        or any(c in key for c in '"\\')
        or any(ord(c) < 0x20 for c in key)
    ):
        raise ValidationError(
            f"filter key {key!r} in {section!r} must be a non-empty string without quotes, "
            "backslashes or control characters"
        )
    return check_unicode(key, f"filter key in {section!r}")


def _check_value(section: str, key: str, value: object) -> FilterValue:
    if isinstance(value, Mapping):
        if len(value) != 1 or next(iter(value)) not in _OPERATORS:
            raise ValidationError(
                f"filter {section}.{key} uses unknown operator(s) {sorted(map(str, value))}; "
                f"the supported operators are {list(_OPERATORS)}"
            )
        value = value["$eq"]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(f"filter {section}.{key}={value!r} must be a finite number")
    if not isinstance(value, (str, int, float)):
        raise ValidationError(
            f"filter {section}.{key}={value!r} must be a string, number or boolean"
        )
    if isinstance(value, int) and not isinstance(value, bool) and not -_MAX_INT < value < _MAX_INT:
        raise ValidationError(
            f"filter {section}.{key}={value!r} is too large; integers must lie strictly "
            "between -2**53 and 2**53 (compare as a string or float instead)"
        )
    if isinstance(value, str):
        check_unicode(value, f"filter {section}.{key}")
    if section == "labels" and not isinstance(value, str):
        raise ValidationError(f"filter labels.{key}={value!r} must be a string label value")
    return value


def parse_filter(spec: object) -> Filter | None:
    """Validate a user filter; ``None`` or ``{}`` mean no filter."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ValidationError(
            f"filter={spec!r} must be a mapping like {{'metadata': {{'src': 'chat'}}}}"
        )
    unknown = [key for key in spec if key not in _SECTIONS]
    if unknown:
        raise ValidationError(
            f"filter has unknown key(s) {unknown}; use 'metadata' and/or 'labels'"
        )
    parts: dict[str, list[tuple[str, FilterValue]]] = {"metadata": [], "labels": []}
    for section in _SECTIONS:
        conditions = spec.get(section, {})
        if not isinstance(conditions, Mapping):
            raise ValidationError(
                f"filter[{section!r}]={conditions!r} must be a mapping of field to value"
            )
        for key, value in conditions.items():
            checked = _check_key(section, key)
            parts[section].append((checked, _check_value(section, checked, value)))
    if not parts["metadata"] and not parts["labels"]:
        return None
    return Filter(
        metadata=tuple(sorted(parts["metadata"], key=lambda kv: kv[0])),
        labels=tuple(sorted(((k, str(v)) for k, v in parts["labels"]), key=lambda kv: kv[0])),
    )
