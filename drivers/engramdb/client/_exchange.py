"""One call's I/O: a total deadline and an answer of bounded size, for both clients.

The client's flows (``engramdb.providers.Flow``) yield a request and its retries' waits;
an :class:`Exchange` performs them, sync (:func:`perform_sync`) or awaited
(:func:`perform_async`), so that

- **a request ends by its deadline**: ``timeout`` seconds after its first send, its
  connects, writes, every read, its retries and the waits between them included. The
  async client awaits each attempt under ``asyncio.timeout``; the sync one sends through
  :func:`deadline_transport`, whose sockets never wait past the deadline (a server that
  trickles its headers a byte at a time cannot hold a call), and checks the deadline
  between the chunks of a body. A wait that would end past the deadline fails at once.
- **an answer is at most ``max_answer_bytes``**, counted after decompression: the body is
  streamed, a declared ``Content-Length`` over the cap is refused before it is read, a
  gzip or deflate body is inflated a bounded piece at a time (a decompression bomb is
  refused after ``max_answer_bytes``, not after inflating it all), and the connection is
  closed on refusal. The client asks for ``gzip, deflate`` only; another encoding is
  refused.

Both failures are a :class:`~engramdb.StoreError` that names the request, the figure and
the option that changes it (``timeout=``, ``max_answer_bytes=``); neither is retried.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
import zlib
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

from engramdb import StoreError
from engramdb.providers import Sleep

__all__ = [
    "ACCEPT_ENCODING",
    "DEFAULT_MAX_ANSWER_BYTES",
    "Exchange",
    "deadline_transport",
    "perform_async",
    "perform_sync",
]

DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""The largest answer read by default, after decompression (64 MiB): the API's largest
answers, a recall of ``top_k=1000`` or a listing of 500 memories, hold at most 1,000 of
the largest texts (32 KiB) and metadata (16 KiB), 47 MiB before the fields around them."""
ERROR_EXCERPT_BYTES = 64 * 1024
"""How much of an error answer (not 2xx) is read: the API's are under a kilobyte; the
rest of a longer one is left unread, and the error is that of its status."""
ACCEPT_ENCODING = "gzip, deflate"
"""The encodings the client reads (inflated under the size cap); it asks for no other."""

_ENCODINGS = frozenset({"gzip", "x-gzip", "deflate"})
_AUTO_HEADER = 32 + zlib.MAX_WBITS  # zlib reads a gzip or a zlib header, whichever it finds
_UNFINISHED = "the answer had not all arrived"
_DEADLINE: ContextVar[float | None] = ContextVar("engramdb_client_deadline", default=None)
"""When the sync call on this thread must end (``time.monotonic``), for the sockets of
:func:`deadline_transport`; None outside a call."""


