"""The reranker protocol: what a recall's rerank stage needs from a reranking model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["DEFAULT_RERANK", "Reranker"]

DEFAULT_RERANK = 30
"""How many of the fused hits a recall re-scores when its memory has a reranker and the
call does not say (``recall(..., rerank=N)``)."""


@runtime_checkable
class Reranker(Protocol):
    """Scores how well each text answers a query (a cross-encoder, a rerank API).

    ``rerank`` and ``arerank`` return one relevance score per text, in input order
    (higher is better; the scale is the model's: a probability, a logit). ``id`` names
    the model, ``"provider/model"`` (e.g. ``"cohere/rerank-v3.5"``). ``max_batch`` is
    the most texts one call accepts; callers split larger inputs, and only scores of
    one call are compared with each other when the scale is not absolute. A failure
    raises (``ProviderError`` and its kin for a provider); a recall then keeps its fused
    order and says ``status="degraded"`` (``docs/quality.md``, "Rerank stage").

    Optional: a reranker whose ``supports_timeout`` is True takes ``timeout=`` (seconds,
    keyword) on both methods, the most the call may take with its retries and waits;
    a recall's stage passes what is left of its budget (:class:`~engramdb.RerankGuard`).
    Without it, the async face still cancels a call at the budget, and the sync face
    uses no answer that comes after it.
    """

    @property
    def id(self) -> str: ...

    @property
    def max_batch(self) -> int: ...

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]: ...

    async def arerank(self, query: str, texts: Sequence[str]) -> list[float]: ...
