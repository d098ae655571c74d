"""Ties: equal scores come back newest first, in every store and in every ranking.

Newest means the later ``created_at``, then the greater id. Ids are time-ordered (a
millisecond prefix, then an order within the process: ``_ids``), so for the items
engramdb creates the id alone agrees; an item given an explicit older ``created_at``
(an import, a restore) is placed by that time, whatever its id.

A store breaks ties this way before it cuts its results to ``k``, so the cut keeps the
newest of the candidates that tie at the k-th score.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from operator import itemgetter
from typing import Any, Protocol, TypeVar

from ._types import MemoryRecord

__all__ = ["Newer", "best_first", "newest", "ranked_pairs"]

Newer = Callable[[str], Any]
"""An id's place among equal scores: greater is newer (default: the id itself)."""

_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


def newest(record: MemoryRecord) -> tuple[datetime, str]:
    """The key by which ``record`` sorts among equal scores: greater is newer."""
    return (record.created_at, record.id)


def ranked_pairs(
    pairs: Iterable[tuple[str, float]], k: int | None = None, newer: Newer | None = None
) -> list[tuple[str, float]]:
    """``(id, score)`` pairs by score descending, equal scores newest first (by
    ``newer(id)`` descending, the id when None); at most ``k`` (all when None)."""
    key: Callable[[tuple[str, float]], Any] = (
        _FIRST if newer is None else lambda pair: newer(pair[0])
    )
    ranked = sorted(pairs, key=key, reverse=True)
    ranked.sort(key=_SECOND, reverse=True)  # stable: equal scores stay newest first
    return ranked if k is None else ranked[: max(0, k)]


class _Scored(Protocol):
    @property
    def score(self) -> float: ...

    @property
    def record(self) -> MemoryRecord: ...


_H = TypeVar("_H", bound=_Scored)


def best_first(hits: Iterable[_H], k: int | None = None) -> list[_H]:
    """Search hits by score descending, equal scores newest first (by the record's
    ``created_at``, then its id, both descending); at most ``k`` (all when None)."""
    ranked = sorted(hits, key=lambda hit: newest(hit.record), reverse=True)
    ranked.sort(key=lambda hit: hit.score, reverse=True)  # stable: ties stay newest first
    return ranked if k is None else ranked[: max(0, k)]
