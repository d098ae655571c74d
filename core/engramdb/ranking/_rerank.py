"""The rerank stage: a reranker re-scores the first N hits of a recall's fused order.

:func:`rerank_stage` is a flow: it yields one ``Rerank(query, texts)`` effect per
``max_batch`` texts of the first ``count`` hits and orders those hits by the scores it
receives, best first (equal scores keep the fused order); the hits after them keep
their fused order. Every hit's evidence carries ``rerank_score`` (None for a hit the
stage did not score). The texts are those of the hits with the memory's ``redact``
applied once more, so no text leaves for a rerank service unredacted, even one stored
by a memory without ``redact``; the query is the recall's, already redacted.

A failure of the reranker (an exception, a wrong number of scores, a score that is not a
finite number, no answer within the budget) never reaches the caller: the stage answers
the fused order unchanged and a reason, which the recall reports with
``status="degraded"``. The context's :class:`~engramdb.RerankGuard` bounds the stage:
it re-scores at most ``guard.calls`` batches (the hits past them keep their fused order),
each ``Rerank`` effect carries the seconds left of its budget (``timeout``), an answer
after the budget is not used, and while the guard's breaker is open the stage yields
no effect at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from engramdb._base.types import Hit, is_finite_number
from engramdb.flows._effects import Flow, Rerank
from engramdb.flows.context import FlowContext
from engramdb.ranking._rerank_guard import RerankGuard

__all__ = ["Reranked", "rerank_stage"]


@dataclass(frozen=True, slots=True)
class Reranked:
    """The hits after the stage, and why it kept the fused order (None: it did not)."""

    hits: tuple[Hit, ...]
    error: str | None = None


class _BadAnswer(Exception):
    """A reranker answered, but not one finite score per text."""


class _OverBudget(Exception):
    """The stage's budget ran out before every batch had its scores."""


def rerank_stage(ctx: FlowContext, query: str, hits: Sequence[Hit], count: int) -> Flow[Reranked]:
    """Re-score the first ``count`` of ``hits`` (best first, fused order) with the
    context's reranker for ``query``; answer every hit, the re-scored ones first."""
    reranker = ctx.reranker
    guard = ctx.rerank_guard or RerankGuard()
    if reranker is not None:  # at most the guard's calls of max_batch texts each
        count = min(count, guard.calls * reranker.max_batch)
    head = list(hits[:count])
    if not head or reranker is None:
        return Reranked(tuple(hits))
    skipped = guard.admit()
    if skipped is not None:  # the breaker is open: nothing goes to the reranker
        return Reranked(tuple(hits), f"rerank: {skipped}")
    redact = ctx.redact
    texts = [hit.memory.text if redact is None else redact(hit.memory.text) for hit in head]
    size = reranker.max_batch
    scores: list[float] = []
    deadline = guard.now() + guard.budget
    reason: str | None = None
    try:
        for start in range(0, len(texts), size):
            batch = tuple(texts[start : start + size])
            left = deadline - guard.now()
            if left <= 0:
                raise _OverBudget
            answer = yield Rerank(query, batch, left)
            if guard.now() > deadline:  # a late answer is not used
                raise _OverBudget
            scores.extend(_scores(answer, len(batch)))
    except _BadAnswer as exc:
        reason = str(exc)
    except Exception as exc:  # a reranker's failure is never the caller's error
        # The async driver's timeout fires on the event loop's clock, which may read the
        # budget as spent a moment before the guard's does (Pyodide's WebLoop): its
        # TimeoutError is the budget's too.
        late = isinstance(exc, TimeoutError) or guard.now() >= deadline
        reason = f"no answer within the {guard.budget:g} s budget" if late else type(exc).__name__
    if reason is not None:
        guard.failed()
        return Reranked(tuple(hits), f"rerank: {reason}")
    guard.succeeded()
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    scored = [
        replace(head[i], evidence={**head[i].evidence, "rerank_score": scores[i]}) for i in order
    ]
    return Reranked((*scored, *hits[count:]))


def _scores(answer: object, count: int) -> list[float]:
    """The reranker's answer for ``count`` texts as floats, or :class:`_BadAnswer`."""
    if isinstance(answer, str | bytes) or not isinstance(answer, Sequence):
        raise _BadAnswer(f"the reranker answered a {type(answer).__name__}, not a list of scores")
    if len(answer) != count:
        raise _BadAnswer(f"the reranker answered {len(answer)} scores for {count} texts")
    if not all(is_finite_number(score) for score in answer):
        raise _BadAnswer("the reranker answered a score that is not a finite number")
    return [float(score) for score in answer]
