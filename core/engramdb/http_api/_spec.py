"""The HTTP API's routes, described once: the router's table and the OpenAPI document.

Each :class:`Operation` is one method on one path: what it is for, whether it needs the
bearer token, the JSON schema of its body and its query parameters, and every status it
can answer with the schema of that answer (an error's ``code`` values included).
:mod:`engramdb.http_api` routes requests by :data:`OPERATIONS` (an operation is
answered by the handler of its ``operation_id``, and a handler without an operation, or
an operation without a handler, stops the import), and :func:`openapi_document` writes
them as OpenAPI 3.1. The schemas are JSON Schema 2020-12 and say what the API writes:
:mod:`engramdb.json_format`'s forms of records and hits, nulls included.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engramdb import __version__ as engramdb_version
from engramdb.flows._view_ops import ID_SCHEMA, MAX_DOCUMENT_BYTES, VIEW_OPS, ViewOp
from engramdb.http_api._errors import error_code
from engramdb.http_api._wire import (
    MAX_BODY_BYTES,
    MAX_JSON_DEPTH,
    MAX_LIST_LIMIT,
    MAX_TEXT_BYTES,
)
from engramdb.json_format import _HIT_FIELDS, _HITS_FIELDS, _MODES, _STATUSES, RECORD_FIELDS

__all__ = [
    "OPENAPI_PATH",
    "OPERATIONS",
    "SCHEMAS",
    "Operation",
    "Param",
    "cached_document",
    "openapi_document",
]

OPENAPI_PATH = "/openapi.json"
"""Where the hosts serve :func:`openapi_document`, without a token."""


@dataclass(frozen=True, slots=True)
class Param:
    """A query parameter: its name, JSON schema and what it means."""

    name: str
    schema: Mapping[str, Any]
    description: str


@dataclass(frozen=True, slots=True)
class Operation:
    """One method on one path. ``path`` is a template (``{id}``: one path segment);
    ``body``: the name of the request body's schema (None: no body is read);
    ``answers``: each status the operation can answer -> the name of its body's schema,
    ``errors``: each error status -> its ``code`` values; ``headers``: a status -> the
    headers that answer carries (name -> meaning) beyond the errors' own."""

    method: str
    path: str
    operation_id: str
    summary: str
    answers: Mapping[int, str]
    errors: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    token: bool = True
    body: str | None = None
    query: tuple[Param, ...] = ()
    headers: Mapping[int, Mapping[str, str]] = field(default_factory=dict)


def _null(*types: str) -> list[str]:
    return [*types, "null"]


