"""The dialect-neutral shape of a SQL store's data: the item row and the filter walk.

Every SQL store engramdb ships (SQLite through ``sqlite3``, D1 and Durable Objects share
one dialect in core; PostgreSQL has its own in ``engramdb.postgres``) stores an item the
same way, and so can yours:

* :data:`ITEM_COLUMNS` declares the item row ONCE: the column lists of every SELECT,
  RETURNING and INSERT, the JSON payload of item writes and the decoding of rows come
  from it. :func:`item_row` writes a ``MemoryRecord`` as those values (times as integer
  milliseconds since the epoch, metadata and labels as compact JSON text,
  :func:`as_json`; the scope as ``engramdb.store.scope_key``) and :func:`record_from`
  reads one back (a row that does not decode raises ``CorruptDataError``).
* :func:`scope_path` is a scope's sort key, whose order is the order of scope tuples.
* :func:`combined_sql` walks a parsed filter (``engramdb.store.parse_filter``) into one
  SQL expression: its ``$and``, ``$or`` and ``$not`` as ``AND``, ``OR`` and ``NOT`` of
  the expressions your dialect writes for its conditions.

Public and stable: ``docs/stores.md`` ("The driver kit"). Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, Final

from engramdb._base.clock import from_ms, to_ms
from engramdb._base.errors import CorruptDataError, ValidationError
from engramdb._base.types import MemoryRecord, Scope, scope_from_key, scope_key
from engramdb.store._filter import And, Filter, LabelCondition, MetadataCondition, Not, Or

__all__ = [
    "ITEM_COLUMNS",
    "ITEM_WIDTH",
    "as_json",
    "combined_sql",
    "decoded",
    "item_row",
    "optional_time",
    "record_from",
    "scope_path",
]

# -- the item row -------------------------------------------------------------------------

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
            f"revision={record.revision} of item {record.id!r} does not fit a 64-bit integer column"
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
        created = int(r[6])
        created_at = from_ms(created)
        updated = int(r[7])
        # Positional, in the order of MemoryRecord's fields (a test pins it): a quarter
        # cheaper than keywords, for the hundred records of each leg of a recall.
        return MemoryRecord(
            str(r[0]),  # id
            scope_from_key(r[1]),
            str(r[2]),  # text
            {} if r[3] == "{}" else json.loads(r[3]),  # metadata: most hold nothing
            {} if r[4] == "{}" else json.loads(r[4]),  # labels
            float(r[5]),  # importance
            created_at,
            created_at if updated == created else from_ms(updated),  # updated_at: most
            None if r[8] is None else from_ms(int(r[8])),  # expires_at
            int(r[9]),  # revision
            str(r[10]),  # content_sha256
        )
    except (TypeError, ValueError) as exc:
        raise CorruptDataError(
            f"the stored item {r[0]!r} does not decode ({exc}); delete or rewrite it"
        ) from exc


def decoded(rows: Iterable[Sequence[Any]]) -> tuple[list[tuple[MemoryRecord, Any]], list[str]]:
    """Each row's record with its row, and the ids of the rows whose item columns do not
    decode. A search or a listing leaves those out (a search reports them as
    ``skipped``, so the recall says ``degraded``) instead of failing for the whole scope;
    ``get`` of such an id raises ``CorruptDataError``, and ``forget`` deletes it."""
    good: list[tuple[MemoryRecord, Any]] = []
    bad: list[str] = []
    for row in rows:
        try:
            good.append((record_from(row), row))
        except CorruptDataError:
            bad.append(str(row[0]))
    return good, bad


def optional_time(value: Any) -> datetime | None:
    """A stored millisecond time, or None."""
    return None if value is None else from_ms(int(value))


# -- the filter walk ----------------------------------------------------------------------


def combined_sql(
    spec: Filter,
    condition_sql: Callable[[MetadataCondition | LabelCondition], str],
    true: str,
    false: str,
) -> str:
    """``spec`` as SQL: its $and, $or and $not as AND, OR and NOT of the expressions
    ``condition_sql`` writes for its conditions, each of which must never be NULL;
    ``true`` and ``false`` are the SQL dialect's constants (an empty And or Or)."""
    if isinstance(spec, Not):
        return f"NOT {combined_sql(spec.part, condition_sql, true, false)}"
    if isinstance(spec, (And, Or)):
        operator, empty = (" AND ", true) if isinstance(spec, And) else (" OR ", false)
        parts = [combined_sql(part, condition_sql, true, false) for part in spec.parts]
        return "(" + operator.join(parts) + ")" if parts else empty
    return condition_sql(spec)
