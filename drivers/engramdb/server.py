"""``engramdb serve``: the HTTP API of :mod:`engramdb.http_api` on CPython, with uvicorn.

The Cloudflare Worker and this server answer every request with the same code
(:func:`engramdb.http_api.handle`); only the host differs. Here a tiny hand-written ASGI
app (:class:`App`) reads the body with a size limit, calls ``handle`` and sends the reply.

Tokens come from ``--tokens-file`` or ``ENGRAMDB_TOKENS`` (the Worker's JSON format and
hashing, :func:`engramdb.http_api.parse_tokens`); the database and embedder from
``--db``/``--embedder``, the environment or the config file (``--config``;
:func:`engramdb.settings.resolve`).

**Tenancy.** A grant's *tenant* is the first part of its scope (``["acme", "user",
"sam"]`` belongs to ``acme``). When the grants name one tenant, its memories live in
``--db``. When they name several, each tenant gets its own SQLite file,
``<db>.d/<sha256 of the tenant>.sqlite3``, so tenants share no statistics, vectors or
receipts (as each Worker deployment keeps its own D1). A grant may read only scopes of
its own tenant.

**Maintenance.** Each tenant's ``AsyncMemory`` owns a ``Maintainer`` (``maintain=True``):
it starts with the tenant's first request, in a task of the server's loop, embeds
pending texts, repairs vectors and purges expired memories every 5 minutes (at once
while work is left), and stops, after its running pass, before the server closes the
tenant's store. ``GET /v1/status`` shows its state. ``--no-maintain`` (or
``ENGRAMDB_MAINTAIN=off``) turns it off, for a deployment that runs ``engramdb
maintain`` itself.

**Metrics.** With ``ENGRAMDB_METRICS_TOKEN`` (or ``--metrics-token-file``) set,
``GET /metrics`` answers Prometheus metrics to that token only (:mod:`engramdb.server_metrics`).

**Read timeouts.** A request's head must arrive within ``--header-timeout`` seconds
(``ENGRAMDB_HEADER_TIMEOUT``, 10) and its body within ``--body-timeout`` seconds after
it (``ENGRAMDB_BODY_TIMEOUT``, 30); else the connection is closed, after a 408 for a
late body (:mod:`engramdb.server_timeouts`).

**Probes.** ``GET /healthz`` answers 200 while the process runs; ``GET /readyz``
(:meth:`Tenants.readiness`) answers 200 when every tenant's store answers a cheap read
and no maintainer has failed its last passes, else 503. Neither needs a token and
neither names a tenant.

Importing this module needs no extra; :func:`main` needs uvicorn (``pip install
'engramdb[server]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from engramdb import AsyncMemory, ConfigurationError, Maintenance, RerankGuard, redact_secrets
from engramdb.http_api import (
    MAX_BODY_BYTES,
    ApiError,
    Grant,
    Readiness,
    ReadinessCheck,
    body_too_large,
    check_store,
    dumps,
    handle,
    maintainer_summary,
    method_not_allowed,
    parse_tokens,
)
from engramdb.server_metrics import CONTENT_TYPE, Metrics, route_label
from engramdb.server_timeouts import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    body_timed_out,
    seconds_setting,
    with_head_timeout,
)
from engramdb.settings import Settings, on_store, resolve
from engramdb.stores import store_kind

__all__ = ["App", "Tenants", "argument_parser", "main", "tenant_of"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
INSTALL_HINT = "pip install 'engramdb[server]'"
HOW_TO_SET = "pass --tokens-file FILE or set the environment variable ENGRAMDB_TOKENS"
"""The advice of the error when no token is configured."""

AsgiScope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def tenant_of(grant: Grant) -> str:
    """A grant's tenant: the first part of its scope."""
    return grant.scope[0]


