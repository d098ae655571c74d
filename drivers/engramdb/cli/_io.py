"""``engramdb import`` and ``engramdb export``: the file formats and the vectors.

An export line is :func:`engramdb.json_format.export_to_json`'s: ``"format": 1`` and
every field of the record (``docs/storage-format.md#json``). Import reads back ``text``,
``metadata``, ``labels``, ``importance`` and ``expires_at``, and stores new memories in
the bound scope (the line's ``id``, ``scope``, times and ``revision`` are checked, not
kept). ``--with-vectors`` adds ``space_id`` and ``vector``: the base64 of the vector's
little-endian float32 bytes, exactly as stored. A line without ``format`` (an export of
an earlier engramdb, or a line written by hand such as ``{"text": "..."}``) is read
leniently: only ``text`` is required.

Export and import are inverses: an export line is :func:`engramdb.json_format.dumps_line`'s
(no raw line separator inside), and import splits JSON Lines and text files on ``\n``
only (a ``\r`` before it dropped), never on U+2028, U+2029 or U+0085. Every problem of a
file, however hostile (deep nesting, huge numbers, a CSV field over the csv module's
limit), is a ``CliError`` naming its line, raised before anything is stored.
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from engramdb import EmbeddingSpace, EngramError, MemoryRecord
from engramdb.json_format import dumps_line, export_from_json, export_to_json, loads_line
from engramdb.store import check_unit_vector

from ._parser import CliError

__all__ = ["Import", "export_line", "open_output", "read_import", "read_text", "space_of"]

IMPORTED = {"text", "metadata", "labels", "importance", "expires_at", "ttl"}
VECTOR_KEYS = {"space_id", "vector"}
IGNORED = {"id", "created_at", "updated_at", "revision", "content_sha256", "scope"}


@dataclass
class Import:
    """The items of an import file, and the vectors some of them carry."""

    items: list[dict[str, Any]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # the line number of each item
    vectors: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (space, sha) -> bytes
    spaces: dict[str, EmbeddingSpace] = field(default_factory=dict)  # by id
    # (space, sha) -> the line whose vector ``vectors`` holds, and its text
    vector_lines: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)


def read_text(path: str, what: str) -> str:
    """The text of the file ``path`` (``-``: standard input), its line ends untouched;
    ``what`` names it in the error (``"import file"``)."""
    try:
        if path == "-":
            return sys.stdin.read()
        # newline="": the bytes' own line ends (csv reads \r\n inside quotes itself)
        with open(path, encoding="utf-8", newline="") as file:
            return file.read()
    except FileNotFoundError:
        raise CliError(f"{what} {path!r} does not exist; check the path") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"{what} {path!r} is not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise CliError(f"cannot read {what} {path!r}: {exc.strerror}") from None


def read_import(path: str, fmt: str) -> Import:
    """Every item of the file; a bad line raises ``CliError`` naming it (nothing stored)."""
    text = read_text(path, "import file")
    if fmt == "auto" and path == "-":  # standard input: JSON Lines if it looks like them
        first = next((line for line in _lines(text) if line.strip()), "")
        fmt = "jsonl" if first.lstrip().startswith("{") else "text"
    elif fmt == "auto":
        suffix = Path(path).suffix.lower()
        fmt = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}.get(
            suffix, "text"
        )
    reader = {"jsonl": _jsonl, "csv": _csv, "text": _text}[fmt]
    try:
        return _read(path, reader(path, text))
    except CliError as exc:  # one form for every bad line: the import stores nothing
        raise CliError(f"{exc}; nothing was stored") from None


def _read(
    path: str, lines: Iterator[tuple[int, dict[str, Any], tuple[EmbeddingSpace, bytes] | None]]
) -> Import:
    result = Import()
    for number, item, vector in lines:
        if not isinstance(item.get("text"), str) or not item["text"].strip():
            raise CliError(f"{path} line {number}: no text; every memory needs a text")
        if vector is not None:
            space, raw = vector
            sha = hashlib.sha256(item["text"].encode("utf-8")).hexdigest()
            result.vectors[(space.id, sha)] = raw
            result.vector_lines[(space.id, sha)] = (number, item["text"])
            result.spaces[space.id] = space
        result.items.append(item)
        result.lines.append(number)
    return result


def _jsonl(
    path: str, text: str
) -> Iterator[tuple[int, dict[str, Any], tuple[EmbeddingSpace, bytes] | None]]:
    for number, line in enumerate(_lines(text), 1):
        if not line.strip():
            continue
        try:
            value = loads_line(line)
        except EngramError as exc:  # not JSON, too deep, a number out of range
            raise CliError(f"{path} line {number}: {exc}") from None
        if not isinstance(value, dict):
            raise CliError(f'{path} line {number}: a JSON object is needed, like {{"text": ...}}')
        where = f"{path} line {number}"
        item, vector = _versioned(where, value) if "format" in value else _loose(where, value)
        yield number, item, vector


def _versioned(
    where: str, value: dict[str, Any]
) -> tuple[dict[str, Any], tuple[EmbeddingSpace, bytes] | None]:
    """A line with ``format``: a whole record, read strictly by the JSON codec."""
    try:
        record, vector = export_from_json(value)
    except EngramError as exc:
        raise CliError(f"{where}: {exc}") from None
    item: dict[str, Any] = {
        "text": record.text,
        "metadata": record.metadata,
        "labels": record.labels,
        "importance": record.importance,
    }
    if record.expires_at is not None:
        item["expires_at"] = record.expires_at
    return item, None if vector is None else _vector(where, *vector)


def _loose(
    where: str, value: dict[str, Any]
) -> tuple[dict[str, Any], tuple[EmbeddingSpace, bytes] | None]:
    """A line without ``format``: an older export, or one written by hand."""
    unknown = sorted(set(value) - IMPORTED - VECTOR_KEYS - IGNORED)
    if unknown:
        raise CliError(
            f"{where}: unknown key {unknown[0]!r}; known keys are "
            f"{', '.join(sorted(IMPORTED | VECTOR_KEYS))}"
        )
    item = {key: value[key] for key in IMPORTED if value.get(key) is not None}
    if isinstance(item.get("expires_at"), str):
        try:
            item["expires_at"] = datetime.fromisoformat(item["expires_at"])
        except ValueError:
            raise CliError(
                f"{where}: expires_at {value['expires_at']!r} is not ISO 8601; write e.g. "
                "2027-01-31T12:00:00Z"
            ) from None
    if value.get("vector") is None:
        return item, None
    space_id, text = value.get("space_id"), value["vector"]
    if not isinstance(space_id, str) or not isinstance(text, str):
        raise CliError(f"{where}: a vector needs a space_id and base64 text")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CliError(f"{where}: vector is not base64") from None
    return item, _vector(where, space_id, raw)


def _vector(where: str, space_id: str, raw: bytes) -> tuple[EmbeddingSpace, bytes]:
    """A line's vector, checked: a finite unit vector of its space's size."""
    space = space_of(space_id, where)
    try:
        check_unit_vector(raw, space.dimensions)
    except EngramError as exc:
        raise CliError(f"{where}: {exc}") from None
    return space, raw


def _lines(text: str) -> list[str]:
    """The lines of a JSON Lines or text file: split on ``\n`` only, as JSON escapes it
    (``str.splitlines`` also splits on U+2028, U+2029, U+0085 and more, which a JSON
    string may hold raw); a ``\r`` ending a line (Windows) is dropped."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def _csv(path: str, text: str) -> Iterator[tuple[int, dict[str, Any], None]]:
    rows = csv.DictReader(io.StringIO(text, newline=""))
    try:
        yield from _csv_rows(path, rows)
    except csv.Error as exc:  # e.g. a field above csv.field_size_limit() (128 KiB)
        raise CliError(f"{path} line {rows.line_num + 1}: not CSV ({exc})") from None


