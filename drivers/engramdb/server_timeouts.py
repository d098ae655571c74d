"""``engramdb serve``'s read timeouts: a request's head and its body each have a deadline.

uvicorn bounds only the wait between two requests of a kept-alive connection
(``timeout_keep_alive``, 5 s); nothing bounds how long a request takes to arrive, so a
client that opens connections and sends half a request line, or headers and half a
body, holds each one open for as long as it likes. Two deadlines close them:

- **head** (``--header-timeout``, ``ENGRAMDB_HEADER_TIMEOUT``; 10 s): a connection's
  request line and headers must have arrived that many seconds after it opened (or
  after the first byte of its next request); else the connection is closed without an
  answer. :func:`with_head_timeout` adds it to uvicorn's HTTP protocol (h11 or
  httptools), which has no such timeout of its own.
- **body** (``--body-timeout``, ``ENGRAMDB_BODY_TIMEOUT``; 30 s): the whole body must
  have arrived that many seconds after the head; else the request is answered 408
  ``request_timeout`` and the connection is closed (:class:`engramdb.server.App` reads
  the body with this deadline, :func:`body_timed_out`).

Both count the whole head or body, not the wait for each byte, so a client trickling a
byte at a time is cut off too.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

from engramdb import ConfigurationError
from engramdb.http_api import ApiError

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEADER_TIMEOUT",
    "body_timed_out",
    "seconds_setting",
    "with_head_timeout",
]

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
_MOST = 3600.0  # an hour: longer is a mistake, not a slow client


def seconds_setting(
    given: str | float | None, environ: Mapping[str, str], variable: str, default: float
) -> float:
    """A timeout in seconds: ``given`` (the option), else ``environ[variable]``, else
    ``default``; a ``ConfigurationError`` naming the value unless it is a number above
    0 and at most 3600."""
    option = "--" + variable.removeprefix("ENGRAMDB_").lower().replace("_", "-")
    source, raw = (option, given) if given is not None else (variable, environ.get(variable))
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= _MOST:
        raise ConfigurationError(
            f"{source}={str(raw)[:40]!r} is not a timeout; give a number of seconds above 0 "
            f"and at most {_MOST:g}, e.g. {default:g}"
        )
    return seconds


def body_timed_out(seconds: float) -> ApiError:
    """The 408 of a body that did not arrive in ``seconds``; its ``Connection: close``
    makes the server close the connection after the answer."""
    return ApiError(
        "request_timeout",
        f"the request body did not arrive within {seconds:g} s; send it at once",
        {"connection": "close"},
    )


def with_head_timeout(base: type[asyncio.Protocol], seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol ``base``, closing a connection whose request head has not
    arrived ``seconds`` after the connection opened, or after the first byte of a next
    request on it. Reads ``cycle`` (the request being answered; None before the first),
    ``loop`` and ``transport`` of ``base``, which uvicorn's h11 and httptools protocols
    both have."""

    class HeadTimeout(base):  # type: ignore[valid-type,misc]  # a class made at run time
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._head_timer is None and self._between_requests():
                self._arm()  # the first byte of a next request: its head has `seconds`
            super().data_received(data)
            if not self._between_requests():
                self._disarm()  # the head arrived: uvicorn now hands it to the app

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _between_requests(self) -> bool:
            cycle = self.cycle
            return cycle is None or bool(cycle.response_complete)

        def _arm(self) -> None:
            self._head_timer = self.loop.call_later(seconds, self._head_timed_out)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self._between_requests() and not self.transport.is_closing():
                self.transport.close()

    HeadTimeout.__name__ = HeadTimeout.__qualname__ = f"HeadTimeout{base.__name__}"
    return HeadTimeout
