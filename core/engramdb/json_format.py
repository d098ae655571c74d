"""The JSON form of records, hits and export lines: one codec for every face.

The HTTP API, the CLI's ``--json``, ``engramdb export``/``import``, the agent tools and
the MCP server all write a record and a hit with these functions, so a client sees one
shape wherever it asks (``docs/storage-format.md#json``):

- a **scope** is a JSON array of its parts, ``["acme", "user", "sam"]``;
- a **time** is RFC 3339 in UTC with milliseconds and ``Z``,
  ``"2026-12-01T23:52:52.123Z"`` (engramdb keeps times to the millisecond);
- a **score** that is not a finite number (``score``, ``similarity``, ``bm25``, a boost,
  ``retention``) is written ``null``; any other non-finite number is refused
  (:class:`ValidationError`): JSON has no NaN or Infinity, and :func:`dumps` and
  :func:`loads` never write or read one;
- an **export line** is a record with ``"format": FORMAT_VERSION`` and, when it carries
  its vector, ``space_id`` and ``vector`` (the base64 of the stored float32 bytes),
  written by :func:`dumps_line` (DEL, the C1 controls, U+2028, U+2029 and the bidi
  controls escaped: a line holds no character any reader takes for a line break, or a
  terminal acts on) and read by :func:`loads_line` (one
  line of an untrusted file: nesting, integer size and NaN checked before use).

:func:`record_from_json` reads a record back strictly: every field present with its
type, nothing unknown, times with a timezone; a mistake is a :class:`ValidationError`
naming the field and the fix. :func:`hits_from_json` reads a recall's answer back the
same way (``engramdb.client`` turns ``POST /v1/recall`` into :class:`~engramdb.Hits`).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from engramdb._base.errors import ValidationError, shown
from engramdb._base.types import (
    Evidence,
    Hit,
    Hits,
    MemoryRecord,
    Scope,
    content_sha256,
    is_finite_number,
    validate_scope,
)
from engramdb.store import ScopeCount
from engramdb.store.rows import ITEM_COLUMNS

__all__ = [
    "FORMAT_VERSION",
    "MAX_LINE_DEPTH",
    "RECORD_FIELDS",
    "dumps",
    "dumps_line",
    "export_from_json",
    "export_to_json",
    "format_time",
    "hit_from_json",
    "hit_to_json",
    "hits_from_json",
    "hits_to_json",
    "loads",
    "loads_line",
    "nested_deeper_than",
    "parse_time",
    "record_from_json",
    "record_to_json",
    "scope_count_from_json",
    "scope_count_to_json",
    "scope_to_json",
    "status_to_json",
]

FORMAT_VERSION = 1
"""The version of this JSON form, written in every export line as ``"format"``. A reader
refuses a line of a newer version; a line without ``format`` is an older export (or a
line written by hand) and is read as one."""

RECORD_FIELDS = tuple("scope" if column == "scope_key" else column for column in ITEM_COLUMNS)
"""The keys of a record's JSON object, in the order they are written: the columns of
its row (``engramdb.store.rows.ITEM_COLUMNS``), the scope as itself."""

_EXPORT_EXTRAS = ("format", "space_id", "vector")

MAX_LINE_DEPTH = 64
"""Deepest nesting of objects and arrays :func:`loads_line` reads (a record's metadata
may nest ``Limits.max_metadata_depth``, 32 by default, inside the line's object)."""

_INT64 = (-(2**63), 2**63 - 1)
# What JSON may hold raw but a line of a file must not: DEL and the C1 controls (U+0085
# is a line break to str.splitlines, U+009B a terminal's CSI), the line and paragraph
# separators, and the bidi embeddings, overrides and isolates (they reorder the text
# around them on screen). JSON itself escapes the C0 controls.
_UNSAFE_RAW = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def format_time(moment: datetime | None, what: str = "a time") -> str | None:
    """``moment`` in UTC as RFC 3339 with milliseconds and ``Z`` (None stays None); a
    time without a timezone is refused (engramdb never makes one)."""
    if moment is None:
        return None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValidationError(
            f"{what} {moment.isoformat()} has no timezone; give it one (engramdb's times are UTC)"
        )
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.removesuffix("+00:00") + "Z"


def parse_time(value: object, what: str) -> datetime:
    """An RFC 3339 time with a timezone (``Z`` or an offset) as an aware UTC datetime."""
    moment = None
    if isinstance(value, str) and "T" in value:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            moment = None
    if moment is None or moment.tzinfo is None:
        raise ValidationError(
            f"{what}={shown(value)} must be an RFC 3339 time with a timezone, e.g. "
            "'2026-12-01T23:52:52.123Z'"
        )
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00: before the year 1 in UTC
        raise ValidationError(
            f"{what}={shown(value)} is outside the years 1 to 9999 in UTC; pass a time "
            "from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z"
        ) from None


def scope_to_json(scope: Scope) -> list[str]:
    """A scope as the JSON array of its parts."""
    return list(scope)


def _finite(value: float | None) -> float | None:
    """A score for JSON: a finite float, else null."""
    return None if value is None or not math.isfinite(value) else float(value)


def record_to_json(record: MemoryRecord) -> dict[str, Any]:
    """A memory record as a JSON object with the keys of :data:`RECORD_FIELDS`
    (``utility``, the evidence of use that ``get()`` adds, is not part of it)."""
    if not math.isfinite(record.importance):
        raise ValidationError(
            f"the importance of {record.id!r} is {record.importance!r}; JSON holds only "
            "finite numbers (engramdb stores 0 to 1)"
        )
    return {
        "id": record.id,
        "scope": scope_to_json(record.scope),
        "text": record.text,
        "metadata": record.metadata,
        "labels": record.labels,
        "importance": record.importance,
        "created_at": format_time(record.created_at, "created_at"),
        "updated_at": format_time(record.updated_at, "updated_at"),
        "expires_at": format_time(record.expires_at, "expires_at"),
        "revision": record.revision,
        "content_sha256": record.content_sha256,
    }


def hit_to_json(hit: Hit) -> dict[str, Any]:
    """A recall hit as JSON: ``memory`` (the record), its scores (non-finite ones
    ``null``) and its ``evidence`` (with ``vector_share`` and ``lexical_share`` only
    when a leg scored the hybrid hit, ``rerank_score`` only when the rerank stage
    re-scored it), and ``context`` (the turns around a turn of a conversation, each a
    record, in turn order) only when the hit has some."""
    evidence = hit.evidence
    cited: dict[str, Any] = {
        "id": evidence["id"],
        "scope": scope_to_json(evidence["scope"]),
        "revision": evidence["revision"],
        "content_sha256": evidence["content_sha256"],
        "space_id": evidence["space_id"],
        "embedded_at": format_time(evidence["embedded_at"], "embedded_at"),
    }
    for key in _OPTIONAL_EVIDENCE:  # only a hit that has one has the key: format 1 as is
        value = evidence.get(key)
        if isinstance(value, int | float):
            cited[key] = _finite(float(value))
    answer: dict[str, Any] = {
        "memory": record_to_json(hit.memory),
        "score": _finite(hit.score),
        "similarity": _finite(hit.similarity),
        "vector_rank": hit.vector_rank,
        "lexical_rank": hit.lexical_rank,
        "bm25": _finite(hit.bm25),
        "boosts": {name: _finite(value) for name, value in hit.boosts.items()},
        "retention": _finite(hit.retention),
        "evidence": cited,
    }
    if hit.context:  # only a hit that has some has the key: format 1 as is
        answer["context"] = [record_to_json(record) for record in hit.context]
    return answer


def hits_to_json(hits: Hits) -> dict[str, Any]:
    """A recall's answer as JSON: ``status``, ``coverage``, ``mode``, ``selection_id``,
    ``error`` and ``hits`` (each :func:`hit_to_json`'s), best first."""
    return {
        "status": hits.status,
        "coverage": _finite(hits.coverage),
        "mode": hits.mode,
        "selection_id": hits.selection_id,
        "error": hits.error,
        "hits": [hit_to_json(hit) for hit in hits],
    }


def _field(
    obj: Mapping[str, Any],
    name: str,
    kind: type | tuple[type, ...],
    hint: str,
    what: str = "the record",
) -> Any:
    value = obj[name]
    if isinstance(value, bool) or not isinstance(value, kind):  # no field is a boolean
        raise ValidationError(f"{what}'s {name!r} is {shown(obj[name])}; it must be {hint}")
    return value


def scope_count_to_json(found: ScopeCount) -> dict[str, Any]:
    """A scope and how many memories it holds: ``{"scope", "count"}``, on every face."""
    return {"scope": scope_to_json(found.scope), "count": found.items}


def scope_count_from_json(obj: Any) -> ScopeCount:
    """:func:`scope_count_to_json`'s JSON, read back."""
    return ScopeCount(validate_scope(tuple(obj["scope"])), obj["count"])


def status_to_json(status: Any) -> dict[str, Any]:
    """A bound view's status, as every face writes it: its scope and session, how many
    memories they hold (``items``), the active embedding space (``space``), the schema
    version, and the maintainer's snapshot (None without one)."""
    maintenance = status.maintenance
    return {
        "scope": scope_to_json(status.scope),
        "session": status.session,
        "items": status.items,
        "space": status.active_space,
        "schema_version": status.schema_version,
        "maintenance": None if maintenance is None else maintenance.to_json(),
    }


def record_from_json(obj: object) -> MemoryRecord:
    """The record a :func:`record_to_json` object describes, checked field by field.

    Every key of :data:`RECORD_FIELDS` is required except ``content_sha256`` (computed
    from the text when absent, and checked against it when present); an unknown key is
    refused. Times come back as aware UTC datetimes.
    """
    if not isinstance(obj, Mapping):
        raise ValidationError(f"a record must be a JSON object, not {shown(obj)}")
    unknown = sorted(set(obj) - set(RECORD_FIELDS))
    if unknown:
        raise ValidationError(
            f"a record has no field {unknown[0]!r}; its fields are {', '.join(RECORD_FIELDS)}"
        )
    missing = [name for name in RECORD_FIELDS if name not in obj and name != "content_sha256"]
    if missing:
        raise ValidationError(
            f"the record lacks {', '.join(map(repr, missing))}; a record has every one of "
            f"{', '.join(RECORD_FIELDS)} (expires_at may be null)"
        )
    record_id = _field(obj, "id", str, "a non-empty string")
    if not record_id:
        raise ValidationError("the record's 'id' is empty; it must be a non-empty string")
    scope = _field(obj, "scope", list, 'an array of non-empty strings, e.g. ["acme", "sam"]')
    text = _field(obj, "text", str, "a string")
    metadata = _field(obj, "metadata", dict, "a JSON object ({} when empty)")
    labels = _field(obj, "labels", dict, 'an object of name -> [values], e.g. {"topic": ["x"]}')
    for name, values in labels.items():
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ValidationError(
                f"the record's label {name!r} is {shown(values)}; each label is a list of "
                'strings, e.g. {"topic": ["travel"]}'
            )
    importance = _field(obj, "importance", (int, float), "a number from 0 to 1")
    if not (is_finite_number(importance) and 0.0 <= importance <= 1.0):
        raise ValidationError(
            f"the record's 'importance' is {shown(importance)}; it must be a number from 0 to 1"
        )
    revision = _field(obj, "revision", int, "a whole number from 1 up")
    if revision < 1:
        raise ValidationError(f"the record's 'revision' is {revision}; revisions start at 1")
    expires = obj["expires_at"]
    sha = obj.get("content_sha256")
    if sha is not None and sha != content_sha256(text):
        raise ValidationError(
            f"the record's content_sha256 {shown(sha)} is not the SHA-256 of its text; "
            "leave content_sha256 out if the text was edited"
        )
    return MemoryRecord(
        id=record_id,
        scope=validate_scope(tuple(scope)),
        text=text,
        metadata=metadata,
        labels={name: list(values) for name, values in labels.items()},
        importance=float(importance),
        created_at=parse_time(obj["created_at"], "created_at"),
        updated_at=parse_time(obj["updated_at"], "updated_at"),
        expires_at=None if expires is None else parse_time(expires, "expires_at"),
        revision=revision,
        content_sha256=content_sha256(text),
    )


_HIT_FIELDS = (
    "memory",
    "score",
    "similarity",
    "vector_rank",
    "lexical_rank",
    "bm25",
    "boosts",
    "retention",
    "evidence",
)
_HITS_FIELDS = ("status", "coverage", "mode", "selection_id", "error", "hits")
_STATUSES = ("used", "partial", "degraded", "lexical_only")
_MODES = ("hybrid", "vector", "lexical")
_EVIDENCE = "a hit's evidence"
_OPTIONAL_EVIDENCE = ("vector_share", "lexical_share", "rerank_score")


def _exactly(obj: object, names: tuple[str, ...], what: str) -> Mapping[str, Any]:
    """``obj`` as a JSON object with exactly the keys ``names``."""
    if not isinstance(obj, Mapping):
        raise ValidationError(f"{what} must be a JSON object, not {shown(obj)}")
    if set(obj) != set(names):
        raise ValidationError(
            f"{what} has the keys {sorted(obj)}; it must have exactly {', '.join(names)}"
        )
    return obj


def _score(obj: Mapping[str, Any], name: str, what: str) -> float | None:
    """``obj[name]``: a finite number, or None (also when ``obj`` lacks the key)."""
    value = obj.get(name)
    if value is None:
        return None
    if not is_finite_number(value):
        raise ValidationError(f"{what}'s {name!r} is {shown(value)}; it must be a number or null")
    return float(value)


def _rank(obj: Mapping[str, Any], name: str) -> int | None:
    value = obj[name]
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValidationError(
            f"a hit's {name!r} is {shown(value)}; it must be a rank from 1 or null"
        )
    return value


def hit_from_json(obj: object) -> Hit:
    """The hit a :func:`hit_to_json` object describes, checked as
    :func:`record_from_json` checks its record; a non-finite score, written ``null``,
    comes back as NaN where the hit must have a number (``score``, ``retention``)."""
    given = set(obj) if isinstance(obj, Mapping) else set()
    hit = _exactly(obj, (*_HIT_FIELDS, "context") if "context" in given else _HIT_FIELDS, "a hit")
    record = record_from_json(hit["memory"])
    context = hit.get("context", [])
    if not isinstance(context, list):
        raise ValidationError(f"a hit's context is {shown(context)}; it must be an array")
    cited = hit["evidence"]
    keys = ("id", "scope", "revision", "content_sha256", "space_id", "embedded_at")
    if not isinstance(cited, Mapping) or not set(keys) <= set(cited) <= {
        *keys,
        *_OPTIONAL_EVIDENCE,
    }:
        raise ValidationError(
            f"a hit's evidence is {shown(cited)}; it must have exactly {', '.join(keys)} "
            f"(and any of {', '.join(_OPTIONAL_EVIDENCE)})"
        )
    evidence: Evidence = {
        "id": _field(cited, "id", str, "the memory's id", _EVIDENCE),
        "scope": validate_scope(
            tuple(_field(cited, "scope", list, "an array of strings", _EVIDENCE))
        ),
        "revision": _field(cited, "revision", int, "a revision from 1", _EVIDENCE),
        "content_sha256": _field(cited, "content_sha256", str, "a SHA-256 in hex", _EVIDENCE),
        "space_id": cited["space_id"]
        if cited["space_id"] is None
        else _field(cited, "space_id", str, "an embedding space's id or null", _EVIDENCE),
        "embedded_at": None
        if cited["embedded_at"] is None
        else parse_time(cited["embedded_at"], "embedded_at"),
        "vector_share": _score(cited, "vector_share", _EVIDENCE),
        "lexical_share": _score(cited, "lexical_share", _EVIDENCE),
        "rerank_score": _score(cited, "rerank_score", _EVIDENCE),
    }
    boosts = hit["boosts"]
    if not isinstance(boosts, Mapping):
        raise ValidationError(f"a hit's boosts are {shown(boosts)}; they must be an object")
    return Hit(
        memory=record,
        score=_or_nan(_score(hit, "score", "a hit")),
        similarity=_score(hit, "similarity", "a hit"),
        vector_rank=_rank(hit, "vector_rank"),
        lexical_rank=_rank(hit, "lexical_rank"),
        bm25=_score(hit, "bm25", "a hit"),
        evidence=evidence,
        boosts={str(name): _or_nan(_score(boosts, name, "a hit's boost")) for name in boosts},
        retention=_or_nan(_score(hit, "retention", "a hit")),
        context=tuple(record_from_json(turn) for turn in context),
    )


def _or_nan(score: float | None) -> float:
    """A score that must be a number: a ``null`` (written for a non-finite one) is NaN."""
    return math.nan if score is None else score


def hits_from_json(obj: object) -> Hits:
    """The :class:`~engramdb.Hits` a :func:`hits_to_json` object describes, each hit
    read by :func:`hit_from_json`."""
    answer = _exactly(obj, _HITS_FIELDS, "a recall's answer")
    status, mode = answer["status"], answer["mode"]
    if status not in _STATUSES:
        raise ValidationError(f"a recall's status {shown(status)} is not one of {_STATUSES}")
    if mode not in _MODES:
        raise ValidationError(f"a recall's mode {shown(mode)} is not one of {_MODES}")
    selection = answer["selection_id"]
    if selection is not None:  # None: a recall on a read-only store, which wrote no receipt
        _field(
            answer, "selection_id", str, "the recall's selection id or null", "a recall's answer"
        )
    error = answer["error"]
    if error is not None and not isinstance(error, str):
        raise ValidationError(f"a recall's error is {shown(error)}; it must be a string or null")
    hits = answer["hits"]
    if not isinstance(hits, list):
        raise ValidationError(f"a recall's hits are {shown(hits)}; they must be an array")
    return Hits(
        [hit_from_json(hit) for hit in hits],
        status=status,
        selection_id=selection,
        mode=mode,
        error=error,
        coverage=_score(answer, "coverage", "a recall's answer"),
    )


def export_to_json(record: MemoryRecord, vector: tuple[str, bytes] | None = None) -> dict[str, Any]:
    """An export line: ``format``, the record's fields and, when ``vector`` is given as
    ``(space_id, float32 bytes)``, ``space_id`` and ``vector`` (base64 of the bytes)."""
    line: dict[str, Any] = {"format": FORMAT_VERSION, **record_to_json(record)}
    if vector is not None:
        line["space_id"] = vector[0]
        line["vector"] = base64.b64encode(vector[1]).decode("ascii")
    return line


def export_from_json(obj: object) -> tuple[MemoryRecord, tuple[str, bytes] | None]:
    """The record of an export line of this format and its ``(space_id, vector bytes)``
    (None when the line has no vector); a line of a newer format is refused."""
    if not isinstance(obj, Mapping):
        raise ValidationError(f"an export line must be a JSON object, not {shown(obj)}")
    version = obj.get("format")
    if isinstance(version, bool) or version != FORMAT_VERSION:
        newer = type(version) is int and version > FORMAT_VERSION
        raise ValidationError(
            f"export format {shown(version)} is not {FORMAT_VERSION}; "
            + (
                "it was written by a newer engramdb: upgrade engramdb to read it"
                if newer
                else f'write "format": {FORMAT_VERSION}'
            )
        )
    record = record_from_json({k: v for k, v in obj.items() if k not in _EXPORT_EXTRAS})
    space_id, encoded = obj.get("space_id"), obj.get("vector")
    if space_id is None and encoded is None:
        return record, None
    if not isinstance(space_id, str) or not isinstance(encoded, str):
        raise ValidationError(
            "a line's vector needs both 'space_id' (a string) and 'vector' (base64 text)"
        )
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError("the line's 'vector' is not base64 text") from None
    return record, (space_id, raw)


def _refuse_constant(name: str) -> Any:
    raise ValidationError(f"{name} is not a JSON number; write a finite number or null")


def dumps(value: Any) -> str:
    """JSON text of ``value``: compact, UTF-8 as is (no ``\\u`` escapes), keys in the
    order given; a NaN or an infinity anywhere is refused (:class:`ValidationError`)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise
        raise ValidationError(
            "a value holds NaN or an infinity, which JSON cannot hold; use a finite number or null"
        ) from None


def loads(text: str | bytes) -> Any:
    """Parse JSON text; ``NaN``, ``Infinity`` and ``-Infinity`` (which Python's ``json``
    accepts) are refused (:class:`ValidationError`)."""
    return json.loads(text, parse_constant=_refuse_constant)


def dumps_line(value: Any) -> str:
    """:func:`dumps` for one line of JSON Lines (an export line, a backup line): the same
    JSON, with U+2028, U+2029 and U+0085 (which JSON may hold raw, but ``str.splitlines``,
    editors and JavaScript take for line breaks), DEL, the other C1 controls and the bidi
    controls (which a terminal acts on, or which reorder the text on screen) written as
    ``\\u`` escapes. The line holds no ``\\n`` or ``\\r`` (JSON escapes them), so splitting
    the file on ``\\n`` gives the lines back, whatever reads them, and printing it to a
    terminal shows it."""
    text = dumps(value)
    if _UNSAFE_RAW.search(text) is None:
        return text
    # raw, they can only be inside strings, where a \u escape is the same character
    return _UNSAFE_RAW.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def loads_line(text: str, max_depth: int = MAX_LINE_DEPTH) -> Any:
    """One line of an untrusted JSON Lines file (``engramdb import``), parsed safely:
    nesting deeper than ``max_depth`` is refused before the parser runs (its recursion is
    the risk), an integer outside 64 bits (``-2**63`` to ``2**63 - 1``) is refused as it is
    read (before any digit conversion or float), and so are ``NaN`` and ``Infinity``. Every
    refusal, and text that is not JSON, is a :class:`ValidationError` naming the problem."""
    if nested_deeper_than(text, max_depth):
        raise ValidationError(f"nested deeper than {max_depth} levels; flatten it")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_int64)
    except RecursionError:  # unreachable after the scan, kept as a guard
        raise ValidationError(f"nested deeper than {max_depth} levels; flatten it") from None
    except ValidationError:
        raise
    except ValueError as exc:
        raise ValidationError(f"not JSON ({exc})") from None


def _int64(digits: str) -> int:
    """``parse_int`` of :func:`loads_line`: a whole number within 64 bits, else refused
    by its length before Python converts it (a 5,000-digit integer is not converted)."""
    if len(digits.lstrip("-")) <= 19:
        number = int(digits)
        if _INT64[0] <= number <= _INT64[1]:
            return number
    shown_digits = digits if len(digits) <= 24 else f"{digits[:12]}…({len(digits)} characters)"
    raise ValidationError(
        f"the number {shown_digits} is out of range; whole numbers must fit 64 bits, from "
        "-2**63 to 2**63 - 1 (write a larger one as a string)"
    )


def nested_deeper_than(text: str, limit: int) -> bool:
    """Whether JSON ``text`` nests ``[`` and ``{`` deeper than ``limit`` (brackets inside
    strings left out): one linear scan, no recursion."""
    if text.count("[") + text.count("{") <= limit:  # the common case, at C speed
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
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False
