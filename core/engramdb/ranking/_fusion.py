"""Fusion of the ranked legs of a recall into one list.

Each *leg* (``"vector"``, ``"lexical"`` ...) is a list of ``(id, score)``, best first.
Two methods:

* :func:`convex` (the default of ``recall``): each leg's scores come on an absolute
  scale from 0 to 1 (``_hits`` puts them there: the cosine for the vector leg, the
  BM25 relevance over the query's ceiling for the lexical one), and the fused score of
  an id is ``sum over legs of weight[leg] * score`` (0 in a leg that lacks it). Scores
  are not stretched to each query's candidates: a leg that found only weak evidence (a
  word every memory holds) adds next to nothing, and a fused score means the same in
  every query. Measured on LoCoMo's development split and on name-sharing facts in
  ``docs/quality.md``.
* :func:`rrf`, reciprocal-rank fusion (Cormack, Clarke and Büttcher, 2009)::

      score(id) = sum over legs where id appears of  weight[leg] / (k + rank[leg])

  with 1-based ranks, ``k = 60`` and weight 1.0 per leg by default. Only ranks matter.

Both take a ``depth``: only the first ``depth`` candidates of a leg score (a deeper
candidate gets 0 from that leg, as if it were absent, and its rank is still recorded). So candidates
past ``depth`` in every leg come after all others (by their best rank), and asking a
leg for more candidates never moves the first ones: ``recall`` passes its fixed
candidate depth (100), whatever its ``top_k``.

Fused scores are rounded to 9 decimals, and ties are broken by the best rank in a leg
of weight above 0, then by the best rank in any leg, then newest first (by the caller's
``newer`` key, by id when there is none; both descending): the order never depends on
dict order. The legs' scores come in on the grid of ``_ties.quantised`` (every store
ranks and returns them so), so the same candidates have the same scores in every store,
and the arithmetic here, the same in every store, gives the same fused order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engramdb._base.errors import ValidationError, shown
from engramdb._base.types import is_finite_number

__all__ = ["DEFAULT_RRF_K", "Fused", "convex", "rrf"]

DEFAULT_RRF_K = 60
_MAX_WEIGHT = 1_000_000.0  # weights are relative; a bound keeps every sum finite


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
    legs: Mapping[str, object], k: int, weights: Mapping[str, float] | None
) -> dict[str, float]:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationError(f"rrf k={shown(k)} must be an int >= 1; the usual value is 60")
    resolved = dict.fromkeys(legs, 1.0)
    if weights is None:
        return resolved
    for name, weight in weights.items():
        if name not in legs:
            known = ", ".join(repr(leg) for leg in sorted(legs)) or "none"
            raise ValidationError(
                f"fusion weight for unknown leg {name!r}; known legs: {known}. "
                "Remove it or fix the name"
            )
        if not is_finite_number(weight) or weight < 0 or weight > _MAX_WEIGHT:
            raise ValidationError(
                f"fusion weight {name!r}={shown(weight)} must be a finite number >= 0 and "
                f"at most {_MAX_WEIGHT:g}, e.g. 1.0"
            )
        resolved[name] = float(weight)
    return resolved


def convex(
    legs: Mapping[str, Sequence[tuple[str, float]]],
    *,
    weights: Mapping[str, float],
    newer: Callable[[str], Any] | None = None,
    depth: int | None = None,
) -> list[Fused]:
    """Fuse scored legs by a weighted sum of their scores; return every id once, best
    first.

    ``legs`` maps a leg name to ``(id, score)`` pairs, best first, each score on its
    leg's absolute scale from 0 to 1; an id repeated within a leg counts at its first
    rank. ``weights`` gives each leg's weight (a leg without one weighs 1.0); a leg of
    weight 0 still contributes its ids (at score 0, so they follow the others in the
    order of their ranks). Order: score descending, then the best rank across legs,
    then newest first (``newer(id)`` descending; the id when None). ``depth``: only
    each leg's first ``depth`` pairs score (all pairs when None).

    Raises ``ValidationError`` when a weight is negative or not finite, or names a leg
    that is not in ``legs``.
    """
    resolved = _validate(legs, DEFAULT_RRF_K, weights)
    ranks: dict[str, dict[str, int]] = {}
    parts: dict[str, list[float]] = {}
    for leg in sorted(legs):
        weight = resolved[leg]
        for position, (item, score) in enumerate(legs[leg], start=1):
            # past the depth: nothing
            part = weight * score if depth is None or position <= depth else 0.0
            item_ranks = ranks.get(item)
            if item_ranks is None:
                ranks[item] = {leg: position}
                parts[item] = [part]
            elif leg not in item_ranks:
                item_ranks[leg] = position
                parts[item].append(part)
    fsum = math.fsum
    return _ordered(
        [
            Fused(item, round(fsum(parts[item]), 9), item_ranks)
            for item, item_ranks in ranks.items()
        ],
        weighted={leg for leg, weight in resolved.items() if weight > 0},
        newer=newer,
    )


def rrf(
    legs: Mapping[str, Sequence[str]],
    *,
    k: int = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
    newer: Callable[[str], Any] | None = None,
    depth: int | None = None,
) -> list[Fused]:
    """Fuse ranked legs with reciprocal-rank fusion; return every id once, best first.

    ``legs`` maps a leg name to its ids, best first; an id repeated within a leg counts
    at its first (best) rank. ``weights`` maps leg names to non-negative weights
    (default 1.0 each); a leg of weight 0 is ignored as if it were absent (its ids are
    not added and its ranks are not recorded), so zero-weighting a leg never changes
    the result. The result holds every id of the other legs exactly once. Order: score
    descending, then the best rank across legs ascending, then newest first
    (``newer(id)`` descending; the id when None), so it never depends on dict order.
    ``depth``: a rank past it adds nothing to the score (None: every rank adds).

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
    # math.fsum over a sorted leg order: the score is exact-rounded and independent of
    # insertion order.
    return _ordered(
        (
            Fused(
                item,
                round(
                    math.fsum(
                        resolved[leg] / (k + rank)
                        for leg, rank in sorted(item_ranks.items())
                        if depth is None or rank <= depth
                    ),
                    9,
                ),
                item_ranks,
            )
            for item, item_ranks in ranks.items()
        ),
        weighted=set(resolved),
        newer=newer,
    )


def _ordered(
    fused: Iterable[Fused], *, weighted: set[str], newer: Callable[[str], Any] | None
) -> list[Fused]:
    """Score descending, then the best rank in a leg of weight above 0 (an id only in
    legs of weight 0 comes after), then the best rank in any leg, then newest first."""

    tie = _identity if newer is None else newer

    def key(item: Fused) -> tuple[float, float, float, Any]:
        """Greater comes first: every criterion in one key (the ranks negated)."""
        ranks = item.ranks
        low: float = math.inf  # the best rank in a leg of weight above 0
        best = math.inf  # the best rank in any leg
        for leg, rank in ranks.items():
            if rank < best:
                best = rank
            if rank < low and leg in weighted:
                low = rank
        return (item.score, -low, -best, tie(item.id))

    return sorted(fused, key=key, reverse=True)


def _identity(item: str) -> str:
    return item
