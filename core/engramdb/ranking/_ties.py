"""Ties: equal scores come back newest first, in every store and in every ranking.

Newest means the later ``created_at``, then the greater id. Ids are time-ordered (a
millisecond prefix, then an order within the process: ``_ids``), so for the items
engramdb creates the id alone agrees; an item given an explicit older ``created_at``
(an import, a restore) is placed by that time, whatever its id.

A store breaks ties this way before it cuts its results to ``k``, so the cut keeps the
newest of the candidates that tie at the k-th score.

Scores tie when they are equal after :func:`quantised`: rounded down to a multiple of
2**-30 (about 9.3e-10). Stores compute the same BM25 or cosine with different
operations (SQLite sums a query's terms in SQL, the core in Python; CPython 3.12 takes a
dot product with ``math.sumprod``, Pyodide's 3.11 from ``math.dist``), so their last bits
may differ; every store ranks by the quantised score (and returns it), so such scores
tie, and the tie falls to ``(created_at, id)``, which every store holds alike. Scaling
by a power of two and rounding down are exact in IEEE doubles, so Python, SQLite
(``CAST(score * 1073741824.0 AS INTEGER)``, scores above 0) and PostgreSQL
(``floor(score * 1073741824.0)``) agree on the grid bit for bit. Two scores a few ulps
apart still fall on different sides of a grid line when one lies between them: about
once in 10**6 such pairs (an ulp of a score near 3 is 4.4e-16).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import datetime
from operator import itemgetter
from typing import Any, Protocol, TypeVar

from engramdb._base.types import MemoryRecord

__all__ = ["GRID", "Newer", "best_first", "newest", "quantised", "ranked_pairs"]

GRID = 1073741824.0
"""2**30: scores are ranked as multiples of ``1 / GRID`` (:func:`quantised`)."""

Newer = Callable[[str], Any]
"""An id's place among equal scores: greater is newer (default: the id itself)."""

_SWAPPED = itemgetter(1, 0)  # (score, id): an id is its own place among equal scores


def quantised(score: float) -> float:
    """``score`` rounded down to a multiple of 2**-30, exactly (the ranking's grid)."""
    return math.floor(score * GRID) / GRID


def newest(record: MemoryRecord) -> tuple[datetime, str]:
    """The key by which ``record`` sorts among equal scores: greater is newer."""
    return (record.created_at, record.id)


def ranked_pairs(
    pairs: Iterable[tuple[str, float]], k: int | None = None, newer: Newer | None = None
) -> list[tuple[str, float]]:
    """``(id, score)`` pairs by score descending, equal scores newest first (by
    ``newer(id)`` descending, the id when None); at most ``k`` (all when None). Scores
    are :func:`quantised` first (and returned so)."""
    pairs = [(item, quantised(score)) for item, score in pairs]
    key: Callable[[tuple[str, float]], Any] = (
        _SWAPPED if newer is None else lambda pair: (pair[1], newer(pair[0]))
    )
    ranked = sorted(pairs, key=key, reverse=True)  # the score, then newer: one key
    return ranked if k is None else ranked[: max(0, k)]


class _Scored(Protocol):
    @property
    def score(self) -> float: ...

    @property
    def record(self) -> MemoryRecord: ...


_H = TypeVar("_H", bound=_Scored)


def best_first(hits: Iterable[_H], k: int | None = None) -> list[_H]:
    """Search hits by :func:`quantised` score descending, equal ones newest first (by
    the record's ``created_at``, then its id, both descending); at most ``k`` (all when
    None). The hits' scores should be quantised already (a store returns them so)."""
    ranked = sorted(hits, key=_best_first_key, reverse=True)  # one key: no sort twice
    return ranked if k is None else ranked[: max(0, k)]


def _best_first_key(hit: _Scored) -> tuple[float, datetime, str]:
    """Greater is better: the quantised score, then newer (``created_at``, then id)."""
    record = hit.record
    return (quantised(hit.score), record.created_at, record.id)
