"""The glue between the Workers runtime and :mod:`engramdb_workers.api`.

* :func:`serve` is the whole ``fetch`` handler: it reads method, URL and the few headers
  the API needs from the request and a lazy body reader (:func:`read_stream`); answers
  the probes ``/healthz`` and ``/readyz`` (:func:`readiness`) and ``/openapi.json``
  without a token; checks
  the token and its rate limit (:mod:`engramdb_workers.access`); then either forwards
  the request to the grant's tenant object (``MEMORY``, see :mod:`.tenant`) or answers
  it over the isolate's D1 database (``DB``); and makes a ``workers.Response``.
* :func:`maintain` is the ``scheduled`` (cron) handler: one bounded ``maintain()`` pass
  of the memory's own ``Maintainer`` (pending texts embedded, expired memories purged;
  its snapshot in ``/v1/status``); nothing with ``MAINTAIN=off``.
* :func:`services` builds, once per isolate and on first use, the ``D1Store`` (whose
  migrations then run once, on its first batch), the embedder and the ``AsyncMemory``.
  Module import does nothing: no I/O, no randomness (Workers snapshot the imported
  module at deploy time).

Configuration: ``ENGRAMDB_TOKENS``, ``TOKENS`` and ``RATE_LIMITER`` (who may call, see
:mod:`engramdb_workers.access`), ``MEMORY`` or ``DB`` (where memories live) and the vars
of :mod:`engramdb_workers.config`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from engramdb import AsyncMemory, ConfigurationError, MaintenanceReport, StoreError

from . import access, api, config, sharding
from .d1 import D1Store
from .sharding import Shards, forward
from .tenant import tenant_of

__all__ = [
    "Services",
    "maintain",
    "read_stream",
    "readiness",
    "reset_isolate",
    "serve",
    "services",
]


_HEADERS = ("authorization", "content-type", "content-length")
_BODY_METHODS = frozenset({"POST", "PATCH", "PUT"})


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
    access.reset()
    sharding.reset()


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
    db = config.var(env, "DB")
    current: Services | None = _isolate.get("services")
    if current is not None and _same(current.binding, db):
        return current
    model = config.model_name(env)
    embedder = config.embedder(env)
    store = D1Store(db, cache_bytes=config.cache_bytes(env))
    memory = AsyncMemory(
        store,
        embedder,
        redact=config.redact(env),
        maintain=config.maintenance(env),
        reranker=config.reranker(env),
    )
    current = Services(db, store, memory, model)
    _isolate["services"] = current
    return current


async def read_stream(stream: Any, limit: int) -> bytes:
    """The bytes of a JS ``ReadableStream`` (None or null: empty), read chunk by chunk;
    413 (``api.body_too_large``) as soon as they pass ``limit``, the rest never read."""
    if config.is_null(stream):
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
    """The ``scheduled`` handler: one maintenance pass of the D1 database by the
    memory's own maintainer (None: it failed, or one was running in this isolate, and
    its snapshot says which; or ``MAINTAIN=off``). With one Durable Object per tenant
    (``MEMORY``) each object maintains itself on its alarm, so there is nothing to do
    here."""
    if config.var(env, "DB") is None and config.var(env, "MEMORY") is not None:
        return None
    maintainer = services(env).memory.maintainer
    if maintainer is None:
        return None
    return await maintainer.arun_once()


async def readiness(env: Any) -> api.Readiness:
    """``/readyz``: ``tokens`` (``ENGRAMDB_TOKENS`` parses, or the ``TOKENS`` KV namespace
    is bound), ``config`` (the vars parse, as the Worker's front checks them) and, with
    one D1 database, ``store`` (one cheap read through the ``D1Store``). With one
    Durable Object per tenant (``MEMORY``) no object is asked: waking each tenant's
    object would cost a request per tenant, and there is no single store to read."""
    checks: dict[str, str] = {}
    logs: list[str] = []
    for name, check in (("tokens", access.check), ("config", config.check)):
        try:
            check(env)
            checks[name] = "ok"
        except ConfigurationError as exc:
            checks[name] = "misconfigured"
            logs.append(f"engramdb: readiness: {name}: {exc}")
    if config.var(env, "MEMORY") is None:
        checks["store"], log = await api.check_store(lambda: services(env).store)
        if log is not None:
            logs.append(log)
    return api.Readiness(checks, log="\n".join(logs) or None)


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

    method, url = str(js_request.method), str(js_request.url)
    namespace = config.var(env, "MEMORY")
    probed = await api.probe(method, url, ready=lambda: readiness(env))
    if probed is not None:  # before any token or object: a load balancer's probe
        status, reply_headers, text = api.answer(probed)
    elif namespace is None:  # one D1 database: a single-tenant deployment
        reply = await api.handle(
            method,
            url,
            headers,
            read_body,
            lookup=lambda digest: access.lookup_grant(env, digest),
            rate_limit=lambda digest: access.rate_limit(env, digest),
            memory=lambda grant: services(env).memory,
        )
        status, reply_headers, text = api.answer(reply)
    else:
        status, reply_headers, text = await _forward(
            namespace, env, method, url, headers, read_body
        )
    out_headers = {
        "content-type": "application/json; charset=utf-8",
        "cache-control": "no-store",
        **reply_headers,
    }
    return Response(text, status=status, headers=out_headers)


async def _forward(
    namespace: Any,
    env: Any,
    method: str,
    url: str,
    headers: dict[str, str],
    read_body: Callable[[], Awaitable[bytes]],
) -> tuple[int, dict[str, str], str]:
    """Authenticate here, then let the grant's tenant objects answer (see ``tenant``;
    with ``SHARDS`` above 1, ``sharding``)."""
    try:
        grant = await api.authenticate(
            headers,
            lambda digest: access.lookup_grant(env, digest),
            lambda digest: access.rate_limit(env, digest),
        )
        config.check_object(env)  # a bad value: 500 here, not a failed object (503)
        name = tenant_of(grant, config.tenant_parts(env))
        body = b""
        if method.upper() in _BODY_METHODS:
            api.check_declared_length(headers, api.MAX_BODY_BYTES)  # 413 before reading
            body = await read_body()
    except Exception as exc:
        return api.answer(api.error_reply(exc))
    shards = Shards(namespace, name, config.shards(env), config.redact(env))
    try:
        return await forward(shards, method, url, headers, body, grant)
    except Exception as exc:  # an object failed or was reset: its words stay in the logs
        print(f"engramdb: tenant object failed: {type(exc).__name__}: {exc}")
        return api.answer(api.error_reply(StoreError("the tenant's Durable Object failed")))