def _object(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A closed object: no properties beyond ``properties``."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_TIME = {"type": "string", "format": "date-time", "description": "RFC 3339 UTC, milliseconds"}
_SCORE = {"type": _null("number")}
_RANK = {"type": _null("integer"), "minimum": 1}
_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
SCHEMAS: dict[str, dict[str, Any]] = {
    "Scope": {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "minItems": 1,
        "description": 'a scope\'s parts, e.g. ["acme", "user", "sam"]',
    },
    "Record": _object(
        {
            "id": {"type": "string", "minLength": 1},
            "scope": _ref("Scope"),
            "text": {"type": "string"},
            "metadata": {"type": "object"},
            "labels": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
            "importance": {"type": "number", "minimum": 0, "maximum": 1},
            "created_at": _TIME,
            "updated_at": _TIME,
            "expires_at": {**_TIME, "type": _null("string")},
            "revision": {"type": "integer", "minimum": 1},
            "content_sha256": _SHA256,
        },
        RECORD_FIELDS,
    ),
    "Evidence": _object(
        {
            "id": {"type": "string"},
            "scope": _ref("Scope"),
            "revision": {"type": "integer", "minimum": 1},
            "content_sha256": _SHA256,
            "space_id": {"type": _null("string")},
            "embedded_at": {**_TIME, "type": _null("string")},
            "vector_share": {
                **_SCORE,
                "description": "the vector leg's part of a hybrid hit's score (its weight "
                "times the cosine); only when that leg scored the hit",
            },
            "lexical_share": {
                **_SCORE,
                "description": "the lexical leg's part of a hybrid hit's score (its weight "
                "times BM25, with the gain for the question's names, over the query's "
                "ceiling, above the lexical floor); only when that leg scored the hit",
            },
            "rerank_score": {**_SCORE, "description": "only when a reranker re-scored the hit"},
        },
        ("id", "scope", "revision", "content_sha256", "space_id", "embedded_at"),
    ),
    "Hit": _object(
        {
            "memory": _ref("Record"),
            "score": _SCORE,
            "similarity": _SCORE,
            "vector_rank": _RANK,
            "lexical_rank": _RANK,
            "bm25": _SCORE,
            "boosts": {"type": "object", "additionalProperties": _SCORE},
            "retention": _SCORE,
            "evidence": _ref("Evidence"),
            "context": {
                "type": "array",
                "items": _ref("Record"),
                "description": "the turns before and after a hit that is a turn of a "
                "conversation, in turn order, when the recall asked for context; only "
                "when there are some",
            },
        },
        _HIT_FIELDS,
    ),
    "Hits": _object(
        {
            "status": {"enum": list(_STATUSES)},
            "coverage": _SCORE,
            "mode": {"enum": list(_MODES)},
            "selection_id": {"type": _null("string")},
            "error": {"type": _null("string")},
            "hits": {"type": "array", "items": _ref("Hit")},
        },
        _HITS_FIELDS,
    ),
    "Error": _object(
        {
            "error": _object(
                {"code": {"type": "string"}, "message": {"type": "string"}}, ("code", "message")
            )
        },
        ("error",),
    ),
    "Memory": _object({"memory": _ref("Record")}, ("memory",)),
    "Memories": _object({"memories": {"type": "array", "items": _ref("Record")}}, ("memories",)),
    "MemoryPage": _object(
        {
            "memories": {"type": "array", "items": _ref("Record")},
            "next_before": {"type": _null("string")},
        },
        ("memories", "next_before"),
    ),
    "StoredDocument": _object(
        {
            "id": {"type": "string"},
            "source": {"type": "string"},
            "sha256": _SHA256,
            "added": {
                "type": "boolean",
                "description": "false: the source already held this very text",
            },
            "chunks": {"type": "array", "items": _ref("Record")},
        },
        ("id", "source", "sha256", "added", "chunks"),
    ),
    "Document": _object({"document": _ref("StoredDocument")}, ("document",)),
    "DocumentUpload": _object(
        {
            "source": {"type": "string"},
            "sha256": _SHA256,
            "parts": {"type": "integer", "minimum": 1},
            "received": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0},
                "description": "the parts held, in order (after a restart, only those sent since)",
            },
            "document": {
                "oneOf": [_ref("StoredDocument"), {"type": "null"}],
                "description": "the document remembered, once the last part arrived; else null",
            },
        },
        ("source", "sha256", "parts", "received", "document"),
    ),
    "SourceDeleted": _object(
        {"deleted": {"type": "integer", "minimum": 0}, "source": {"type": "string"}},
        ("deleted", "source"),
    ),
    "History": _object(
        {"id": {"type": "string"}, "revisions": {"type": "array", "items": _ref("Record")}},
        ("id", "revisions"),
    ),
    "Deleted": _object(
        {
            "deleted": {
                "type": "boolean",
                "description": "whether the memory was deleted: true here (a memory that is "
                "not there answers 404 not_found); a client answers this value",
            },
            "id": {"type": "string"},
        },
        ("deleted", "id"),
    ),
    "ScopePage": _object(
        {
            "scopes": {
                "type": "array",
                "items": _object(
                    {"scope": _ref("Scope"), "count": {"type": "integer", "minimum": 0}},
                    ("scope", "count"),
                ),
            },
            "next_cursor": {"oneOf": [_ref("Scope"), {"type": "null"}]},
        },
        ("scopes", "next_cursor"),
    ),
    "ScopeDeleted": _object(
        {"deleted": {"type": "integer", "minimum": 0}, "scope": _ref("Scope")},
        ("deleted", "scope"),
    ),
    "Completed": _object(
        {"completed": {"type": "boolean"}, "selection_id": {"type": "string"}},
        ("completed", "selection_id"),
    ),
    "Maintenance": _object(
        {
            "state": {"type": "string"},
            **{
                name: {"type": "integer", "minimum": 0}
                for name in ("runs", "successes", "failures", "consecutive_failures", "skipped")
            },
            **{
                name: {**_TIME, "type": _null("string")}
                for name in ("last_started_at", "last_finished_at", "last_success_at", "next_at")
            },
            "last_error": {"type": _null("string")},
            "last_report": {"type": "null", "description": "the store's counts: never shown"},
        },
        (
            "state",
            "runs",
            "successes",
            "failures",
            "consecutive_failures",
            "skipped",
            "last_started_at",
            "last_finished_at",
            "last_success_at",
            "next_at",
            "last_error",
            "last_report",
        ),
    ),
    "Status": _object(
        {
            "status": {"const": "ok"},
            "engramdb": {"type": "string"},
            "scope": _ref("Scope"),
            "read": {"type": "array", "items": _ref("Scope")},
            "space": {"type": _null("string")},
            "schema_version": {"type": "integer"},
            "items": {"type": "integer", "minimum": 0},
            "maintenance": {"oneOf": [_ref("Maintenance"), {"type": "null"}]},
        },
        ("status", "engramdb", "scope", "read", "space", "schema_version", "items", "maintenance"),
    ),
    "Health": _object(
        {"status": {"const": "ok"}, "engramdb": {"type": "string"}}, ("status", "engramdb")
    ),
    "Readiness": _object(
        {
            "status": {"enum": ["ready", "unavailable"]},
            "engramdb": {"type": "string"},
            "checks": {"type": "object", "additionalProperties": {"type": "string"}},
            "maintainer": _object(
                {
                    "state": {"enum": ["off", "idle", "running", "backing_off", "failing"]},
                    "last_pass_at": {**_TIME, "type": _null("string")},
                    "last_success_at": {**_TIME, "type": _null("string")},
                },
                ("state", "last_pass_at", "last_success_at"),
            ),
        },
        ("status", "engramdb", "checks"),
    ),
    "OpenAPI": {
        "type": "object",
        "required": ["openapi", "info", "paths"],
        "properties": {"openapi": {"const": "3.1.0"}},
        "description": "this document",
    },
}
"""The JSON schemas of the answers (the request bodies are the view operations' fields:
:func:`_request_schemas` adds them)."""


