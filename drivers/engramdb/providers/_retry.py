"""The retry policy and the flow that sends one request with retries.

Retried: HTTP 408, 425, 429, 500, 502, 503, 504, timeouts and connection errors, up to
``max_retries`` times (default 4, so at most 5 attempts). The wait before retry ``n``
(0-based) is ``min(max_delay, initial_delay * multiplier**n)`` scaled by a random factor
in ``[0.5, 1.0)`` ("equal jitter"): about 0.5, 1, 2, 4 s by default, never above 20 s.
A ``Retry-After`` header (seconds or an HTTP date) replaces the computed wait; if it asks
for more than ``max_retry_after`` seconds the call fails at once instead of waiting.
Every other status fails at once with :class:`~engramdb.ProviderHTTPError`.
"""

from __future__ import annotations

import logging
import math
import random as _random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

import httpx

from engramdb._errors import (
    ConfigurationError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
)

from ._flow import Flow, Sleep
from ._redact import Secret, redact

__all__ = ["RETRY_STATUSES", "RetryPolicy", "parse_retry_after", "send_with_retries"]

logger = logging.getLogger("engramdb.providers")

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})

_HINTS = {
    400: "the provider rejected the request; check the model name and options",
    401: "check the API key (argument or environment variable)",
    403: "the API key is not allowed to use this model or account",
    404: "check the model name and the base URL",
    413: "the batch is too large; lower max_batch",
    422: "the provider rejected the request; check the model name and options",
}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how long to wait before retrying a failed provider call."""

    max_retries: int = 4
    initial_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 20.0
    max_retry_after: float = 120.0
    retry_statuses: frozenset[int] = field(default=RETRY_STATUSES)

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise ConfigurationError(f"max_retries={self.max_retries!r} must be an int, e.g. 4")
        if self.max_retries < 0:
            raise ConfigurationError(f"max_retries={self.max_retries} must be 0 or more")
        for name in ("initial_delay", "multiplier", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ConfigurationError(f"{name}={value!r} must be a finite number >= 0")

    def backoff(self, retry: int, jitter: float) -> float:
        """The wait before retry number ``retry`` (0-based); ``jitter`` is in [0, 1)."""
        base = min(self.max_delay, self.initial_delay * self.multiplier**retry)
        return base * (0.5 + 0.5 * jitter)


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
    secrets: Iterable[Secret | None] = (),
    random: Callable[[], float] = _random.random,
    clock: Callable[[], float] = time.time,
) -> Flow[httpx.Response]:
    """Flow: send ``request`` until it succeeds (2xx) or the policy gives up.

    Returns the successful response. Raises ``ProviderHTTPError`` (error status),
    ``ProviderTimeoutError`` (timeouts after retries) or ``ProviderError`` (connection
    failures after retries). Messages hold the provider, the host and a redacted body
    excerpt, never a header.
    """
    secrets = tuple(secrets)
    host = request.url.host
    retry = 0
    while True:
        try:
            response = yield request
        except httpx.TimeoutException as exc:
            if retry >= policy.max_retries:
                raise ProviderTimeoutError(
                    f"{provider} at {host} did not answer in time after {retry + 1} attempts "
                    f"({type(exc).__name__}); raise timeout= or try again later",
                    provider=provider,
                ) from exc
            delay = policy.backoff(retry, random())
            _log_retry(provider, host, type(exc).__name__, retry, policy, delay)
        except httpx.TransportError as exc:
            if retry >= policy.max_retries:
                raise ProviderError(
                    f"could not reach {provider} at {host} after {retry + 1} attempts "
                    f"({type(exc).__name__}: {redact(str(exc), secrets)}); "
                    "check the base URL and the network",
                    provider=provider,
                ) from exc
            delay = policy.backoff(retry, random())
            _log_retry(provider, host, type(exc).__name__, retry, policy, delay)
        else:
            assert response is not None
            status = response.status_code
            if 200 <= status < 300:
                return response
            if status not in policy.retry_statuses or retry >= policy.max_retries:
                raise _http_error(provider, host, response, secrets, retry)
            retry_after = parse_retry_after(response.headers.get("retry-after"), clock())
            if retry_after is not None and retry_after > policy.max_retry_after:
                raise _http_error(
                    provider,
                    host,
                    response,
                    secrets,
                    retry,
                    note=f"it asked to wait {retry_after:.0f} s, more than "
                    f"max_retry_after={policy.max_retry_after:g} s",
                )
            delay = retry_after if retry_after is not None else policy.backoff(retry, random())
            _log_retry(provider, host, f"HTTP {status}", retry, policy, delay)
        yield Sleep(delay)
        retry += 1


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
