"""Reading the server's answers: every field checked against the API's own description.

The HTTP API describes each answer once, as the JSON schema of each operation and status
(``engramdb.http_api.openapi_document()``, the document the server serves and is tested
against). The client checks a 2xx answer against that schema, then builds engramdb's
types from it with the one JSON codec (``engramdb.json_format``) and the call's own
checks (the memory it names is the one asked for, no more hits than ``top_k``).

Anything else is not the API, and is a :class:`~engramdb.StoreError` naming the request
and the field (``$.hits[0].memory.importance``), never a raw ``KeyError``,
``TypeError``, ``ValueError``, ``OverflowError`` or ``RecursionError``: a body that is
not JSON, nested deeper than :data:`MAX_DEPTH` levels, a number Python cannot carry as
the API means it (``1e999``, ``NaN``, an integer outside 64 bits), text that is not
Unicode (a lone surrogate), a missing, unknown or mistyped field, a status its operation
never answers.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn, TypeVar

import httpx

from engramdb import EngramError, StoreError
from engramdb.http_api import openapi_document
from engramdb.json_format import MAX_LINE_DEPTH, parse_time
from engramdb.validate import shown

__all__ = ["MAX_DEPTH", "NotTheAPI", "error_of", "read_answer"]

T = TypeVar("T")

MAX_DEPTH = MAX_LINE_DEPTH
"""Deepest nesting of objects and arrays an answer may have: a record's metadata nests at
most ``Limits.max_metadata_depth`` (32) levels, inside an answer's few of its own."""

_INT64 = (-(2**63), 2**63 - 1)
_KEYWORDS = frozenset(
    {
        "$ref",
        "additionalProperties",
        "const",
        "description",
        "enum",
        "format",
        "items",
        "maximum",
        "minItems",
        "minLength",
        "minimum",
        "oneOf",
        "pattern",
        "properties",
        "required",
        "type",
    }
)
"""The JSON Schema keywords the answers' schemas use, each one checked here."""


