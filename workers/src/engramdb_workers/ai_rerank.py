"""``WorkersAIReranker``: a rerank stage through the Workers AI binding (``env.AI``).

``await env.AI.run("@cf/baai/bge-reranker-base", {"query": q, "contexts": [{"text": t},
...]})`` answers ``{"response": [{"id": i, "score": s}, ...]}``, ``id`` being the
context's index (https://developers.cloudflare.com/workers-ai/models/bge-reranker-base/).
The query and each text are cut at ``max_chars`` (1,500, as the embedder cuts:
bge-reranker-base reads 512 tokens, and a longer text would only cost bytes sent). A
failed call is retried with the same ``RetryPolicy`` as the embedder and the HTTP
providers. Async only: a Worker can only await. Give it to ``AsyncMemory(...,
reranker=WorkersAIReranker(env.AI))``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from engramdb import ConfigurationError, ProviderError, ValidationError
from engramdb.driver import WORKERS_AI_DEFAULT_MAX_CHARS as DEFAULT_MAX_CHARS
from engramdb.driver import RetryPolicy

from .ai import bind, run_binding

__all__ = ["DEFAULT_RERANK_MODEL", "WorkersAIReranker"]

DEFAULT_RERANK_MODEL = "@cf/baai/bge-reranker-base"


class WorkersAIReranker:
    """Relevance scores through a Workers AI binding, e.g. ``WorkersAIReranker(env.AI)``;
    its ``id`` is ``cloudflare/cf/baai/bge-reranker-base``. ``max_batch`` texts go in
    one call (more are sent in several; the recall's ``RerankGuard`` caps the calls),
    each cut at ``max_chars`` characters."""

    provider = "cloudflare"

    def __init__(
        self,
        ai: Any,
        model: str = DEFAULT_RERANK_MODEL,
        *,
        max_batch: int = 100,
        max_chars: int = DEFAULT_MAX_CHARS,
        retry: RetryPolicy | None = None,
        asleep: Callable[[float], Awaitable[object]] | None = None,
        random: Callable[[], float] | None = None,
    ) -> None:
        bind(self, ai, model, DEFAULT_RERANK_MODEL, retry, asleep, random)
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ConfigurationError(f"max_batch={max_batch!r} must be a positive int")
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ConfigurationError(
                f"max_chars={max_chars!r} must be a positive int, e.g. {DEFAULT_MAX_CHARS}"
            )
        self._max_batch = max_batch
        self.max_chars = max_chars

    def __repr__(self) -> str:
        return f"WorkersAIReranker({self.model!r})"

    @property
    def id(self) -> str:
        return f"{self.provider}/{self.model.removeprefix('@')}"

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        raise ConfigurationError(
            "WorkersAIReranker is async only (the AI binding can only be awaited); use AsyncMemory"
        )

    async def arerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in input order."""
        if not isinstance(query, str):
            raise ValidationError(f"query must be a str, not a {type(query).__name__}")
        if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
            raise ValidationError("texts must be a list of strings")
        cut = self.max_chars
        scores: list[float] = []
        for start in range(0, len(texts), self._max_batch):
            chunk = texts[start : start + self._max_batch]
            inputs = {"query": query[:cut], "contexts": [{"text": text[:cut]} for text in chunk]}
            scores.extend(self._parse(await run_binding(self, inputs), len(chunk)))
        return scores

    def _parse(self, answer: Any, count: int) -> list[float]:
        rows = answer.get("response") if isinstance(answer, Mapping) else None
        if not isinstance(rows, list):
            raise ProviderError(
                f"Workers AI {self.model} answered without a 'response' list; is it a "
                "reranker model?",
                provider=self.provider,
            )
        scores: list[float | None] = [None] * count
        for position, row in enumerate(rows):
            index = row.get("id") if isinstance(row, Mapping) else None
            value = row.get("score") if isinstance(row, Mapping) else None
            if (
                isinstance(index, bool)
                or not isinstance(index, int)
                or not 0 <= index < count
                or scores[index] is not None
                or isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise ProviderError(
                    f"Workers AI {self.model} answered response[{position}] = {row!r}, not "
                    f"a new id below {count} with a finite score",
                    provider=self.provider,
                )
            scores[index] = float(value)
        if any(score is None for score in scores):
            raise ProviderError(
                f"Workers AI {self.model} scored {len(rows)} of {count} texts",
                provider=self.provider,
            )
        return [score for score in scores if score is not None]
