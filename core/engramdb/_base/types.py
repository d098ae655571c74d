"""Records, hits, embedding spaces and scopes: the data engramdb hands you."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Literal, NotRequired, TypedDict, TypeGuard, overload

from engramdb._base.errors import ValidationError, shown

__all__ = [
    "ContextUtility",
    "EmbedKind",
    "EmbeddingSpace",
    "Evidence",
    "Hit",
    "Hits",
    "MemoryRecord",
    "RecallMode",
    "RecallStatus",
    "Remembered",
    "Scope",
    "ScopePrefix",
    "Utility",
    "check_unicode",
    "content_sha256",
    "is_finite_number",
    "scope_from_key",
    "scope_key",
    "utf8",
    "validate_scope",
]

Scope = tuple[str, ...]
EmbedKind = Literal["document", "query"]
RecallMode = Literal["hybrid", "vector", "lexical"]
RecallStatus = Literal["used", "partial", "degraded", "lexical_only"]


@dataclass(frozen=True, slots=True)
class EmbeddingSpace:
    """The identity of a set of comparable vectors: provider, model and dimensions.

    ``variant`` distinguishes settings of one model that give incomparable vectors
    (a prompt set, a task-type set). Vectors of different spaces are never compared.
    """

    provider: str
    model: str
    dimensions: int
    variant: str | None = None

    def __post_init__(self) -> None:
        for name in ("provider", "model"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or any(c in value for c in "@#\n"):
                raise ValidationError(
                    f"EmbeddingSpace {name}={value!r} must be a non-empty string without "
                    "'@', '#' or newlines"
                )
        if isinstance(self.dimensions, bool) or not isinstance(self.dimensions, int):
            raise ValidationError(
                f"EmbeddingSpace dimensions={self.dimensions!r} must be an int; pass e.g. 384"
            )
        if not 1 <= self.dimensions <= 65_536:
            raise ValidationError(
                f"EmbeddingSpace dimensions={self.dimensions} is out of range; use 1..65536"
            )

    @classmethod
    def from_id(cls, space_id: str) -> EmbeddingSpace:
        """The space of ``space_id`` (``provider/model@dimensions#variant``, as
        :attr:`id` writes it): ``from_id(space.id).id == space.id``. A string of another
        form raises ``ValidationError``."""
        base, _, variant = space_id.partition("#") if isinstance(space_id, str) else ("", "", "")
        name, _, dimensions = base.rpartition("@")
        provider, _, model = name.partition("/")
        # ASCII digits only ("²" is a digit to str.isdigit, not to int), and few of them
        if (
            not (provider and model and dimensions.isascii() and dimensions.isdigit())
            or len(dimensions) > 9
        ):
            raise ValidationError(
                f"space_id {shown(space_id)} is not of the form provider/model@N "
                "(e.g. 'openai/text-embedding-3-small@1536')"
            )
        return cls(provider, model, int(dimensions), variant or None)

    @property
    def id(self) -> str:
        """Stable string id, e.g. ``openai/text-embedding-3-small@1536``."""
        base = f"{self.provider}/{self.model}@{self.dimensions}"
        return f"{base}#{self.variant}" if self.variant else base

    def __str__(self) -> str:
        return self.id


_MAX_SCOPE_PARTS = 16
_MAX_SCOPE_PART = 256
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1


def validate_scope(scope: object) -> Scope:
    """Return ``scope`` as a tuple of strings, or raise ``ValidationError``.

    A scope is a non-empty tuple (or list) of 1..16 non-empty strings of at most 256
    characters without control characters, e.g. ``("acme", "user", "u42")``.
    """
    if type(scope) is tuple and all(type(part) is str for part in scope):
        return _valid_tuple(scope)  # checked once per distinct scope
    return _checked_scope(scope)


@functools.lru_cache(maxsize=4096)
def _valid_tuple(scope: tuple[str, ...]) -> Scope:
    return _checked_scope(scope)


def _checked_scope(scope: object) -> Scope:
    """:func:`validate_scope`, checked part by part."""
    if isinstance(scope, str) or not isinstance(scope, (tuple, list)):
        raise ValidationError(
            f"scope={shown(scope)} must be a tuple of strings, e.g. ('acme', 'user', 'u42')"
        )
    if not scope or len(scope) > _MAX_SCOPE_PARTS:
        raise ValidationError(
            f"scope={shown(tuple(scope))} must have 1 to {_MAX_SCOPE_PARTS} parts, "
            "e.g. ('acme', 'user', 'u42')"
        )
    for part in scope:
        if not isinstance(part, str) or not part.strip():
            raise ValidationError(
                f"scope part {shown(part)} in {shown(tuple(scope))} must be a non-empty string"
            )
        if len(part) > _MAX_SCOPE_PART:
            raise ValidationError(
                f"scope part {part[:20]!r}... is {len(part)} characters; "
                f"use at most {_MAX_SCOPE_PART}"
            )
        if _CONTROL.search(part):
            raise ValidationError(
                f"scope part {shown(part)} contains a control character; remove it"
            )
        check_unicode(part, "scope part")
    return tuple(scope)


@dataclass(frozen=True, slots=True)
class ScopePrefix:
    """A scope and every scope under it, matched by whole parts.

    ``ScopePrefix(("acme", "user"))`` selects ``("acme", "user")`` and
    ``("acme", "user", "u42")`` but never ``("acme", "username")``. Pass it where a call
    takes scopes (``recall(..., scopes=[ScopePrefix(...)])``, ``list(ScopePrefix(...))``):
    selections are exact unless you ask for a prefix.
    """

    scope: Scope

    def __post_init__(self) -> None:
        object.__setattr__(self, "scope", validate_scope(self.scope))


def utf8(value: str, what: str) -> bytes:
    """``value`` as UTF-8, or ``ValidationError`` if it holds a lone surrogate."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{what} has a lone surrogate {value[exc.start : exc.end]!r} at position "
            f"{exc.start}, which is not valid Unicode text; fix or re-decode the input"
        ) from None