class NotTheAPI(Exception):
    """An answer differs from the API's description: ``where`` (a JSON path from ``$``)
    and what is wrong there. Raised while reading; :func:`read_answer` turns it into
    the one ``StoreError``."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"at {where}, {problem}")


# --- JSON text ------------------------------------------------------------------------------


def _refuse_constant(literal: str) -> NoReturn:
    raise NotTheAPI("$", f"{literal} is not a JSON number")


def _finite(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise NotTheAPI("$", f"the number {shown(literal)} is too large for a float")
    return number


def _int64(digits: str) -> int:
    """A whole number within 64 bits (every integer the API writes is one), refused by its
    length before Python converts it."""
    if len(digits.lstrip("-")) <= 19:
        number = int(digits)
        if _INT64[0] <= number <= _INT64[1]:
            return number
    return _refuse_int(digits)


def _refuse_int(digits: str) -> NoReturn:
    raise NotTheAPI("$", f"the integer {shown(digits)} is outside 64 bits")


def parse(body: bytes | str) -> Any:
    """The JSON value of ``body``, read as the API writes it (no NaN, no infinity, no
    integer beyond 64 bits); anything else is :class:`NotTheAPI`."""
    try:
        return json.loads(
            body, parse_constant=_refuse_constant, parse_float=_finite, parse_int=_int64
        )
    except RecursionError:
        raise NotTheAPI(
            "$", f"the JSON nests too deep to read (the API's nests at most {MAX_DEPTH} levels)"
        ) from None
    except NotTheAPI:
        raise
    except ValueError as exc:  # UnicodeDecodeError is one
        raise NotTheAPI("$", f"the body is not JSON ({exc})") from None


# --- the API's schemas ----------------------------------------------------------------------


@functools.cache
def _document() -> Mapping[str, Any]:
    """The API's OpenAPI document, its answers' schemas checked to use only the keywords
    :func:`check` knows (a schema with another would be checked in part: refused)."""
    document = openapi_document()
    unknown = sorted(set(_answer_keywords(document)) - _KEYWORDS)
    if unknown:  # pragma: no cover - a new keyword in the API's answers needs a check here
        raise RuntimeError(f"engramdb.client cannot check the JSON Schema keyword(s) {unknown}")
    return document


def _answer_keywords(document: Mapping[str, Any]) -> Iterator[str]:
    """Every keyword of the schemas of the 2xx answers, those they refer to included (the
    names inside ``properties`` are not keywords)."""
    schemas = document["components"]["schemas"]
    stack: list[Any] = [
        answer["content"]["application/json"]["schema"]
        for operation in document["paths"].values()
        for method in operation.values()
        for status, answer in method["responses"].items()
        if status.startswith("2") and "content" in answer
    ]
    seen: set[str] = set()
    while stack:
        schema = stack.pop()
        if isinstance(schema, list):
            stack += schema
        elif isinstance(schema, Mapping):
            for key, value in schema.items():
                yield key
                if key == "$ref" and value not in seen:
                    seen.add(value)
                    stack.append(schemas[value.rsplit("/", 1)[-1]])
                elif key == "properties":
                    stack += list(value.values())
                elif key not in ("enum", "const", "default", "required", "description"):
                    stack.append(value)


def answer_schema(method: str, template: str, status: int) -> Mapping[str, Any] | None:
    """The schema of the answer ``status`` to ``method`` on the path ``template`` (as the
    document writes it, ``/v1/memories/{id}``), or None when the API never answers it."""
    operation = _document()["paths"].get(template, {}).get(method.lower(), {})
    answer = operation.get("responses", {}).get(str(status), {})
    schema: Mapping[str, Any] | None = (
        answer.get("content", {}).get("application/json", {}).get("schema")
    )
    return schema


def _resolve(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = _document()["components"]["schemas"][name]
    return schema


_TYPES: dict[str, type | tuple[type, ...]] = {
    "null": type(None),
    "boolean": bool,
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
}


def _is(value: object, kind: str) -> bool:
    if isinstance(value, bool) and kind != "boolean":  # a boolean is no number here
        return False
    return isinstance(value, _TYPES[kind])


def _same(value: object, wanted: object) -> bool:
    return type(value) is type(wanted) and value == wanted


def _unicode(value: str, where: str) -> str:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise NotTheAPI(where, f"{shown(value)} holds a lone surrogate") from None
    return value


@functools.cache
def _pattern(pattern: str) -> re.Pattern[str]:
    # the API's patterns are anchored (^...$); fullmatch keeps "$" from passing a "\n"
    return re.compile(pattern.removeprefix("^").removesuffix("$"))


def check(value: Any, schema: Mapping[str, Any], where: str = "$", depth: int = 1) -> None:
    """``value`` as ``schema`` describes it, or :class:`NotTheAPI` naming where it is not.
    An object the schema leaves open (a record's metadata) is any JSON within
    :data:`MAX_DEPTH`."""
    schema = _resolve(schema)
    if "oneOf" in schema:
        fitting = sum(1 for option in schema["oneOf"] if _fits(value, option, where, depth))
        if fitting != 1:
            raise NotTheAPI(where, f"{shown(value)} is not one of the forms the API writes there")
        return
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, kind) for kind in kinds):
            raise NotTheAPI(where, f"{shown(value)} is not {' or '.join(kinds)}")
    if "const" in schema and not _same(value, schema["const"]):
        raise NotTheAPI(where, f"{shown(value)} is not {shown(schema['const'])}")
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        raise NotTheAPI(where, f"{shown(value)} is not one of {shown(schema['enum'])}")
    if isinstance(value, str):
        _check_string(value, schema, where)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise NotTheAPI(where, f"{shown(value)} is below {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise NotTheAPI(where, f"{shown(value)} is above {schema['maximum']}")
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise NotTheAPI(where, f"{shown(value)} has fewer than {schema['minItems']} items")
        if "items" in schema:
            for index, item in enumerate(value):
                check(item, schema["items"], f"{where}[{index}]", depth + 1)
        else:
            _check_open(value, where, depth)
    elif isinstance(value, dict):
        _check_object(value, schema, where, depth)


def _fits(value: Any, schema: Mapping[str, Any], where: str, depth: int) -> bool:
    try:
        check(value, schema, where, depth)
    except NotTheAPI:
        return False
    return True


def _check_string(value: str, schema: Mapping[str, Any], where: str) -> None:
    _unicode(value, where)
    if len(value) < schema.get("minLength", 0):
        raise NotTheAPI(where, f"{shown(value)} is shorter than {schema['minLength']}")
    if "pattern" in schema and not _pattern(schema["pattern"]).fullmatch(value):
        raise NotTheAPI(where, f"{shown(value)} is not of the form {schema['pattern']}")
    if schema.get("format") == "date-time":
        try:
            parse_time(value, where)
        except (ValueError, OverflowError):  # ValidationError is a ValueError
            raise NotTheAPI(where, f"{shown(value)} is not an RFC 3339 time") from None


def _check_object(value: dict[str, Any], schema: Mapping[str, Any], where: str, depth: int) -> None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            raise NotTheAPI(where, f"the field {name!r} is missing")
    extra = schema.get("additionalProperties", True)
    if not properties and extra is True:
        _check_open(value, where, depth)
        return
    for name, item in value.items():
        inner = f"{where}.{name}" if name.isidentifier() else f"{where}[{shown(name)}]"
        if name in properties:
            check(item, properties[name], inner, depth + 1)
        elif extra is False:
            raise NotTheAPI(where, f"the field {shown(name)} is not one the API writes")
        elif isinstance(extra, Mapping):
            _unicode(name, inner)
            check(item, extra, inner, depth + 1)
        else:  # a field the schema leaves open
            _check_open(item, inner, depth + 1)


def _check_open(value: Any, where: str, depth: int) -> None:
    """Any JSON (as :func:`parse` reads it) nested at most :data:`MAX_DEPTH` levels from
    the answer's top, its strings Unicode: walked without recursion."""
    stack = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            _unicode(item, where)
        elif isinstance(item, dict | list):
            if level > MAX_DEPTH:
                raise NotTheAPI(where, f"the JSON nests deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key in item:
                    _unicode(key, where)
                stack += [(inner, level + 1) for inner in item.values()]
            else:
                stack += [(inner, level + 1) for inner in item]


# --- one answer -----------------------------------------------------------------------------


def read_answer(
    response: httpx.Response,
    method: str,
    template: str,
    build: Callable[[Any], T],
) -> T:
    """The value ``build`` makes of a 2xx answer to ``method`` on ``template``, once the
    answer is checked against the API's schema for its status; a ``StoreError`` naming
    the request and the field when it is not the API's (``build`` raises
    :class:`NotTheAPI` for what only the call can check)."""
    request = response.request
    status = response.status_code
    cause: Exception | None = None
    try:
        schema = answer_schema(method, template, status)
        if schema is None:
            raise NotTheAPI("$", f"HTTP {status} is not an answer of {method} {template}")
        answer = parse(response.content)
        check(answer, schema)
        return build(answer)
    except NotTheAPI as exc:
        problem, cause = str(exc), None
    except EngramError as exc:  # the codec's ValidationError: what its checks refused
        problem, cause = str(exc), exc
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError) as exc:
        # not expected past the checks above; an answer must still never escape the tree
        problem, cause = f"{type(exc).__name__}: {str(exc)[:200]}", exc
    raise StoreError(
        f"engramdb at {request.url.host} answered {method} {request.url.path} (HTTP {status}) with "
        f"something that is not the engramdb API ({problem}); is the URL an engramdb "
        "server of this version?"
    ) from cause


def error_of(body: str) -> tuple[str, str]:
    """The ``code`` and ``message`` of an error answer, or ``("", an excerpt)`` when the
    body is not the API's error form."""
    try:
        error = parse(body)
        check(error, {"$ref": "#/components/schemas/Error"})
    except NotTheAPI:
        return "", body[:200]
    return error["error"]["code"], error["error"]["message"]
