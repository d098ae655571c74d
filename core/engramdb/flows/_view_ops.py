"""The operations of a bound view, each declared once, beside its method.

A :class:`ViewOp` says what one method of ``AsyncBoundMemory`` is outside Python: the
parameters it takes from JSON (each a :class:`Field` with its JSON schema, written
once), its HTTP route (:class:`Route`), its agent tool (:class:`Tool`, and so its MCP
tool), its CLI command, and its answer as JSON (``answer``) and back (``read``). The
method carries its declaration (``@view_op(...)`` in ``_view_faces_async.py``), and every
face is derived from :data:`VIEW_OPS`:

* the HTTP API's routes, OpenAPI bodies and field checks (``engramdb.http_api``);
* the agent tools' specs (``engramdb.agents``), and so the MCP server's tools;
* the client's methods, requests and answers (``tools/unasync.py`` writes them from
  the view's methods; ``engramdb.client``);
* a CLI command for an operation the CLI has no hand-written command for.

A face an operation is not offered on names the reason (``not_offered``): a test holds
each face to the table. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from engramdb._base.errors import ValidationError, shown
from engramdb._base.types import validate_scope
from engramdb.documents import _LEAST_MAX_CHARS, DEFAULT_MAX_CHARS, Document, DocumentUpload
from engramdb.flows._conversations import MAX_CONTEXT
from engramdb.flows._uploads import MAX_PARTS
from engramdb.json_format import (
    hits_from_json,
    hits_to_json,
    record_from_json,
    record_to_json,
    scope_count_from_json,
    scope_count_to_json,
    scope_to_json,
    status_to_json,
)
from engramdb.validate import Limits

__all__ = [
    "DEFAULT_TOP_K",
    "FACES",
    "MAX_BATCH_ITEMS",
    "MAX_DOCUMENT_BYTES",
    "MAX_LIST_LIMIT",
    "MAX_PARTS",
    "MAX_TEXT_BYTES",
    "VIEW_OPS",
    "Field",
    "Route",
    "Tool",
    "ViewOp",
    "view_op",
]

MAX_TEXT_BYTES = Limits().max_text_bytes
"""Largest ``text`` / ``query`` in UTF-8 bytes (the core's default ``Limits``)."""
MAX_DOCUMENT_BYTES = 96 * 1024
"""Largest document text one request sends (``POST /v1/documents``), in UTF-8 bytes: with
every character escaped to two bytes in JSON, and the largest metadata
(``Limits.max_metadata_bytes``), it still fits the HTTP API's body limit (256 KiB)."""
MAX_LIST_LIMIT = 500
"""Largest ``limit`` of a listing."""
MAX_BATCH_ITEMS = 100
"""Most memories one ``POST /v1/memories/batch`` stores."""
DEFAULT_TOP_K = 10
"""Hits a recall answers over HTTP when the body gives no ``top_k``."""

FACES = ("http", "tool", "client", "cli")
"""The faces a view operation can be offered on, besides Python."""

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Field:
    """One parameter of an operation as JSON: its name (the method's keyword), its JSON
    schema, what it means, whether it must be given, and how its JSON value becomes the
    method's argument (``decode``, on the server) and back (``encode``, in the client).
    ``wire`` is its name in JSON when that is not the keyword's. A JSON null leaves the
    argument to the method's default, unless ``null_is_value`` (then the method is given
    None: ``update``'s ``expires_at: null`` clears the expiry); a field whose schema does
    not allow null refuses it."""

    name: str
    schema: Mapping[str, Any]
    description: str
    required: bool = False
    decode: Callable[[Any], Any] | None = None
    encode: Callable[[Any], Any] | None = None
    null_is_value: bool = False
    wire: str = ""

    @property
    def key(self) -> str:
        """Its name in JSON: ``wire``, else the method's keyword."""
        return self.wire or self.name

    def decoded(self, value: Any) -> Any:
        """The method's argument for the JSON ``value``."""
        return value if self.decode is None else self.decode(value)

    def encoded(self, value: Any) -> Any:
        """The JSON of the method's argument ``value``."""
        return value if self.encode is None else self.encode(value)

    def described(self) -> dict[str, Any]:
        """Its JSON schema, described: what it means, then the schema's own note."""
        note = self.schema.get("description")
        meaning = f"{self.description}; {note}" if note else self.description
        return {**self.schema, "description": meaning}

    def nullable(self) -> bool:
        """Whether its schema takes a JSON null."""
        kind = self.schema.get("type")
        return (isinstance(kind, list) and "null" in kind) or None in self.schema.get("enum", ())


@dataclass(frozen=True, slots=True)
class Route:
    """An operation's HTTP route: its method and path (``{id}``: the ``id`` parameter),
    the status of its answer, the name of its answer's schema (or the schema itself),
    the error codes it adds to those every route has, the headers of its answer, the
    fields of which a body must give at least one (``one_of``), and the answer's count a
    tenant split over several stores sums over them (``summed``: each answers for the
    memories it holds; ``engramdb_workers.sharding``)."""

    method: str
    path: str
    answer: str | Mapping[str, Any]
    status: int = 200
    errors: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    one_of: tuple[str, ...] = ()
    summed: str | None = None


@dataclass(frozen=True, slots=True)
class Tool:
    """An operation's agent tool: its name, what it tells the model, and its parameters
    (by default the operation's fields; a name takes the operation's field of that
    name, a :class:`Field` is the tool's own)."""

    name: str
    description: str
    fields: tuple[str | Field, ...] | None = None


_NEVER = object()


@dataclass(frozen=True, slots=True)
class ViewOp:
    """One operation of a bound view and its faces (see the module's docstring).
    ``absent``: the method's answer that means "no such memory" (a 404 ``not_found``
    over HTTP, and the client's answer to one); ``answer``/``read``: the method's answer
    as the JSON the HTTP API writes, and that JSON as the client's answer."""

    name: str
    summary: str
    fields: tuple[Field, ...] = ()
    route: Route | None = None
    tool: Tool | None = None
    cli: str | None = None
    answer: Callable[[Any, Mapping[str, Any]], Any] | None = None
    read: Callable[[Any, Mapping[str, Any]], Any] | None = None
    absent: object = _NEVER
    not_offered: Mapping[str, str] = field(default_factory=dict)

    def field(self, name: str) -> Field:
        """Its field of the keyword ``name``."""
        for given in self.fields:
            if given.name == name:
                return given
        raise KeyError(name)

    @property
    def has_absent(self) -> bool:
        """Whether one of its answers means "no such memory"."""
        return self.absent is not _NEVER

    def tool_fields(self) -> tuple[Field, ...]:
        """The parameters of its tool."""
        assert self.tool is not None
        chosen = self.fields if self.tool.fields is None else self.tool.fields
        return tuple(self.field(f) if isinstance(f, str) else f for f in chosen)

    def offered(self, face: str) -> str | None:
        """The name this operation has on ``face``, or None (``not_offered`` says why)."""
        names = {
            "http": self.name if self.route else None,
            "tool": self.tool.name if self.tool else None,
            "client": self.name if self.route else None,
            "cli": self.cli,
        }
        return names[face]


VIEW_OPS: dict[str, ViewOp] = {}
"""Every operation of a bound view, by its method's name, in the order declared."""


def view_op(
    summary: str,
    *,
    fields: tuple[Field, ...] = (),
    route: Route | None = None,
    tool: Tool | None = None,
    cli: str | None = None,
    answer: Callable[[Any, Mapping[str, Any]], Any] | None = None,
    read: Callable[[Any, Mapping[str, Any]], Any] | None = None,
    absent: object = _NEVER,
    not_offered: Mapping[str, str] | None = None,
) -> Callable[[F], F]:
    """Declare the decorated method of ``AsyncBoundMemory`` as a view operation (the
    method is returned as it is)."""

    def declare(method: F) -> F:
        op = ViewOp(
            method.__name__,
            summary,
            fields,
            route,
            tool,
            cli,
            answer,
            read,
            absent,
            dict(not_offered or {}),
        )
        if op.name in VIEW_OPS:
            raise RuntimeError(f"the view operation {op.name!r} is declared twice")
        unexplained = [f for f in FACES if op.offered(f) is None and f not in op.not_offered]
        if unexplained or (route is None) != (answer is None):
            raise RuntimeError(f"{op.name}: say why it is not offered on {unexplained}")
        VIEW_OPS[op.name] = op
        return method

    return declare


# --- the fields many operations share: each schema once --------------------------------


def _null(*types: str) -> list[str]:
    return [*types, "null"]


def _time(value: object) -> datetime | None:
    """An RFC 3339 time with a timezone, from JSON (null: none)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            moment = None
        if moment is not None and moment.tzinfo is not None:
            return moment
    raise ValidationError(
        f"expires_at={shown(value)} must be an ISO 8601 time with a timezone, "
        "e.g. '2026-12-31T18:00:00+00:00'"
    )


def _time_json(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else value


def _seconds_json(value: object) -> object:
    return value.total_seconds() if isinstance(value, timedelta) else value


BATCH_ITEMS: Mapping[str, Any] = {
    "type": "array",
    "items": {"$ref": "#/components/schemas/RememberBody"},
    "minItems": 1,
    "maxItems": MAX_BATCH_ITEMS,
}


def _scope_json(value: object) -> object:
    return json.dumps(list(value)) if isinstance(value, tuple | list) else value


def _scope(value: object) -> object:
    """A scope from JSON (a list of its parts)."""
    try:
        return validate_scope(tuple(value) if isinstance(value, list) else value)
    except (ValueError, TypeError):
        raise ValidationError(
            f'cursor={shown(value)} must be a JSON scope such as ["a", "b"]'
        ) from None


def position(value: object) -> object:
    """A listing's position ``[created_at, id]`` from JSON, as ``(datetime, id)``."""
    if value is None:
        return None
    if isinstance(value, list) and len(value) == 2 and isinstance(value[1], str):
        moment = _time(value[0]) if isinstance(value[0], str) else None
        if moment is not None:
            return (moment, value[1])
    raise ValidationError(
        f"below={shown(value)} must be a position [created_at, id], e.g. "
        '["2026-12-31T18:00:00.000Z", "01JF..."] (a page\'s last memory)'
    )


def position_json(value: object) -> object:
    if isinstance(value, tuple) and len(value) == 2:
        return [_time_json(value[0]), value[1]]
    return value


TEXT_SCHEMA: Mapping[str, Any] = {
    "type": "string",
    "minLength": 1,
    "x-max-utf8-bytes": MAX_TEXT_BYTES,
    "description": f"not blank; at most {MAX_TEXT_BYTES} bytes of UTF-8 (else 413 text_too_large)",
}
LABELS_SCHEMA: Mapping[str, Any] = {
    "type": _null("object"),
    "additionalProperties": {
        "oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "items": {"type": "string", "minLength": 1}},
        ]
    },
    "description": 'label name -> its values (one string or a list), e.g. {"topic": ["deploys"]}',
}
ID_SCHEMA: Mapping[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": Limits().max_id_chars,
}

