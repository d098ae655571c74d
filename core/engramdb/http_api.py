"""engramdb's JSON HTTP API, as plain functions: (method, url, headers, body) -> reply.

Nothing here does I/O, so the same API is served by the Cloudflare Worker
(``engramdb_workers.worker``) and by ``engramdb serve`` (:mod:`engramdb.server`, uvicorn),
and it runs (and is tested) like any Python:

==================================  ===================================================
``POST /v1/memories``               ``{"text", "metadata"?, "labels"?, "importance"?}``
                                    -> 201 ``{"memory": {...}}``
``POST /v1/memories/batch``         ``{"memories": [{"text", ...}, ...]}`` -> 201
                                    ``{"memories": [...]}``
``GET /v1/memories``                ``?limit=50&before=<id>`` -> 200 ``{"memories",
                                    "next_before"}``
``GET /v1/memories/ID``             -> 200 ``{"memory": {...}}`` or 404
``PATCH /v1/memories/ID``           ``{"text"?, "metadata"?, "labels"?, "importance"?,
                                    "expected_revision"?}`` -> 200, 404 or 409
``GET /v1/memories/ID/history``     ``?limit=10`` -> 200 ``{"id", "revisions"}``
``DELETE /v1/memories/ID``          -> 200 ``{"deleted": true, "id"}`` or 404
``POST /v1/recall``                 ``{"query", "top_k"?, "mode"?, "filter"?,
                                    "min_similarity"?, "labels"?}`` -> 200
                                    ``{"status", "mode", "selection_id", "hits": [...]}``
``POST /v1/complete``               ``{"selection_id", "score"}`` -> 200 ``{"completed"}``
``POST /v1/feedback``               ``{"memory_id", "value"}`` -> 200 ``{"memory"}``
``GET /v1/scopes``                  ``?limit=100&cursor=<JSON scope>`` -> 200
                                    ``{"scopes": [{"scope", "count"}], "next_cursor"}``
``DELETE /v1/scope``                -> 200 ``{"deleted": n, "scope"}``
``GET /v1/status``                  -> 200 ``{"status": "ok", "scope", "space", ...}``
==================================  ===================================================

**Authorization.** Every request needs ``Authorization: Bearer <token>``. The token
names the caller's scope through configuration only (:func:`parse_tokens`, from the
``ENGRAMDB_TOKENS`` secret), never through the request. A missing or unknown token is a
401 before anything else happens: the body is not read and the store is not touched.
The API acts through the bound view ``memory.bind(grant.scope, read=grant.read)``: the
grant's scope is where the caller writes, lists, updates and deletes; recall, get and
history also see the read-only ``read`` scopes.

**Errors** are ``{"error": {"code": ..., "message": ...}}`` with a stable ``code``:
``missing_token``/``invalid_token`` 401, ``invalid_json``/``invalid_request`` 400,
``not_found`` 404, ``method_not_allowed`` 405, ``revision_conflict`` 409,
``payload_too_large``/``text_too_large`` 413, ``unsupported_media_type`` 415,
``embedding_failed`` 502, ``store_unavailable``/``schema_too_new`` 503,
``server_misconfigured``/``internal_error`` 500.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from engramdb import __version__ as engramdb_version
from engramdb._errors import (
    ConfigurationError,
    ConflictError,
    DimensionMismatchError,
    EngramError,
    NotFoundError,
    ProviderError,
    SchemaTooNewError,
    StoreError,
    ValidationError,
)
from engramdb._types import Hit, MemoryRecord, Scope, check_unicode, validate_scope

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_TEXT_BYTES",
    "ApiError",
    "Grant",
    "Reply",
    "handle",
    "parse_tokens",
    "token_digest",
]

MAX_BODY_BYTES = 256 * 1024
"""Largest request body read (bigger: 413 before reading it, when Content-Length says so)."""
MAX_TEXT_BYTES = 32 * 1024
"""Largest ``text`` / ``query`` in UTF-8 bytes (the core's default ``Limits``)."""
DEFAULT_TOP_K = 10
"""Hits a recall answers when the body gives no ``top_k`` (as ``AsyncMemory.recall``)."""
MAX_LIST_LIMIT = 500
"""Largest ``limit`` of a listing."""
MAX_BATCH_ITEMS = 100
"""Most memories one ``POST /v1/memories/batch`` stores."""
MAX_JSON_DEPTH = 32
"""Deepest nesting of objects and arrays a request body may have."""

_REMEMBER_FIELDS = frozenset({"text", "metadata", "labels", "importance"})
_RECALL_FIELDS = frozenset({"query", "top_k", "mode", "filter", "min_similarity", "labels"})
_UPDATE_FIELDS = frozenset({"text", "metadata", "labels", "importance", "expected_revision"})


@dataclass(frozen=True, slots=True)
class Grant:
    """What one token may do: write/list/delete in ``scope``, recall ``scope`` + ``read``."""

    scope: Scope
    read: tuple[Scope, ...] = ()

    @property
    def recall_scopes(self) -> list[Scope]:
        return [self.scope, *(s for s in self.read if s != self.scope)]


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer: status, JSON body, extra headers."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


class ApiError(Exception):
    """An error answer with a stable code."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})

    def reply(self) -> Reply:
        return Reply(
            self.status, {"error": {"code": self.code, "message": self.message}}, self.headers
        )


def token_digest(token: str) -> str:
    """The form a token is looked up by: ``sha256:`` + hex of its UTF-8 SHA-256."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_tokens(config: str | None) -> dict[str, Grant]:
    """Parse ``ENGRAMDB_TOKENS``: a JSON object from token to grant.

    Keys are ``"sha256:<64 hex>"`` (recommended: the secret then never holds the token
    itself; make one with ``printf %s "$TOKEN" | sha256sum``) or the token itself. A
    value is a scope (``["acme", "user", "sam"]``) or an object ``{"scope": [...],
    "read": [[...], ...]}``. Raises ``ConfigurationError`` naming the bad entry (never
    the token).
    """
    if config is None or not str(config).strip():
        raise ConfigurationError(
            "ENGRAMDB_TOKENS is not set; run `wrangler secret put ENGRAMDB_TOKENS` with a "
            'JSON object such as {"sha256:<hex>": ["acme", "user", "sam"]}'
        )
    try:
        data = json.loads(str(config))
    except ValueError as exc:
        raise ConfigurationError(f"ENGRAMDB_TOKENS is not valid JSON ({exc.args[0]})") from None
    if not isinstance(data, dict) or not data:
        raise ConfigurationError("ENGRAMDB_TOKENS must be a non-empty JSON object")
    grants: dict[str, Grant] = {}
    for position, (key, value) in enumerate(data.items()):
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"ENGRAMDB_TOKENS entry {position} has an empty token")
        if key.startswith("sha256:"):
            hexpart = key[7:].lower()
            if len(hexpart) != 64 or any(c not in "0123456789abcdef" for c in hexpart):
                raise ConfigurationError(
                    f"ENGRAMDB_TOKENS entry {position}: a sha256: key needs 64 hex digits"
                )
            digest = "sha256:" + hexpart
        else:
            digest = token_digest(key)
        grants[digest] = _grant(position, value)
    return grants


