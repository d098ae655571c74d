"""LangGraph items as engramdb records, and LangGraph's value filters.

An item ``(namespace, key, value)`` is one record in the namespace's scope, its id
derived from the namespace and the key (so a put of an existing key is the record's next
revision), its metadata ``{"key": key, "value": value, "indexed": bool, "ttl": minutes}``.
Its text is the first text its index fields give (the item is embedded from it); every
further text is a *part* record of the same scope, metadata ``{"part_of": id}``, so that
an item is scored by its best text, as LangGraph scores it. An item without texts
(``index=False``, no index, or no field present) holds the value's JSON as its text and
``"indexed": False``: a search never scores it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from engramdb import MemoryRecord, Scope
from engramdb.store import content_sha256
from langgraph.store.base import Item, SearchItem, get_text_at_path, tokenize_path

from ._namespaces import namespace_of

__all__ = [
    "FILTER_OPERATORS",
    "check_filter",
    "item_id",
    "item_of",
    "item_records",
    "matches",
    "part_id",
    "search_item_of",
    "texts_of",
]

FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_FILTER_KEY = re.compile(r"^[a-zA-Z0-9_.-]+$")


def item_id(namespace: Sequence[str], key: str) -> str:
    """The record id of the item ``key`` of ``namespace``."""
    digest = hashlib.sha256(json.dumps([list(namespace), key]).encode()).hexdigest()
    return f"lg-{digest[:40]}"


def part_id(id: str, position: int) -> str:
    return f"{id}-{position}"


def texts_of(value: Mapping[str, Any], fields: Sequence[str]) -> list[str]:
    """The texts LangGraph embeds for ``value`` with the field paths ``fields``
    (``"$"``: the whole value as JSON), without blank ones, each once."""
    texts: list[str] = []
    for path in fields:
        tokens = path if path == "$" else tokenize_path(path)
        texts.extend(get_text_at_path(value, tokens))
    return [text for text in dict.fromkeys(texts) if text.strip()]


def item_records(
    scope: Scope,
    namespace: Sequence[str],
    key: str,
    value: dict[str, Any],
    texts: Sequence[str],
    ttl: float | None,
    now: datetime,
) -> list[MemoryRecord]:
    """The records of one item: the item, then one part per further text."""
    id = item_id(namespace, key)
    expires_at = None if ttl is None else now + timedelta(minutes=ttl)
    main_text = texts[0] if texts else json.dumps(value, sort_keys=True, ensure_ascii=False)
    metadata = {"key": key, "value": value, "indexed": bool(texts), "ttl": ttl}
    records = [_record(id, scope, main_text, metadata, now, expires_at)]
    for position, text in enumerate(texts[1:], start=1):
        part: dict[str, object] = {"key": key, "part_of": id}
        records.append(_record(part_id(id, position), scope, text, part, now, expires_at))
    return records


def _record(
    id: str,
    scope: Scope,
    text: str,
    metadata: dict[str, object],
    now: datetime,
    expires_at: datetime | None,
) -> MemoryRecord:
    return MemoryRecord(
        id=id,
        scope=scope,
        text=text,
        metadata=metadata,
        created_at=now,
        updated_at=now,
        expires_at=expires_at,
        content_sha256=content_sha256(text),
    )


def item_of(record: MemoryRecord, namespace: tuple[str, ...]) -> Item:
    """The LangGraph item a record holds."""
    key, value = _key_value(record)
    return Item(
        value=value,
        key=key,
        namespace=namespace,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def search_item_of(record: MemoryRecord, score: float | None) -> SearchItem:
    """The LangGraph search hit a record holds."""
    key, value = _key_value(record)
    namespace = namespace_of(record.scope)
    return SearchItem(namespace, key, value, record.created_at, record.updated_at, score)


def _key_value(record: MemoryRecord) -> tuple[str, dict[str, Any]]:
    key, value = record.metadata["key"], record.metadata["value"]
    assert isinstance(key, str) and isinstance(value, dict)
    return key, value


# -- filters ------------------------------------------------------------------------------


def check_filter(spec: object) -> None:
    """Refuse a filter LangGraph's stores refuse: not a dict, a key that is not a path of
    letters, digits, ``_``, ``-`` and ``.``, or an unknown operator."""
    if spec is None:
        return
    if not isinstance(spec, Mapping):
        raise ValueError(f"filter={spec!r} must be a dict of value paths to conditions")
    for key, condition in spec.items():
        if not isinstance(key, str) or not _FILTER_KEY.match(key):
            raise ValueError(
                f"Invalid filter key: {key!r}. Filter keys must contain only alphanumeric "
                "characters, underscores, dots, and hyphens."
            )
        if isinstance(condition, Mapping) and any(str(k).startswith("$") for k in condition):
            unknown = sorted(str(k) for k in condition if k not in FILTER_OPERATORS)
            if unknown:
                raise ValueError(
                    f"filter[{key!r}] uses the operators {unknown}; use "
                    f"{sorted(FILTER_OPERATORS)} or a plain value for equality"
                )


def matches(value: Mapping[str, Any], spec: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` matches every condition of a (checked) filter."""
    if not spec:
        return True
    return all(_compare(_at_path(value, key), want) for key, want in spec.items())


_MISSING = object()


def _at_path(value: Any, path: str) -> Any:
    for step in path.split("."):
        if not isinstance(value, Mapping) or step not in value:
            return _MISSING
        value = value[step]
    return value


def _compare(have: Any, want: Any) -> bool:
    if isinstance(want, Mapping):
        if any(str(k).startswith("$") for k in want):
            return all(_operator(have, op, arg) for op, arg in want.items())
        if not isinstance(have, Mapping):
            return False
        return all(_compare(have.get(k, _MISSING), v) for k, v in want.items())
    if isinstance(want, list | tuple):
        return (
            isinstance(have, list | tuple)
            and len(have) == len(want)
            and all(_compare(h, w) for h, w in zip(have, want, strict=True))
        )
    return have is not _MISSING and _equal(have, want)


def _equal(have: Any, want: Any) -> bool:
    if isinstance(have, bool) or isinstance(want, bool):
        return isinstance(have, bool) and isinstance(want, bool) and have == want
    return bool(have == want)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _operator(have: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return have is not _MISSING and _equal(have, arg)
    if op == "$ne":
        return have is _MISSING or not _equal(have, arg)
    if _number(have) and _number(arg):
        left, right = float(have), float(arg)
        if math.isnan(left) or math.isnan(right):
            return False
    elif isinstance(have, str) and isinstance(arg, str):
        left, right = have, arg  # type: ignore[assignment]
    else:
        return False
    if op == "$gt":
        return left > right
    if op == "$gte":
        return left >= right
    if op == "$lt":
        return left < right
    return left <= right
