"""What travels between the dialect and a driver, and how an item row is read and written.

A plan yields lists of :class:`Statement` and receives, per statement, its rows as a list
of tuples (BLOBs as ``bytes``, NULL as ``None``). The item row is declared ONCE, in
:data:`ITEM_COLUMNS`: the column lists of every SELECT, RETURNING and INSERT, the JSON
payload of item writes and the decoding of rows all come from it (``items`` and
``item_revisions`` have these columns; a test compares them with the live schema).
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Final

from .._clock import from_ms, to_ms
from .._errors import CorruptDataError, ValidationError
from .._types import MemoryRecord, Scope, scope_from_key, scope_key

__all__ = [
    "ITEM_COLUMNS",
    "ITEM_WIDTH",
    "MAX_PARAMS",
    "Plan",
    "Rows",
    "Statement",
    "Transaction",
    "as_json",
    "columns",
    "expired",
    "item_row",
    "live",
    "record_from",
    "scope_path",
]

MAX_PARAMS: Final = 100
"""The most parameters one statement binds (D1 refuses more)."""

Rows = list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement and its positional ``?`` parameters (never ``None``: older
    Pyodide cannot send JS ``null``, so a NULL is written as a literal)."""

    sql: str
    params: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Transaction:
    """Statements to run as one transaction, committed at once (a migration step)."""

    statements: tuple[Statement, ...]


Plan = Generator[Any, Any, Any]
"""A generator yielding ``list[Statement]`` (or a :class:`Transaction`) and receiving
``list[Rows]``: driven by ``engramdb._trampoline.run``/``arun`` with a driver's execute."""

ITEM_COLUMNS: Final = (
    "id",
    "scope_key",
    "text",
    "metadata",
    "labels",
    "importance",
    "created_at",
    "updated_at",
    "expires_at",
    "revision",
    "content_sha256",
)
"""The columns of an item row, in the order rows are read, written and decoded."""

ITEM_WIDTH: Final = len(ITEM_COLUMNS)


def columns(table: str = "items") -> str:
    """``table.id, table.scope_key, ...``: the item columns for a SELECT or RETURNING."""
    return ", ".join(f"{table}.{name}" for name in ITEM_COLUMNS)


def live(now: datetime, table: str = "items") -> str:
    """The SQL condition "not expired at ``now``" (a literal: it binds nothing)."""
    return f"({table}.expires_at IS NULL OR {table}.expires_at > {to_ms(now)})"


def expired(now: datetime, table: str = "items") -> str:
    """The SQL condition "expired at ``now``", in the form the partial index
    ``items_scope_expiring`` serves (``NOT live`` would scan every item of a scope)."""
    return f"({table}.expires_at IS NOT NULL AND {table}.expires_at <= {to_ms(now)})"


def as_json(value: object) -> str:
    """Compact JSON, as stored and as bound for ``json_each``."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_scope_key = lru_cache(maxsize=4096)(scope_key)
_to_ms = lru_cache(maxsize=64)(to_ms)  # a batch's records share a few timestamps


def scope_path(scope: Scope) -> str:
    """The scope's sort key: its parts joined by U+001F, a control character no part
    holds. Its order is the order of scope tuples, and a prefix's descendants are the
    paths between ``path + "\\x1f"`` and ``path + "\\x20"``."""
    return "\x1f".join(scope)


def item_row(record: MemoryRecord) -> list[Any]:
    """The values of ``record`` in :data:`ITEM_COLUMNS` order, as stored."""
    if not 0 < record.revision < 2**63:  # JSON would carry a bigger one as a float
        raise ValidationError(
            f"revision={record.revision} of item {record.id!r} does not fit SQLite's 64-bit integer"
        )
    if "\x00" in record.text:  # json_extract would end the text there: refuse, never cut
        raise ValidationError(
            f"the text of item {record.id!r} contains U+0000, which cannot be stored; "
            "store a text without that character"
        )
    created = _to_ms(record.created_at)
    return [
        record.id,
        _scope_key(record.scope),
        record.text,
        "{}" if not record.metadata else as_json(record.metadata),
        "{}" if not record.labels else as_json(record.labels),
        float(record.importance),
        created,
        created if record.updated_at is record.created_at else _to_ms(record.updated_at),
        None if record.expires_at is None else _to_ms(record.expires_at),
        record.revision,
        record.content_sha256,
    ]


def record_from(row: Sequence[Any], offset: int = 0) -> MemoryRecord:
    """Decode the item columns of ``row`` starting at ``offset``."""
    r = row[offset : offset + ITEM_WIDTH]
    try:
        return MemoryRecord(
            id=str(r[0]),
            scope=scope_from_key(r[1]),
            text=str(r[2]),
            metadata={} if r[3] == "{}" else json.loads(r[3]),  # most hold nothing
            labels={} if r[4] == "{}" else json.loads(r[4]),
            importance=float(r[5]),
            created_at=from_ms(int(r[6])),
            updated_at=from_ms(int(r[7])),
            expires_at=None if r[8] is None else from_ms(int(r[8])),
            revision=int(r[9]),
            content_sha256=str(r[10]),
        )
    except (TypeError, ValueError) as exc:
        raise CorruptDataError(
            f"the stored item {r[0]!r} does not decode ({exc}); delete or rewrite it"
        ) from exc


def optional_time(value: Any) -> datetime | None:
    """A stored millisecond time, or None."""
    return None if value is None else from_ms(int(value))