# --- the operations -----------------------------------------------------------------------

# What every operation behind the token can answer, and what reading a body adds (each
# code's status is the one errors.ERRORS gives it).
_GUARDED = (
    "missing_token",
    "invalid_token",
    "rate_limited",
    "server_misconfigured",
    "internal_error",
    "store_unavailable",
    "schema_too_new",
)
_BODY = ("invalid_json", "invalid_request", "payload_too_large", "unsupported_media_type")
_INVALID = ("invalid_request",)


def _errors(*parts: tuple[str, ...]) -> dict[int, tuple[str, ...]]:
    """An operation's error codes by status, the guarded ones first, each once."""
    merged: dict[int, tuple[str, ...]] = {}
    for code in dict.fromkeys(code for part in (_GUARDED, *parts) for code in part):
        row = error_code(code)
        assert row is not None, code
        merged[row.status] = (*merged.get(row.status, ()), code)
    return dict(sorted(merged.items()))


def _camel(name: str) -> str:
    return "".join(part.title() for part in name.split("_"))


def _in_body(op: ViewOp) -> bool:
    assert op.route is not None
    return op.route.method in ("POST", "PATCH", "PUT")


def _body_schema(op: ViewOp) -> dict[str, Any]:
    fields = [f for f in op.fields if f.name != "id"]
    schema = _object(
        {f.key: f.described() for f in fields}, tuple(f.key for f in fields if f.required)
    )
    if op.route is not None and op.route.one_of:
        schema["anyOf"] = [{"required": [name]} for name in op.route.one_of]
    return schema


def _query(op: ViewOp) -> tuple[Param, ...]:
    """A route's query parameters: its fields but the path's ``id``; a JSON value (an
    array or an object) is sent as its JSON text."""
    params = []
    for f in op.fields:
        if f.name == "id":
            continue
        kind = f.schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        scalar = not {"array", "object"} & set(kinds)
        schema = (
            dict(f.schema) if scalar else {"type": "string", "contentMediaType": "application/json"}
        )
        params.append(Param(f.key, schema, f.description if scalar else f"JSON: {f.description}"))
    return tuple(params)


def _answer_name(op: ViewOp) -> str:
    assert op.route is not None
    answer = op.route.answer
    return answer if isinstance(answer, str) else _camel(op.name) + "Answer"


def _request_schemas() -> None:
    """Add each view operation's body (``RecallBody``...) and inline answer schema."""
    for op in VIEW_OPS.values():
        if op.route is None:
            continue
        if _in_body(op):
            SCHEMAS[_camel(op.name) + "Body"] = _body_schema(op)
        if not isinstance(op.route.answer, str):
            SCHEMAS[_answer_name(op)] = dict(op.route.answer)


def _view_operation(op: ViewOp) -> Operation:
    route = op.route
    assert route is not None
    body = _in_body(op)
    texts = any("x-max-utf8-bytes" in f.schema for f in op.fields)
    parts = (
        _BODY if body else _INVALID if op.fields else (),
        ("text_too_large",) if texts else (),
        route.errors,
    )
    return Operation(
        route.method,
        route.path,
        op.name,
        op.summary,
        {route.status: _answer_name(op)},
        _errors(*parts),
        body=_camel(op.name) + "Body" if body else None,
        query=() if body else _query(op),
        headers={route.status: route.headers} if route.headers else {},
    )


_request_schemas()

OPERATIONS: tuple[Operation, ...] = (
    *(_view_operation(op) for op in VIEW_OPS.values() if op.route is not None),
    *(
        Operation(method, path, operation_id, summary, answers, token=False)
        for path, operation_id, summary, answers in (
            ("/healthz", "health", "Liveness: the process answers", {200: "Health"}),
            (
                "/readyz",
                "ready",
                "Readiness: the host's checks (its stores, its maintainers)",
                {200: "Readiness", 503: "Readiness"},
            ),
            (OPENAPI_PATH, "openapi", "This OpenAPI 3.1 document", {200: "OpenAPI"}),
        )
        for method in ("GET", "HEAD")
    ),
)
"""Every operation of the API, in the order the document lists them. A ``HEAD`` operation
answers what its ``GET`` does, without the body."""