class Tenants:
    """One ``AsyncMemory`` per tenant, opened on first use: the ``--db`` file (or
    PostgreSQL database) when the grants name one tenant, else
    ``<db>.d/<sha256(tenant)>.sqlite3`` each (one PostgreSQL database serves one tenant).
    Each owns a maintainer with ``maintain`` (default: ``settings.maintain``)."""

    def __init__(
        self,
        settings: Settings,
        grants: Mapping[str, Grant],
        embedder: Any,
        *,
        maintain: bool | Maintenance | None = None,
    ) -> None:
        for grant in grants.values():
            for read in grant.read:
                if read[0] != tenant_of(grant):
                    raise ConfigurationError(
                        f"a grant for scope {list(grant.scope)} reads {list(read)} of another "
                        "tenant; tenants live in separate files, so a grant may read only "
                        "scopes that start like its own"
                    )
        self.settings = settings
        self.embedder = embedder
        self.names = sorted({tenant_of(grant) for grant in grants.values()})
        self.kind = store_kind(settings.db)
        if not self.kind.tenants and len(self.names) > 1:
            raise ConfigurationError(
                f"the grants name {len(self.names)} tenants but {settings.db_label} is one "
                f"{self.kind.name} database; tenants get separate storage, so run a server "
                "per tenant, each with its own database (or use SQLite files: a file each)"
            )
        self.maintain = settings.maintain if maintain is None else maintain
        self.reranker = settings.make_reranker()  # ENGRAMDB_RERANKER's, shared by tenants
        # with its budget and breaker: a dead service is skipped for every tenant at once
        self.rerank_guard = None if self.reranker is None else RerankGuard()
        self._open: dict[str, AsyncMemory] = {}

    def path(self, tenant: str) -> str:
        """Where ``tenant``'s memories live."""
        db = self.settings.db
        return db if len(self.names) == 1 else self.kind.tenant_db(db, tenant)

    def memory(self, grant: Grant) -> AsyncMemory:
        return self.open(tenant_of(grant))

    def open(self, tenant: str) -> AsyncMemory:
        """``tenant``'s memory, opened on first use."""
        memory = self._open.get(tenant)
        if memory is None:
            path = self.path(tenant)
            if self.kind.is_file:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            redact = redact_secrets if self.settings.redact else None
            memory = on_store(
                path,
                lambda store: AsyncMemory(
                    store,
                    self.embedder,
                    redact=redact,
                    maintain=self.maintain,
                    reranker=self.reranker,
                    rerank_guard=self.rerank_guard,
                ),
            )
            self._open[tenant] = memory
        return memory

    async def readiness(self) -> Readiness:
        """``/readyz``: every tenant's store answers a cheap read (a tenant's store is
        opened here if no request has opened it yet, as its first request would), and the
        maintainers' summary. The words name no tenant; the log line names the files."""
        words: set[str] = set()
        logs: list[str] = []
        for tenant in self.names:
            word, log = await check_store(functools.partial(self._store_of, tenant))
            words.add(word)
            if log is not None:
                logs.append(log)
        store = next((word for word in sorted(words) if word != "ok"), "ok")
        snapshots = [m.maintainer.snapshot for m in self._open.values() if m.maintainer]
        maintainer, summary = maintainer_summary(snapshots, enabled=self.maintain is not False)
        return Readiness(
            {"store": store, "maintainer": maintainer},
            maintainer=summary,
            log="\n".join(logs) or None,
        )

    @property
    def opened(self) -> Mapping[str, AsyncMemory]:
        """The tenants' memories opened so far."""
        return self._open

    def _store_of(self, tenant: str) -> Any:
        return self.open(tenant).store

    async def aclose(self) -> None:
        """Stop every tenant's maintainer (after its running pass) and close its store."""
        opened, self._open = self._open, {}
        for memory in opened.values():
            await memory.aclose()


