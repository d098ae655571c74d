"""Rerankers over HTTP: Cohere, Voyage AI, Jina AI, and self-hosted TEI and infinity.

Each is one :class:`HTTPReranker` subclass that says how to build one request and how
to read one answer; batching (``max_batch`` documents per request), retries
(``RetryPolicy``), redacted errors and the two drivers are written once here, on the
shared HTTP client of the embedders (``_http.HTTPService``). A key is sent only in the
``Authorization`` header.

The wire formats, as each service documents them:

- Cohere (https://docs.cohere.com/reference/rerank): ``POST /v2/rerank``
  ``{"model", "query", "documents": [str], "top_n"}`` → ``{"results": [{"index",
  "relevance_score"}]}``, best first. Key ``$COHERE_API_KEY`` (or ``$CO_API_KEY``).
- Voyage AI (https://docs.voyageai.com/reference/reranker-api): ``POST /v1/rerank``
  ``{"model", "query", "documents", "top_k", "truncation"}`` → ``{"data": [{"index",
  "relevance_score"}]}``. Key ``$VOYAGE_API_KEY``.
- Jina AI (https://jina.ai/reranker/): ``POST /v1/rerank`` ``{"model", "query",
  "documents", "top_n", "return_documents": false}`` → ``{"results": [{"index",
  "relevance_score"}]}``. Key ``$JINA_API_KEY``.
- Hugging Face text-embeddings-inference
  (https://huggingface.co/docs/text-embeddings-inference/quick_tour, "Re-rankers"):
  ``POST /rerank`` ``{"query", "texts"}`` → ``[{"index", "score"}]``. No key unless
  the server has one (``api_key_env`` names its variable).
- infinity (https://github.com/michaelfeil/infinity): ``POST /rerank``, Cohere's
  body and answer with the served model's name.

An answer must hold exactly one finite score per document, each index once; anything
else is a ``ProviderError`` (and the recall keeps its fused order, degraded).

Each reranker ``supports_timeout``: ``rerank(query, texts, timeout=S)`` ends within
``S`` seconds, its requests, retries and back-off waits included (a recall's rerank stage
passes what is left of its budget, ``engramdb.RerankGuard``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from typing import Any, ClassVar, Unpack

import httpx

from engramdb import ConfigurationError, ProviderError, ValidationError
from engramdb.driver import RetryPolicy
from engramdb.validate import check_float

from ._flow import Flow, adrive_all, drive
from ._http import HTTPService, _safe_url
from ._options import ServiceOptions
from ._parse import field, json_payload, list_field

__all__ = [
    "CohereReranker",
    "HTTPReranker",
    "InfinityReranker",
    "JinaReranker",
    "TEIReranker",
    "VoyageReranker",
]


class HTTPReranker(HTTPService):
    """Base class of the HTTP rerankers (the :class:`engramdb.Reranker` protocol).

    Subclasses set :attr:`provider`, :attr:`default_base_url`, :attr:`key_variables`
    (the environment variables a key is read from; empty: no key needed),
    :attr:`default_max_batch`, and implement :meth:`build_request` and
    :meth:`parse_response`.
    """

    provider: str = "http"
    default_base_url: ClassVar[str] = ""
    key_variables: ClassVar[tuple[str, ...]] = ()
    default_max_batch: ClassVar[int] = 100
    supports_timeout: ClassVar[bool] = True
    """``rerank`` and ``arerank`` take ``timeout=`` (seconds for the whole call)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_batch: int | None = None,
        max_concurrency: int = 1,
        retry: RetryPolicy | None = None,
        **options: Unpack[ServiceOptions],
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"model={model!r} must be a non-empty model name")
        self.model = model
        variables = (api_key_env,) if api_key_env else self.key_variables
        api_key = api_key or next(
            (os.environ[name] for name in variables if os.environ.get(name)), None
        )
        if not api_key and self.key_variables and not api_key_env:
            raise ConfigurationError(
                f"no {self.provider} API key: set {' or '.join(self.key_variables)} "
                "or pass api_key="
            )
        url = base_url or self.default_base_url
        if not url:
            raise ConfigurationError(f"{self.provider} needs base_url=, e.g. http://host:8080")
        self._init_http(api_key=api_key, base_url=url, timeout=timeout, retry=retry, **options)
        for name, value in (("max_batch", max_batch), ("max_concurrency", max_concurrency)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigurationError(f"{name}={value!r} must be a positive int")
        self._max_batch = max_batch or self.default_max_batch
        self.max_concurrency = max_concurrency

    # -- the Reranker protocol -----------------------------------------------------------

    @property
    def id(self) -> str:
        """``provider/model``, e.g. ``cohere/rerank-v3.5``."""
        return f"{self.provider}/{self.model}"

    @property
    def max_batch(self) -> int:
        """The most documents one request carries; more are sent in several requests."""
        return self._max_batch

    def rerank(
        self, query: str, texts: Sequence[str], *, timeout: float | None = None
    ) -> list[float]:
        """One relevance score per text, in input order (``max_batch`` per request).
        ``timeout``: the seconds the whole call may take, retries and waits included
        (each request's timeouts are cut to what is left; a retry that cannot end in
        time is not made); None: as the retry policy and ``timeout=`` of each request
        allow."""
        flows = self.batch_flows(query, texts, _deadline(timeout))
        client = self._sync_client()
        return [score for flow in flows for score in drive(flow, client, self._sleep)]

    async def arerank(
        self, query: str, texts: Sequence[str], *, timeout: float | None = None
    ) -> list[float]:
        """Like :meth:`rerank`, awaited; up to ``max_concurrency`` requests in flight."""
        flows = self.batch_flows(query, texts, _deadline(timeout))
        client = self._async_http_client()
        results = await adrive_all(flows, client, self._asleep, self.max_concurrency)
        return [score for batch in results for score in batch]

    # -- flows ---------------------------------------------------------------------------

    def batch_flows(
        self, query: str, texts: Sequence[str], deadline: float | None = None
    ) -> list[Flow[list[float]]]:
        """One flow per ``max_batch`` texts (the arguments checked now), all ending by
        ``deadline`` (``time.monotonic()``) if given."""
        if not isinstance(query, str):
            raise ValidationError(f"query must be a str, not a {type(query).__name__}")
        if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
            raise ValidationError("texts must be a list of strings")
        size = self._max_batch
        return [
            self.batch_flow(query, list(texts[i : i + size]), deadline)
            for i in range(0, len(texts), size)
        ]

    def batch_flow(
        self, query: str, texts: list[str], deadline: float | None = None
    ) -> Flow[list[float]]:
        """Flow: score one batch, with retries (none past ``deadline``); the answer checked."""

        def read(response: httpx.Response) -> list[float]:
            return self.parse_response(json_payload(response, self.provider), len(texts))

        return (yield from self._send(self.build_request(query, texts), read, deadline))

    # -- what a provider implements ------------------------------------------------------

    def build_request(self, query: str, texts: list[str]) -> httpx.Request:
        """The HTTP request scoring ``texts`` against ``query``."""
        raise NotImplementedError

    def parse_response(self, payload: Any, count: int) -> list[float]:
        """The ``count`` scores of a successful answer's JSON ``payload``, in input order."""
        raise NotImplementedError

    def _indexed(self, rows: list[Any], path: str, score: str, count: int) -> list[float]:
        """Scores from ``[{"index": i, score: s}, ...]`` (any order), in input order."""
        scores: list[float | None] = [None] * count
        for position, row in enumerate(rows):
            index = field(row, "index", f"{path}[{position}].index", self.provider)
            value = field(row, score, f"{path}[{position}].{score}", self.provider)
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
                raise ProviderError(
                    f"{self.provider} answered index {index!r} at {path}[{position}] for "
                    f"{count} documents",
                    provider=self.provider,
                )
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ProviderError(
                    f"{self.provider} answered a {type(value).__name__} score at "
                    f"{path}[{position}], not a number",
                    provider=self.provider,
                )
            if not math.isfinite(value) or scores[index] is not None:
                problem = "is not finite" if scores[index] is None else "repeats an index"
                raise ProviderError(
                    f"{self.provider} answer {path}[{position}] {problem}",
                    provider=self.provider,
                )
            scores[index] = float(value)
        missing = sum(1 for value in scores if value is None)
        if missing:
            raise ProviderError(
                f"{self.provider} scored {count - missing} of {count} documents; the answer "
                "lacks the others",
                provider=self.provider,
            )
        return [value for value in scores if value is not None]

    def __repr__(self) -> str:
        key = "<secret>" if self._secret else None
        return (
            f"{type(self).__name__}(model={self.model!r}, "
            f"base_url={_safe_url(self.base_url)!r}, api_key={key})"
        )


def _deadline(timeout: object) -> float | None:
    """When a call given ``timeout`` seconds must end, on ``time.monotonic()``."""
    if timeout is None:
        return None
    return time.monotonic() + check_float("timeout", timeout, 0.0, 86_400.0)


class _CohereWire(HTTPReranker):
    """Cohere's body and answer: ``documents`` and ``top_n`` in, ``results`` out."""

    path: ClassVar[str] = "/v2/rerank"
    extra: ClassVar[dict[str, Any]] = {}  # more fields of the body

    def build_request(self, query: str, texts: list[str]) -> httpx.Request:
        body = {
            "model": self.model,
            "query": query,
            "documents": texts,
            "top_n": len(texts),
            **self.extra,
        }
        return self._post(f"{self.base_url}{self.path}", body, self._bearer())

    def parse_response(self, payload: Any, count: int) -> list[float]:
        rows = list_field(payload, "results", "results", self.provider)
        return self._indexed(rows, "results", "relevance_score", count)


class CohereReranker(_CohereWire):
    """Cohere Rerank (``rerank-v3.5``, ``rerank-english-v3.0`` ...)."""

    provider = "cohere"
    default_base_url = "https://api.cohere.com"
    key_variables = ("COHERE_API_KEY", "CO_API_KEY")
    default_max_batch = 1000  # Cohere advises at most 1,000 documents per request

    def __init__(self, model: str = "rerank-v3.5", **options: Any) -> None:
        super().__init__(model, **options)


class JinaReranker(_CohereWire):
    """Jina AI Reranker (``jina-reranker-v2-base-multilingual`` ...)."""

    provider = "jina"
    default_base_url = "https://api.jina.ai"
    key_variables = ("JINA_API_KEY",)
    path = "/v1/rerank"
    extra: ClassVar[dict[str, Any]] = {"return_documents": False}

    def __init__(self, model: str = "jina-reranker-v2-base-multilingual", **options: Any) -> None:
        super().__init__(model, **options)


class InfinityReranker(_CohereWire):
    """A self-hosted infinity server's ``/rerank`` (Cohere's wire), ``base_url`` given."""

    provider = "infinity"
    path = "/rerank"
    default_max_batch = 32


class VoyageReranker(HTTPReranker):
    """Voyage AI rerankers (``rerank-2``, ``rerank-2.5``, ``rerank-2-lite`` ...)."""

    provider = "voyage"
    default_base_url = "https://api.voyageai.com/v1"
    key_variables = ("VOYAGE_API_KEY",)
    default_max_batch = 1000  # Voyage takes at most 1,000 documents per request

    def __init__(self, model: str = "rerank-2", **options: Any) -> None:
        super().__init__(model, **options)

    def build_request(self, query: str, texts: list[str]) -> httpx.Request:
        body = {
            "model": self.model,
            "query": query,
            "documents": texts,
            "top_k": len(texts),
            "truncation": True,
        }
        return self._post(f"{self.base_url}/rerank", body, self._bearer())

    def parse_response(self, payload: Any, count: int) -> list[float]:
        rows = list_field(payload, "data", "data", self.provider)
        return self._indexed(rows, "data", "relevance_score", count)


class TEIReranker(HTTPReranker):
    """A Hugging Face text-embeddings-inference server serving a reranker, at
    ``base_url``; its ``model`` names the model for the reranker's id (TEI serves one)."""

    provider = "tei"
    default_max_batch = 32  # TEI's --max-client-batch-size default

    def __init__(self, model: str = "reranker", **options: Any) -> None:
        super().__init__(model, **options)

    def build_request(self, query: str, texts: list[str]) -> httpx.Request:
        return self._post(
            f"{self.base_url}/rerank", {"query": query, "texts": texts}, self._bearer()
        )

    def parse_response(self, payload: Any, count: int) -> list[float]:
        if not isinstance(payload, list):
            raise ProviderError(
                f"tei answered a {type(payload).__name__}, not a list of {{index, score}}; "
                "check that base_url is a TEI server serving a reranker",
                provider=self.provider,
            )
        return self._indexed(payload, "answer", "score", count)
