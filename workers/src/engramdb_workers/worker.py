"""The glue between the Workers runtime and :mod:`engramdb_workers.api`.

* :func:`serve` is the whole ``fetch`` handler: it reads method, URL and the few headers
  the API needs from the request, hands a lazy body reader to :func:`api.handle` and
  turns the reply into a ``workers.Response``.
* :func:`maintain` is the ``scheduled`` (cron) handler: one bounded ``maintain()`` pass
  of the isolate's ``Maintainer`` (pending texts embedded, expired memories purged).
* :func:`services` builds, once per isolate and on first use, the ``D1Store`` (whose
  migrations then run once, on its first batch), the embedder and the ``AsyncMemory``.
  Module import does nothing: no I/O, no randomness (Workers snapshot the imported
  module at deploy time).

Configuration (``wrangler.jsonc`` vars and secrets):

``ENGRAMDB_TOKENS``       secret: JSON token -> scope map, see :func:`api.parse_tokens`
``EMBEDDING_MODEL``       Workers AI model (default ``@cf/baai/bge-base-en-v1.5``), or
                          ``hash`` for the offline, non-semantic ``HashEmbedder``
``EMBEDDING_DIMENSIONS``  needed only for models whose size is not known
``EMBEDDING_MAX_RETRIES`` retries of a failed Workers AI call (default 4, as over HTTP)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engramdb import AsyncMemory, HashEmbedder, Maintainer, MaintenanceReport
from engramdb._errors import ConfigurationError
from engramdb._retry_policy import RetryPolicy

from . import api
from .ai import DEFAULT_MODEL, WorkersAIEmbedder
from .d1 import D1Store

__all__ = ["Services", "maintain", "reset_isolate", "serve", "services"]

MAINTAIN_ITEMS = 500
"""Texts embedded (and memories purged) per cron run: well inside a cron's CPU budget."""

try:
    from pyodide.ffi import jsnull as _jsnull
except ImportError:  # pragma: no cover - CPython or older Pyodide
    _jsnull = None

_HEADERS = ("authorization", "content-type", "content-length")


@dataclass
class Services:
    """What one isolate keeps between requests."""

    binding: Any  # the D1 binding the store was built on
    store: D1Store
    memory: AsyncMemory
    model: str


_isolate: dict[str, Any] = {}  # filled on the first request, never at import


def reset_isolate() -> None:
    """Forget the per-isolate services and parsed tokens (tests; a fresh isolate)."""
    _isolate.clear()


def _var(env: Any, name: str) -> Any:
    try:
        value = getattr(env, name, None)
    except Exception:  # a JS env without that key
        return None
    if value is None or (_jsnull is not None and value is _jsnull):
        return None
    return value


def _same(a: Any, b: Any) -> bool:
    a = getattr(a, "_binding", a)
    b = getattr(b, "_binding", b)
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def services(env: Any) -> Services:
    """The isolate's services for ``env`` (built on first use; rebuilt if DB changes)."""
    db = _var(env, "DB")
    current: Services | None = _isolate.get("services")
    if current is not None and _same(current.binding, db):
        return current
    model = str(_var(env, "EMBEDDING_MODEL") or DEFAULT_MODEL).strip()
    dimensions = _int_var(env, "EMBEDDING_DIMENSIONS", "768")
    retries = _int_var(env, "EMBEDDING_MAX_RETRIES", "4")
    embedder: Any
    if model == "hash":
        embedder = HashEmbedder(dimensions=dimensions or 256)
    else:
        retry = RetryPolicy(max_retries=retries) if retries is not None else None
        embedder = WorkersAIEmbedder(
            _var(env, "AI"), model=model, dimensions=dimensions, retry=retry
        )
    store = D1Store(db)
    current = Services(db, store, AsyncMemory(store, embedder), model)
    _isolate["services"] = current
    return current


def _int_var(env: Any, name: str, example: str) -> int | None:
    text = _var(env, name)
    if text in (None, ""):
        return None
    try:
        return int(str(text))
    except ValueError:
        raise ConfigurationError(f"{name}={text!r} must be an integer such as {example}") from None


def grants(env: Any) -> dict[str, api.Grant]:
    """The parsed ``ENGRAMDB_TOKENS`` (parsed once per isolate per secret value)."""
    config = _var(env, "ENGRAMDB_TOKENS")
    cached = _isolate.get("grants")
    if cached is not None and cached[0] == config:
        return cached[1]  # type: ignore[no-any-return]
    parsed = api.parse_tokens(None if config is None else str(config))
    _isolate["grants"] = (config, parsed)
    return parsed


async def maintain(env: Any) -> MaintenanceReport | None:
    """The ``scheduled`` handler: one maintenance pass (None: it failed, or one was
    running in this isolate; the maintainer's snapshot says which)."""
    current = services(env)
    maintainer: Maintainer | None = _isolate.get("maintainer")
    if maintainer is None or maintainer.memory is not current.memory:
        maintainer = Maintainer(current.memory, max_items=MAINTAIN_ITEMS)
        _isolate["maintainer"] = maintainer
    return await maintainer.arun_once()


async def serve(request: Any, env: Any) -> Any:
    """The ``fetch`` handler: a ``Request`` (SDK or JS) in, a ``workers.Response`` out."""
    from workers import Response  # the Workers SDK; imported here to keep api testable

    js_request = getattr(request, "js_object", request)
    headers: dict[str, str] = {}
    for name in _HEADERS:
        value = js_request.headers.get(name)
        if isinstance(value, str):
            headers[name] = value

    async def read_body() -> bytes:
        # The bytes, not text(): text() would replace invalid UTF-8 with U+FFFD, and the
        # API refuses such a body with a 400 instead.
        buffer = await js_request.arrayBuffer()
        return bytes(buffer.to_py())

    reply = await api.handle(
        str(js_request.method),
        str(js_request.url),
        headers,
        read_body,
        grants=lambda: grants(env),
        memory=lambda grant: services(env).memory,
    )
    out_headers = {
        "content-type": "application/json; charset=utf-8",
        "cache-control": "no-store",
        **reply.headers,
    }
    return Response(api.dumps(reply.body), status=reply.status, headers=out_headers)