def _csv_rows(path: str, rows: csv.DictReader[str]) -> Iterator[tuple[int, dict[str, Any], None]]:
    if rows.fieldnames is None or "text" not in rows.fieldnames:
        raise CliError(f"{path}: a CSV import needs a 'text' column in its header row")
    for row in rows:
        item: dict[str, Any] = {"text": row["text"]}
        if row.get("importance"):
            try:
                item["importance"] = float(row["importance"])
            except ValueError:
                raise CliError(
                    f"{path} line {rows.line_num}: importance {row['importance']!r} is not a number"
                ) from None
        yield rows.line_num, item, None


def _text(path: str, text: str) -> Iterator[tuple[int, dict[str, Any], None]]:
    for number, line in enumerate(_lines(text), 1):
        if line.strip():
            yield number, {"text": line.strip()}, None


def space_of(space_id: str, where: str) -> EmbeddingSpace:
    """``provider/model@dimensions#variant`` → its ``EmbeddingSpace`` (``where`` names
    the line for the error)."""
    try:
        return EmbeddingSpace.from_id(space_id)
    except EngramError as exc:
        raise CliError(f"{where}: {exc}") from None


def export_line(record: MemoryRecord, vector: tuple[str, bytes] | None) -> str:
    """One line of ``engramdb export``: the JSON codec's export line, as text."""
    return dumps_line(export_to_json(record, vector))


def open_output(path: str | None) -> TextIO:
    if path is None:
        return sys.stdout
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path!r}: {exc.strerror}") from None
