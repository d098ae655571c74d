"""The Worker's JSON HTTP API, as plain functions: (method, url, headers, body) -> reply.

Nothing here touches the Workers runtime, so it runs (and is tested) like any Python:

=========================  ==========================================================
``POST /v1/memories``      ``{"text", "metadata"?, "labels"?, "importance"?}`` -> 201
                           ``{"memory": {...}}``
``POST /v1/recall``        ``{"query", "top_k"?, "mode"?, "filter"?}`` -> 200
                           ``{"status", "mode", "selection_id", "hits": [...]}``
``GET /v1/memories``       ``?limit=50&before=<id>`` -> 200 ``{"memories", "next_before"}``
``DELETE /v1/memories/ID`` -> 200 ``{"deleted": true, "id"}`` or 404
``GET /v1/status``         -> 200 ``{"status": "ok", "scope", "space", ...}``
=========================  ==========================================================

**Authorization.** Every request needs ``Authorization: Bearer <token>``. The token
names the caller's scope through configuration only (:func:`parse_tokens`, from the
``ENGRAMDB_TOKENS`` secret), never through the request. A missing or unknown token is a
401 before anything else happens: the body is not read and the store is not touched.
The scope in a grant is where the caller writes, lists and deletes; recall searches it
plus the grant's optional read-only ``read`` scopes.

**Errors** are ``{"error": {"code": ..., "message": ...}}`` with a stable ``code``:
``missing_token``/``invalid_token`` 401, ``invalid_json``/``invalid_request`` 400,
``not_found`` 404, ``method_not_allowed`` 405, ``payload_too_large``/``text_too_large``
413, ``unsupported_media_type`` 415, ``embedding_failed`` 502, ``store_unavailable``/
``schema_too_new`` 503, ``server_misconfigured``/``internal_error`` 500.
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
MAX_LIST_LIMIT = 500

_REMEMBER_FIELDS = frozenset({"text", "metadata", "labels", "importance"})
_RECALL_FIELDS = frozenset({"query", "top_k", "mode", "filter", "min_similarity"})


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

MemoryFactory = Callable[[], Any]  # returns an AsyncMemory (built lazily, after auth)


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
    except ProviderError as exc:
        return ApiError(
            502, "embedding_failed", f"the embedding model failed ({type(exc).__name__}: {exc})"
        ).reply()
    except StoreError as exc:
        print(f"engramdb: store error: {exc}")
        return ApiError(503, "store_unavailable", "the database failed; retry later").reply()
    except ConfigurationError as exc:
        # The details go to the Worker's logs, not to a caller who may hold no token.
        print(f"engramdb: configuration error: {exc}")
        return ApiError(
            500,
            "server_misconfigured",
            "the Worker is misconfigured (ENGRAMDB_TOKENS, the DB or AI binding, or "
            "EMBEDDING_MODEL); its logs say what to fix",
        ).reply()
    except EngramError as exc:  # pragma: no cover - every subclass is handled above
        return ApiError(500, "internal_error", f"{type(exc).__name__}").reply()
    except Exception as exc:
        print(f"engramdb: unexpected {type(exc).__name__}: {exc}")
        return ApiError(500, "internal_error", "an unexpected error happened; see the logs").reply()


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
    if route == "status":
        return await _status(grant, memory())
    if route == "memories" and method == "GET":
        return await _list(grant, memory(), parse_qs(parts.query))
    if route == "memory":
        return await _delete(grant, memory(), item_id or "")
    body = await _json_body(headers, read_body, max_body_bytes)
    if route == "memories":
        return await _remember(grant, memory(), body)
    return await _recall(grant, memory(), body)


def _route(path: str) -> tuple[str | None, frozenset[str], str | None]:
    if path == "/v1/memories":
        return "memories", frozenset({"GET", "POST"}), None
    if path == "/v1/recall":
        return "recall", frozenset({"POST"}), None
    if path == "/v1/status":
        return "status", frozenset({"GET"}), None
    prefix = "/v1/memories/"
    if path.startswith(prefix) and "/" not in path[len(prefix) :]:
        return "memory", frozenset({"DELETE"}), unquote(path[len(prefix) :])
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
    if declared.isdigit() and int(declared) > max_body_bytes:
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
        body = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
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


async def _remember(grant: Grant, memory: Any, body: dict[str, Any]) -> Reply:
    _check_fields(body, _REMEMBER_FIELDS, "POST /v1/memories")
    text = _text(body, "text")
    options: dict[str, Any] = {}
    for name in ("metadata", "labels", "importance"):
        if body.get(name) is not None:
            options[name] = body[name]
    record = await memory.remember(text, scope=grant.scope, **options)
    return Reply(201, {"memory": record_json(record)}, {"location": f"/v1/memories/{record.id}"})


async def _recall(grant: Grant, memory: Any, body: dict[str, Any]) -> Reply:
    _check_fields(body, _RECALL_FIELDS, "POST /v1/recall")
    query = _text(body, "query")
    options: dict[str, Any] = {}
    for name in ("top_k", "mode", "filter", "min_similarity"):
        if body.get(name) is not None:
            options[name] = body[name]
    hits = await memory.recall(query, scopes=grant.recall_scopes, **options)
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


async def _list(grant: Grant, memory: Any, query: Mapping[str, list[str]]) -> Reply:
    raw_limit = (query.get("limit") or ["50"])[-1]
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_LIST_LIMIT:
        raise ApiError(
            400, "invalid_request", f"limit={raw_limit!r} must be an integer in 1..{MAX_LIST_LIMIT}"
        )
    limit = int(raw_limit)
    before = (query.get("before") or [None])[-1] or None
    records = await memory.list(grant.scope, limit=limit, before=before)
    next_before = records[-1].id if len(records) == limit else None
    return Reply(200, {"memories": [record_json(r) for r in records], "next_before": next_before})


async def _delete(grant: Grant, memory: Any, item_id: str) -> Reply:
    if not item_id:
        raise ApiError(400, "invalid_request", "the memory id is missing from the path")
    record = await memory.get(item_id)
    # Another scope's memory is "not found" too: its existence is not revealed.
    if record is None or record.scope != grant.scope or not await memory.forget(item_id):
        raise ApiError(404, "not_found", f"no memory {item_id!r} in your scope")
    return Reply(200, {"deleted": True, "id": item_id})


async def _status(grant: Grant, memory: Any) -> Reply:
    # Counts in MemoryStatus cover every tenant of the database, so they are not shown.
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
