"""The glue between the Workers runtime and :mod:`engramdb_workers.api`.

* :func:`serve` is the whole ``fetch`` handler: it reads method, URL and the few headers
  the API needs from the request, hands a lazy body reader (:func:`read_stream`) to
  :func:`api.handle`, with the grant lookup (:func:`lookup_grant`) and the rate limit
  (:func:`rate_limit`), and turns the reply into a ``workers.Response``.
* :func:`maintain` is the ``scheduled`` (cron) handler: one bounded ``maintain()`` pass
  of the isolate's ``Maintainer`` (pending texts embedded, expired memories purged).
* :func:`services` builds, once per isolate and on first use, the ``D1Store`` (whose
  migrations then run once, on its first batch), the embedder and the ``AsyncMemory``.
  Module import does nothing: no I/O, no randomness (Workers snapshot the imported
  module at deploy time).

Configuration (``wrangler.jsonc`` vars and secrets):

``ENGRAMDB_TOKENS``       secret: JSON token -> scope map, see :func:`api.parse_tokens`
``TOKENS``                KV namespace: ``sha256:<hex>`` -> one grant (consulted after the
                          secret; either or both may be set), see :func:`lookup_grant`
``RATE_LIMITER``          Workers Rate Limiting binding, keyed by token digest
``RATE_LIMIT_PERIOD``     the limiter's period in seconds, sent as ``Retry-After`` (60)
``EMBEDDING_MODEL``       Workers AI model (default ``@cf/baai/bge-base-en-v1.5``), or
                          ``hash`` for the offline, non-semantic ``HashEmbedder``
``EMBEDDING_DIMENSIONS``  needed only for models whose size is not known
``EMBEDDING_MAX_RETRIES`` retries of a failed Workers AI call (default 4, as over HTTP)
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

from engramdb import AsyncMemory, HashEmbedder, Maintainer, MaintenanceReport
from engramdb._errors import ConfigurationError
from engramdb._retry_policy import RetryPolicy

from . import api
from .ai import DEFAULT_MODEL, WorkersAIEmbedder
from .d1 import D1Store

__all__ = [
    "Services",
    "lookup_grant",
    "maintain",
    "rate_limit",
    "read_stream",
    "reset_isolate",
    "serve",
    "services",
]

MAINTAIN_ITEMS = 500
"""Texts embedded (and memories purged) per cron run: well inside a cron's CPU budget."""
GRANT_CACHE_SECONDS = 60.0
"""How long an isolate keeps a grant read from the ``TOKENS`` KV namespace: a revoked
token may still work this long in an isolate that saw it (plus KV's own ~60 s)."""
GRANT_CACHE_SIZE = 1024
"""Most KV grants one isolate keeps (the oldest goes first)."""

clock = time.monotonic
"""The grant cache's clock (tests replace it)."""

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


async def lookup_grant(env: Any, digest: str) -> api.Grant | None:
    """The grant of a token's digest: from ``ENGRAMDB_TOKENS`` first (when set), then
    from the ``TOKENS`` KV namespace (when bound), whose grants each isolate keeps for
    :data:`GRANT_CACHE_SECONDS`. None: the token is unknown (401)."""
    kv = _var(env, "TOKENS")
    if kv is None or str(_var(env, "ENGRAMDB_TOKENS") or "").strip():
        found = grants(env).get(digest)  # ConfigurationError (500) when nothing is set
        if found is not None or kv is None:
            return found
    cache: dict[str, tuple[float, api.Grant]] = _isolate.setdefault("kv_grants", {})
    now = clock()
    cached = cache.pop(digest, None)
    if cached is not None and cached[0] > now:
        cache[digest] = cached
        return cached[1]
    try:
        text = await kv.get(digest)
    except Exception as exc:
        print(f"engramdb: the TOKENS KV read failed ({type(exc).__name__})")
        raise api.ApiError(
            503, "store_unavailable", "the token store (TOKENS KV) failed; retry later"
        ) from None
    if text is None or (_jsnull is not None and text is _jsnull):
        return None
    where = f"the TOKENS grant {digest[:15]}..."  # a prefix of the digest, never the token
    try:
        grant = api.parse_grant(str(text), where)
    except ConfigurationError as exc:
        print(f"engramdb: configuration error: {exc}")
        raise api.ApiError(
            500,
            "server_misconfigured",
            f'{where} is malformed; put a scope such as ["acme", "user", "sam"] '
            "under its key (the logs say what is wrong)",
        ) from None
    while len(cache) >= GRANT_CACHE_SIZE:
        del cache[next(iter(cache))]
    cache[digest] = (now + GRANT_CACHE_SECONDS, grant)
    return grant


async def rate_limit(env: Any, digest: str) -> int | None:
    """Ask the ``RATE_LIMITER`` binding (when bound) about an authorized token's digest:
    None serves the request, else the seconds to wait (``RATE_LIMIT_PERIOD``, 60). A
    failing limiter serves the request (fail open) and says so in the logs."""
    limiter = _var(env, "RATE_LIMITER")
    if limiter is None:
        return None
    try:
        outcome = await limiter.limit({"key": digest})
        success = outcome["success"] if isinstance(outcome, dict) else outcome.success
    except Exception as exc:
        print(f"engramdb: RATE_LIMITER failed ({type(exc).__name__}); request served")
        return None
    if success:
        return None
    return _int_var(env, "RATE_LIMIT_PERIOD", "60") or 60


async def read_stream(stream: Any, limit: int) -> bytes:
    """The bytes of a JS ``ReadableStream`` (None or null: empty), read chunk by chunk;
    413 (``api.body_too_large``) as soon as they pass ``limit``, the rest never read."""
    if stream is None or (_jsnull is not None and stream is _jsnull):
        return b""
    reader = stream.getReader()
    chunks: list[bytes] = []
    size = 0
    while True:
        step = await reader.read()
        if step.done:
            return b"".join(chunks)
        chunk = bytes(step.value.to_bytes())
        size += len(chunk)
        if size > limit:
            with contextlib.suppress(Exception):  # the 413 stands whatever cancel() does
                await reader.cancel()
            raise api.body_too_large(limit)
        chunks.append(chunk)


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
        # API refuses such a body with a 400 instead. Read in chunks: a chunked body has
        # no Content-Length, and arrayBuffer() would take it whole whatever its size.
        return await read_stream(js_request.body, api.MAX_BODY_BYTES)

    reply = await api.handle(
        str(js_request.method),
        str(js_request.url),
        headers,
        read_body,
        lookup=lambda digest: lookup_grant(env, digest),
        rate_limit=lambda digest: rate_limit(env, digest),
        memory=lambda grant: services(env).memory,
        max_body_bytes=api.MAX_BODY_BYTES,
    )
    out_headers = {
        "content-type": "application/json; charset=utf-8",
        "cache-control": "no-store",
        **reply.headers,
    }
    return Response(api.dumps(reply.body), status=reply.status, headers=out_headers)
