"""What the per-op plans share: the plan type and the SQL fragments for scopes, filters
and the vector time of a space."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from engramdb._base.errors import ValidationError
from engramdb._base.types import scope_key
from engramdb.store import ScopeSet
from engramdb.store._filter import Filter
from engramdb.store._sqlite.filters import MAX_FILTER_SQL_BYTES, filter_sql
from engramdb.store._sqlite.rows import Rows, Statement
from engramdb.store.rows import as_json, scope_path

__all__ = [
    "Finish",
    "Planned",
    "chunks",
    "embedded_join",
    "no_result",
    "scope_condition",
    "where_filter",
]

Finish = Callable[[list[Rows]], Any]
Planned = tuple[list[Statement], Finish]
"""A plan: the statements of an op (or a run of ops) and the function from their rows
to its result."""


def scope_condition(
    scopes: ScopeSet, column: str = "items.scope_key"
) -> tuple[str, tuple[Any, ...]]:
    """SQL true exactly for the scope keys ``scopes`` selects (prefixes by whole parts)."""
    parts: list[str] = []
    params: list[Any] = []
    if scopes.exact:
        parts.append(f"{column} IN (SELECT value FROM json_each(?))")
        params.append(as_json([scope_key(scope) for scope in scopes.exact]))
    if scopes.prefixes:
        parts.append(
            f"{column} IN (SELECT scopes.scope_key FROM scopes, json_each(?) AS prefix "
            "WHERE scopes.path = prefix.value OR (scopes.path > prefix.value || char(31) "
            "AND scopes.path < prefix.value || char(32)))"
        )
        params.append(as_json([scope_path(prefix) for prefix in scopes.prefixes]))
    return ("(" + " OR ".join(parts) + ")" if parts else "0"), tuple(params)


def where_filter(spec: Filter | None) -> str:
    """`` AND <filter>``, or nothing. The filter binds nothing (keys and values are SQL
    literals), so only D1's statement length bounds it."""
    if spec is None:
        return ""
    sql = filter_sql(spec)
    size = len(sql.encode("utf-8"))
    if size > MAX_FILTER_SQL_BYTES:
        raise ValidationError(
            f"the filter is {size} bytes as SQL, over the limit of {MAX_FILTER_SQL_BYTES} "
            "(D1 refuses longer statements); use fewer conditions or shorter keys and values"
        )
    return " AND " + sql


def embedded_join(space_id: str | None) -> tuple[str, str, tuple[Any, ...]]:
    """(column, join, params) that add the vector time of ``space_id`` to an item query."""
    if space_id is None:
        return "NULL", "", ()
    return (
        "vectors.embedded_at",
        " LEFT JOIN vectors ON vectors.space_id = ? "
        "AND vectors.content_sha256 = items.content_sha256",
        (space_id,),
    )


def chunks(values: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """``values`` in slices of ``size`` (at least 1)."""
    for start in range(0, len(values), max(1, size)):
        yield values[start : start + max(1, size)]


def no_result(rows: list[Rows]) -> None:
    """The finish of a plan whose op answers None."""
    return None
