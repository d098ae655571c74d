"""OpenAI and OpenAI-compatible embeddings: ``POST {base_url}/embeddings``.

Covers OpenAI, Azure OpenAI (``api-key`` header, ``api-version`` parameter), OpenRouter,
vLLM, LM Studio, Text Embeddings Inference, Ollama's ``/v1`` and Workers AI's ``/ai/v1``.
The request asks for ``encoding_format: "base64"`` (4 bytes per value instead of ~20
characters of JSON) and the response is decoded with the core float32 codec; a server
that answers with float lists is read as well, and one that rejects the option (HTTP
400/422 mentioning it) is asked again, once, with float lists.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Unpack

import httpx

from engramdb import ConfigurationError, EmbedKind, ProviderError, ProviderHTTPError

from ._flow import Flow
from ._http import HTTPEmbedder
from ._options import HTTPOptions
from ._parse import base64_vector, field, float_vector, list_field

__all__ = ["AzureOpenAIEmbedder", "OpenAIEmbedder", "parse_openai_data"]

OPENAI_BASE_URL = "https://api.openai.com/v1"


def parse_openai_data(payload: Any, provider: str) -> list[array[float]]:
    """Vectors from an OpenAI-style ``{"data": [{"embedding", "index"}]}`` payload.

    ``embedding`` is a list of floats or a base64 string of little-endian float32;
    results are put back in input order by ``index``.
    """
    data = list_field(payload, "data", "data", provider)
    indexed: list[tuple[int, array[float]]] = []
    for position, item in enumerate(data):
        path = f"data[{position}]"
        embedding = field(item, "embedding", f"{path}.embedding", provider)
        index = item.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int):
            raise ProviderError(
                f"{provider} response field '{path}.index' is {index!r}, not an int",
                provider=provider,
            )
        if isinstance(embedding, str):
            vector = base64_vector(embedding, f"{path}.embedding", provider)
        else:
            vector = float_vector(embedding, f"{path}.embedding", provider)
        indexed.append((index, vector))
    indexed.sort(key=lambda pair: pair[0])
    if [index for index, _ in indexed] != list(range(len(indexed))):
        raise ProviderError(
            f"{provider} response field 'data[].index' is not 0..{len(indexed) - 1} "
            "exactly once each; the response is unusable",
            provider=provider,
        )
    return [vector for _, vector in indexed]


class OpenAIEmbedder(HTTPEmbedder):
    """Embeddings from OpenAI or any server speaking its ``/embeddings`` API.

    ``api_key`` defaults to ``$OPENAI_API_KEY`` only when ``base_url`` is OpenAI's own
    (a key is never sent to another host unless you pass it, or name its variable with
    ``api_key_env``). With another ``base_url`` the space's provider is
    ``openai-compatible`` unless you name it (``provider="vllm"``). ``dimensions`` is
    sent as the ``dimensions`` option (models ``text-embedding-3-*``) unless
    ``send_dimensions=False``.
    """

    provider = "openai"
    default_max_batch = 512
    default_char_budget = 24_000
    # OpenAI documents 8,191 input tokens for these models; 3 characters per token.
    char_budgets: ClassVar[Mapping[str, int]] = {
        "text-embedding-3-small": 24_000,
        "text-embedding-3-large": 24_000,
        "text-embedding-ada-002": 24_000,
    }
    known_dimensions: ClassVar[Mapping[str, int]] = {
        "text-embedding-3-small": 1536,
        "text-embedding-3-large": 3072,
        "text-embedding-ada-002": 1536,
    }

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        provider: str | None = None,
        encoding: Literal["base64", "float"] = "base64",
        send_dimensions: bool = True,
        auth_header: str = "authorization",
        params: Mapping[str, str] | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        url = (base_url or OPENAI_BASE_URL).rstrip("/")
        if api_key is None:
            if api_key_env:
                api_key = os.environ.get(api_key_env) or None
                if api_key is None:
                    raise ConfigurationError(
                        f"the environment variable {api_key_env} is not set; set it or "
                        "pass api_key="
                    )
            elif url == OPENAI_BASE_URL:
                api_key = os.environ.get("OPENAI_API_KEY") or None
        if url == OPENAI_BASE_URL and not api_key:
            raise ConfigurationError("no OpenAI API key: set OPENAI_API_KEY or pass api_key=")
        if encoding not in ("base64", "float"):
            raise ConfigurationError(f"encoding={encoding!r} must be 'base64' or 'float'")
        if provider is None and url != OPENAI_BASE_URL:
            provider = "openai-compatible"  # the space must not claim OpenAI's vectors
        if provider is not None:
            self.provider = provider
        super().__init__(model, base_url=url, api_key=api_key, **options)
        self.encoding = encoding
        self.send_dimensions = send_dimensions
        self.auth_header = auth_header.lower()
        self.params = dict(params or {})

    def build_request(self, texts: list[str], kind: EmbedKind) -> httpx.Request:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self._dimensions is not None and self.send_dimensions:
            body["dimensions"] = self._dimensions
        if self.encoding == "base64":
            body["encoding_format"] = "base64"
        return self._post(f"{self.base_url}/embeddings", body, self._auth(), self.params or None)

    def _auth(self) -> dict[str, str]:
        if self._secret is None:
            return {}
        if self.auth_header == "authorization":
            return self._bearer()
        return {self.auth_header: self._secret.reveal()}

    def parse_response(self, payload: Any) -> list[array[float]]:
        return parse_openai_data(payload, self.provider)

    def batch_flow(self, texts: list[str], kind: EmbedKind) -> Flow[list[array[float]]]:
        try:
            return (yield from super().batch_flow(texts, kind))
        except ProviderHTTPError as exc:
            if not (
                self.encoding == "base64"
                and exc.status in (400, 422)
                and ("encoding" in exc.body.lower() or "base64" in exc.body.lower())
            ):
                raise
        self.encoding = "float"  # this server cannot do base64; ask for float lists
        return (yield from super().batch_flow(texts, kind))

    def _space_model(self) -> str:
        return self.model.replace("@", "_")


class AzureOpenAIEmbedder(OpenAIEmbedder):
    """Azure OpenAI: ``{endpoint}/openai/deployments/{deployment}/embeddings?api-version=``.

    The key goes in the ``api-key`` header (default ``$AZURE_OPENAI_API_KEY``); the
    endpoint defaults to ``$AZURE_OPENAI_ENDPOINT``. The space's model is the deployment.
    """

    provider = "azure-openai"
    default_max_batch = 512

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str | None = None,
        api_version: str = "2024-10-21",
        api_key: str | None = None,
        **options: Any,
    ) -> None:
        endpoint = endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
        if not endpoint:
            raise ConfigurationError(
                "no Azure OpenAI endpoint: set AZURE_OPENAI_ENDPOINT or pass endpoint="
            )
        api_key = api_key or os.environ.get("AZURE_OPENAI_API_KEY") or None
        if not api_key:
            raise ConfigurationError(
                "no Azure OpenAI API key: set AZURE_OPENAI_API_KEY or pass api_key="
            )
        super().__init__(
            deployment,
            base_url=f"{endpoint.rstrip('/')}/openai/deployments/{deployment}",
            api_key=api_key,
            auth_header="api-key",
            provider="azure-openai",
            params={"api-version": api_version},
            **options,
        )
