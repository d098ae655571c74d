"""engramdb's JSON HTTP API, as plain functions: (method, url, headers, body) -> reply.

Nothing here does I/O, so the same API is served by the Cloudflare Worker
(``engramdb_workers.worker``) and by ``engramdb serve`` (:mod:`engramdb.server`, uvicorn),
and it runs (and is tested) like any Python. Its routes are the bound view's operations
(``POST /v1/memories``, ``POST /v1/recall``, ``GET /v1/memories/{id}``, ``GET
/v1/count``...), each with the fields its declaration gives; ``GET /openapi.json``
(:func:`openapi_document`) lists them all with their bodies and answers, and docs/http.md
in a table. ``/healthz``, ``/readyz`` and ``/openapi.json`` answer without a token.

**One description.** Every route behind the token is a bound view's operation, declared
once on its method (:data:`engramdb.flows.VIEW_OPS`: its fields with their JSON schemas,
its route, its answer); :mod:`engramdb.http_api._spec` writes each as an ``Operation``
(path, method, token or not, body and query schemas, every status it answers): the
router's tables are built from them, a request's body or query is checked against the
operation's fields, and the OpenAPI document is written from them, so a route cannot be
answered without being described.

**Probes.** ``/healthz`` (liveness) and ``/readyz`` (readiness) are answered before
authorization, to ``GET`` and ``HEAD`` only, without reading a body, and say nothing
about any scope or tenant (:mod:`engramdb.http_api._probes`): ``/healthz`` touches nothing;
``/readyz`` asks the host's ``ready`` check (a store read, the maintainer's state).

**Authorization.** Every other request needs ``Authorization: Bearer <token>``. The token
names the caller's scope through configuration only (:func:`parse_tokens`, from the
``ENGRAMDB_TOKENS`` secret, or a host's ``lookup`` by the token's digest, such as the
Worker's KV namespace), never through the request. A missing or unknown token is a
401 before anything else happens: the body is not read and the store is not touched.
A host's ``rate_limit`` is asked next, with the token's digest: a caller over its budget
gets a 429 with ``Retry-After``, again before any body or memory work.
The API acts through the bound view ``memory.bind(grant.scope, read=grant.read)``: the
grant's scope is where the caller writes, lists, updates and deletes; recall, get and
history also see the read-only ``read`` scopes.

**Errors** are ``{"error": {"code": ..., "message": ...}}`` with a stable ``code``:
``missing_token``/``invalid_token`` 401, ``invalid_json``/``invalid_request`` 400,
``not_found`` 404, ``method_not_allowed`` 405, ``revision_conflict`` 409,
``payload_too_large``/``text_too_large`` 413, ``unsupported_media_type`` 415,
``rate_limited`` 429,
``embedding_failed`` 502, ``store_unavailable``/``schema_too_new`` 503,
``server_misconfigured``/``internal_error`` 500.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from engramdb import __version__ as engramdb_version
from engramdb.flows._view_ops import VIEW_OPS, ViewOp
from engramdb.http_api._errors import ERRORS, ErrorCode, caught, error_code
from engramdb.http_api._grants import Grant, parse_grant, parse_tokens, token_digest
from engramdb.http_api._probes import (
    MAINTAINER_FAILURES_UNREADY,
    PROBE_PATHS,
    Readiness,
    ReadinessCheck,
    check_store,
    maintainer_summary,
    probe,
)
from engramdb.http_api._spec import OPERATIONS, Operation, openapi_document
from engramdb.http_api._wire import (
    DEFAULT_TOP_K,
    MAX_BATCH_ITEMS,
    MAX_BODY_BYTES,
    MAX_DOCUMENT_BYTES,
    MAX_JSON_DEPTH,
    MAX_TEXT_BYTES,
    ApiError,
    Reply,
    body_arguments,
    body_too_large,
    check_declared_length,
    dumps,
    hit_json,
    json_body,
    method_not_allowed,
    query_arguments,
    record_json,
)
from engramdb.json_format import status_to_json

__all__ = [
    "DEFAULT_TOP_K",
    "ERRORS",
    "MAINTAINER_FAILURES_UNREADY",
    "MAX_BODY_BYTES",
    "MAX_DOCUMENT_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_TEXT_BYTES",
    "PROBE_PATHS",
    "ApiError",
    "ErrorCode",
    "Grant",
    "GrantLookup",
    "RateLimit",
    "Readiness",
    "ReadinessCheck",
    "Reply",
    "authenticate",
    "body_too_large",
    "check_declared_length",
    "check_store",
    "dumps",
    "error_code",
    "error_reply",
    "handle",
    "handle_granted",
    "hit_json",
    "maintainer_summary",
    "method_not_allowed",
    "openapi_document",
    "operation_of",
    "parse_grant",
    "parse_tokens",
    "probe",
    "record_json",
    "remember_many_items",
    "token_digest",
]

# --- request handling -------------------------------------------------------------------

MemoryFactory = Callable[[Grant], Any]
"""The ``AsyncMemory`` that holds a grant's memories (built lazily, after authorization;
a host may keep each tenant in its own store)."""
GrantLookup = Callable[[str], Awaitable[Grant | None]]
"""The grant of a token's digest (``sha256:<hex>``, :func:`token_digest`), or None for an
unknown token: how a host keeps grants outside ``ENGRAMDB_TOKENS`` (a KV namespace)."""
RateLimit = Callable[[str], Awaitable[int | None]]
"""Asked with an authorized token's digest: None serves the request, a number of seconds
refuses it (429 ``rate_limited``, ``Retry-After`` that many seconds)."""


async def handle(
    method: str,
    url: str,
    headers: Mapping[str, str],
    read_body: Callable[[], Awaitable[bytes | str]],
    *,
    memory: MemoryFactory,
    grants: Callable[[], Mapping[str, Grant]] | None = None,
    lookup: GrantLookup | None = None,
    rate_limit: RateLimit | None = None,
    ready: ReadinessCheck | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Reply:
    """Answer one request. ``headers`` keys are lower case; ``read_body`` is called at most
    once and only after authorization (and the rate limit); ``grants``/``lookup``/
    ``memory`` are called only when needed. Give ``grants`` (the token map) or
    ``lookup`` (awaited with the token's digest), not both. The probes ``/healthz`` and
    ``/readyz`` are answered first, without a token (:func:`probe`, asking ``ready``).
    Never raises: every failure becomes an error reply."""
    if (grants is None) == (lookup is None):
        raise TypeError("handle() needs exactly one of grants= and lookup=")
    probed = await probe(method, url, ready=ready)
    if probed is not None:
        return probed
    find = lookup if lookup is not None else _in_map(grants)  # type: ignore[arg-type]
    try:
        # Authorize before anything else: no body read, no store touched without a grant.
        grant = await authenticate(headers, find, rate_limit)
    except Exception as exc:
        return error_reply(exc)
    return await handle_granted(
        method, url, headers, read_body, grant=grant, memory=memory, max_body_bytes=max_body_bytes
    )


async def handle_granted(
    method: str,
    url: str,
    headers: Mapping[str, str],
    read_body: Callable[[], Awaitable[bytes | str]],
    *,
    grant: Grant,
    memory: MemoryFactory,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Reply:
    """Answer a request its host has already authenticated as ``grant`` (the Worker does,
    then hands the request to the tenant's Durable Object). Never raises."""
    try:
        return await _answer(method.upper(), url, headers, read_body, grant, memory, max_body_bytes)
    except Exception as exc:
        return error_reply(exc)


def error_reply(exc: Exception) -> Reply:
    """The reply for a failure: a 4xx naming the caller's mistake, or a 5xx that keeps
    internal details (configuration, the database, an upstream's words) out of the body
    and in ``reply.log``, for the host to write to its logs (:data:`ERRORS` says which
    code answers which error, and what it says)."""
    if isinstance(exc, ApiError):
        return exc.reply()
    row = caught(exc)
    kind = type(exc).__name__
    said = str(exc) if row.says is None else row.says.format(kind=kind)
    reply = ApiError(row.code, said).reply()
    return reply if row.logs is None else replace(reply, log=row.logs.format(kind=kind, error=exc))


async def _answer(
    method: str,
    url: str,
    headers: Mapping[str, str],
    read_body: Callable[[], Awaitable[bytes | str]],
    grant: Grant,
    memory: MemoryFactory,
    max_body_bytes: int,
) -> Reply:
    parts = urlsplit(url)
    path = parts.path.rstrip("/") or "/"
    route, allowed, item_id = _route(path)
    if route is None:
        raise ApiError("not_found", f"no such endpoint {path!r}; see GET /openapi.json")
    if method not in allowed:
        raise method_not_allowed(method, path, allowed)
    operation = allowed[method]
    op = VIEW_OPS[operation.operation_id]
    if operation.body is None:
        args = query_arguments(op, parse_qs(parts.query))
    else:
        args = body_arguments(op, await json_body(headers, read_body, max_body_bytes))
    if item_id is not None:
        args["id"] = item_id
    handler = _HANDLERS.get(op.name, _call)
    return await handler(op, grant, memory(grant), args)


def operation_of(method: str, url: str) -> tuple[str, str | None] | None:
    """The operation behind the token a request asks for (its ``operationId``, e.g.
    ``"recall"``) and the memory id its path holds; None when none answers it (the API
    then answers 404 or 405). A host that splits a tenant over shards routes by it."""
    path = urlsplit(url).path.rstrip("/") or "/"
    route, allowed, item_id = _route(path)
    operation = allowed.get(method.upper()) if route is not None else None
    if operation is None:
        return None
    return operation.operation_id, item_id


def _route(path: str) -> tuple[str | None, Mapping[str, Operation], str | None]:
    """The path template ``path`` matches, its operations by method and the ``{id}`` it
    holds: a fixed path first (``/v1/memories/batch`` is not a memory's id)."""
    if path in _ROUTES:
        return path, _ROUTES[path], None
    parts = path.split("/")
    for template, operations in _TEMPLATES:
        if _fills(parts, template):
            item = parts[template.index("{id}")]
            return "/".join(template), operations, unquote(item)
    return None, {}, None


def _fills(parts: list[str], template: list[str]) -> bool:
    """Whether a path's segments fill a template's: ``{id}`` takes any non-empty one."""
    if len(parts) != len(template):
        return False
    pairs = zip(template, parts, strict=True)
    return all(got == want or (want == "{id}" and got != "") for want, got in pairs)


def _in_map(grants: Callable[[], Mapping[str, Grant]]) -> GrantLookup:
    async def find(digest: str) -> Grant | None:
        return grants().get(digest)  # ConfigurationError -> 500 if unset

    return find


async def authenticate(
    headers: Mapping[str, str], lookup: GrantLookup, rate_limit: RateLimit | None = None
) -> Grant:
    """The grant of the request's bearer token (a 401 ``ApiError`` without one), after
    its rate limit (a 429 ``ApiError``): an unknown token never spends anyone's budget."""
    digest, grant = await _authorize(headers, lookup)
    wait = None if rate_limit is None else await rate_limit(digest)
    if wait is not None:
        raise ApiError(
            "rate_limited",
            f"too many requests with this token; retry in {wait} s",
            {"retry-after": str(wait)},
        )
    return grant


async def _authorize(headers: Mapping[str, str], lookup: GrantLookup) -> tuple[str, Grant]:
    challenge = {"www-authenticate": 'Bearer realm="engramdb"'}
    value = headers.get("authorization", "").strip()
    scheme, _, token = value.partition(" ")
    token = token.strip()
    if not value or scheme.lower() != "bearer" or not token:
        raise ApiError(
            "missing_token",
            "send your token as 'Authorization: Bearer <token>'",
            challenge,
        )
    digest = token_digest(token)  # looked up by hash: no comparison of secret strings
    grant = await lookup(digest)
    if grant is None:
        raise ApiError("invalid_token", "the bearer token is not known here", challenge)
    return digest, grant


def _view(grant: Grant, memory: Any) -> Any:
    """The memory bound to the grant: writes in its scope, recall also in ``read``."""
    return memory.bind(grant.scope, read=grant.read)


async def _call(op: ViewOp, grant: Grant, memory: Any, args: dict[str, Any]) -> Reply:
    """Run a view operation with its checked arguments and answer as its route says; the
    view's "no such memory" answer (``op.absent``) is a 404."""
    route = op.route
    assert route is not None and op.answer is not None
    # The view acts in the grant's scope: an id of another scope is not found (a write's
    # scope is checked by the store inside its batch, so one moved out meanwhile too).
    result = await getattr(_view(grant, memory), op.name)(**args)
    if op.has_absent and result is op.absent:
        named = next(iter(args.values()))
        raise ApiError("not_found", f"no memory {named!r} in your scopes")
    headers = {}
    if "Location" in route.headers:
        headers["location"] = f"{route.path}/{result.id}"
    return Reply(route.status, op.answer(result, args), headers)


async def _recall(op: ViewOp, grant: Grant, memory: Any, args: dict[str, Any]) -> Reply:
    if args.get("rerank") not in (None, 0) and getattr(memory, "reranker", None) is None:
        # the core's ConfigurationError would be a 500: the caller asked, the server lacks it
        raise ApiError("invalid_request", "this server has no reranker; leave out 'rerank'")
    return await _call(op, grant, memory, args)


async def _remember_many(op: ViewOp, grant: Grant, memory: Any, args: dict[str, Any]) -> Reply:
    fields = VIEW_OPS["remember"].fields
    items = [
        {f.name: f.decoded(item[f.key]) for f in fields if f.key in item}
        for item in _items(args["items"])
    ]
    return await _call(op, grant, memory, {**args, "items": items})


def remember_many_items(body: object) -> list[dict[str, Any]]:
    """The items of a ``POST /v1/memories/batch`` body, each ``{"text", ...}`` with the
    fields it gives (as JSON), after the API's checks of the body (an ``ApiError`` names
    the first fault): what ``remember_many`` is then asked to store. A host that splits a
    tenant over shards checks a batch whole with it before any shard stores a part."""
    if not isinstance(body, dict):
        raise ApiError("invalid_json", "the body must be a JSON object")
    args = body_arguments(VIEW_OPS["remember_many"], body, "POST /v1/memories/batch")
    return _items(args["items"])


def _items(items: Any) -> list[dict[str, Any]]:
    """The memories of a batch, each checked as ``POST /v1/memories`` checks its body."""
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH_ITEMS:
        raise ApiError(
            "invalid_request",
            f"'memories' must be a list of 1..{MAX_BATCH_ITEMS} objects like {{\"text\": ...}}",
        )
    remember = VIEW_OPS["remember"]
    checked: list[dict[str, Any]] = []
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise ApiError("invalid_request", f"memories[{position}] must be an object")
        try:
            given = body_arguments(remember, item, "POST /v1/memories/batch", decode=False)
        except ApiError as err:
            raise ApiError(err.code, f"memories[{position}]: {err.message}") from None
        checked.append({remember.field(name).key: value for name, value in given.items()})
    return checked


async def _forget_all(op: ViewOp, grant: Grant, memory: Any, args: dict[str, Any]) -> Reply:
    assert op.answer is not None
    deleted = await _view(grant, memory).forget_all()
    return Reply(200, op.answer(deleted, {"scope": grant.scope}))


async def _status(op: ViewOp, grant: Grant, memory: Any, args: dict[str, Any]) -> Reply:
    status = await _view(grant, memory).status()  # counts nothing of another scope
    view = status_to_json(status)
    return Reply(
        200,
        {
            "status": "ok",
            "engramdb": engramdb_version,
            "scope": list(grant.scope),
            "read": [list(s) for s in grant.read],
            # the host's own maintainer, without the store-wide counts of its last pass
            **{k: view[k] for k in ("space", "schema_version", "items", "maintenance")},
        },
    )


_Handler = Callable[[ViewOp, Grant, Any, dict[str, Any]], Awaitable[Reply]]
_HANDLERS: dict[str, _Handler] = {
    "recall": _recall,
    "remember_many": _remember_many,
    "forget_all": _forget_all,
    "status": _status,
}
"""The operations whose answer needs more than the view's (the grant, the server's
reranker, a batch's items); every other route is answered by :func:`_call`, from
:data:`engramdb.flows.VIEW_OPS`."""


def _routes() -> dict[str, dict[str, Operation]]:
    """Each path template behind the token -> its operations by method (each a view
    operation's route: :data:`engramdb.flows.VIEW_OPS`)."""
    routes: dict[str, dict[str, Operation]] = {}
    for operation in OPERATIONS:
        if operation.token:
            routes.setdefault(operation.path, {})[operation.method] = operation
    return routes


_ROUTES = _routes()
_TEMPLATES = [(path.split("/"), ops) for path, ops in _ROUTES.items() if "{" in path]


# --- JSON forms ---------------------------------------------------------------------------
