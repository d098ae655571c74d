"""``RerankGuard``: how long a recall's rerank stage may take, and when to skip it.

A reranker is a service a recall waits for. Unguarded, a dead one cost every recall its
timeout times its attempts (155.7 s with the HTTP rerankers' defaults, 30 s and 4
retries) before the recall fell back to its fused order. The guard bounds the stage:

- **A budget per recall** (``budget``, 5 s): the stage's calls to the reranker, their
  retries and back-off waits included, end by then. The async face cancels a call still
  running at the budget; both faces hand a reranker that ``supports_timeout`` the time
  left (the HTTP rerankers spend it on their requests and waits, and give up early
  rather than wait past it); an answer that comes after the budget is not used. The
  recall then answers its fused order, ``status="degraded"``.
- **Calls per recall** (``calls``, 2): the stage re-scores at most ``calls`` batches of
  the reranker's ``max_batch`` texts; hits past them keep their fused order (their
  ``rerank_score`` is None). ``rerank=1000`` through a reranker that takes 100 texts a
  call sends 200 texts in 2 calls, not 1,000 in 10.
- **A circuit breaker**: after ``failures`` (3) failed stages in a row (an error, an
  answer that is not one finite score per text, no answer within the budget) it
  *opens*: for ``cooldown`` seconds (30) the stage is skipped, nothing is sent to the
  reranker and recalls answer their fused order at once, degraded. Then one recall
  tries the reranker (others keep skipping while that trial runs, for at most the
  budget): a success *closes* the breaker, a failure opens it for another cool-down.

The guard holds the breaker's state, so memories that share a reranker may share a guard
(``engramdb serve`` gives all its tenants one). ``clock`` gives the seconds the guard
measures with, read at call time (default ``time.monotonic``); a test passes its own to
move past a cool-down without waiting. A guard does no I/O and holds no lock: threads
sharing one may at worst let an extra trial through.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Literal

from engramdb._base.errors import ConfigurationError, shown
from engramdb._base.types import is_finite_number

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_CALLS",
    "DEFAULT_COOLDOWN",
    "DEFAULT_FAILURES",
    "RerankGuard",
]

DEFAULT_BUDGET = 5.0
"""Seconds a recall's rerank stage may take: a rerank service answers 30 texts in well
under a second, so 5 s leaves room for a retry or two after a 429 or a 503."""
DEFAULT_CALLS = 2
"""Reranker calls one recall's stage may make: a paid call each (Workers AI counts
neurons), and re-scoring past the first few hundred hits rarely changes the top."""
DEFAULT_FAILURES = 3
"""Failed stages in a row that open the breaker (one blip does not)."""
DEFAULT_COOLDOWN = 30.0
"""Seconds the breaker stays open before a recall tries the reranker again."""

BreakerState = Literal["closed", "open", "half-open"]


class RerankGuard:
    """The rerank stage's time budget per recall and its circuit breaker (module
    docstring): ``RerankGuard(budget=5.0, calls=2, failures=3, cooldown=30.0,
    clock=None)``."""

    __slots__ = (
        "_clock",
        "_failed",
        "_open_until",
        "_trial_until",
        "budget",
        "calls",
        "cooldown",
        "failures",
    )

    def __init__(
        self,
        *,
        budget: float = DEFAULT_BUDGET,
        calls: int = DEFAULT_CALLS,
        failures: int = DEFAULT_FAILURES,
        cooldown: float = DEFAULT_COOLDOWN,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.budget = _seconds("budget", budget, DEFAULT_BUDGET)
        self.cooldown = _seconds("cooldown", cooldown, DEFAULT_COOLDOWN)
        self.calls = _count("calls", calls, DEFAULT_CALLS, "reranker calls one recall may make")
        self.failures = _count(
            "failures", failures, DEFAULT_FAILURES, "failed stages in a row that open the breaker"
        )
        if clock is not None and not callable(clock):
            raise ConfigurationError(f"clock={shown(clock)} must be a function giving seconds")
        self._clock = clock
        self._failed = 0  # failed stages in a row
        self._open_until: float | None = None  # set while open: when a trial may go
        self._trial_until: float | None = None  # set while a trial runs: when it is lost

    def __repr__(self) -> str:
        return (
            f"RerankGuard(budget={self.budget:g}, calls={self.calls}, failures={self.failures}, "
            f"cooldown={self.cooldown:g})"
        )

    def now(self) -> float:
        """The guard's clock, in seconds."""
        return self._clock() if self._clock is not None else time.monotonic()

    @property
    def state(self) -> BreakerState:
        """``closed`` (the stage calls the reranker), ``open`` (it skips it until the
        cool-down ends) or ``half-open`` (the next recall tries it)."""
        if self._open_until is None:
            return "closed"
        return "open" if self.now() < self._open_until else "half-open"

    def admit(self) -> str | None:
        """None when a recall's stage may call the reranker now (the breaker is closed,
        or this recall is its trial), else why the stage is skipped."""
        if self._open_until is None:
            return None
        now = self.now()
        if now < self._open_until:
            wait = math.ceil(self._open_until - now)
            return (
                f"skipped, the reranker failed {self._failed} times in a row (next try in {wait} s)"
            )
        if self._trial_until is not None and now < self._trial_until:
            return "skipped, another recall is trying the reranker after its failures"
        self._trial_until = now + self.budget
        return None

    def succeeded(self) -> None:
        """A stage got its scores in time: the breaker closes."""
        self._failed = 0
        self._open_until = self._trial_until = None

    def failed(self) -> None:
        """A stage failed: one more in a row; at ``failures`` the breaker opens."""
        self._failed += 1
        self._trial_until = None
        if self._failed >= self.failures:
            self._open_until = self.now() + self.cooldown


def _count(name: str, value: object, example: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise ConfigurationError(
            f"{name}={shown(value)} must be an integer from 1 to 1000, e.g. {example}: the {what}"
        )
    return value


def _seconds(name: str, value: object, example: float) -> float:
    if not is_finite_number(value) or not 0 < value <= 3600:
        raise ConfigurationError(
            f"{name}={shown(value)} must be a number of seconds above 0 and at most 3600, "
            f"e.g. {example:g}"
        )
    return float(value)
