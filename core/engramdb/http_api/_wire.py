"""The HTTP API's wire format: what a request must look like, and how answers are written.

The limits of a request, the reading of its JSON body (size, media type, nesting, UTF-8)
and of its fields and query parameters, each refusal an :class:`ApiError` with a stable
code; and the JSON forms of records and hits, which are :mod:`engramdb.json_format`'s.
:mod:`engramdb.http_api` routes requests and calls the memory with what these functions
checked.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engramdb import json_format
from engramdb._base.errors import shown
from engramdb._base.types import Hit, MemoryRecord, check_unicode, is_finite_number
from engramdb.flows._view_ops import (
    DEFAULT_TOP_K,
    MAX_BATCH_ITEMS,
    MAX_DOCUMENT_BYTES,
    MAX_LIST_LIMIT,
    MAX_TEXT_BYTES,
)
from engramdb.http_api._errors import error_code
from engramdb.json_format import hit_to_json, record_to_json

__all__ = [
    "DEFAULT_TOP_K",
    "MAX_BATCH_ITEMS",
    "MAX_BODY_BYTES",
    "MAX_DOCUMENT_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_LIST_LIMIT",
    "MAX_TEXT_BYTES",
    "ApiError",
    "Reply",
    "body_arguments",
    "body_too_large",
    "check_fields",
    "dumps",
    "hit_json",
    "json_body",
    "json_param",
    "limit_param",
    "number_field",
    "query_arguments",
    "record_json",
    "text_field",
]


MAX_BODY_BYTES = 256 * 1024
"""Largest request body read (bigger: 413 before reading it when Content-Length says so,
else as soon as the bytes read pass it: see :func:`body_too_large`)."""
MAX_JSON_DEPTH = 32
"""Deepest nesting of objects and arrays a request body may have."""


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer: status, JSON body, extra headers, and a line for the host's log
    (None: nothing to log). The core does no I/O: the host writes ``log`` where its logs
    go (``engramdb serve``: standard error; the Worker: its console)."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)
    log: str | None = field(default=None, compare=False)


class ApiError(Exception):
    """An error answer with a stable code, and the status :data:`errors.ERRORS` gives it."""

    def __init__(self, code: str, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        row = error_code(code)
        if row is None:
            raise ValueError(f"no error code {code!r} in engramdb.http_api._errors.ERRORS")
        self.status = row.status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})

    def reply(self) -> Reply:
        return Reply(
            self.status, {"error": {"code": self.code, "message": self.message}}, self.headers
        )


def check_declared_length(headers: Mapping[str, str], max_body_bytes: int) -> None:
    """A 413 before any byte of the body is read when its declared ``Content-Length``
    passes ``max_body_bytes`` (a host that reads the body itself calls this first)."""
    declared = headers.get("content-length", "").strip()
    if not (declared.isascii() and declared.isdigit()):
        return  # none, or not a number: the bytes read are counted instead
    if len(declared) > 18 or int(declared) > max_body_bytes:  # int() of 5,000 digits fails
        shown_size = (
            declared if len(declared) <= 18 else f"{declared[:6]}... ({len(declared)} digits)"
        )
        raise ApiError(
            "payload_too_large",
            f"the body has {shown_size} bytes; send at most {max_body_bytes}",
        )


async def json_body(
    headers: Mapping[str, str],
    read_body: Callable[[], Awaitable[bytes | str]],
    max_body_bytes: int,
) -> dict[str, Any]:
    content_type = headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if content_type and content_type != "application/json" and not content_type.endswith("+json"):
        raise ApiError(
            "unsupported_media_type",
            f"the body must be JSON (Content-Type: application/json), not {content_type!r}",
        )
    check_declared_length(headers, max_body_bytes)
    raw = await read_body()
    data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    if len(data) > max_body_bytes:
        raise ApiError(
            "payload_too_large",
            f"the body has {len(data)} bytes; send at most {max_body_bytes}",
        )
    if not data.strip():
        raise ApiError("invalid_json", "the request body is empty; send a JSON object")
    try:
        text = data.decode("utf-8")
        if _deeper_than_allowed(text):  # before the parser, whose recursion is the risk
            raise too_deep()
        body = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:  # nested deeper than the parser goes
        raise too_deep() from None
    except (UnicodeDecodeError, ValueError) as exc:
        detail = exc.args[0] if isinstance(exc, ValueError) and exc.args else str(exc)
        raise ApiError(
            "invalid_json",
            f"the request body is not valid JSON ({detail}); send a JSON object",
        ) from None
    if not isinstance(body, dict):
        raise ApiError(
            "invalid_json", f"the request body must be a JSON object, not {_json_type(body)}"
        )
    return body


def _deeper_than_allowed(text: str) -> bool:
    """Whether JSON ``text`` nests deeper than ``MAX_JSON_DEPTH``, by one linear scan
    (``json_format``'s), so that a deep body never reaches ``json.loads``, whose recursion
    overflows Pyodide's JavaScript stack before Python's own limit."""
    return json_format.nested_deeper_than(text, MAX_JSON_DEPTH)


def method_not_allowed(method: str, path: str, allowed: Iterable[str]) -> ApiError:
    """The 405 of ``method`` on ``path``, naming (and in ``Allow``) the methods it answers."""
    methods = sorted(allowed)
    return ApiError(
        "method_not_allowed",
        f"{method} is not allowed on {path}; use {' or '.join(methods)}",
        {"allow": ", ".join(methods)},
    )


def body_too_large(limit: int) -> ApiError:
    """The 413 a body reader raises as soon as the bytes it has read pass ``limit`` (a
    chunked body has no Content-Length to refuse it by, so it is never read whole)."""
    return ApiError("payload_too_large", f"the body is above {limit} bytes; send less")


def too_deep() -> ApiError:
    return ApiError(
        "invalid_json",
        f"the request body is nested deeper than {MAX_JSON_DEPTH} levels; flatten it",
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def check_fields(body: Mapping[str, Any], allowed: frozenset[str], endpoint: str) -> None:
    if "scope" in body or "scopes" in body:
        raise ApiError(
            "invalid_request",
            "the scope comes from your token, not from the body; remove 'scope'",
        )
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ApiError(
            "invalid_request",
            f"unknown field(s) {', '.join(unknown)} for {endpoint}; allowed: "
            f"{', '.join(sorted(allowed))}",
        )


def text_field(body: Mapping[str, Any], name: str, most: int = MAX_TEXT_BYTES) -> str:
    """A non-empty text of at most ``most`` bytes of UTF-8 (413 ``text_too_large``)."""
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ApiError("invalid_request", f"'{name}' must be a non-empty string")
    size = len(check_unicode(value, f"'{name}'").encode("utf-8"))  # ValidationError: 400
    if size > most:
        raise ApiError(
            "text_too_large",
            f"'{name}' has {size} bytes in UTF-8; send at most {most} (split it)",
        )
    return value


def limit_param(query: Mapping[str, list[str]], default: int, most: int) -> int:
    raw = (query.get("limit") or [str(default)])[-1]
    # the length first: int() refuses more than 4,300 digits with a ValueError
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9) or not 1 <= int(raw) <= most:
        raise ApiError("invalid_request", f"limit={shown(raw)} must be an integer in 1..{most}")
    return int(raw)


def json_param(query: Mapping[str, list[str]], name: str, example: str) -> Any:
    """The JSON value of query parameter ``name`` (None when absent or empty), read with the
    body's checks: the nesting scan before ``json.loads``, no NaN or Infinity."""
    raw = (query.get(name) or [""])[-1]
    if not raw:
        return None
    refusal = ApiError("invalid_request", f"{name} must be JSON such as {example}")
    if _deeper_than_allowed(raw):  # before the parser, whose recursion is the risk
        raise ApiError(
            "invalid_request",
            f"{name} is nested deeper than {MAX_JSON_DEPTH} levels; send JSON such as {example}",
        )
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:  # pragma: no cover - the scan above refuses such depths
        raise refusal from None
    except ValueError:  # not JSON, or an integer past Python's 4,300 digits
        raise refusal from None


def number_field(
    body: Mapping[str, Any],
    name: str,
    allow_null: bool = False,
    low: float = -1.0,
    high: float = 1.0,
) -> float | None:
    """A finite number from ``low`` to ``high`` (compared before ``float()``, so an
    integer of any size is a 400, not an overflow), or None when ``allow_null``."""
    value = body.get(name)
    if value is None and allow_null and name in body:
        return None
    if not is_finite_number(value) or not low <= value <= high:
        raise ApiError(
            "invalid_request",
            f"'{name}' is {shown(value)}; it must be a number in [{low:g}, {high:g}]"
            + (" or null" if allow_null else ""),
        )
    return float(value)


def record_json(record: MemoryRecord) -> dict[str, Any]:
    """A memory record as JSON (:func:`engramdb.json_format.record_to_json`)."""
    return record_to_json(record)


def hit_json(hit: Hit) -> dict[str, Any]:
    """A recall hit as JSON: the record, its scores and its evidence
    (:func:`engramdb.json_format.hit_to_json`)."""
    return hit_to_json(hit)


def dumps(body: Any) -> str:
    """The JSON text of a reply body: compact, UTF-8, no NaN
    (:func:`engramdb.json_format.dumps`)."""
    return json_format.dumps(body)


# --- a view operation's arguments, from a body or a query --------------------------------

_KINDS: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}
_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
}


