"""Voyage AI embeddings: ``POST {base_url}/embeddings``.

Body ``{"model", "input", "input_type": "document"|"query", "truncation",
"output_dimension"}``; answer ``{"data": [{"embedding", "index"}]}`` (OpenAI-shaped).
Key: bearer header, ``$VOYAGE_API_KEY``.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Mapping
from typing import Any, ClassVar, Unpack

import httpx

from engramdb import ConfigurationError, EmbedKind

from ._http import HTTPEmbedder
from ._openai import parse_openai_data
from ._options import HTTPOptions

__all__ = ["VoyageEmbedder"]

VOYAGE_BASE_URL = "https://api.voyageai.com/v1"


class VoyageEmbedder(HTTPEmbedder):
    """Embeddings from Voyage AI ``voyage-*`` models."""

    provider = "voyage"
    default_max_batch = 128
    # voyage-3.5 / 3-large / code-3 take 32,000 tokens; 3 characters per token
    default_char_budget = 96_000
    known_dimensions: ClassVar[Mapping[str, int]] = {
        "voyage-3.5": 1024,
        "voyage-3.5-lite": 1024,
        "voyage-3-large": 1024,
        "voyage-code-3": 1024,
        "voyage-3": 1024,
        "voyage-3-lite": 512,
    }

    def __init__(
        self,
        model: str = "voyage-3.5",
        *,
        api_key: str | None = None,
        base_url: str = VOYAGE_BASE_URL,
        **options: Unpack[HTTPOptions],
    ) -> None:
        api_key = api_key or os.environ.get("VOYAGE_API_KEY")
        if not api_key:
            raise ConfigurationError("no Voyage API key: set VOYAGE_API_KEY or pass api_key=")
        super().__init__(model, base_url=base_url, api_key=api_key, **options)

    def build_request(self, texts: list[str], kind: EmbedKind) -> httpx.Request:
        body: dict[str, Any] = {
            "model": self.model,
            "input": texts,
            "input_type": kind,
            "truncation": self.truncate == "end",
        }
        if self._dimensions is not None:
            body["output_dimension"] = self._dimensions
        return self._post(f"{self.base_url}/embeddings", body, self._bearer())

    def parse_response(self, payload: Any) -> list[array[float]]:
        return parse_openai_data(payload, self.provider)