TEXT = Field("text", TEXT_SCHEMA, "the text to remember", required=True)
METADATA = Field("metadata", {"type": _null("object")}, "any JSON object")
LABELS = Field("labels", LABELS_SCHEMA, "labels, by name")
IMPORTANCE = Field(
    "importance", {"type": _null("number"), "minimum": 0, "maximum": 1}, "0 to 1 (default 0.5)"
)
EXPIRES_AT = Field(
    "expires_at",
    {"type": _null("string"), "format": "date-time"},
    "when to forget it (RFC 3339 with a timezone)",
    decode=_time,
    encode=_time_json,
)
TTL = Field(
    "ttl",
    {"type": _null("number"), "exclusiveMinimum": 0},
    "forget it after this many seconds",
    encode=_seconds_json,
)
ID = Field("id", ID_SCHEMA, "the memory's id", required=True)
POSITION_SCHEMA: Mapping[str, Any] = {
    "type": _null("array"),
    "prefixItems": [{"type": "string", "format": "date-time"}, ID_SCHEMA],
    "minItems": 2,
    "maxItems": 2,
}
FILTER = Field("filter", {"type": _null("object")}, "a metadata filter (docs/filters.md)")
VECTOR_SCHEMA: Mapping[str, Any] = {
    "type": _null("array"),
    "items": {"type": "number"},
    "minItems": 1,
    "maxItems": 65_536,
    "description": "as many finite numbers as the memory's space has dimensions (GET "
    "/v1/status names the space); a wrong size, a NaN or all zeros is 400 invalid_request",
}
# Not offered to a model: the recall tool lists its own fields, without ``vector``, as a
# model writes words, not the numbers of an embedding pipeline it cannot see. A write
# takes no vector over HTTP: a stored vector is shared by every scope's memory of its
# text, which a token holder may not learn of or sway (docs/http.md, "Your own vectors").
QUERY_VECTOR = Field(
    "vector",
    VECTOR_SCHEMA,
    "your own query vector in the memory's space, searched instead of embedding the query "
    "(the query still drives the lexical leg)",
)


