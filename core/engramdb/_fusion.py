"""Reciprocal-rank fusion (RRF) of ranked lists.

Each *leg* (``"vector"``, ``"lexical"`` ...) is a list of ids, best first. The fused
score of an id is::

    score(id) = sum over legs where id appears of  weight[leg] / (k + rank[leg])

with 1-based ranks, ``k = 60`` and weight 1.0 for every leg by default (Cormack, Clarke
and Büttcher, 2009). Only ranks matter, so legs with incomparable scores (cosine
similarity, BM25) fuse without normalisation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._errors import ValidationError

__all__ = ["DEFAULT_RRF_K", "Fused", "rrf"]

DEFAULT_RRF_K = 60


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused result: the id, its RRF score and its 1-based rank in each leg it is in."""

    id: str
    score: float
    ranks: dict[str, int] = field(default_factory=dict)

    @property
    def best_rank(self) -> int:
        """The smallest rank of this id across legs."""
        return min(self.ranks.values())


def _validate(
    legs: Mapping[str, Sequence[str]], k: int, weights: Mapping[str, float] | None
) -> dict[str, float]:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationError(f"rrf k={k!r} must be an int >= 1; the usual value is 60")
    resolved = dict.fromkeys(legs, 1.0)
    if weights is None:
        return resolved
    for name, weight in weights.items():
        if name not in legs:
            known = ", ".join(repr(leg) for leg in sorted(legs)) or "none"
            raise ValidationError(
                f"rrf weight for unknown leg {name!r}; known legs: {known}. "
                "Remove it or fix the name"
            )
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not math.isfinite(weight)
            or weight < 0
        ):
            raise ValidationError(
                f"rrf weight {name!r}={weight!r} must be a finite number >= 0, e.g. 1.0"
            )
        resolved[name] = float(weight)
    return resolved


def rrf(
    legs: Mapping[str, Sequence[str]],
    *,
    k: int = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[Fused]:
    """Fuse ranked legs with reciprocal-rank fusion; return every id once, best first.

    ``legs`` maps a leg name to its ids, best first; an id repeated within a leg counts
    at its first (best) rank. ``weights`` maps leg names to non-negative weights
    (default 1.0 each); a leg of weight 0 is ignored as if it were absent (its ids are
    not added and its ranks are not recorded), so zero-weighting a leg never changes
    the result. The result holds every id of the other legs exactly once. Order: score
    descending, then the best rank across legs ascending, then id ascending, so it
    never depends on dict order.

    Raises ``ValidationError`` when ``k`` is not an int >= 1, when a weight is negative
    or not finite, or when ``weights`` names a leg that is not in ``legs``.
    """
    resolved = _validate(legs, k, weights)
    ranks: dict[str, dict[str, int]] = {}
    for leg in sorted(legs):
        if resolved[leg] == 0.0:
            continue
        for position, item in enumerate(legs[leg], start=1):
            item_ranks = ranks.setdefault(item, {})
            if leg not in item_ranks:
                item_ranks[leg] = position
    fused: list[Fused] = []
    for item, item_ranks in ranks.items():
        # math.fsum over a sorted leg order: the score is exact-rounded and independent
        # of insertion order.
        score = math.fsum(resolved[leg] / (k + rank) for leg, rank in sorted(item_ranks.items()))
        fused.append(Fused(item, score, item_ranks))
    fused.sort(key=lambda f: (-f.score, f.best_rank, f.id))
    return fused