def _kinds(schema: Mapping[str, Any]) -> tuple[str, ...]:
    kind = schema.get("type", [])
    return tuple(k for k in (kind if isinstance(kind, list) else [kind]) if k != "null")


@dataclass(frozen=True, slots=True)
class _Rule:
    """How one field of an operation is read, worked out once (:func:`_rules`)."""

    field: Any  # an engramdb.flows.Field
    key: str  # its name in JSON
    name: str  # the method's keyword
    kinds: tuple[str, ...]  # its JSON types but null
    types: tuple[type, ...]  # their Python types (empty: any)
    numeric: bool  # a number: finite, within its bounds, not a bool
    text: bool  # a text with a size limit (413 text_too_large past it)
    nullable: bool
    default: object  # what an absent field (or a null one, where null is not a value) is

    def check(self, value: object) -> object:
        """``value`` if the schema takes it (a 400 naming the field otherwise)."""
        if self.text:
            return text_field({self.key: value}, self.key, self.field.schema["x-max-utf8-bytes"])
        if not self._fits(value):
            wanted = _wanted(self.field.schema)
            raise ApiError(
                "invalid_request", f"'{self.key}' is {shown(value)}; it must be {wanted}"
            )
        return value

    def _fits(self, value: object) -> bool:
        schema = self.field.schema
        if "enum" in schema:
            return value in schema["enum"]
        if self.types and (
            not isinstance(value, self.types) or (isinstance(value, bool) and self.numeric)
        ):
            return False
        if self.numeric and isinstance(value, int | float):
            if not is_finite_number(value):
                return False
            low, high = schema.get("minimum"), schema.get("maximum")
            above = schema.get("exclusiveMinimum")
            return (
                (low is None or value >= low)
                and (high is None or value <= high)
                and (above is None or value > above)
            )
        if isinstance(value, str):
            shortest: int = schema.get("minLength", 0)
            longest: int = schema.get("maxLength", len(value))
            return shortest <= len(value) <= longest
        if isinstance(value, list):
            fewest: int = schema.get("minItems", 0)
            most: int = schema.get("maxItems", len(value))
            return fewest <= len(value) <= most
        return True


