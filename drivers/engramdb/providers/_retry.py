"""The retry policy and the flow that sends one request with retries.

Retried: HTTP 408, 425, 429, 500, 502, 503, 504, timeouts, connection errors, bodies
that do not decode (a broken gzip stream) and answers holding a number too large for a
float (``GarbledAnswer``), up to ``max_retries`` times (default 4, so at most 5
attempts). The wait before retry ``n`` (0-based) is
``min(max_delay, initial_delay * multiplier**n)`` scaled by a random factor in
``[0.5, 1.0)`` ("equal jitter"): about 0.5, 1, 2, 4 s by default, never above 20 s.
A ``Retry-After`` header (seconds or an HTTP date) replaces the computed wait; if it asks
for more than ``max_retry_after`` seconds the call fails at once instead of waiting.
Every other status fails at once with :class:`~engramdb.ProviderHTTPError`.

With a ``deadline`` (a rerank stage's budget, on the ``monotonic`` clock) the flow ends
by then: each attempt's timeouts are cut to the time left, and a retry whose wait
would end past the deadline is not made (the last failure is raised at once).
"""

from __future__ import annotations

import logging
import math
import random as _random
import time
from collections.abc import Callable, Iterable
from email.utils import parsedate_to_datetime
from typing import TypeVar

import httpx

from engramdb import ProviderError, ProviderHTTPError, ProviderTimeoutError
from engramdb.driver import RETRY_STATUSES, RetryPolicy

from ._flow import Flow, Sleep
from ._parse import GarbledAnswer
from ._redact import Secret, redact

__all__ = ["RETRY_STATUSES", "RetryPolicy", "parse_retry_after", "send_with_retries"]

logger = logging.getLogger("engramdb.providers")

T = TypeVar("T")

_PHASES = ("connect", "read", "write", "pool")  # httpx's timeouts, each cut to a deadline
_SPENT = "no retry: the time budget would end before another attempt"


_HINTS = {
    400: "the provider rejected the request; check the model name and options",
    401: "check the API key (argument or environment variable)",
    403: "the API key is not allowed to use this model or account",
    404: "check the model name and the base URL",
    413: "the batch is too large; lower max_batch",
    422: "the provider rejected the request; check the model name and options",
}


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value, or ``None`` if absent/invalid.

    Accepts delta-seconds (``"3"``, ``"1.5"``) and an HTTP date, relative to ``now``
    (Unix seconds). A date in the past gives ``0.0``.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def send_with_retries(
    request: httpx.Request,
    policy: RetryPolicy,
    *,
    provider: str,
    read: Callable[[httpx.Response], T],
    secrets: Iterable[Secret | None] = (),
    random: Callable[[], float] = _random.random,
    clock: Callable[[], float] = time.time,
    deadline: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> Flow[T]:
    """Flow: send ``request`` until a 2xx answer reads, or the policy gives up.

    Returns ``read(response)`` of the first successful response. Retried like a
    retryable status: timeouts, connection errors, a body that does not decode
    (``httpx.DecodingError``: a broken gzip stream) and a :class:`GarbledAnswer` raised
    by ``read``. Raises ``ProviderHTTPError`` (error status), ``ProviderTimeoutError``
    (timeouts after retries) or ``ProviderError`` (any other failure after retries).
    Messages hold the provider, the host and a redacted body excerpt, never a header.
    ``deadline`` (on ``monotonic``): no attempt and no wait goes past it (module docstring).
    """
    secrets = tuple(secrets)
    host = request.url.host
    timeouts = dict(request.extensions.get("timeout") or {})
    retry = 0
    while True:
        wait: float | None = None  # None: the policy's back-off, unless no retry is left
        cause: Exception
        failure: ProviderError
        if deadline is not None:  # this attempt may take only the time left
            left = max(deadline - monotonic(), 0.001)
            request.extensions["timeout"] = {
                name: left if value is None else min(value, left)
                for name, value in (timeouts or dict.fromkeys(_PHASES)).items()
            }
        try:
            response = yield request
        except httpx.TimeoutException as exc:
            cause, what = exc, type(exc).__name__
            failure = ProviderTimeoutError(
                f"{provider} at {host} did not answer in time after {retry + 1} attempts "
                f"({what}); raise timeout= or try again later",
                provider=provider,
            )
        except httpx.TransportError as exc:
            cause, what = exc, type(exc).__name__
            failure = ProviderError(
                f"could not reach {provider} at {host} after {retry + 1} attempts "
                f"({what}: {redact(str(exc), secrets)}); check the base URL and the network",
                provider=provider,
            )
        except httpx.DecodingError as exc:
            cause, what = exc, "undecodable body"
            detail = f"a body that does not decode, {type(exc).__name__}: {exc}"
            failure = _damaged(provider, host, retry, detail, secrets)
        else:
            assert response is not None
            status = response.status_code
            if 200 <= status < 300:
                try:
                    return read(response)
                except GarbledAnswer as exc:
                    cause, what = exc, "damaged answer"
                    failure = _damaged(provider, host, retry, str(exc), secrets)
            else:
                if status not in policy.retry_statuses or retry >= policy.max_retries:
                    raise _http_error(provider, host, response, secrets, retry)
                wait = parse_retry_after(response.headers.get("retry-after"), clock())
                if wait is not None and wait > policy.max_retry_after:
                    raise _http_error(
                        provider,
                        host,
                        response,
                        secrets,
                        retry,
                        note=f"it asked to wait {wait:.0f} s, more than "
                        f"max_retry_after={policy.max_retry_after:g} s",
                    )
                what = f"HTTP {status}"
                if wait is None:
                    wait = policy.backoff(retry, random())
                if deadline is not None and monotonic() + wait >= deadline:
                    raise _http_error(provider, host, response, secrets, retry, note=_SPENT)
        if wait is None:
            if retry >= policy.max_retries:
                raise failure from cause
            wait = policy.backoff(retry, random())
            if deadline is not None and monotonic() + wait >= deadline:
                raise failure from cause  # no time left to wait for another attempt
        _log_retry(provider, host, what, retry, policy, wait)
        yield Sleep(wait)
        retry += 1


def _damaged(
    provider: str, host: str, retry: int, detail: str, secrets: tuple[Secret | None, ...]
) -> ProviderError:
    return ProviderError(
        f"{provider} at {host} answered with a damaged body after {retry + 1} attempts "
        f"({redact(detail, secrets)}); try again later",
        provider=provider,
    )


def _log_retry(
    provider: str, host: str, what: str, retry: int, policy: RetryPolicy, delay: float
) -> None:
    logger.warning(
        "%s at %s: %s; retry %d of %d in %.2f s",
        provider,
        host,
        what,
        retry + 1,
        policy.max_retries,
        delay,
    )


def _http_error(
    provider: str,
    host: str,
    response: httpx.Response,
    secrets: tuple[Secret | None, ...],
    retries: int,
    note: str = "",
) -> ProviderHTTPError:
    status = response.status_code
    try:
        text = response.text
    except Exception:  # an undecodable body is still an error, just without excerpt
        text = ""
    body = redact(text, secrets)
    if note:
        hint = note
    elif status in _HINTS:
        hint = _HINTS[status]
    elif status == 429:
        hint = f"rate limited after {retries} retries; lower max_concurrency or try later"
    elif status >= 500:
        hint = f"the service is failing after {retries} retries; try again later"
    else:
        hint = "see the provider's documentation for this status"
    excerpt = f": {body}" if body else ""
    return ProviderHTTPError(
        f"{provider} at {host} answered HTTP {status}{excerpt} ({hint})",
        provider=provider,
        status=status,
        body=body,
    )
