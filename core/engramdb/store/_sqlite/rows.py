"""What travels between the dialect and a driver, and the item row's SQL fragments.

A plan yields lists of :class:`Statement` and receives, per statement, its rows as a list
of tuples (BLOBs as ``bytes``, NULL as ``None``). The item row itself is declared once,
dialect-neutral, in :mod:`engramdb.store.rows` (``items`` and ``item_revisions`` have its
columns; a test compares them with the live schema); here are the SQLite dialect's
fragments over it.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from engramdb._base.clock import from_ms, to_ms
from engramdb._base.types import MemoryRecord
from engramdb.store.rows import ITEM_COLUMNS, ITEM_WIDTH

__all__ = [
    "MAX_PARAMS",
    "Plan",
    "Rows",
    "Statement",
    "Transaction",
    "columns",
    "embedded_time",
    "expired",
    "expired_bound",
    "live",
    "live_bound",
]

_CREATED: Final = ITEM_COLUMNS.index("created_at")

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
``list[Rows]``: driven by ``engramdb.driver.run``/``arun`` with a driver's execute."""


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


def live_bound(table: str = "items") -> str:
    """:func:`live` with the time bound as one ``?`` parameter (``to_ms(now)``): the SQL
    text stays the same from call to call, so a driver's statement cache keeps it
    prepared (a recall's statements would otherwise be parsed and planned anew each
    time: about 0.25 ms for the BM25 statement)."""
    return f"({table}.expires_at IS NULL OR {table}.expires_at > ?)"


def expired_bound(table: str = "items") -> str:
    """:func:`expired` with the time bound as one ``?`` parameter (see :func:`live_bound`);
    the partial index ``items_scope_expiring`` still serves it."""
    return f"({table}.expires_at IS NOT NULL AND {table}.expires_at <= ?)"


def embedded_time(row: Sequence[Any], record: MemoryRecord) -> datetime | None:
    """The vector time a search row carries after its item columns (``embedded_at`` at
    ``ITEM_WIDTH``, or None): ``record``'s own ``created_at`` when it is the same stored
    millisecond as the row's ``created_at`` (a text embedded as it was stored, the
    common case), so a recall builds no second datetime per candidate of each leg."""
    value = row[ITEM_WIDTH]
    if value is None:
        return None
    return record.created_at if value == row[_CREATED] else from_ms(int(value))
