"""A local reranker: a sentence-transformers ``CrossEncoder`` (extra ``local``), no network.

``sentence_transformers`` (and torch) are imported when the reranker is created, not
when ``engramdb.providers`` is imported. Scores are the model's raw outputs (for the
``cross-encoder/ms-marco-*`` models a logit; higher is better). ``arerank`` runs the
model inline on the event loop, as the local embedder does.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Sequence
from typing import Any

from engramdb import ConfigurationError, ProviderError, ValidationError

__all__ = ["CrossEncoderReranker"]


class CrossEncoderReranker:
    """Scores (query, text) pairs with a sentence-transformers ``CrossEncoder``, by name
    (``cross-encoder/ms-marco-MiniLM-L-6-v2``) or local folder (then ``model_id=``
    names it for the reranker's id)."""

    provider = "sentence-transformers"

    def __init__(
        self,
        model: str | os.PathLike[str] = "cross-encoder/ms-marco-MiniLM-L-6-v2",
        *,
        device: str | None = None,
        batch_size: int = 32,
        max_batch: int = 256,
        model_id: str | None = None,
    ) -> None:
        model = os.fspath(model)
        for name, value in (("batch_size", batch_size), ("max_batch", max_batch)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name}={value!r} must be a positive int")
        if model_id is None and os.path.isdir(model):
            raise ConfigurationError(
                f"model {model!r} is a local folder: name the model it holds with model_id=, "
                "e.g. model_id='cross-encoder/ms-marco-MiniLM-L-6-v2'"
            )
        try:
            sentence_transformers = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise ImportError(
                "CrossEncoderReranker needs sentence-transformers; install it with:\n"
                "pip install 'engramdb[local]'"
            ) from exc
        self.model_name = model
        self._id = f"{self.provider}/{model_id or model}"
        self._batch_size = batch_size
        self._max_batch = max_batch
        self._model: Any = sentence_transformers.CrossEncoder(model, device=device)

    @property
    def id(self) -> str:
        return self._id

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """The model's score of each (query, text) pair, in input order."""
        if not isinstance(query, str):
            raise ValidationError(f"query must be a str, not a {type(query).__name__}")
        if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
            raise ValidationError("texts must be a list of strings")
        if not texts:
            return []
        raw = self._model.predict(
            [(query, text) for text in texts],
            batch_size=self._batch_size,
            show_progress_bar=False,
        )
        scores = [float(value) for value in getattr(raw, "tolist", lambda: raw)()]
        if len(scores) != len(texts) or not all(math.isfinite(score) for score in scores):
            raise ProviderError(
                f"cross-encoder {self.model_name!r} gave {len(scores)} scores for "
                f"{len(texts)} texts, or a score that is not finite",
                provider=self.provider,
            )
        return scores

    async def arerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return self.rerank(query, texts)

    def __repr__(self) -> str:
        return f"CrossEncoderReranker(model={self.model_name!r})"