_RULES: dict[str, tuple[tuple[_Rule, ...], frozenset[str]]] = {}
_ABSENT = object()


def _rule(field: Any) -> _Rule:
    kinds = _kinds(field.schema)
    types = tuple(t for k in kinds for t in _types(k))
    numeric = bool(kinds) and set(kinds) <= {"integer", "number"}
    text = "x-max-utf8-bytes" in field.schema
    default = field.schema.get("default", _ABSENT)
    nullable = field.nullable()
    return _Rule(field, field.key, field.name, kinds, types, numeric, text, nullable, default)


def _types(kind: str) -> tuple[type, ...]:
    found = _KINDS[kind]
    return found if isinstance(found, tuple) else (found,)


def _rules(op: Any) -> tuple[tuple[_Rule, ...], frozenset[str]]:
    """The rules of an operation's fields but the path's ``id``, and their JSON names:
    worked out on its first request, then kept."""
    known = _RULES.get(op.name)
    if known is None:
        rules = tuple(_rule(f) for f in op.fields if f.name != "id")
        known = _RULES[op.name] = (rules, frozenset(r.key for r in rules))
    return known


def _wanted(schema: Mapping[str, Any]) -> str:
    """What a schema takes, in words: "an integer from 1", "one of 'a', 'b'"."""
    if "enum" in schema:
        return "one of " + ", ".join(shown(v) for v in schema["enum"] if v is not None)
    words = " or ".join(_NAMES[k] for k in _kinds(schema))
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        words += f" in [{low:g}, {high:g}]"
    elif low is not None:
        words += f" from {low:g}"
    elif schema.get("exclusiveMinimum") is not None:
        words += f" above {schema['exclusiveMinimum']:g}"
    if schema.get("minLength"):
        words = "a non-empty string"
    if "maxItems" in schema:
        words += f" of {schema.get('minItems', 0)} to {schema['maxItems']} items"
    return words


