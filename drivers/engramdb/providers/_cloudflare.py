"""Cloudflare Workers AI over REST: ``POST {base}/accounts/{account_id}/ai/run/{model}``.

Body ``{"text": [...]}``; answer ``{"result": {"shape": [n, d], "data": [[...]]},
"success": true}``. The token travels as a bearer header (``$CLOUDFLARE_API_TOKEN``);
the account id (``$CLOUDFLARE_ACCOUNT_ID``) is not secret. At most 100 texts per call.
The space id drops the model's leading ``@``: ``cloudflare/cf/baai/bge-base-en-v1.5@768``
(the Workers AI binding embedder uses the same id, so vectors are shared).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Unpack

import httpx

from engramdb import ConfigurationError, EmbedKind, ProviderError
from engramdb.driver import WORKERS_AI_DEFAULT_MAX_CHARS as DEFAULT_MAX_CHARS
from engramdb.driver import WORKERS_AI_DEFAULT_MODEL as DEFAULT_MODEL
from engramdb.driver import WORKERS_AI_MAX_BATCH as MAX_BATCH
from engramdb.driver import WORKERS_AI_MODELS as MODELS

from ._http import HTTPEmbedder
from ._options import HTTPOptions
from ._parse import field, float_vector, list_field

__all__ = ["CloudflareEmbedder"]

CLOUDFLARE_BASE_URL = "https://api.cloudflare.com/client/v4"


class CloudflareEmbedder(HTTPEmbedder):
    """Embeddings from Workers AI text-embedding models (``@cf/baai/bge-*``); sizes and
    character budgets come from the table the Workers AI binding embedder shares."""

    provider = "cloudflare"
    default_max_batch = MAX_BATCH
    default_char_budget = DEFAULT_MAX_CHARS
    char_budgets: ClassVar[Mapping[str, int]] = {
        name: model.max_chars for name, model in MODELS.items()
    }
    known_dimensions: ClassVar[Mapping[str, int]] = {
        name: model.dimensions for name, model in MODELS.items()
    }

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        account_id: str | None = None,
        api_token: str | None = None,
        base_url: str = CLOUDFLARE_BASE_URL,
        pooling: Literal["mean", "cls"] | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        account_id = account_id or os.environ.get("CLOUDFLARE_ACCOUNT_ID")
        api_token = api_token or os.environ.get("CLOUDFLARE_API_TOKEN")
        if not account_id or not api_token:
            raise ConfigurationError(
                "Workers AI needs CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_API_TOKEN (or "
                "account_id= and api_token=)"
            )
        if pooling not in (None, "mean", "cls"):
            raise ConfigurationError(f"pooling={pooling!r} must be 'mean' or 'cls'")
        max_batch = options.get("max_batch")
        if max_batch is not None and max_batch > MAX_BATCH:
            raise ConfigurationError(
                f"max_batch={max_batch} is above Workers AI's {MAX_BATCH} texts"
            )
        self.account_id = account_id
        self.pooling = pooling
        super().__init__(model, base_url=base_url, api_key=api_token, **options)

    def build_request(self, texts: list[str], kind: EmbedKind) -> httpx.Request:
        body: dict[str, Any] = {"text": texts}
        if self.pooling:
            body["pooling"] = self.pooling
        return self._post(
            f"{self.base_url}/accounts/{self.account_id}/ai/run/{self.model}",
            body,
            self._bearer(),
        )

    def parse_response(self, payload: Any) -> list[array[float]]:
        if isinstance(payload, dict) and payload.get("success") is False:
            raise ProviderError(
                f"{self.provider} answered success=false; check the model name",
                provider=self.provider,
            )
        result = field(payload, "result", "result", self.provider)
        data = list_field(result, "data", "result.data", self.provider)
        return [
            float_vector(values, f"result.data[{i}]", self.provider)
            for i, values in enumerate(data)
        ]

    def _space_model(self) -> str:
        return self.model.removeprefix("@")

    def _variant(self) -> str | None:
        base = super()._variant()
        if self.pooling is None:
            return base
        return f"pooling-{self.pooling}-{base}" if base else f"pooling-{self.pooling}"
