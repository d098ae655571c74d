"""``RetryPolicy``: when and how long to wait before retrying a failed provider call.

A pure value (no I/O, no clock, no randomness: the caller passes the jitter), shared by
the HTTP embedders (``engramdb.providers``) and the Workers AI binding embedder
(``engramdb_workers``), which imports the core only. The wait before retry ``n``
(0-based) is ``min(max_delay, initial_delay * multiplier**n)`` scaled by a factor in
``[0.5, 1.0)`` ("equal jitter"): about 0.5, 1, 2, 4 s by default, never above 20 s. A
``Retry-After`` longer than ``max_retry_after`` fails at once instead of waiting.
``retry_statuses`` are the HTTP statuses worth another attempt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from engramdb._base.errors import ConfigurationError, shown
from engramdb._base.types import is_finite_number

__all__ = ["RETRY_STATUSES", "RetryPolicy"]

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
_MOST = 1_000_000.0  # the largest delay, multiplier or Retry-After bound (about 11 days)
_MOST_RETRIES = 1000


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how long to wait before retrying a failed provider call."""

    max_retries: int = 4
    initial_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 20.0
    max_retry_after: float = 120.0
    retry_statuses: frozenset[int] = field(default=RETRY_STATUSES)

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise ConfigurationError(
                f"max_retries={shown(self.max_retries)} must be an int, e.g. 4"
            )
        if not 0 <= self.max_retries <= _MOST_RETRIES:
            raise ConfigurationError(
                f"max_retries={shown(self.max_retries)} must be from 0 to {_MOST_RETRIES}"
            )
        for name in ("initial_delay", "multiplier", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if not is_finite_number(value) or value < 0 or value > _MOST:
                raise ConfigurationError(
                    f"{name}={shown(value)} must be a finite number from 0 to {_MOST:g}"
                )

    def backoff(self, retry: int, jitter: float) -> float:
        """The wait before retry number ``retry`` (0-based); ``jitter`` is in [0, 1)."""
        try:
            grown = self.initial_delay * self.multiplier**retry
        except OverflowError:  # a float power past 1.8e308
            grown = math.inf
        base = min(self.max_delay, grown)
        return base * (0.5 + 0.5 * jitter)