def is_finite_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is an ``int`` or a finite ``float`` (``bool`` is not a number here).
    An ``int`` of any size qualifies: compare it with bounds before ``float()``, which
    raises ``OverflowError`` past 1.8e308 (as ``math.isfinite`` does on such an int)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def check_unicode(value: str, what: str) -> str:
    """Return ``value``, or raise ``ValidationError`` if it cannot be UTF-8 (see :func:`utf8`)."""
    if not value.isascii():  # ASCII text holds no surrogate
        utf8(value, what)
    return value


def content_sha256(text: str) -> str:
    """The hex SHA-256 of ``text``'s UTF-8: the content address of its vectors."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def scope_key(scope: Scope) -> str:
    """The exact, unambiguous string key of a validated scope (a compact JSON array)."""
    if type(scope) is tuple:
        try:
            return _tuple_key(scope)  # a scope is immutable: encoded once per scope
        except TypeError:  # an unhashable part: json.dumps says what it makes of it
            pass
    return json.dumps(list(scope), ensure_ascii=False, separators=(",", ":"))


@functools.lru_cache(maxsize=4096)
def _tuple_key(scope: tuple[str, ...]) -> str:
    return json.dumps(list(scope), ensure_ascii=False, separators=(",", ":"))


@functools.lru_cache(maxsize=4096)
def scope_from_key(key: str) -> Scope:
    """Inverse of :func:`scope_key` (a scope is immutable: decoded once per key)."""
    return tuple(json.loads(key))


@dataclass(frozen=True, slots=True)
class ContextUtility:
    """The evaluations of a memory given in one label context (``key``)."""

    key: str
    eval_count: int
    eval_sum: float
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Utility:
    """What the use of a memory has shown, kept as aggregates only (never a prompt or a
    conversation): see ``docs/policy.md``.

    ``exposures``: how many recalls through a bound view returned it, the last at
    ``last_exposed_at``. ``eval_count``/``eval_sum``: the evaluations of those recalls
    (``complete()``), each selection's score shared equally by its memories.
    ``manual``: the value set by ``feedback()``, in [-1, 1], at ``manual_updated_at``.
    ``reinforced_at``: the last positive evaluation or feedback. ``contexts``: the
    evaluations per label context, the most recently updated first.
    """

    exposures: int = 0
    last_exposed_at: datetime | None = None
    eval_count: int = 0
    eval_sum: float = 0.0
    manual: float | None = None
    manual_updated_at: datetime | None = None
    reinforced_at: datetime | None = None
    contexts: tuple[ContextUtility, ...] = ()

    def value(self, context: str = "") -> float:
        """The usefulness this evidence shows, in [-1, 1] (0: none): the manual value when
        set, else the mean evaluation (of ``context`` when it has some there), shrunk
        toward 0 by two phantom neutral evaluations, so one evaluation is not a verdict."""
        if self.manual is not None:
            return self.manual
        count, total = self.eval_count, self.eval_sum
        for summary in self.contexts:
            if context and summary.key == context:
                count, total = summary.eval_count, summary.eval_sum
        return max(-1.0, min(1.0, total / (count + 2))) if count else 0.0


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One remembered text and everything known about it.

    ``utility`` is filled by ``get()`` (and on the hits of a recall that needs it); it is
    not part of a record's identity, so it is left out of comparisons.
    """

    id: str
    scope: Scope
    text: str
    metadata: dict[str, object] = field(default_factory=dict)
    labels: dict[str, list[str]] = field(default_factory=dict)
    importance: float = 0.5
    created_at: datetime = datetime.min
    updated_at: datetime = datetime.min
    expires_at: datetime | None = None
    revision: int = 1
    content_sha256: str = ""
    utility: Utility | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, eq=False)
