"""LangGraph namespaces as engramdb scopes, and LangGraph's namespace listing rules.

A namespace label becomes the scope part of the same text when that text is a valid
scope part. A label that is not (whitespace only, or holding a control character such
as a newline) becomes ``"."`` followed by its percent-encoding: LangGraph labels never
hold a ``"."``, so a part that starts with one is always an encoded label and the
mapping is exact both ways.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import quote, unquote

from engramdb import Scope, ValidationError
from engramdb.validate import validate_scope
from langgraph.store.base import InvalidNamespaceError, MatchCondition

__all__ = [
    "namespace_of",
    "prefix_scope",
    "scope_of",
    "select_namespaces",
    "wildcard_free_prefix",
]

Namespace = tuple[str, ...]


def _part(label: str) -> str:
    try:
        validate_scope((label,))
    except ValidationError:
        return "." + quote(label, safe="")
    return label


def _label(part: str) -> str:
    return unquote(part[1:]) if part.startswith(".") else part


def scope_of(namespace: Sequence[str]) -> Scope:
    """The scope of a (validated, non-empty) namespace, or ``InvalidNamespaceError``
    when engramdb cannot hold it (more than 16 labels, or a label over 256 characters
    once encoded)."""
    parts = tuple(_part(label) for label in namespace)
    try:
        return validate_scope(parts)
    except ValidationError as exc:
        raise InvalidNamespaceError(
            f"namespace {tuple(namespace)!r} cannot be stored in engramdb ({exc}); "
            "use at most 16 labels of at most 256 characters"
        ) from None


def prefix_scope(prefix: Sequence[str]) -> Scope | None:
    """The scope of a search or listing prefix, or None when no namespace engramdb
    holds can start with it (so the answer is empty)."""
    try:
        return scope_of(prefix)
    except InvalidNamespaceError:
        return None


def namespace_of(scope: Scope) -> Namespace:
    """The namespace a scope holds."""
    return tuple(_label(part) for part in scope)


def wildcard_free_prefix(conditions: Iterable[MatchCondition]) -> Namespace:
    """The labels a prefix condition fixes before its first ``"*"`` (``()``: none)."""
    for condition in conditions:
        if condition.match_type == "prefix":
            fixed = []
            for label in condition.path:
                if label == "*":
                    break
                fixed.append(label)
            return tuple(fixed)
    return ()


def _matches(condition: MatchCondition, namespace: Namespace) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(want in ("*", have) for have, want in pairs)


def select_namespaces(
    namespaces: Iterable[Namespace],
    conditions: Sequence[MatchCondition],
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[Namespace]:
    """LangGraph's listing: the namespaces matching every condition, cut to
    ``max_depth`` labels (duplicates merged), sorted, then the page
    ``[offset:offset + limit]``."""
    kept = [ns for ns in namespaces if all(_matches(c, ns) for c in conditions)]
    if max_depth is not None:
        kept = list({ns[:max_depth] for ns in kept})
    return sorted(kept)[offset : offset + limit]