class App:
    """The ASGI application: each HTTP request -> :func:`engramdb.http_api.handle`.

    ``body_timeout``: the seconds a request's body may take to arrive, counted from the
    call; a later body is answered 408 ``request_timeout`` and the connection closed."""

    def __init__(
        self,
        grants: Mapping[str, Grant],
        memory: Callable[[Grant], Any],
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        on_shutdown: Callable[[], Awaitable[None]] | None = None,
        ready: ReadinessCheck | None = None,
        metrics: Metrics | None = None,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
    ) -> None:
        self.grants = grants
        self.memory = memory
        self.ready = ready
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.on_shutdown = on_shutdown
        self.maintaining = True  # whether tenants run maintainers (the metrics' state)

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.on_shutdown is not None:
                    await self.on_shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", []):
            name = bytes(raw_name).decode("latin-1").lower()
            headers.setdefault(name, bytes(raw_value).decode("latin-1"))
        path = bytes(scope.get("raw_path") or scope["path"].encode("utf-8")).decode("latin-1")
        query = bytes(scope.get("query_string", b"")).decode("latin-1")
        url = path + ("?" + query if query else "")
        limit, timeout = self.max_body_bytes, self.body_timeout
        deadline = asyncio.get_running_loop().time() + timeout

        async def read_body() -> bytes:
            chunks: list[bytes] = []
            size = 0
            try:
                async with asyncio.timeout_at(deadline):  # the whole body, not each chunk
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            raise ApiError("invalid_request", "the client went away mid-body")
                        chunk = bytes(message.get("body", b""))
                        size += len(chunk)
                        if size > limit:  # a chunked body has no Content-Length to refuse early
                            raise body_too_large(limit)
                        chunks.append(chunk)
                        if not message.get("more_body", False):
                            return b"".join(chunks)
            except TimeoutError:
                raise body_timed_out(timeout) from None

        started = time.perf_counter()
        metrics = self.metrics
        if metrics is not None and route_label(path) == "/metrics":
            status, body, content_type, extra = await self._metrics(metrics, scope, headers)
        else:
            reply = await handle(
                scope["method"],
                url,
                headers,
                read_body,
                grants=lambda: self.grants,
                memory=self.memory,
                ready=self.ready,
                max_body_bytes=limit,
            )
            if reply.log:
                print(reply.log, file=sys.stderr, flush=True)
            status, body = reply.status, dumps(reply.body).encode("utf-8")
            content_type, extra = "application/json; charset=utf-8", reply.headers
        out = {
            "content-type": content_type,
            "cache-control": "no-store",
            **extra,
            "content-length": str(len(body)),
        }
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in out.items()],
            }
        )
        await send({"type": "http.response.body", "body": body})
        if metrics is not None:
            metrics.observe(path, scope["method"], status, time.perf_counter() - started)

    async def _metrics(
        self, metrics: Metrics, scope: AsgiScope, headers: Mapping[str, str]
    ) -> tuple[int, bytes, str, Mapping[str, str]]:
        """``GET /metrics``: the exposition to the metrics token only."""
        if scope["method"] not in ("GET", "HEAD"):
            reply = method_not_allowed(scope["method"], "/metrics", ("GET", "HEAD")).reply()
            return reply.status, dumps(reply.body).encode(), "application/json", reply.headers
        if not metrics.allows(headers):
            error = ApiError(
                "invalid_token",
                "/metrics needs the metrics token (ENGRAMDB_METRICS_TOKEN), not an API token",
                {"www-authenticate": 'Bearer realm="engramdb-metrics"'},
            )
            reply = error.reply()
            return reply.status, dumps(reply.body).encode(), "application/json", reply.headers
        body = await metrics.exposition(self.maintaining)
        return 200, body, CONTENT_TYPE, {}


