"""What the PostgreSQL store's op flows share: the query record, the context, SQL
conditions for scopes and expiry, and :func:`batch_flow`, which runs a batch's ops.

:func:`batch_flow` yields :class:`Query` objects and receives each one's rows (a list of
tuples; ``[]`` for a statement without a result). ``PostgresStore.batch`` drives it with
a psycopg ``Connection``, ``abatch`` with an ``AsyncConnection``, inside one transaction,
so a batch commits whole or not at all and its reads see its earlier writes. The ops
live in ``_items`` (writes and reads of items, vectors and spaces), ``_search`` (the
vector and lexical legs) and ``_policy`` (receipts and evidence).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import Any, Final

from engramdb import EngramError, StoreError
from engramdb.driver import from_ms, to_ms
from engramdb.store import Op, ScopeSet, check_batch, scope_key
from engramdb.store.rows import ITEM_COLUMNS, scope_path

__all__ = [
    "COLUMNS",
    "DEFAULT_EF_SEARCH",
    "HNSW_MAX_DIMENSIONS",
    "Context",
    "Flow",
    "Query",
    "Rows",
    "batch_flow",
    "dimensions_of",
    "each",
    "embedded_join",
    "hnsw_ddl",
    "hnsw_index",
    "indexed_type",
    "live_condition",
    "optional_time",
    "passing",
    "scope_condition",
    "sql_literal",
]

Rows = list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Query:
    """One SQL statement with ``%s`` parameters; with ``many``, the statement once per
    row of parameters, in order (``executemany``: psycopg pipelines them, so the rows
    cost one round trip, not one each)."""

    sql: str
    params: tuple[Any, ...] = ()
    many: tuple[tuple[Any, ...], ...] | None = None


def each(sql: str, rows: Sequence[tuple[Any, ...]]) -> Query:
    """``sql`` once per row of ``rows``: a plain query for one row, else ``many``."""
    return Query(sql, rows[0]) if len(rows) == 1 else Query(sql, many=tuple(rows))


Flow = Generator[Query, Rows, Any]

HNSW_MAX_DIMENSIONS: Final = 4000
"""pgvector's HNSW indexes ``vector`` values of up to 2,000 dimensions and ``halfvec``
ones of up to 4,000; larger spaces search exactly."""


def indexed_type(dimensions: int) -> str | None:
    """The type a space's HNSW index holds its vectors as: ``vector(d)`` (float32) up
    to 2,000 dimensions, ``halfvec(d)`` (float16: half the index, indexable up to 4,000)
    above, None past 4,000 (exact search only). The table keeps float32 either way, so
    scores are always computed from the stored vector."""
    if 0 < dimensions <= 2000:
        return f"vector({dimensions})"
    if dimensions <= HNSW_MAX_DIMENSIONS:
        return f"halfvec({dimensions})"
    return None


@dataclass(frozen=True, slots=True)
class Context:
    """What every op's flow may read: the schema version, and ``ef_search`` (None:
    pgvector's default, 40; at least ``k`` is used)."""

    schema_version: int
    ef_search: int | None = None


DEFAULT_EF_SEARCH: Final = 100
"""The candidate list of an index search unless the store sets one: pgvector's 40 gave
recall@10 0.92 at a million clustered vectors, 100 gave 0.98 for 0.2 ms more
(docs/performance-history.md, "PostgreSQL at 100k and 1M vectors")."""

HNSW_BUILD: Final = "m = 16, ef_construction = 128"
"""How each space's graph is built: pgvector's default ``m`` and twice its default
``ef_construction`` (64), which at a million clustered vectors left clusters the search
could not reach (docs/performance-history.md, "PostgreSQL at 100k and 1M vectors")."""


def hnsw_ddl(space_id: str, dimensions: int) -> str | None:
    """The ``CREATE INDEX`` of ``space_id``'s HNSW index (None: too many dimensions)."""
    kind = indexed_type(dimensions)
    if kind is None:
        return None
    operators = kind.split("(")[0] + "_cosine_ops"
    return (
        f"CREATE INDEX IF NOT EXISTS {hnsw_index(space_id)} ON engramdb_vectors "
        f"USING hnsw ((embedding::{kind}) {operators}) WITH ({HNSW_BUILD}) "
        f"WHERE space_id = {sql_literal(space_id)}"
    )