_DESCRIPTIONS = {
    200: "Done",
    201: "Stored",
    400: "The body or a parameter is not valid; the message says what to fix",
    401: "No bearer token, or an unknown one",
    404: "No such memory in your scopes",
    409: "expected_revision is not the memory's revision; nothing changed",
    413: (
        f"The body passes {MAX_BODY_BYTES} bytes, or a text {MAX_TEXT_BYTES} bytes of UTF-8 "
        f"(a document's {MAX_DOCUMENT_BYTES})"
    ),
    415: "The body is not JSON",
    429: (
        "The token used up its budget; retry after Retry-After seconds. Only on a host "
        "with a rate limit (the Worker's RATE_LIMITER); engramdb serve has none"
    ),
    500: "The server is misconfigured, or failed unexpectedly; its log says why",
    502: (
        "The embedding model failed: a write stores nothing; a recall answers this only "
        "over a store without a lexical index (else it degrades to the lexical leg)"
    ),
    503: "The database failed (rolled back), or a newer engramdb wrote it; retry later",
}
_HEADERS = {
    401: {"WWW-Authenticate": 'Bearer realm="engramdb"'},
    429: {"Retry-After": "seconds to wait"},
}


def _error_schema(codes: tuple[str, ...]) -> dict[str, Any]:
    return {
        "allOf": [_ref("Error")],
        "properties": {"error": {"properties": {"code": {"enum": list(codes)}}}},
    }


def _response(
    operation: Operation, status: int, schema: Mapping[str, Any], description: str
) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": description}
    headers = {**_HEADERS.get(status, {}), **operation.headers.get(status, {})}
    if headers:
        answer["headers"] = {
            name: {"description": text, "schema": {"type": "string"}}
            for name, text in headers.items()
        }
    if operation.method != "HEAD":
        answer["content"] = {"application/json": {"schema": dict(schema)}}
    return answer


def _operation(operation: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operationId": operation.operation_id + ("_head" if operation.method == "HEAD" else ""),
        "summary": operation.summary,
    }
    if not operation.token:
        out["security"] = []  # answered before any token is looked at
    parameters: list[dict[str, Any]] = []
    if "{id}" in operation.path:
        parameters.append({"name": "id", "in": "path", "required": True, "schema": dict(ID_SCHEMA)})
    parameters += [
        {"name": p.name, "in": "query", "schema": dict(p.schema), "description": p.description}
        for p in operation.query
    ]
    if parameters:
        out["parameters"] = parameters
    if operation.body is not None:
        out["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(operation.body)}},
        }
    responses = {
        status: _response(operation, status, _ref(name), _DESCRIPTIONS.get(status, name))
        for status, name in operation.answers.items()
    }
    if operation.path == "/readyz":
        responses[503]["description"] = "A check failed: not ready"
    for status, codes in operation.errors.items():
        responses[status] = _response(
            operation, status, _error_schema(codes), _DESCRIPTIONS[status]
        )
    out["responses"] = {str(status): responses[status] for status in sorted(responses)}
    return out


_INFO = f"""engramdb's JSON HTTP API, answered alike by the Cloudflare Worker and `engramdb
serve`. Every operation but the probes and this document needs `Authorization: Bearer
<token>`; the token names your scope. An error is `{{"error": {{"code", "message"}}}}`.
Any other method on a path listed here is a 405 `method_not_allowed` with an `Allow`
header; a path not listed here is a 404 `not_found` (401 without a token). Limits: a body
of {MAX_BODY_BYTES} bytes, a text of {MAX_TEXT_BYTES} bytes of UTF-8 (a document's
{MAX_DOCUMENT_BYTES}), JSON nested
{MAX_JSON_DEPTH} levels, a listing's limit {MAX_LIST_LIMIT}."""


@functools.cache
def _document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method.lower()] = _operation(operation)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "engramdb HTTP API",
            "version": engramdb_version,
            "description": " ".join(_INFO.split()),
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a token of ENGRAMDB_TOKENS (or the Worker's TOKENS)",
                }
            },
            "schemas": copy.deepcopy(SCHEMAS),
        },
    }


def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI 3.1.0 document (a fresh copy: change it as you like), built
    from :data:`OPERATIONS`; the hosts serve it at ``GET /openapi.json``."""
    return copy.deepcopy(_document())


def cached_document() -> Mapping[str, Any]:
    """The document the hosts answer, built once (not to be changed)."""
    return _document()