def argument_parser(
    prog: str = "engramdb serve", *, add_help: bool = True
) -> argparse.ArgumentParser:
    """The server's options: :func:`main` parses them, and ``engramdb serve`` shows
    and takes them (``add_help=False``: as the parent of its parser)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Serve engramdb's JSON HTTP API (docs/http.md) with uvicorn.",
        add_help=add_help,
    )
    parser.add_argument("--db", help="SQLite file (default: ENGRAMDB_DB, ./engramdb.sqlite3)")
    parser.add_argument("--embedder", help="embedder URL (ENGRAMDB_EMBEDDER; default static:)")
    parser.add_argument(
        "--config", metavar="FILE", help="the config file (ENGRAMDB_CONFIG; docs/cli.md)"
    )
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help=f"the address to listen on (default {DEFAULT_HOST})"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"the port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--tokens-file",
        metavar="FILE",
        help="JSON file of token -> scope grants (default: the ENGRAMDB_TOKENS variable)",
    )
    parser.add_argument(
        "--metrics-token-file",
        metavar="FILE",
        help="file holding the token that opens GET /metrics (default: the "
        "ENGRAMDB_METRICS_TOKEN variable; neither: no /metrics)",
    )
    parser.add_argument(
        "--header-timeout",
        metavar="SECONDS",
        help="close a connection whose request line and headers have not arrived in "
        f"SECONDS (default: ENGRAMDB_HEADER_TIMEOUT, else {DEFAULT_HEADER_TIMEOUT:g})",
    )
    parser.add_argument(
        "--body-timeout",
        metavar="SECONDS",
        help="answer 408 and close when a request body has not arrived SECONDS after its "
        f"headers (default: ENGRAMDB_BODY_TIMEOUT, else {DEFAULT_BODY_TIMEOUT:g})",
    )
    parser.add_argument(
        "--no-maintain",
        action="store_true",
        help="run no background maintenance (default: on, unless ENGRAMDB_MAINTAIN=off)",
    )
    return parser


def _tokens(path: str | None, environ: Mapping[str, str]) -> str | None:
    if path is None:
        return environ.get("ENGRAMDB_TOKENS")
    return _secret_file(path, "--tokens-file")


def _secret_file(path: str | None, option: str) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read {option} {path!r} ({exc.strerror})") from None


def build(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> tuple[App, argparse.Namespace, list[str]]:
    """The app for ``argv``, the parsed options and notices to print (no server started).
    Raises ``ConfigurationError`` (never naming a token)."""
    env = os.environ if environ is None else environ
    options = argument_parser().parse_args(argv)
    options.header_timeout = seconds_setting(
        options.header_timeout, env, "ENGRAMDB_HEADER_TIMEOUT", DEFAULT_HEADER_TIMEOUT
    )
    options.body_timeout = seconds_setting(
        options.body_timeout, env, "ENGRAMDB_BODY_TIMEOUT", DEFAULT_BODY_TIMEOUT
    )
    grants = parse_tokens(_tokens(options.tokens_file, env), how_to_set=HOW_TO_SET)
    settings = resolve(db=options.db, embedder=options.embedder, config=options.config, environ=env)
    maintain = settings.maintain and not options.no_maintain
    tenants = Tenants(settings, grants, settings.make_embedder(), maintain=maintain)
    notices = []
    if len(tenants.names) > 1 and Path(settings.db).is_file():
        notices.append(
            f"notice: {len(tenants.names)} tenants each use their own file under "
            f"{settings.db}.d/; {settings.db} itself is not served"
        )
    metrics_token = _secret_file(options.metrics_token_file, "--metrics-token-file")
    if metrics_token is None:
        metrics_token = env.get("ENGRAMDB_METRICS_TOKEN")
    metrics = None if metrics_token is None else Metrics(metrics_token, lambda: tenants.opened)
    app = App(
        grants,
        tenants.memory,
        on_shutdown=tenants.aclose,
        ready=tenants.readiness,
        metrics=metrics,
        body_timeout=options.body_timeout,
    )
    app.maintaining = maintain is not False
    return app, options, notices


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until interrupted; 0 on a clean stop, 2 on a configuration error."""
    try:
        app, options, notices = build(argv)
    except ConfigurationError as exc:
        print(f"engramdb serve: {exc}", file=sys.stderr)
        return 2
    try:
        uvicorn: Any = importlib.import_module("uvicorn")
    except ImportError:
        print(f"engramdb serve needs uvicorn: {INSTALL_HINT}", file=sys.stderr)
        return 1
    for notice in notices:
        print(notice, file=sys.stderr)
    http: Any = importlib.import_module("uvicorn.protocols.http.auto").AutoHTTPProtocol
    config = uvicorn.Config(
        app,
        host=options.host,
        port=options.port,
        lifespan="on",
        server_header=False,
        http=with_head_timeout(http, options.header_timeout),
    )
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1


if __name__ == "__main__":
    raise SystemExit(main())
