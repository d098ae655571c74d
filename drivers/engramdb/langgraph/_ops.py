"""LangGraph ops, checked as LangGraph checks them, before any op of a batch runs.

:func:`check_ops` raises on the first bad op (``InvalidNamespaceError`` for a namespace,
``ValueError`` for anything else, each naming the value and the fix) and otherwise
returns each op with what the batch needs of it, so that a bad op changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from engramdb import Scope, ValidationError
from engramdb.validate import Validator
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchOp,
    validate_op_namespace,
)

from ._embeddings import Index
from ._namespaces import scope_of
from ._values import check_filter, texts_of

__all__ = ["CheckedPut", "check_ops"]


@dataclass(frozen=True, slots=True)
class CheckedPut:
    """A put (``value`` None: a delete) with its scope and the texts to embed."""

    namespace: tuple[str, ...]
    scope: Scope
    key: str
    value: dict[str, Any] | None
    texts: tuple[str, ...]
    ttl: float | None


Checked: TypeAlias = "GetOp | SearchOp | ListNamespacesOp | CheckedPut"


def check_ops(
    ops: Iterable[Op], index: Index | None, validator: Validator, supports_ttl: bool
) -> list[Checked]:
    return [_check(op, index, validator, supports_ttl) for op in ops]


def _count(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}={value!r} must be an integer of at least {low}")


def _check(op: object, index: Index | None, validator: Validator, supports_ttl: bool) -> Checked:
    if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
        raise ValueError(
            f"Unknown operation type: {type(op).__name__}; pass GetOp, PutOp, SearchOp or "
            "ListNamespacesOp"
        )
    validate_op_namespace(op)
    if isinstance(op, GetOp):
        if not isinstance(op.key, str):
            raise ValueError(f"key={op.key!r} must be a string")
        return op._replace(namespace=tuple(op.namespace))
    if isinstance(op, SearchOp):
        check_filter(op.filter)
        _count("limit", op.limit, 0)
        _count("offset", op.offset, 0)
        if op.query is not None and not isinstance(op.query, str):
            raise ValueError(f"query={op.query!r} must be a string or None")
        return op._replace(namespace_prefix=tuple(op.namespace_prefix))
    if isinstance(op, ListNamespacesOp):
        for condition in op.match_conditions or ():
            if condition.match_type not in ("prefix", "suffix"):
                raise ValueError(
                    f"match_type={condition.match_type!r} must be 'prefix' or 'suffix'"
                )
        if op.max_depth is not None:
            _count("max_depth", op.max_depth, 1)
        _count("limit", op.limit, 0)
        _count("offset", op.offset, 0)
        return op
    return _check_put(op, index, validator, supports_ttl)


def _check_put(
    op: PutOp, index: Index | None, validator: Validator, supports_ttl: bool
) -> CheckedPut:
    namespace = tuple(op.namespace)
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    scope = scope_of(namespace)
    if not isinstance(op.key, str):
        raise ValueError(f"key={op.key!r} must be a string")
    ttl = op.ttl
    if ttl is not None:
        if not supports_ttl:
            raise NotImplementedError(
                "TTL is not supported by this EngramStore's store; use a store with "
                "supports_ttl (InMemoryStore, SqliteStore, PostgresStore) or ttl=None"
            )
        if (
            isinstance(ttl, bool)
            or not isinstance(ttl, int | float)
            or not (math.isfinite(ttl) and ttl > 0)
        ):
            raise ValueError(f"ttl={ttl!r} must be a positive number of minutes, or None")
        ttl = float(ttl)
    if op.value is None:
        return CheckedPut(namespace, scope, op.key, None, (), None)
    if not isinstance(op.value, Mapping):
        raise ValueError(f"value={op.value!r} must be a dict (JSON object), or None to delete")
    if (
        op.index is not None
        and op.index is not False
        and (
            not isinstance(op.index, list | tuple) or not all(isinstance(f, str) for f in op.index)
        )
    ):
        raise ValueError(f"index={op.index!r} must be None, False or a list of field paths")
    try:
        value = validator.metadata({"value": dict(op.value)})["value"]
        assert isinstance(value, dict)
        texts: list[str] = []
        if index is not None and op.index is not False:
            fields = index.fields if op.index is None else tuple(op.index)
            texts = [validator.text(t, "an indexed text") for t in texts_of(value, fields)]
    except ValidationError as exc:
        raise ValueError(
            f"the value of {namespace!r} / {op.key!r} cannot be stored: {exc}"
        ) from None
    return CheckedPut(namespace, scope, op.key, value, tuple(texts), ttl)
