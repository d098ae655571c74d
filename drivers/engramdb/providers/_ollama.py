"""Ollama native embeddings: ``POST {host}/api/embed``.

Body ``{"model", "input": [...], "truncate", "dimensions"}``; answer
``{"embeddings": [[...], ...]}``. The host defaults to ``$OLLAMA_HOST`` or
``http://localhost:11434``; no key is needed locally (``$OLLAMA_API_KEY`` is sent as a
bearer token when set, for hosted Ollama). ``nomic-embed-text`` gets its documented
``search_query: `` / ``search_document: `` prefixes unless you set your own.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Mapping
from typing import Any, ClassVar, Unpack

import httpx

from engramdb import EmbedKind

from ._http import HTTPEmbedder
from ._options import HTTPOptions
from ._parse import float_vector, list_field

__all__ = ["OllamaEmbedder"]

_NOMIC = ("search_query: ", "search_document: ")


class OllamaEmbedder(HTTPEmbedder):
    """Embeddings from a local (or hosted) Ollama server."""

    provider = "ollama"
    default_max_batch = 64
    default_char_budget = 8_000
    # context 8,192 / 512 / 2,048 tokens; 3 characters per token
    char_budgets: ClassVar[Mapping[str, int]] = {
        "nomic-embed-text": 24_000,
        "mxbai-embed-large": 1_500,
        "all-minilm": 1_500,
        "embeddinggemma": 6_000,
    }
    known_dimensions: ClassVar[Mapping[str, int]] = {
        "nomic-embed-text": 768,
        "mxbai-embed-large": 1024,
        "all-minilm": 384,
        "embeddinggemma": 768,
    }
    default_prefixes: ClassVar[Mapping[str, tuple[str, str]]] = {"nomic-embed-text": _NOMIC}

    def __init__(
        self,
        model: str = "nomic-embed-text",
        *,
        host: str | None = None,
        api_key: str | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        host = host or os.environ.get("OLLAMA_HOST") or "http://localhost:11434"
        if not host.startswith(("http://", "https://")):
            host = f"http://{host}"  # OLLAMA_HOST is often written as "0.0.0.0:11434"
        api_key = api_key or os.environ.get("OLLAMA_API_KEY") or None
        super().__init__(model, base_url=host, api_key=api_key, **options)

    def build_request(self, texts: list[str], kind: EmbedKind) -> httpx.Request:
        body: dict[str, Any] = {
            "model": self.model,
            "input": texts,
            "truncate": self.truncate == "end",
        }
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        return self._post(f"{self.base_url}/api/embed", body, self._bearer())

    def parse_response(self, payload: Any) -> list[array[float]]:
        embeddings = list_field(payload, "embeddings", "embeddings", self.provider)
        return [
            float_vector(values, f"embeddings[{i}]", self.provider)
            for i, values in enumerate(embeddings)
        ]

    def _model_key(self) -> str:
        name, _, tag = self.model.partition(":")
        return name if tag in ("", "latest") else self.model

    def _space_model(self) -> str:
        return self._model_key()