def body_arguments(
    op: Any, body: Mapping[str, Any], endpoint: str | None = None, *, decode: bool = True
) -> dict[str, Any]:
    """A view operation's arguments from a JSON body, by its fields
    (:class:`engramdb.flows.Field`): no field it does not declare, each given one as its
    schema says, a null only where it may be one, and the defaults the schemas give.
    ``decode=False`` keeps the values as JSON; ``endpoint`` names the request in an
    error (by default, the operation's route)."""
    rules, keys = _rules(op)
    if "scope" in body or "scopes" in body or not keys.issuperset(body):
        check_fields(body, keys, endpoint or f"{op.route.method} {op.route.path}")
    args: dict[str, Any] = {}
    for rule in rules:
        value = body.get(rule.key, _ABSENT)
        if value is None and not rule.field.null_is_value:
            if not rule.nullable:
                raise ApiError("invalid_request", f"'{rule.key}' may not be null; omit it")
            value = _ABSENT
        if value is _ABSENT:
            if rule.field.required:
                raise ApiError(
                    "invalid_request", f"'{rule.key}' is required: {rule.field.description}"
                )
            if rule.default is not _ABSENT:
                args[rule.name] = rule.default
        elif value is None:
            args[rule.name] = None
        else:
            value = rule.check(value)
            args[rule.name] = rule.field.decoded(value) if decode else value
    one_of = op.route.one_of if op.route is not None else ()
    if one_of and args.keys().isdisjoint(one_of):
        raise ApiError("invalid_request", f"nothing to change: send {', '.join(one_of)}")
    return args


def query_arguments(op: Any, query: Mapping[str, list[str]]) -> dict[str, Any]:
    """A view operation's arguments from a URL's query (a JSON value as its JSON text),
    with the defaults the schemas give; the path's ``id`` is not among them."""
    args: dict[str, Any] = {}
    for rule in _rules(op)[0]:
        f = rule.field
        raw = (query.get(rule.key) or [""])[-1]
        if not raw:
            if f.required:
                raise ApiError(
                    "invalid_request", f"the query parameter {f.key} is required: {f.description}"
                )
            if rule.default is not _ABSENT:
                args[rule.name] = rule.default
            continue
        if rule.kinds == ("integer",):
            low, high = f.schema.get("minimum", 0), f.schema.get("maximum", 10**9)
            # the length first: int() refuses more than 4,300 digits with a ValueError
            if not (raw.isascii() and raw.isdigit() and len(raw) <= 9) or not (
                low <= int(raw) <= high
            ):
                raise ApiError(
                    "invalid_request", f"{f.key}={shown(raw)} must be an integer in {low}..{high}"
                )
            value: object = int(raw)
        elif {"array", "object"} & set(rule.kinds):
            value = json_param(query, f.key, f.description)
        else:
            value = raw
        args[rule.name] = f.decoded(rule.check(value))
    return args