def _grant(position: int, value: Any) -> Grant:
    where = f"ENGRAMDB_TOKENS entry {position}"
    try:
        if isinstance(value, list):
            return Grant(validate_scope(value))
        if isinstance(value, dict) and set(value) <= {"scope", "read"} and "scope" in value:
            read = value.get("read", [])
            if not isinstance(read, list):
                raise ConfigurationError(f"{where}: 'read' must be a list of scopes")
            return Grant(validate_scope(value["scope"]), tuple(validate_scope(s) for s in read))
    except ValidationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
    raise ConfigurationError(
        f'{where} must be a scope like ["acme", "user", "sam"] or {{"scope": [...], '
        '"read": [[...]]}'
    )


# --- request handling -------------------------------------------------------------------

MemoryFactory = Callable[[Grant], Any]
"""The ``AsyncMemory`` that holds a grant's memories (built lazily, after authorization;
a host may keep each tenant in its own store)."""


async def handle(
    method: str,
    url: str,
    headers: Mapping[str, str],
    read_body: Callable[[], Awaitable[bytes | str]],
    *,
    grants: Callable[[], Mapping[str, Grant]],
    memory: MemoryFactory,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Reply:
    """Answer one request. ``headers`` keys are lower case; ``read_body`` is called at most
    once and only after authorization; ``grants``/``memory`` are called only when needed.
    Never raises: every failure becomes an error reply."""
    try:
        return await _handle(
            method.upper(), url, headers, read_body, grants, memory, max_body_bytes
        )
    except ApiError as err:
        return err.reply()
    except SchemaTooNewError as exc:
        return ApiError(503, "schema_too_new", str(exc)).reply()
    except DimensionMismatchError as exc:
        return ApiError(502, "embedding_failed", str(exc)).reply()
    except ValidationError as exc:
        return ApiError(400, "invalid_request", str(exc)).reply()
    except NotFoundError as exc:
        return ApiError(404, "not_found", str(exc)).reply()
    except ConflictError as exc:
        return ApiError(409, "revision_conflict", str(exc)).reply()
    except ProviderError as exc:  # the upstream's own words stay out of the reply
        return ApiError(
            502, "embedding_failed", f"the embedding model failed ({type(exc).__name__}); retry"
        ).reply()
    except StoreError as exc:
        print(f"engramdb: store error: {exc}")
        return ApiError(503, "store_unavailable", "the database failed; retry later").reply()
    except ConfigurationError as exc:
        # The details go to the host's logs, not to a caller who may hold no token.
        print(f"engramdb: configuration error: {exc}")
        return ApiError(
            500,
            "server_misconfigured",
            "the server is misconfigured (ENGRAMDB_TOKENS, the database or the embedder); "
            "its logs say what to fix",
        ).reply()
    except EngramError as exc:  # pragma: no cover - every subclass is handled above
        return ApiError(500, "internal_error", f"{type(exc).__name__}").reply()
    except Exception as exc:
        print(f"engramdb: unexpected {type(exc).__name__}: {exc}")
        return ApiError(500, "internal_error", "an unexpected error happened; see the logs").reply()


_ROUTES: dict[str, frozenset[str]] = {
    "/v1/memories": frozenset({"GET", "POST"}),
    "/v1/memories/batch": frozenset({"POST"}),
    "/v1/recall": frozenset({"POST"}),
    "/v1/complete": frozenset({"POST"}),
    "/v1/feedback": frozenset({"POST"}),
    "/v1/scopes": frozenset({"GET"}),
    "/v1/scope": frozenset({"DELETE"}),
    "/v1/status": frozenset({"GET"}),
}
_ITEM = frozenset({"DELETE", "GET", "PATCH"})
_HISTORY = frozenset({"GET"})


async def _handle(
    method: str,
    url: str,
    headers: Mapping[str, str],
    read_body: Callable[[], Awaitable[bytes | str]],
    grants: Callable[[], Mapping[str, Grant]],
    memory: MemoryFactory,
    max_body_bytes: int,
) -> Reply:
    # Authorize before anything else: no body read, no store touched without a grant.
    grant = _authorize(headers, grants)
    parts = urlsplit(url)
    path = parts.path.rstrip("/") or "/"
    route, allowed, item_id = _route(path)
    if route is None:
        raise ApiError(404, "not_found", f"no such endpoint {path!r}; see GET /v1/status")
    if method not in allowed:
        raise ApiError(
            405,
            "method_not_allowed",
            f"{method} is not allowed on {path}; use {' or '.join(sorted(allowed))}",
            {"allow": ", ".join(sorted(allowed))},
        )
    query = parse_qs(parts.query)
    key = (route, method)
    if key in _NO_BODY:
        return await _NO_BODY[key](grant, memory(grant), query, item_id or "")
    body = await _json_body(headers, read_body, max_body_bytes)
    return await _WITH_BODY[key](grant, memory(grant), body, item_id or "")


def _route(path: str) -> tuple[str | None, frozenset[str], str | None]:
    if path in _ROUTES:
        return path, _ROUTES[path], None
    prefix = "/v1/memories/"
    if path.startswith(prefix):
        rest = path[len(prefix) :]
        item, slash, tail = rest.partition("/")
        if item and not slash:
            return "memory", _ITEM, unquote(item)
        if item and tail == "history":
            return "history", _HISTORY, unquote(item)
    return None, frozenset(), None


def _authorize(headers: Mapping[str, str], grants: Callable[[], Mapping[str, Grant]]) -> Grant:
    challenge = {"www-authenticate": 'Bearer realm="engramdb"'}
    value = headers.get("authorization", "").strip()
    scheme, _, token = value.partition(" ")
    token = token.strip()
    if not value or scheme.lower() != "bearer" or not token:
        raise ApiError(
            401,
            "missing_token",
            "send your token as 'Authorization: Bearer <token>'",
            challenge,
        )
    grant = grants().get(token_digest(token))  # ConfigurationError -> 500 if unset
    if grant is None:
        raise ApiError(401, "invalid_token", "the bearer token is not known here", challenge)
    return grant


async def _json_body(
    headers: Mapping[str, str],
    read_body: Callable[[], Awaitable[bytes | str]],
    max_body_bytes: int,
) -> dict[str, Any]:
    content_type = headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if content_type and content_type != "application/json" and not content_type.endswith("+json"):
        raise ApiError(
            415,
            "unsupported_media_type",
            f"the body must be JSON (Content-Type: application/json), not {content_type!r}",
        )
    declared = headers.get("content-length", "").strip()
    if declared.isascii() and declared.isdigit() and int(declared) > max_body_bytes:
        raise ApiError(
            413,
            "payload_too_large",
            f"the body has {int(declared)} bytes; send at most {max_body_bytes}",
        )
    raw = await read_body()
    data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    if len(data) > max_body_bytes:
        raise ApiError(
            413,
            "payload_too_large",
            f"the body has {len(data)} bytes; send at most {max_body_bytes}",
        )
    if not data.strip():
        raise ApiError(400, "invalid_json", "the request body is empty; send a JSON object")
    try:
        text = data.decode("utf-8")
        if _deeper_than_allowed(text):  # before the parser, whose recursion is the risk
            raise _too_deep()
        body = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:  # nested deeper than the parser goes
        raise _too_deep() from None
    except (UnicodeDecodeError, ValueError) as exc:
        detail = exc.args[0] if isinstance(exc, ValueError) and exc.args else str(exc)
        raise ApiError(
            400,
            "invalid_json",
            f"the request body is not valid JSON ({detail}); send a JSON object",
        ) from None
    if not isinstance(body, dict):
        raise ApiError(
            400, "invalid_json", f"the request body must be a JSON object, not {_json_type(body)}"
        )
    return body


def _deeper_than_allowed(text: str) -> bool:
    """Whether JSON ``text`` nests ``[`` and ``{`` deeper than ``MAX_JSON_DEPTH`` (brackets
    inside strings left out): one linear scan, no recursion, so that a deep body never
    reaches ``json.loads``, whose recursion overflows Pyodide's JavaScript stack before
    Python's own limit."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:  # the common case, at C speed
        return False
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _too_deep() -> ApiError:
    return ApiError(
        400,
        "invalid_json",
        f"the request body is nested deeper than {MAX_JSON_DEPTH} levels; flatten it",
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _check_fields(body: Mapping[str, Any], allowed: frozenset[str], endpoint: str) -> None:
    if "scope" in body or "scopes" in body:
        raise ApiError(
            400,
            "invalid_request",
            "the scope comes from your token, not from the body; remove 'scope'",
        )
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ApiError(
            400,
            "invalid_request",
            f"unknown field(s) {', '.join(unknown)} for {endpoint}; allowed: "
            f"{', '.join(sorted(allowed))}",
        )


def _text(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ApiError(400, "invalid_request", f"'{name}' must be a non-empty string")
    size = len(check_unicode(value, f"'{name}'").encode("utf-8"))  # ValidationError: 400
    if size > MAX_TEXT_BYTES:
        raise ApiError(
            413,
            "text_too_large",
            f"'{name}' has {size} bytes in UTF-8; send at most {MAX_TEXT_BYTES} (split it)",
        )
    return value


def _view(grant: Grant, memory: Any) -> Any:
    """The memory bound to the grant: writes in its scope, recall also in ``read``."""
    return memory.bind(grant.scope, read=grant.read)


def _options(body: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {name: body[name] for name in names if body.get(name) is not None}


def _limit(query: Mapping[str, list[str]], default: int, most: int) -> int:
    raw = (query.get("limit") or [str(default)])[-1]
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= most:
        raise ApiError(400, "invalid_request", f"limit={raw!r} must be an integer in 1..{most}")
    return int(raw)


def _number_field(body: Mapping[str, Any], name: str, allow_null: bool = False) -> float | None:
    value = body.get(name)
    if value is None and allow_null and name in body:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(
            400,
            "invalid_request",
            f"'{name}' must be a number in [-1, 1]" + (" or null" if allow_null else ""),
        )
    return float(value)


async def _own(grant: Grant, memory: Any, item_id: str) -> MemoryRecord:
    """The memory ``item_id`` of the grant's own scope; another scope's is "not found"
    too, so its existence is not revealed."""
    record = await memory.get(item_id) if item_id else None
    if record is None or record.scope != grant.scope:
        raise ApiError(404, "not_found", f"no memory {item_id!r} in your scope")
    return record  # type: ignore[no-any-return]


async def _remember(grant: Grant, memory: Any, body: dict[str, Any], _id: str) -> Reply:
    _check_fields(body, _REMEMBER_FIELDS, "POST /v1/memories")
    text = _text(body, "text")
    options = _options(body, ("metadata", "labels", "importance"))
    record = await _view(grant, memory).remember(text, **options)
    return Reply(201, {"memory": record_json(record)}, {"location": f"/v1/memories/{record.id}"})


async def _remember_many(grant: Grant, memory: Any, body: dict[str, Any], _id: str) -> Reply:
    _check_fields(body, frozenset({"memories"}), "POST /v1/memories/batch")
    items = body.get("memories")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH_ITEMS:
        raise ApiError(
            400,
            "invalid_request",
            f"'memories' must be a list of 1..{MAX_BATCH_ITEMS} objects like {{\"text\": ...}}",
        )
    checked: list[dict[str, Any]] = []
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise ApiError(400, "invalid_request", f"memories[{position}] must be an object")
        try:
            _check_fields(item, _REMEMBER_FIELDS, "POST /v1/memories/batch")
            text = _text(item, "text")
        except ApiError as err:
            raise ApiError(err.status, err.code, f"memories[{position}]: {err.message}") from None
        options = _options(item, ("metadata", "labels", "importance"))
        checked.append({"text": text, "scope": grant.scope, **options})
    records = await memory.remember_many(checked)
    return Reply(201, {"memories": [record_json(r) for r in records]})


async def _recall(grant: Grant, memory: Any, body: dict[str, Any], _id: str) -> Reply:
    _check_fields(body, _RECALL_FIELDS, "POST /v1/recall")
    query = _text(body, "query")
    options = {"top_k": DEFAULT_TOP_K}
    options.update(_options(body, ("top_k", "mode", "filter", "min_similarity", "labels")))
    hits = await _view(grant, memory).recall(query, **options)
    return Reply(
        200,
        {
            "status": hits.status,
            "coverage": hits.coverage,
            "mode": hits.mode,
            "selection_id": hits.selection_id,
            "error": hits.error,
            "hits": [hit_json(hit) for hit in hits],
        },
    )


async def _list(grant: Grant, memory: Any, query: Mapping[str, list[str]], _id: str) -> Reply:
    limit = _limit(query, 50, MAX_LIST_LIMIT)
    before = (query.get("before") or [""])[-1] or None
    records = await memory.list(grant.scope, limit=limit, before=before)
    next_before = records[-1].id if len(records) == limit else None
    return Reply(200, {"memories": [record_json(r) for r in records], "next_before": next_before})


async def _get(grant: Grant, memory: Any, query: Mapping[str, list[str]], item_id: str) -> Reply:
    record = await _view(grant, memory).get(item_id)
    if record is None:
        raise ApiError(404, "not_found", f"no memory {item_id!r} in your scopes")
    return Reply(200, {"memory": record_json(record)})


async def _history(
    grant: Grant, memory: Any, query: Mapping[str, list[str]], item_id: str
) -> Reply:
    limit = _limit(query, 10, MAX_LIST_LIMIT)
    if await _view(grant, memory).get(item_id) is None:
        raise ApiError(404, "not_found", f"no memory {item_id!r} in your scopes")
    records = await memory.history(item_id, limit)
    return Reply(200, {"id": item_id, "revisions": [record_json(r) for r in records]})


async def _update(grant: Grant, memory: Any, body: dict[str, Any], item_id: str) -> Reply:
    _check_fields(body, _UPDATE_FIELDS, f"PATCH /v1/memories/{item_id}")
    changes: dict[str, Any] = {}
    if "text" in body:
        changes["text"] = _text(body, "text")
    for name in ("metadata", "labels", "importance"):
        if name in body:
            if body[name] is None:
                raise ApiError(400, "invalid_request", f"'{name}' may not be null; omit it")
            changes[name] = body[name]
    if not changes:
        raise ApiError(
            400, "invalid_request", "nothing to change: send text, metadata, labels or importance"
        )
    expected = body.get("expected_revision")
    if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int)):
        raise ApiError(400, "invalid_request", "'expected_revision' must be an integer")
    await _own(grant, memory, item_id)
    record = await memory.update(item_id, expected_revision=expected, **changes)
    return Reply(200, {"memory": record_json(record)})


async def _delete(grant: Grant, memory: Any, query: Mapping[str, list[str]], item_id: str) -> Reply:
    if not await _view(grant, memory).forget(item_id):
        raise ApiError(404, "not_found", f"no memory {item_id!r} in your scope")
    return Reply(200, {"deleted": True, "id": item_id})


async def _scopes(grant: Grant, memory: Any, query: Mapping[str, list[str]], _id: str) -> Reply:
    limit = _limit(query, 100, MAX_LIST_LIMIT)
    cursor: Scope | None = None
    raw = (query.get("cursor") or [""])[-1]
    if raw:
        try:
            cursor = validate_scope(json.loads(raw))
        except (ValueError, TypeError):
            raise ApiError(
                400, "invalid_request", 'cursor must be a JSON scope such as ["a", "b"]'
            ) from None
    found = await memory.list_scopes(grant.scope, limit=limit, cursor=cursor)
    scopes = [{"scope": list(s.scope), "count": s.items} for s in found]
    next_cursor = scopes[-1]["scope"] if len(scopes) == limit else None
    return Reply(200, {"scopes": scopes, "next_cursor": next_cursor})


async def _forget_scope(
    grant: Grant, memory: Any, query: Mapping[str, list[str]], _id: str
) -> Reply:
    deleted = await memory.forget_scope(grant.scope)
    return Reply(200, {"deleted": deleted, "scope": list(grant.scope)})


async def _complete(grant: Grant, memory: Any, body: dict[str, Any], _id: str) -> Reply:
    _check_fields(body, frozenset({"selection_id", "score"}), "POST /v1/complete")
    selection_id = body.get("selection_id")
    if not isinstance(selection_id, str) or not selection_id:
        raise ApiError(400, "invalid_request", "'selection_id' must be a recall's selection_id")
    score = _number_field(body, "score")
    completed = await _view(grant, memory).complete(selection_id, score)
    return Reply(200, {"completed": completed, "selection_id": selection_id})


async def _feedback(grant: Grant, memory: Any, body: dict[str, Any], _id: str) -> Reply:
    _check_fields(body, frozenset({"memory_id", "value"}), "POST /v1/feedback")
    memory_id = body.get("memory_id")
    if not isinstance(memory_id, str) or not memory_id:
        raise ApiError(400, "invalid_request", "'memory_id' must be a memory's id")
    if "value" not in body:
        raise ApiError(400, "invalid_request", "'value' must be a number in [-1, 1] or null")
    value = _number_field(body, "value", allow_null=True)
    record = await _view(grant, memory).feedback(memory_id, value)
    if record is None:
        raise ApiError(404, "not_found", f"no memory {memory_id!r} in your scope")
    return Reply(200, {"memory": record_json(record)})


async def _status(grant: Grant, memory: Any, query: Mapping[str, list[str]], _id: str) -> Reply:
    # Counts in MemoryStatus may cover other tenants of the database, so they are not shown.
    status = await memory.status()
    return Reply(
        200,
        {
            "status": "ok",
            "engramdb": engramdb_version,
            "scope": list(grant.scope),
            "read": [list(s) for s in grant.read],
            "space": status.active_space,
            "schema_version": status.schema_version,
        },
    )


_Handler = Callable[[Grant, Any, Any, str], Awaitable[Reply]]
_NO_BODY: dict[tuple[str, str], _Handler] = {
    ("/v1/memories", "GET"): _list,
    ("memory", "GET"): _get,
    ("memory", "DELETE"): _delete,
    ("history", "GET"): _history,
    ("/v1/scopes", "GET"): _scopes,
    ("/v1/scope", "DELETE"): _forget_scope,
    ("/v1/status", "GET"): _status,
}
_WITH_BODY: dict[tuple[str, str], _Handler] = {
    ("/v1/memories", "POST"): _remember,
    ("/v1/memories/batch", "POST"): _remember_many,
    ("memory", "PATCH"): _update,
    ("/v1/recall", "POST"): _recall,
    ("/v1/complete", "POST"): _complete,
    ("/v1/feedback", "POST"): _feedback,
}


# --- JSON forms ---------------------------------------------------------------------------


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record_json(record: MemoryRecord) -> dict[str, Any]:
    """A memory record as JSON."""
    return {
        "id": record.id,
        "scope": list(record.scope),
        "text": record.text,
        "metadata": record.metadata,
        "labels": record.labels,
        "importance": record.importance,
        "created_at": _time(record.created_at),
        "updated_at": _time(record.updated_at),
        "expires_at": _time(record.expires_at),
        "revision": record.revision,
        "content_sha256": record.content_sha256,
    }


def _number(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def hit_json(hit: Hit) -> dict[str, Any]:
    """A recall hit as JSON: the record, its scores and its evidence."""
    evidence = hit.evidence
    return {
        "memory": record_json(hit.memory),
        "score": _number(hit.score),
        "similarity": _number(hit.similarity),
        "vector_rank": hit.vector_rank,
        "lexical_rank": hit.lexical_rank,
        "bm25": _number(hit.bm25),
        "boosts": {k: _number(v) for k, v in hit.boosts.items()},
        "evidence": {
            "id": evidence["id"],
            "scope": list(evidence["scope"]),
            "revision": evidence["revision"],
            "content_sha256": evidence["content_sha256"],
            "space_id": evidence["space_id"],
            "embedded_at": _time(evidence["embedded_at"]),
        },
    }


def dumps(body: Any) -> str:
    """The JSON text of a reply body (compact, UTF-8, no NaN)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