def limit(default: int, most: int = MAX_LIST_LIMIT) -> Field:
    return Field(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": most, "default": default},
        "how many to answer",
    )


SCOPE_CURSOR = Field(
    "cursor",
    {"type": _null("array"), "items": {"type": "string", "minLength": 1}, "minItems": 1},
    'the scope to list after, e.g. ["a", "b"]',
    decode=_scope,
    encode=_scope_json,
)


# --- answers ------------------------------------------------------------------------------


def memory_answer(record: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"memory": record_to_json(record)}


def memory_read(answer: Any, args: Mapping[str, Any]) -> Any:
    return record_from_json(answer["memory"])


def memories_answer(records: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"memories": [record_to_json(r) for r in records]}


def memories_read(answer: Any, args: Mapping[str, Any]) -> Any:
    return [record_from_json(r) for r in answer["memories"]]


def page_answer(records: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    """A page of memories, and the id to continue before (None: the last page)."""
    full = len(records) == args.get("limit", 50)
    return memories_answer(records, args) | {"next_before": records[-1].id if full else None}


def hits_answer(hits: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    return hits_to_json(hits)


def hits_read(answer: Any, args: Mapping[str, Any]) -> Any:
    return hits_from_json(answer)


def deleted_answer(done: bool, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"deleted": done, "id": args["id"]}


def deleted_read(answer: Any, args: Mapping[str, Any]) -> Any:
    return answer["deleted"]


def scope_deleted_answer(deleted: int, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"deleted": deleted, "scope": scope_to_json(args["scope"])}


def completed_answer(done: bool, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"completed": done, "selection_id": args["selection_id"]}


def completed_read(answer: Any, args: Mapping[str, Any]) -> Any:
    return answer["completed"]


def history_answer(records: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": args["id"], "revisions": [record_to_json(r) for r in records]}


def history_read(answer: Any, args: Mapping[str, Any]) -> Any:
    return [record_from_json(r) for r in answer["revisions"]]


def scope_page_answer(found: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    """A page of scopes with counts, and the scope to continue after (None: the last)."""
    scopes = [scope_count_to_json(s) for s in found]
    full = len(scopes) == args.get("limit", 100)
    return {"scopes": scopes, "next_cursor": scopes[-1]["scope"] if full else None}


def scope_page_read(answer: Any, args: Mapping[str, Any]) -> Any:
    return [scope_count_from_json(s) for s in answer["scopes"]]


def document_answer(document: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    """What ``remember_document`` did: the document, its chunks' records in order."""
    return {
        "document": {
            "id": document.id,
            "source": document.source,
            "sha256": document.sha256,
            "added": document.added,
            "chunks": [record_to_json(r) for r in document.chunks],
        }
    }


def document_read(answer: Any, args: Mapping[str, Any]) -> Any:
    found = answer["document"]
    chunks = tuple(record_from_json(r) for r in found["chunks"])
    return Document(found["id"], found["source"], found["sha256"], chunks, found["added"])


def upload_answer(upload: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a document held, and the document once the last arrived (else null)."""
    done = upload.document
    return {
        "source": upload.source,
        "sha256": upload.sha256,
        "parts": upload.parts,
        "received": list(upload.received),
        "document": None if done is None else document_answer(done, args)["document"],
    }


def upload_read(answer: Any, args: Mapping[str, Any]) -> Any:
    done = answer["document"]
    document = None if done is None else document_read({"document": done}, args)
    received = tuple(answer["received"])
    return DocumentUpload(answer["source"], answer["sha256"], answer["parts"], received, document)


def source_deleted_answer(deleted: int, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"deleted": deleted, "source": args["source"]}


def status_answer(status: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    return status_to_json(status)


def status_read(answer: Any, args: Mapping[str, Any]) -> Any:
    return answer


# --- what a face says when it does not offer an operation -------------------------------

ITEM_PATH = "/v1/memories/{id}"
SMALL_TOOLSET = "not a tool: a model's set stays small (recall and list_recent show ids)"
NO_BATCH = "not a tool: a model remembers one fact at a time"
DOCUMENT_TEXT = Field(
    "text",
    {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_DOCUMENT_BYTES,
        "x-max-utf8-bytes": MAX_DOCUMENT_BYTES,
        "description": f"not blank; at most {MAX_DOCUMENT_BYTES} bytes of UTF-8 (else 413 "
        "text_too_large: send a longer text in parts, POST /v1/documents/parts)",
    },
    "the document's text",
    required=True,
)
SOURCE = Field(
    "source",
    {"type": "string", "minLength": 1},
    "where the document comes from (a path, a URL or an id of yours): the same source "
    "again replaces its chunks",
    required=True,
)
MAX_CHARS = Field(
    "max_chars",
    {"type": ["integer", "null"], "minimum": _LEAST_MAX_CHARS, "default": DEFAULT_MAX_CHARS},
    "the most characters of a chunk",
)
SHA256_SCHEMA: Mapping[str, Any] = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
NO_DOCUMENT_BATCH = (
    "send each document to POST /v1/documents: a folder of them passes one body's limit"
)
MAX_TOOL_TOP_K = 20
EMBEDS = ("embedding_failed",)
MAX_RECENT = 50
TOOL_LABELS = Field(
    "labels",
    {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    'Labels as name -> list of short values, e.g. {"topic": ["deploys"]}',
)
DURABILITY = Field(
    "durability",
    {"type": "string", "enum": ["shared", "session"], "default": "shared"},
    "'session' keeps it for this session only.",
)
DEDUPE = "false stores a text its scope already holds again (default true: answer the existing)"
CONTEXT = Field(
    "context",
    {"type": _null("integer"), "minimum": 0, "maximum": MAX_CONTEXT, "default": 0},
    "how many turns before and after each hit that is a turn of a conversation to answer "
    "with it (its context)",
)
TOOL_CONTEXT = Field(
    "context",
    {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "default": 0},
    "For a memory that is a turn of a conversation, also answer this many turns before "
    "and after it (e.g. 1).",
)


def _turns_json(value: object) -> object:
    """The turns of ``remember_conversation`` as JSON (an ``at`` datetime as RFC 3339)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        return value
    return [
        {k: _time_json(v) for k, v in turn.items()} if isinstance(turn, Mapping) else turn
        for turn in value
    ]


TURNS = Field(
    "turns",
    {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_BATCH_ITEMS,
        "items": {
            "type": "object",
            "properties": {
                "speaker": {"type": "string", "minLength": 1},
                "text": TEXT_SCHEMA,
                "at": {"type": _null("string"), "format": "date-time"},
                "metadata": {"type": _null("object")},
            },
            "required": ["speaker", "text"],
            "additionalProperties": False,
        },
    },
    'the turns in order, e.g. [{"speaker": "Sam", "text": "...", "at": "2026-05-08T13:56:00Z"}]',
    required=True,
    encode=_turns_json,
)
