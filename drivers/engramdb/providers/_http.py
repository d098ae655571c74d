"""``HTTPEmbedder``: batching, retries, validation and the two drivers, written once.

A provider subclass only says how to build one request and how to read one response
(:meth:`HTTPEmbedder.build_request`, :meth:`HTTPEmbedder.parse_response`); both are
pure functions of their arguments and the embedder's settings.
"""

from __future__ import annotations

import asyncio
import hashlib
import random as _random
import time
from array import array
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Self, TypeVar, Unpack

import httpx

from engramdb import ConfigurationError, EmbeddingSpace, EmbedKind, ProviderError, ValidationError

from ._flow import Flow, adrive_all, drive
from ._options import ServiceOptions
from ._parse import check_vectors, json_payload
from ._redact import Secret
from ._retry import RetryPolicy, send_with_retries

__all__ = ["HTTPEmbedder", "HTTPService", "Truncate"]

Truncate = Literal["end", "error"]
T = TypeVar("T")


class HTTPService:
    """What every HTTP provider shares (embedders and rerankers): the key (a
    :class:`Secret`, sent only in headers), the checked base URL, the timeout, the
    retry policy, the two httpx clients (one per event loop for the async one) and the
    sleeps, random and clock the retry flow uses."""

    provider: str = "http"

    def _init_http(
        self,
        *,
        api_key: str | None,
        base_url: str,
        timeout: float,
        retry: RetryPolicy | None,
        **options: Unpack[ServiceOptions],
    ) -> None:
        self._secret = Secret(api_key) if api_key else None
        self.base_url = base_url.rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"base_url={_safe_url(base_url)!r} must start with http:// or https://"
            )
        if _has_userinfo(self.base_url):
            raise ConfigurationError(
                f"base_url={_safe_url(base_url)!r} holds credentials before its host "
                "(user:password@); never put a key in a URL: pass api_key= or set the "
                "provider's environment variable"
            )
        if not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigurationError(f"timeout={timeout!r} must be a number of seconds > 0")
        self.timeout = float(timeout)
        self.retry = retry if retry is not None else RetryPolicy()
        transport = options.get("transport")
        self._transport = transport
        self._async_transport = options.get("async_transport")
        if self._async_transport is None and isinstance(transport, httpx.AsyncBaseTransport):
            self._async_transport = transport  # httpx.MockTransport serves both faces
        self._client = options.get("client")
        self._owns_client = self._client is None
        self._async_client = options.get("async_client")
        self._owns_async_client = self._async_client is None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._sleep = options.get("sleep") or time.sleep
        self._asleep = options.get("asleep") or asyncio.sleep
        self._random = options.get("random") or _random.random
        self._clock = options.get("clock") or time.time

    def _send(
        self,
        request: httpx.Request,
        read: Callable[[httpx.Response], T],
        deadline: float | None = None,
    ) -> Flow[T]:
        """Flow: ``request`` sent with the retry policy, its answer ``read``; with a
        ``deadline`` (``time.monotonic()``), no attempt or wait goes past it."""
        return send_with_retries(
            request,
            self.retry,
            provider=self.provider,
            read=read,
            secrets=(self._secret,),
            random=self._random,
            clock=self._clock,
            deadline=deadline,
        )

    def _post(
        self,
        url: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> httpx.Request:
        return httpx.Request(
            "POST",
            url,
            json=body,
            params=params,
            headers={"accept": "application/json", **(headers or {})},
            extensions={"timeout": httpx.Timeout(self.timeout).as_dict()},
        )

    def _bearer(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._secret.reveal()}"} if self._secret else {}

    def _sync_client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(transport=self._transport, timeout=self.timeout)
        return self._client

    def _async_http_client(self) -> httpx.AsyncClient:
        if not self._owns_async_client:
            assert self._async_client is not None
            return self._async_client
        loop = asyncio.get_running_loop()
        if self._async_client is None or self._async_loop is not loop:
            # an AsyncClient is bound to the loop it first ran on; make one per loop
            self._async_client = httpx.AsyncClient(
                transport=self._async_transport, timeout=self.timeout
            )
            self._async_loop = loop
        return self._async_client

    def close(self) -> None:
        """Close the HTTP client this provider created (not one you passed in)."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close the async HTTP client this provider created (not one you passed in)."""
        if self._owns_async_client and self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class HTTPEmbedder(HTTPService):
    """Base class of the HTTP embedding providers.

    Subclasses set :attr:`provider`, :attr:`default_max_batch`, the per-model tables
    :attr:`known_dimensions` / :attr:`char_budgets`, and implement
    :meth:`build_request` and :meth:`parse_response`.
    """

    provider: str = "http"
    default_max_batch: ClassVar[int] = 32
    default_char_budget: ClassVar[int] = 8_000
    known_dimensions: ClassVar[Mapping[str, int]] = {}
    char_budgets: ClassVar[Mapping[str, int]] = {}
    default_prefixes: ClassVar[Mapping[str, tuple[str, str]]] = {}

    def __init__(
        self,
        model: str,
        *,
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str,
        timeout: float = 30.0,
        max_batch: int | None = None,
        max_concurrency: int = 1,
        retry: RetryPolicy | None = None,
        truncate: Truncate = "end",
        max_chars: int | None = None,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
        client: httpx.Client | None = None,
        async_client: httpx.AsyncClient | None = None,
        sleep: Callable[[float], None] | None = None,
        asleep: Callable[[float], Awaitable[object]] | None = None,
        random: Callable[[], float] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"model={model!r} must be a non-empty model name")
        self.model = model
        self._dimensions = _positive_int_or_none("dimensions", dimensions)
        self._learned: int | None = None
        self._init_http(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            retry=retry,
            transport=transport,
            async_transport=async_transport,
            client=client,
            async_client=async_client,
            sleep=sleep,
            asleep=asleep,
            random=random,
            clock=clock,
        )
        batch = _positive_int_or_none("max_batch", max_batch)
        self._max_batch = batch if batch is not None else self.default_max_batch
        concurrency = _positive_int_or_none("max_concurrency", max_concurrency)
        self.max_concurrency = concurrency or 1
        if truncate not in ("end", "error"):
            raise ConfigurationError(f"truncate={truncate!r} must be 'end' or 'error'")
        self.truncate: Truncate = truncate
        budget = _positive_int_or_none("max_chars", max_chars)
        self.max_chars = budget or self.char_budgets.get(
            self._model_key(), self.default_char_budget
        )
        default_query, default_document = self.default_prefixes.get(self._model_key(), ("", ""))
        if query_prefix is None and document_prefix is None:
            query_prefix, document_prefix = default_query, default_document
        self.query_prefix = query_prefix or ""
        self.document_prefix = document_prefix or ""

    # -- the Embedder protocol ---------------------------------------------------------

    @property
    def space(self) -> EmbeddingSpace:
        """The embedding space; dimensions come from the settings, the first valid answer
        or the model table, in that order."""
        dimensions = (
            self._dimensions or self._learned or self.known_dimensions.get(self._model_key())
        )
        if dimensions is None:
            raise ConfigurationError(
                f"the dimensions of {self.provider} model {self.model!r} are not known until "
                "the first response; pass dimensions=N or call embed() once first"
            )
        return EmbeddingSpace(self.provider, self._space_model(), dimensions, self._variant())

    @property
    def dimensions_learned(self) -> bool:
        """True when the space's dimensions come from an answer, not from
        ``dimensions=``: ``Memory`` then checks a new space against the spaces its store
        holds before it stores vectors in it."""
        return self._dimensions is None and self._learned is not None

    def forget_dimensions(self) -> None:
        """Forget a size learned from an answer (``dimensions=`` stays): the next valid
        answer teaches it again. ``Memory`` calls it when it refuses a learned size that
        disagrees with the space its store holds for the model."""
        self._learned = None

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        """Embed ``texts`` (any number; sent in batches of ``max_batch``), in order."""
        flows = self.batch_flows(texts, kind)
        client = self._sync_client()
        return [vector for flow in flows for vector in drive(flow, client, self._sleep)]

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        """Like :meth:`embed`, awaited; up to ``max_concurrency`` batches in flight."""
        flows = self.batch_flows(texts, kind)
        client = self._async_http_client()
        results = await adrive_all(flows, client, self._asleep, self.max_concurrency)
        return [vector for batch in results for vector in batch]

    # -- flows -------------------------------------------------------------------------

    def batch_flows(self, texts: Sequence[str], kind: EmbedKind) -> list[Flow[list[array[float]]]]:
        """One flow per batch of at most ``max_batch`` texts (validated and prepared now)."""
        prepared = self.prepare(texts, kind)
        size = self._max_batch
        return [
            self.batch_flow(prepared[i : i + size], kind) for i in range(0, len(prepared), size)
        ]

    def batch_flow(self, texts: list[str], kind: EmbedKind) -> Flow[list[array[float]]]:
        """Flow: embed one batch of prepared texts, with retries, then validate."""
        vectors = yield from self._send(self.build_request(texts, kind), self._read)
        self._accept(vectors, len(texts))
        return vectors

    def _read(self, response: httpx.Response) -> list[array[float]]:
        return self.parse_response(json_payload(response, self.provider))

    def _accept(self, vectors: list[array[float]], count: int) -> None:
        """Check an answer; learn its size if it is the first valid one.

        Valid: ``count`` vectors of one size, finite, none all zeros. A size other than
        the expected one is a ``ProviderError``; a learned size is then forgotten, so a
        wrong first answer cannot pin the embedder to its size. Without ``dimensions=``,
        a model of :attr:`known_dimensions` must answer its documented size: a first
        answer of another size is a ``ProviderError`` and teaches nothing.
        """
        size = check_vectors(vectors, count=count, dimensions=None, provider=self.provider)
        if not size:
            return
        expected = self._dimensions or self._learned
        if expected is None:
            default = self.known_dimensions.get(self._model_key())
            if default is not None and size != default:
                raise ProviderError(
                    f"{self.provider} returned vectors of {size} dimensions but model "
                    f"{self.model!r} answers {default} unless told otherwise; nothing was "
                    f"learned from this answer, try again. If the server really serves "
                    f"{size}, pass dimensions={size}",
                    provider=self.provider,
                )
            self._learned = size
            return
        if size != expected:
            if self.dimensions_learned:
                self._learned = None  # the next valid answer teaches the size again
                hint = "the size learned from an earlier answer is forgotten"
            else:
                hint = "check the model and dimensions settings"
            raise ProviderError(
                f"{self.provider} returned vectors of {size} dimensions, expected "
                f"{expected}; {hint}",
                provider=self.provider,
            )

    def prepare(self, texts: Sequence[str], kind: EmbedKind) -> list[str]:
        """Validate ``texts``, cut over-long ones (``truncate="end"``), add the prefix."""
        if kind not in ("document", "query"):
            raise ValidationError(f"kind={kind!r} must be 'document' or 'query'")
        if isinstance(texts, str):
            raise ValidationError("texts must be a list of strings, not one string; wrap it")
        prefix = self.query_prefix if kind == "query" else self.document_prefix
        budget = max(1, self.max_chars - len(prefix))
        prepared = []
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValidationError(
                    f"texts[{index}] is a {type(text).__name__}; every text must be a str"
                )
            if len(text) > budget:
                if self.truncate == "error":
                    raise ValidationError(
                        f"texts[{index}] has {len(text)} characters; {self.provider} model "
                        f"{self.model!r} takes at most {budget} here; shorten it, raise "
                        "max_chars= or pass truncate='end'"
                    )
                text = text[:budget]
            prepared.append(prefix + text)
        return prepared

    # -- what a provider implements -----------------------------------------------------

    def build_request(self, texts: list[str], kind: EmbedKind) -> httpx.Request:
        """The HTTP request embedding ``texts`` (already prefixed and truncated)."""
        raise NotImplementedError

    def parse_response(self, payload: Any) -> list[array[float]]:
        """The vectors in a successful response's JSON ``payload``, in input order."""
        raise NotImplementedError

    # -- helpers for subclasses ---------------------------------------------------------

    def _model_key(self) -> str:
        return self.model

    def _space_model(self) -> str:
        return self.model

    def _variant(self) -> str | None:
        if not (self.query_prefix or self.document_prefix):
            return None
        digest = hashlib.sha256(
            f"{self.query_prefix}\x00{self.document_prefix}".encode()
        ).hexdigest()
        return f"prefix-{digest[:8]}"

    def __repr__(self) -> str:
        dimensions = self._dimensions or self._learned
        key = "<secret>" if self._secret else None
        return (
            f"{type(self).__name__}(model={self.model!r}, dimensions={dimensions!r}, "
            f"base_url={_safe_url(self.base_url)!r}, api_key={key})"
        )


def _positive_int_or_none(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name}={value!r} must be a positive int")
    return value


def _has_userinfo(url: str) -> bool:
    """Whether ``url`` has a user (and maybe a password) before its host; an unreadable
    URL counts as having one, so it is refused rather than sent."""
    try:
        return bool(httpx.URL(url).userinfo)
    except Exception:
        return "@" in url


def _safe_url(url: str) -> str:
    """``url`` without user info or query string (either could hold a credential)."""
    try:
        parsed = httpx.URL(url)
    except Exception:
        return "<invalid url>"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path}".rstrip("/")