def hnsw_index(space_id: str) -> str:
    """The name of the HNSW index of ``space_id`` (a partial index per space)."""
    return "engramdb_hnsw_" + hashlib.sha256(space_id.encode()).hexdigest()[:16]


def sql_literal(text: str) -> str:
    """``text`` as an escape-string literal, ``E'...'`` (a partial index's predicate
    must be matched by a literal, not a parameter, for the planner to use it). Quotes and
    backslashes are doubled, so it reads the same whatever ``standard_conforming_strings``
    says, and ``%`` is written as the escape ``\\x25``, so a query with parameters (whose
    ``%`` psycopg reads as a placeholder) can hold it too."""
    if "\x00" in text:
        raise StoreError(f"{text!r} contains U+0000, which PostgreSQL cannot hold")
    escaped = text.replace("\\", "\\\\").replace("'", "''").replace("%", "\\x25")
    return "E'" + escaped + "'"


COLUMNS = ", ".join(f"i.{name}" for name in ITEM_COLUMNS)


def live_condition(now: datetime) -> tuple[str, tuple[Any, ...]]:
    return "(i.expires_at IS NULL OR i.expires_at > %s)", (to_ms(now),)


def scope_condition(scopes: ScopeSet) -> tuple[str, tuple[Any, ...]]:
    """The SQL condition "the item's scope is selected" and its parameters."""
    parts: list[str] = []
    params: list[Any] = []
    if scopes.exact:
        parts.append("i.scope_key = ANY(%s)")
        params.append([scope_key(s) for s in scopes.exact])
    for prefix in scopes.prefixes:
        path = scope_path(prefix)
        parts.append("(i.scope_path = %s OR (i.scope_path > %s AND i.scope_path < %s))")
        params += [path, path + "\x1f", path + "\x20"]
    if not parts:
        return "FALSE", ()
    return "(" + " OR ".join(parts) + ")", tuple(params)


def dimensions_of(space_id: str) -> Flow:
    rows = yield Query("SELECT dimensions FROM engramdb_spaces WHERE space_id = %s", (space_id,))
    return int(rows[0][0]) if rows else None


def embedded_join(space_id: str | None) -> tuple[str, str, tuple[Any, ...]]:
    """The column and join that add the embedding time of ``space_id`` to an item row."""
    if space_id is None:
        return "NULL", "", ()
    return (
        "v.embedded_at",
        "LEFT JOIN engramdb_vectors v ON v.space_id = %s AND v.content_sha256 = i.content_sha256",
        (space_id,),
    )


def optional_time(value: Any) -> datetime | None:
    return None if value is None else from_ms(int(value))


def passing(ops: Sequence[Op], check: Callable[[Any], object]) -> int:
    """How many of ``ops``, from the first, ``check`` lets through (it raises for the
    others): a set-based write writes those, then checks the next one again, so it
    raises where and what the ops one by one would."""
    for number, op in enumerate(ops):
        try:
            check(op)
        except EngramError:
            return number
    return len(ops)


def batch_flow(
    ops: Sequence[Op],
    context: Context,
    handlers: dict[type, Any],
    runs: dict[type, Any] | None = None,
) -> Flow:
    """Run ``ops`` (already inside one transaction) with ``handlers`` (op type -> flow of
    the op and ``context``); return their results in order.

    ``runs`` (op type -> flow of a list of ops and ``context``, answering a result per
    op) writes two or more consecutive ops of its type in a few statements, set-based,
    with the same checks, effects and results as those ops one by one (a restore's
    thousands of ``RestoreItem`` and ``PutVector`` ops would otherwise cost a round trip
    per statement)."""
    check_batch(ops)
    results: list[Any] = []
    for kind, grouped in groupby(ops, key=type):
        group = list(grouped)
        run = (runs or {}).get(kind)
        if run is not None and len(group) > 1:
            results += yield from run(group, context)
            continue
        for op in group:
            handler = handlers.get(type(op))
            if handler is None:
                raise StoreError(f"PostgresStore does not know the op {op!r}")
            results.append((yield from handler(op, context)))
    return results
