"""Gemini native embeddings: ``POST {base_url}/models/{model}:batchEmbedContents``.

The key travels in the ``x-goog-api-key`` header (default ``$GEMINI_API_KEY``, then
``$GOOGLE_API_KEY``). ``kind`` maps to ``taskType``: ``RETRIEVAL_DOCUMENT`` for
documents, ``RETRIEVAL_QUERY`` for queries; ``dimensions`` is sent as
``outputDimensionality``. At most 100 texts per call.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Mapping
from typing import Any, ClassVar, Unpack

import httpx

from engramdb import ConfigurationError, EmbedKind

from ._http import HTTPEmbedder
from ._options import HTTPOptions
from ._parse import field, float_vector, list_field

__all__ = ["GeminiEmbedder"]

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"


class GeminiEmbedder(HTTPEmbedder):
    """Embeddings from the Gemini API (``gemini-embedding-001`` and friends).

    Set ``query_task`` / ``document_task`` to ``None`` for a model that takes no task
    type (then use ``query_prefix`` / ``document_prefix`` instead).
    """

    provider = "gemini"
    default_max_batch = 100
    # Gemini documents 2,048 input tokens for these models; 3 characters per token.
    default_char_budget = 6_000
    char_budgets: ClassVar[Mapping[str, int]] = {
        "gemini-embedding-001": 6_000,
        "text-embedding-004": 6_000,
    }
    known_dimensions: ClassVar[Mapping[str, int]] = {
        "gemini-embedding-001": 3072,
        "text-embedding-004": 768,
    }

    def __init__(
        self,
        model: str = "gemini-embedding-001",
        *,
        api_key: str | None = None,
        base_url: str = GEMINI_BASE_URL,
        query_task: str | None = "RETRIEVAL_QUERY",
        document_task: str | None = "RETRIEVAL_DOCUMENT",
        **options: Unpack[HTTPOptions],
    ) -> None:
        api_key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not api_key:
            raise ConfigurationError(
                "no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) or pass api_key="
            )
        model = model.removeprefix("models/")
        super().__init__(model, base_url=base_url, api_key=api_key, **options)
        self.query_task = query_task
        self.document_task = document_task

    def build_request(self, texts: list[str], kind: EmbedKind) -> httpx.Request:
        task = self.query_task if kind == "query" else self.document_task
        requests = []
        for text in texts:
            item: dict[str, Any] = {
                "model": f"models/{self.model}",
                "content": {"parts": [{"text": text}]},
            }
            if task:
                item["taskType"] = task
            if self._dimensions is not None:
                item["outputDimensionality"] = self._dimensions
            requests.append(item)
        assert self._secret is not None
        return self._post(
            f"{self.base_url}/models/{self.model}:batchEmbedContents",
            {"requests": requests},
            {"x-goog-api-key": self._secret.reveal()},
        )

    def parse_response(self, payload: Any) -> list[array[float]]:
        embeddings = list_field(payload, "embeddings", "embeddings", self.provider)
        return [
            float_vector(
                field(item, "values", f"embeddings[{i}].values", self.provider),
                f"embeddings[{i}].values",
                self.provider,
            )
            for i, item in enumerate(embeddings)
        ]

    def _variant(self) -> str | None:
        base = super()._variant()
        if (self.query_task, self.document_task) == ("RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT"):
            return base
        tasks = f"tasks-{self.query_task or 'none'}-{self.document_task or 'none'}".lower()
        return f"{tasks}-{base}" if base else tasks
