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
    """

    @property
    def id(self) -> str: ...

    @property
    def max_batch(self) -> int: ...

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]: ...

    async def arerank(self, query: str, texts: Sequence[str]) -> list[float]: ...
