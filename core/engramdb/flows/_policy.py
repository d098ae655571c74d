"""Memory policy: how the evidence of use changes what a bound view's recall returns.

Every rule here is off or neutral by default and bounded when on (``docs/policy.md``):

- **Reinforcement** multiplies a hit's score by ``1 + 0.25 * u``, where ``u`` in [-1, 1]
  is the memory's :meth:`~engramdb.Utility.value` (in the recall's label context when
  it has evidence there): a factor between 0.75 and 1.25.
- **Forgetting** multiplies it by the memory's retention, ``0.5 ** (age / half_life')``:
  ``age`` runs from the memory's last update (or, with reinforcement, its last positive
  evidence), and ``half_life' = half_life * (0.5 + importance)``, times ``2 ** u`` with
  reinforcement. A memory whose retention is below ``suppress_below`` is not returned
  (``get()`` still returns it).
- **Recency** multiplies it by ``1 + recency_weight * 0.5 ** (age / recency_half_life)``.
- **Diversity** (``diversity`` = λ < 1) re-orders the hits by maximal marginal relevance:
  each next hit maximises ``λ * score - (1 - λ) * overlap`` with the hits already taken
  (overlap: the Jaccard similarity of their word sets).

Each factor multiplies the hit's :func:`relevance` (every candidate with evidence of
relevance has a positive one). The rules only re-order and drop the candidates the legs
found, so they never add a
memory of another scope, one that fails the filter, or one without evidence of relevance.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from engramdb._base.clock import to_ms
from engramdb._base.errors import ValidationError, shown
from engramdb._base.types import Hit, MemoryRecord, Utility
from engramdb.flows._labels import LabelRules
from engramdb.ranking._hits import Ranking
from engramdb.validate import check_float, check_int

__all__ = ["REINFORCEMENT", "Forgetting", "Policy", "relevance", "rerank", "retention"]

REINFORCEMENT = 0.25
"""The largest relative change reinforcement makes to a score."""


def _positive_duration(name: str, value: object) -> timedelta:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise ValidationError(
            f"{name}={shown(value)} must be a positive timedelta, e.g. timedelta(days=30)"
        )
    return value


@dataclass(frozen=True, slots=True)
class Forgetting:
    """Exponential forgetting: ``half_life`` (a positive ``timedelta``) before importance
    and utility lengthen it; a hit below ``suppress_below`` retention is hidden."""

    half_life: timedelta
    suppress_below: float = 0.05

    def __post_init__(self) -> None:
        _positive_duration("half_life", self.half_life)
        check_float("suppress_below", self.suppress_below, 0.0, 1.0)


@dataclass(frozen=True, slots=True)
class Policy:
    """The knobs of a bound view (``memory.bind(..., policy=Policy(...))``).

    ``reinforcement`` (False): utility re-ranks and lengthens retention. ``forgetting``
    (None): a :class:`Forgetting`. ``max_items`` (None): the capacity of each scope the
    view writes to; a write beyond it drops the oldest (with reinforcement, the least
    useful) memories in the same atomic batch. ``recency_half_life`` (None) and
    ``recency_weight`` (0.2): a bounded boost of recent memories. ``diversity`` (None):
    the MMR λ in (0, 1].
    ``max_contexts`` (8): label-context summaries kept per memory. ``max_selections``
    (256): receipts kept per scope. ``selection_ttl`` (1 day): how long a receipt can be
    completed. ``label_rules`` (:class:`LabelRules` defaults): label normalisation and
    limits. ``labeler`` (None): a callable ``text -> labels`` (sync or async), best effort,
    given ``labeler_timeout`` seconds (2.0) when async.
    """

    reinforcement: bool = False
    forgetting: Forgetting | None = None
    max_items: int | None = None
    recency_half_life: timedelta | None = None
    recency_weight: float = 0.2
    diversity: float | None = None
    max_contexts: int = 8
    max_selections: int = 256
    selection_ttl: timedelta = timedelta(days=1)
    label_rules: LabelRules = field(default_factory=LabelRules)
    labeler: Callable[[str], Any] | None = None
    labeler_timeout: float = 2.0

    def __post_init__(self) -> None:
        if not isinstance(self.reinforcement, bool):
            raise ValidationError(
                f"reinforcement={shown(self.reinforcement)} must be True or False"
            )
        if self.forgetting is not None and not isinstance(self.forgetting, Forgetting):
            raise ValidationError(
                f"forgetting={shown(self.forgetting)} must be None or "
                "Forgetting(half_life=timedelta(...))"
            )
        if self.max_items is not None:
            check_int("max_items", self.max_items, 1, 10_000_000)
        if self.recency_half_life is not None:
            _positive_duration("recency_half_life", self.recency_half_life)
        check_float("recency_weight", self.recency_weight, 0.0, 1.0)
        if self.diversity is not None:
            check_float("diversity", self.diversity, 0.0, 1.0)
        check_int("max_contexts", self.max_contexts, 0, 64)
        check_int("max_selections", self.max_selections, 1, 100_000)
        _positive_duration("selection_ttl", self.selection_ttl)
        if not isinstance(self.label_rules, LabelRules):
            raise ValidationError(f"label_rules={shown(self.label_rules)} must be LabelRules(...)")
        if self.labeler is not None and not callable(self.labeler):
            raise ValidationError(
                f"labeler={shown(self.labeler)} must be a callable text -> labels, or None"
            )
        check_float("labeler_timeout", self.labeler_timeout, 0.001, 600.0)

    @property
    def needs_utility(self) -> bool:
        """Whether ranking reads the evidence of the candidates."""
        return self.reinforcement or self.forgetting is not None

    @property
    def reranks(self) -> bool:
        return (
            self.needs_utility
            or self.recency_half_life is not None
            or (self.diversity is not None and self.diversity < 1.0)
        )


def _age_ms(since: datetime | None, now: datetime) -> int:
    return max(0, to_ms(now) - to_ms(since)) if since is not None else 0


def retention(record: MemoryRecord, utility: Utility, now: datetime, policy: Policy) -> float:
    """The retention of ``record`` at ``now`` under ``policy`` (1.0 without forgetting)."""
    forgetting = policy.forgetting
    if forgetting is None:
        return 1.0
    since = record.updated_at
    half_life = forgetting.half_life / timedelta(milliseconds=1) * (0.5 + record.importance)
    if policy.reinforcement:
        if utility.reinforced_at is not None and utility.reinforced_at > since:
            since = utility.reinforced_at
        half_life *= 2.0 ** utility.value()
    return float(0.5 ** (_age_ms(since, now) / half_life))


def relevance(hits: Sequence[Hit], ranking: Ranking) -> list[float]:
    """The score each policy factor multiplies: positive for every hit with evidence.

    A hybrid recall's convex fusion measures the vector leg from its noise floor, so its
    weakest candidate scores 0 there and no factor could lift it; the policy instead
    weighs each leg's score divided by the leg's best (cosine clipped at 0). Other
    recalls use their score (an RRF score, a cosine, a scaled BM25), clipped at 0.
    """
    if ranking.mode != "hybrid" or ranking.fusion != "convex":
        return [max(0.0, hit.score) for hit in hits]
    legs = {
        "vector": [max(0.0, h.similarity) if h.similarity is not None else 0.0 for h in hits],
        "lexical": [h.bm25 if h.bm25 is not None else 0.0 for h in hits],
    }
    out = [0.0] * len(hits)
    for leg, scores in legs.items():
        best = max(scores, default=0.0)
        weight = ranking.weights.get(leg, 1.0)
        if best > 0 and weight > 0:
            out = [total + weight * score / best for total, score in zip(out, scores, strict=True)]
    return out


def rerank(
    hits: Sequence[Hit],
    utilities: Mapping[str, Utility],
    context: str,
    now: datetime,
    policy: Policy,
    ranking: Ranking,
) -> list[Hit]:
    """The first ``ranking.top_k`` of ``hits`` (best first) after the policy's factors,
    suppression and diversity; scores are :func:`relevance` times the factors, rounded
    to 9 decimals. Ties keep the legs' order."""
    scored: list[Hit] = []
    for hit, base in zip(hits, relevance(hits, ranking), strict=True):
        utility = utilities.get(hit.memory.id, Utility())
        boosts: dict[str, float] = {}
        if policy.reinforcement:
            boosts["utility"] = 1.0 + REINFORCEMENT * utility.value(context)
        if policy.recency_half_life is not None:
            age = _age_ms(hit.memory.updated_at, now)
            fresh = 0.5 ** (age / (policy.recency_half_life / timedelta(milliseconds=1)))
            boosts["recency"] = 1.0 + policy.recency_weight * fresh
        kept = retention(hit.memory, utility, now, policy)
        if policy.forgetting is not None and kept < policy.forgetting.suppress_below:
            continue
        score = round(base * kept * math.prod(boosts.values()), 9)
        memory = replace(hit.memory, utility=utility)
        scored.append(replace(hit, memory=memory, score=score, boosts=boosts, retention=kept))
    order = sorted(range(len(scored)), key=lambda i: (-scored[i].score, i))
    ranked = [scored[i] for i in order]
    if policy.diversity is not None and policy.diversity < 1.0:
        return _mmr(ranked, policy.diversity, ranking.top_k)
    return ranked[: ranking.top_k]


_WORD = re.compile(r"\w+")


def _mmr(ranked: list[Hit], lam: float, top_k: int) -> list[Hit]:
    words = [frozenset(_WORD.findall(hit.memory.text.casefold())) for hit in ranked]
    chosen: list[int] = []
    left = list(range(len(ranked)))
    while left and len(chosen) < top_k:

        def gain(i: int) -> float:
            overlap = max((_jaccard(words[i], words[j]) for j in chosen), default=0.0)
            return lam * ranked[i].score - (1.0 - lam) * overlap

        best = max(left, key=lambda i: (gain(i), -i))
        chosen.append(best)
        left.remove(best)
    return [ranked[i] for i in chosen]


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0
