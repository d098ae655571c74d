"""The rerank stage: a reranker re-scores the first N hits of a recall's fused order.

:func:`rerank_stage` is a flow: it yields one ``Rerank(query, texts)`` effect per
``max_batch`` texts of the first ``count`` hits and orders those hits by the scores it
receives, best first (equal scores keep the fused order); the hits after them keep
their fused order. Every hit's evidence carries ``rerank_score`` (None for a hit the
stage did not score). The texts are those of the hits with the memory's ``redact``
applied once more, so no text leaves for a rerank service unredacted, even one stored
by a memory without ``redact``; the query is the recall's, already redacted.

A failure of the reranker (an exception, a wrong number of scores, a score that is not a
finite number) never reaches the caller: the stage answers the fused order unchanged
and a reason, which the recall reports with ``status="degraded"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ._effects import Flow, Rerank
from ._types import Hit, is_finite_number
from .context import FlowContext

__all__ = ["Reranked", "rerank_stage"]


@dataclass(frozen=True, slots=True)
class Reranked:
    """The hits after the stage, and why it kept the fused order (None: it did not)."""

    hits: tuple[Hit, ...]
    error: str | None = None


class _BadAnswer(Exception):
    """A reranker answered, but not one finite score per text."""


def rerank_stage(ctx: FlowContext, query: str, hits: Sequence[Hit], count: int) -> Flow[Reranked]:
    """Re-score the first ``count`` of ``hits`` (best first, fused order) with the
    context's reranker for ``query``; answer every hit, the re-scored ones first."""
    head = list(hits[:count])
    reranker = ctx.reranker
    if not head or reranker is None:
        return Reranked(tuple(hits))
    redact = ctx.redact
    texts = [hit.memory.text if redact is None else redact(hit.memory.text) for hit in head]
    size = reranker.max_batch
    scores: list[float] = []
    try:
        for start in range(0, len(texts), size):
            batch = tuple(texts[start : start + size])
            answer = yield Rerank(query, batch)
            scores.extend(_scores(answer, len(batch)))
    except _BadAnswer as exc:
        return Reranked(tuple(hits), f"rerank: {exc}")
    except Exception as exc:  # a reranker's failure is never the caller's error
        return Reranked(tuple(hits), f"rerank: {type(exc).__name__}")
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