class Exchange:
    """The I/O state of one call of a client: the request being sent, when it must end
    (its first send plus ``timeout``), its attempts and what failed last."""

    def __init__(self, timeout: float, max_answer_bytes: int) -> None:
        self.timeout = timeout
        self.max_answer_bytes = max_answer_bytes
        self.end = 0.0
        self._request: httpx.Request | None = None
        self._attempts = 0
        self._last = ""

    def start(self, request: httpx.Request) -> httpx.Request:
        """``request`` about to be sent (again, for a retry), its timeouts set to the time
        left; a request not seen before starts its deadline."""
        if request is not self._request:
            self._request, self.end, self._attempts = request, time.monotonic() + self.timeout, 0
        self._attempts += 1
        request.extensions["timeout"] = httpx.Timeout(self.left()).as_dict()
        return request

    def left(self) -> float:
        """Seconds left before the deadline; its ``StoreError`` when none are."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise self.expired(_UNFINISHED)
        return left

    def after_failure(self, exc: Exception) -> None:
        """Record an attempt that failed with ``exc``; the deadline's ``StoreError`` when
        the deadline has passed (no retry could help)."""
        self.record(type(exc).__name__)
        if time.monotonic() >= self.end:
            raise self.expired(self._last) from exc

    def wait(self, seconds: float) -> None:
        """Before a retry's wait: its ``StoreError`` when the wait would end past the
        deadline (waiting could only end in the same failure, later)."""
        if seconds >= self.end - time.monotonic():
            raise self.expired(
                f"{self._last}; the retry's wait of {seconds:.1f} s would end past it"
            )

    def record(self, outcome: str) -> None:
        """Record what the last attempt met (``HTTP 503``, ``ReadTimeout``)."""
        self._last = f"after {self._attempts} attempt(s), the last {outcome}"

    def expired(self, detail: str) -> StoreError:
        assert self._request is not None
        url = self._request.url
        return StoreError(
            f"engramdb at {url.host} did not answer {self._request.method} {url.path} within "
            f"timeout={self.timeout:g} s ({detail}); the timeout covers a call with its "
            "retries: raise timeout= or check the server"
        )

    def too_large(self, declared: int | None = None) -> StoreError:
        """The error of an answer over the cap (``declared``: its Content-Length)."""
        assert self._request is not None
        url, cap = self._request.url, self.max_answer_bytes
        size = f"{declared:,} bytes, more than" if declared is not None else "more than"
        return StoreError(
            f"engramdb at {url.host} answered {self._request.method} {url.path} with {size} "
            f"max_answer_bytes={cap:,} (counted after decompression); ask for less (a "
            "smaller top_k or limit) or raise max_answer_bytes="
        )

    def body(self, response: httpx.Response) -> Body:
        """A reader of ``response``'s body (its headers checked first)."""
        return Body(self, response)

    def answer(self, response: httpx.Response, content: bytes) -> httpx.Response:
        """The answer as the flows read it: ``response`` with its decoded body."""
        self.record(f"HTTP {response.status_code}")
        headers = [
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx.Response(
            response.status_code, headers=headers, content=content, request=response.request
        )


class Body:
    """A body as it arrives: inflated (gzip or deflate) a bounded piece at a time, counted
    against the size cap (an error answer: cut to :data:`ERROR_EXCERPT_BYTES`), the
    deadline checked between its chunks."""

    def __init__(self, exchange: Exchange, response: httpx.Response) -> None:
        self._exchange = exchange
        self._excerpt = not response.is_success
        cap = exchange.max_answer_bytes
        self._cap = min(cap, ERROR_EXCERPT_BYTES) if self._excerpt else cap
        self._parts: list[bytes] = []
        self._size = 0
        self.complete = False  # an excerpt of an error answer is read
        encoding = response.headers.get("content-encoding", "").strip().lower()
        self._inflate: Any = None  # zlib's Decompress, which typeshed does not export
        if encoding in _ENCODINGS:
            self._inflate = zlib.decompressobj(_AUTO_HEADER)
        elif encoding not in ("", "identity"):
            raise StoreError(
                f"engramdb at {response.request.url.host} answered in the encoding "
                f"{encoding!r}, which the client did not ask for (it asks for "
                f"{ACCEPT_ENCODING}); is the URL an engramdb server?"
            )
        else:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self._cap and not self._excerpt:
                raise exchange.too_large(int(declared))

    def feed(self, raw: bytes) -> bool:
        """Take the next chunk of the body as it came over the wire; False once no more
        is wanted (an error answer's excerpt is read)."""
        self._exchange.left()
        if self._inflate is None:
            self._keep(raw)
            return not self.complete
        data = raw
        while data and not self.complete:
            if self._inflate.eof:
                raise httpx.DecodingError("the body goes on past the end of its compressed data")
            try:
                # at most one byte past the cap: enough to know it is over
                self._keep(self._inflate.decompress(data, self._cap - self._size + 1))
            except zlib.error as exc:
                raise httpx.DecodingError(f"the compressed body is damaged: {exc}") from exc
            data = self._inflate.unconsumed_tail or self._inflate.unused_data
        return not self.complete

    def _keep(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > self._cap:
            if not self._excerpt:
                raise self._exchange.too_large()
            data = data[: len(data) - (self._size - self._cap)]
            self.complete = True
        self._parts.append(data)

    def content(self) -> bytes:
        """The body as read, decoded."""
        if self._inflate is not None and not self._inflate.eof and not self.complete:
            raise httpx.DecodingError("the compressed body ends before its end")
        return b"".join(self._parts)


def perform_sync(
    exchange: Exchange, client: httpx.Client, sleep: Callable[[float], None]
) -> Callable[[httpx.Request | Sleep], httpx.Response | None]:
    """``perform`` of :func:`engramdb.driver.run` for one call of the sync client."""

    def perform(effect: httpx.Request | Sleep) -> httpx.Response | None:
        if isinstance(effect, Sleep):
            exchange.wait(effect.seconds)
            sleep(effect.seconds)
            return None
        request = exchange.start(effect)
        token = _DEADLINE.set(exchange.end)
        try:
            response = client.send(request, stream=True)
            try:
                body = exchange.body(response)
                for chunk in response.iter_raw():
                    if not body.feed(chunk):
                        break
            finally:
                response.close()
        except httpx.TransportError as exc:
            exchange.after_failure(exc)
            raise
        finally:
            _DEADLINE.reset(token)
        return exchange.answer(response, body.content())

    return perform


def perform_async(
    exchange: Exchange, client: httpx.AsyncClient, sleep: Callable[[float], Awaitable[object]]
) -> Callable[[httpx.Request | Sleep], Awaitable[httpx.Response | None]]:
    """``perform`` of :func:`engramdb.driver.arun` for one call of the async client."""

    async def perform(effect: httpx.Request | Sleep) -> httpx.Response | None:
        if isinstance(effect, Sleep):
            exchange.wait(effect.seconds)
            await sleep(effect.seconds)
            return None
        request = exchange.start(effect)
        try:
            async with asyncio.timeout(exchange.left()):
                response = await client.send(request, stream=True)
                try:
                    body = exchange.body(response)
                    async for chunk in response.aiter_raw():
                        if not body.feed(chunk):
                            break
                finally:
                    await response.aclose()
        except TimeoutError:
            raise exchange.expired(_UNFINISHED) from None
        except httpx.TransportError as exc:
            exchange.after_failure(exc)
            raise
        return exchange.answer(response, body.content())

    return perform


# --- sockets that keep the sync call's deadline --------------------------------------------


def _within(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` of one socket operation, cut to what is left of the call's deadline;
    ``error`` when nothing is left."""
    end = _DEADLINE.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the call's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write ends by the deadline of the call it serves."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _within(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _within(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _within(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sync sockets, each connection a :class:`_DeadlineStream`."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _within(timeout, httpcore.ConnectTimeout)
        stream = self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context, made once (loading the CA bundle takes 0.1 s)."""
    return httpx.create_ssl_context()


class _DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport (with httpx's default limits) over :class:`_DeadlineStream`
    sockets: the sync client's, unless you pass ``transport=`` or ``client=``."""

    def __init__(self) -> None:  # not httpx's: it builds a pool that this one replaces
        # httpx takes no network backend; its transport sends through this one pool
        self._pool = httpcore.ConnectionPool(
            ssl_context=_ssl_context(),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=_DeadlineBackend(),
        )


def deadline_transport() -> httpx.HTTPTransport:
    """A transport whose sockets keep the deadline of the sync call they serve."""
    return _DeadlineTransport()