class Remembered(MemoryRecord):
    """The record a bound view's ``remember()`` stored, and ``dropped``: how many older
    (or, with reinforcement, less useful) memories its scope's capacity (``max_items``)
    dropped in the same atomic write. It equals the :class:`MemoryRecord` it extends."""

    dropped: int = 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MemoryRecord):
            return NotImplemented
        return all(
            getattr(self, f.name) == getattr(other, f.name)
            for f in fields(MemoryRecord)
            if f.compare
        )

    __hash__ = None  # type: ignore[assignment]


class Evidence(TypedDict):
    """Where a hit came from: enough to audit it and to cite it. ``vector_share`` and
    ``lexical_share`` are each leg's part of a hybrid hit's fused score (its weight
    times its score on the leg's absolute scale; None for a leg that did not score the
    hit, or outside hybrid mode). ``rerank_score`` is the rerank stage's score of the
    hit (None when the stage did not re-score it). A recall always sets all three; a
    hand-made ``Evidence`` may leave them out."""

    id: str
    scope: Scope
    revision: int
    content_sha256: str
    space_id: str | None
    embedded_at: datetime | None
    vector_share: NotRequired[float | None]
    lexical_share: NotRequired[float | None]
    rerank_score: NotRequired[float | None]


@dataclass(frozen=True, slots=True)
class Hit:
    """A recalled memory with its scores and the evidence behind them.

    ``score`` is the final fused score (higher is better). ``similarity`` is the cosine
    similarity to the query (None when the vector leg did not score it);
    ``vector_rank`` / ``lexical_rank`` are 1-based ranks in each leg (None when absent);
    ``bm25`` is the lexical relevance, higher is better (None when absent).
    ``boosts`` names each policy factor the score was multiplied by (``utility``,
    ``recency``); ``retention`` is the memory's retention under forgetting (1.0 when
    forgetting is off). ``context`` holds, for a turn of a conversation, the turns
    around it in its conversation and scope, in turn order, when the recall asked for
    them (``recall(..., context=N)``; ``docs/conversations.md``); else it is empty.
    """

    memory: MemoryRecord
    score: float
    similarity: float | None
    vector_rank: int | None
    lexical_rank: int | None
    bm25: float | None
    evidence: Evidence
    boosts: dict[str, float] = field(default_factory=dict)
    retention: float = 1.0
    context: tuple[MemoryRecord, ...] = ()


class Hits(Sequence[Hit]):
    """The result of a recall: a sequence of :class:`Hit`, best first.

    ``status`` is ``"used"`` (both legs as asked, the vector leg over every selected
    memory), ``"partial"`` (the vector leg could score only part of the selected memories:
    the others are pending, or embedded in another space; ``coverage`` is the share it
    could score), ``"degraded"`` (the provider could not embed the query, so the lexical
    leg answered alone; or some stored vectors do not decode and their items were skipped
    until ``reindex()``; or the rerank stage failed and the fused order stands;
    ``error`` names the error class, ``"rerank: ..."`` for the rerank stage's) or
    ``"lexical_only"`` (the
    lexical leg was asked for). ``coverage`` is None when the vector leg did not run.
    ``selection_id`` names this recall for later feedback (``complete()``); it is None
    when the store is open read-only (``capabilities.read_only``): such a recall writes
    no receipt, and ``error`` says so (``"read-only: ..."``, after the search's own error
    if it has one) while ``status`` still describes the search.
    """

    __slots__ = ("_hits", "coverage", "error", "mode", "selection_id", "status")

    def __init__(
        self,
        hits: Sequence[Hit],
        *,
        status: RecallStatus,
        selection_id: str | None,
        mode: RecallMode,
        error: str | None = None,
        coverage: float | None = None,
    ) -> None:
        self._hits = tuple(hits)
        self.status: RecallStatus = status
        self.selection_id = selection_id
        self.mode: RecallMode = mode
        self.error = error
        self.coverage = coverage

    @overload
    def __getitem__(self, index: int) -> Hit: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Hit]: ...
    def __getitem__(self, index: int | slice) -> Hit | Sequence[Hit]:
        return self._hits[index]

    def __len__(self) -> int:
        return len(self._hits)

    def __iter__(self) -> Iterator[Hit]:
        return iter(self._hits)

    def __repr__(self) -> str:
        return (
            f"Hits({len(self._hits)} hits, status={self.status!r}, mode={self.mode!r}, "
            f"selection_id={self.selection_id!r})"
        )
