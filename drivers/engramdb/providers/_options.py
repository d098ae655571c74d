"""The keyword options every HTTP provider (``ServiceOptions``) and embedder
(``HTTPOptions``, see ``HTTPEmbedder``) accepts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, TypedDict

import httpx

from engramdb.driver import RetryPolicy

__all__ = ["HTTPOptions", "ServiceOptions"]


class ServiceOptions(TypedDict, total=False):
    """The transport and test hooks every HTTP provider takes (``HTTPService``)."""

    transport: httpx.BaseTransport | None
    async_transport: httpx.AsyncBaseTransport | None
    client: httpx.Client | None
    async_client: httpx.AsyncClient | None
    sleep: Callable[[float], None] | None
    asleep: Callable[[float], Awaitable[object]] | None
    random: Callable[[], float] | None
    clock: Callable[[], float] | None


class HTTPOptions(ServiceOptions, total=False):
    dimensions: int | None
    timeout: float
    max_batch: int | None
    max_concurrency: int
    retry: RetryPolicy | None
    truncate: Literal["end", "error"]
    max_chars: int | None
    query_prefix: str | None
    document_prefix: str | None
