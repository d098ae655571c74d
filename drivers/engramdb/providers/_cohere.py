"""Cohere embeddings (API v2): ``POST {base_url}/v2/embed``.

Body ``{"model", "texts", "input_type", "embedding_types": ["float"], "truncate"}``;
answer ``{"embeddings": {"float": [[...]]}}``. ``kind`` maps to ``input_type``
``search_document`` / ``search_query``. Key: bearer header, ``$COHERE_API_KEY`` (or
``$CO_API_KEY``). At most 96 texts per call.
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

__all__ = ["CohereEmbedder"]

COHERE_BASE_URL = "https://api.cohere.com"


class CohereEmbedder(HTTPEmbedder):
    """Embeddings from Cohere ``embed-*`` models. ``dimensions`` is sent as
    ``output_dimension`` (``embed-v4.0``)."""

    provider = "cohere"
    default_max_batch = 96
    # v3 models take 512 tokens, embed-v4.0 128k; 3 characters per token
    default_char_budget = 1_500
    char_budgets: ClassVar[Mapping[str, int]] = {"embed-v4.0": 384_000}
    known_dimensions: ClassVar[Mapping[str, int]] = {
        "embed-v4.0": 1536,
        "embed-english-v3.0": 1024,
        "embed-multilingual-v3.0": 1024,
        "embed-english-light-v3.0": 384,
        "embed-multilingual-light-v3.0": 384,
    }

    def __init__(
        self,
        model: str = "embed-v4.0",
        *,
        api_key: str | None = None,
        base_url: str = COHERE_BASE_URL,
        **options: Unpack[HTTPOptions],
    ) -> None:
        api_key = api_key or os.environ.get("COHERE_API_KEY") or os.environ.get("CO_API_KEY")
        if not api_key:
            raise ConfigurationError("no Cohere API key: set COHERE_API_KEY or pass api_key=")
        super().__init__(model, base_url=base_url, api_key=api_key, **options)

    def build_request(self, texts: list[str], kind: EmbedKind) -> httpx.Request:
        body: dict[str, Any] = {
            "model": self.model,
            "texts": texts,
            "input_type": "search_query" if kind == "query" else "search_document",
            "embedding_types": ["float"],
            "truncate": "END" if self.truncate == "end" else "NONE",
        }
        if self._dimensions is not None:
            body["output_dimension"] = self._dimensions
        return self._post(f"{self.base_url}/v2/embed", body, self._bearer())

    def parse_response(self, payload: Any) -> list[array[float]]:
        embeddings = field(payload, "embeddings", "embeddings", self.provider)
        rows = list_field(embeddings, "float", "embeddings.float", self.provider)
        return [
            float_vector(values, f"embeddings.float[{i}]", self.provider)
            for i, values in enumerate(rows)
        ]
