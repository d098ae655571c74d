"""Exact scoring of unit vectors held in a flat float32 buffer: the reference search.

:class:`~engramdb._vectors.index.VectorIndex` scores with it when a search is exact and to
re-score its approximate path's last candidates; a driver's accelerated index (the
numpy kernel of ``engramdb.sqlite``) re-scores its candidates with it, through the
driver kit, so that its answers are the reference's bit for bit. Standard library only.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from itertools import compress
from operator import itemgetter

from engramdb._base.errors import DimensionMismatchError, ValidationError
from engramdb.ranking._ties import Newer, quantised

__all__ = ["Excluding", "check_query", "eligible_positions", "normalize", "score_exactly"]

# normalize() returns a vector this close to unit length as it is: dividing by the norm
# would change it by less than float32 (the storage format) can represent.
_ALREADY_UNIT = 1e-12


def normalize(vector: Iterable[float]) -> list[float]:
    """Return ``vector`` scaled to unit L2 length, as a list of floats.

    Raises ``ValidationError`` for an empty, all-zero or non-finite vector.
    """
    return list(map(float, _unit(vector)))


def _unit(vector: Iterable[float]) -> Sequence[float]:
    """``vector`` itself when its L2 norm is 1 (to float64 precision), else it scaled."""
    values = vector if isinstance(vector, (list, tuple, array)) else list(vector)
    if not values:
        raise ValidationError("the vector is empty; pass at least one finite number")
    try:
        norm = math.hypot(*values)
    except TypeError as exc:
        raise ValidationError(
            f"cannot read the vector as floats ({exc}); pass a sequence of finite numbers"
        ) from exc
    if not math.isfinite(norm):
        raise ValidationError(
            "the vector has a NaN or infinite component; pass finite numbers only"
        )
    if norm == 0.0:
        raise ValidationError(
            "the vector is all zeros and has no direction; check the embedder's output"
        )
    if abs(norm - 1.0) <= _ALREADY_UNIT:  # most embedders normalise already
        return values
    return [x / norm for x in values]


# --- kernels ------------------------------------------------------------------------
#
# For *unit* vectors read from the flat float32 array the index scores with
# ``math.sumprod`` on Python 3.12+ and ``math.dist`` on 3.11 (chosen per call, never at
# import; measured fastest on memoryview slices in each version).

_DotFn = Callable[[Sequence[float], Sequence[float]], float]
_SECOND = itemgetter(1)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValidationError(f"k={k!r} must be an int >= 0; pass e.g. k=10")


def _smallest(
    scores: list[float],
    k: int,
    keys: Sequence[str],
    newer: Newer | None,
    similarity: Callable[[float], float],
) -> list[tuple[int, float]]:
    """The ``k`` best of ``scores`` (smaller is nearer) as ``(index, similarity)``: the
    similarity ``similarity(score)`` (which never rises with the score), quantised
    (``_ties.quantised``), descending; equal ones newest first: by ``newer(keys[i])``
    descending (``keys[i]`` when None), before the cut to ``k``.

    Only the best ``k`` plus some slack are quantised: a score past them has a
    similarity at most the slack's worst, so when that lies below the k-th one's grid
    step nothing past the slack can tie into the cut (else all are quantised); only
    those at or above that step are ordered, and ``newer`` is asked only when two of
    them are equal."""
    n = len(scores)
    chosen: Iterable[int] = range(n)
    cut = -math.inf  # the k-th quantised similarity: nothing below it is kept
    if k < n:
        bound = heapq.nsmallest(min(n, k + max(8, k // 8)), scores)
        cut = quantised(similarity(bound[k - 1]))
        if quantised(similarity(bound[-1])) < cut:
            threshold = bound[-1]
            chosen = [i for i, s in enumerate(scores) if s <= threshold]
    pairs = [(i, q) for i in chosen if (q := quantised(similarity(scores[i]))) >= cut]
    if len({q for _, q in pairs}) == len(pairs):  # no two equal: no place is asked
        pairs.sort(key=_SECOND, reverse=True)
    elif newer is None:
        pairs.sort(key=lambda pair: (pair[1], keys[pair[0]]), reverse=True)
    else:
        pairs.sort(key=lambda pair: (pair[1], newer(keys[pair[0]])), reverse=True)
    return pairs[:k]


def check_query(
    query: Sequence[float], k: int, dimensions: int, candidates: int | None = None
) -> list[float]:
    """Check the arguments of a vector search and return the query normalised.

    Raises ``ValidationError`` for a bad ``k`` or ``candidates`` and
    ``DimensionMismatchError`` for a query of another length: what
    :meth:`VectorIndex.search` raises (a driver's index raises the same).
    """
    _check_k(k)
    if len(query) != dimensions:
        raise DimensionMismatchError(
            f"the query has {len(query)} dimensions but the index has {dimensions}; embed "
            "the query with the same embedding space",
            expected=dimensions,
            actual=len(query),
        )
    q = normalize(query)
    if candidates is not None and (
        isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1
    ):
        raise ValidationError(
            f"candidates={candidates!r} must be an int >= 1; pass e.g. 800 or None"
        )
    return q


def score_exactly(
    flat: object,
    dimensions: int,
    keys: Sequence[str],
    q: list[float],
    positions: Sequence[int] | None,
    k: int,
    newer: Newer | None = None,
) -> list[tuple[str, float]]:
    """The exact search of :class:`VectorIndex` on CPython: score the vectors at
    ``positions`` (None: the first ``len(keys)``) of ``flat``, a buffer of float32
    components in native byte order (``array('f')``, or any object whose memoryview has
    format ``"f"``) holding vector ``i`` at ``[i * dimensions, (i + 1) * dimensions)``;
    return the best ``k`` ``(keys[i], similarity)``, quantised, equal ones newest first.

    ``q`` is the normalised query (:func:`check_query`). The similarity of one vector
    depends only on its components and ``q`` (``math.sumprod`` on Python 3.12+,
    ``math.dist`` on 3.11), so scoring a subset that holds every vector a full scan
    would keep gives the full scan's result, bit for bit: what a driver's accelerated
    index relies on.
    """
    d = dimensions
    if positions is None:
        offsets: Iterable[int] = range(0, len(keys) * d, d)
        chosen = keys
    else:
        offsets = [p * d for p in positions]
        chosen = [keys[p] for p in positions]
    sumprod: _DotFn | None = getattr(math, "sumprod", None)
    with memoryview(flat) as view:  # type: ignore[arg-type]
        if sumprod is not None:
            scores = [-sumprod(view[o : o + d], q) for o in offsets]
        else:
            qt = tuple(q)
            dist = math.dist
            scores = [dist(qt, view[o : o + d]) for o in offsets]
    if sumprod is not None:
        best = _smallest(scores, k, chosen, newer, _negated)
    else:  # for unit vectors |q - v|^2 = 2 - 2 cos, so cos = 1 - dist^2 / 2
        best = _smallest(scores, k, chosen, newer, _from_distance)
    return [(chosen[i], similarity) for i, similarity in best]


class Excluding:
    """The container of every key except ``excluded`` (a search's expired items):
    :func:`eligible_positions` looks up the few excluded keys instead of testing every
    key of the index."""

    __slots__ = ("excluded",)

    def __init__(self, excluded: Collection[str]) -> None:
        self.excluded = excluded

    def __contains__(self, key: object) -> bool:
        return key not in self.excluded


def eligible_positions(
    allowed: Container[str] | None, keys: Sequence[str], positions: Mapping[str, int]
) -> list[int] | None:
    """The positions (ascending) of the ``allowed`` keys of an index that holds ``keys``,
    ``positions`` mapping each to its place; None when ``allowed`` is None (all).

    Raises ``ValidationError`` for a ``str`` (a set of keys was meant)."""
    if allowed is None:
        return None
    if isinstance(allowed, str):
        raise ValidationError(
            f"allowed={allowed!r} is a str; pass a set of keys, e.g. {{{allowed!r}}}"
        )
    get = positions.get
    if isinstance(allowed, Excluding):  # every key but a few: look those few up
        gone = {p for p in map(get, allowed.excluded) if p is not None}
        if not gone:
            return None
        if len(gone) <= 32:  # a few: delete each from the list of all
            eligible = list(range(len(keys)))
            for p in sorted(gone, reverse=True):  # from the last: each keeps its place
                del eligible[p]
            return eligible
        # many: one pass over a mask (each deletion would shift the rest of the list)
        keep = bytearray(b"\x01") * len(keys)
        for p in gone:
            keep[p] = 0
        return list(compress(range(len(keys)), keep))
    if isinstance(allowed, Collection) and len(allowed) < len(keys):
        found = {get(key) for key in allowed}
        found.discard(None)
        return sorted(p for p in found if p is not None)
    return [p for p, key in enumerate(keys) if key in allowed]


def _clamp(similarity: float) -> float:
    return max(-1.0, min(1.0, float(similarity)))


def _negated(score: float) -> float:
    return _clamp(-score)


def _from_distance(distance: float) -> float:
    return _clamp(1.0 - distance * distance / 2.0)
