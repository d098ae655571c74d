"""``engramdb import`` and ``engramdb export``: the file formats and the vectors.

An export line is a JSON object: ``text``, ``metadata``, ``labels``, ``importance`` and
``expires_at`` (ISO 8601 or null), which import reads back, and ``id``, ``created_at``
and ``revision``, which import ignores (it stores new memories in the bound scope).
``--with-vectors`` adds ``space_id`` and ``vector``: the base64 of the vector's
little-endian float32 bytes, exactly as stored (see ``docs/storage-format.md``).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from engramdb import EmbeddingSpace, EngramError, MemoryRecord
from engramdb.store import check_unit_vector

from ._parser import CliError
from ._render import iso

__all__ = ["Import", "export_line", "open_output", "read_import", "space_of"]

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


def read_import(path: str, fmt: str) -> Import:
    """Every item of the file; a bad line raises ``CliError`` naming it (nothing stored)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"import file {path!r} does not exist; check the path") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"import file {path!r} is not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise CliError(f"cannot read import file {path!r}: {exc.strerror}") from None
    if fmt == "auto" and path == "-":  # standard input: JSON Lines if it looks like them
        first = next((line for line in text.splitlines() if line.strip()), "")
        fmt = "jsonl" if first.lstrip().startswith("{") else "text"
    elif fmt == "auto":
        suffix = Path(path).suffix.lower()
        fmt = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}.get(
            suffix, "text"
        )
    reader = {"jsonl": _jsonl, "csv": _csv, "text": _text}[fmt]
    result = Import()
    for number, item, vector in reader(path, text):
        if not isinstance(item.get("text"), str) or not item["text"].strip():
            raise CliError(f"{path} line {number}: no text; every memory needs a text")
        if vector is not None:
            space, raw = vector
            sha = hashlib.sha256(item["text"].encode("utf-8")).hexdigest()
            result.vectors[(space.id, sha)] = raw
            result.spaces[space.id] = space
        result.items.append(item)
        result.lines.append(number)
    return result


def _jsonl(
    path: str, text: str
) -> Iterator[tuple[int, dict[str, Any], tuple[EmbeddingSpace, bytes] | None]]:
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CliError(f"{path} line {number}: not JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise CliError(f'{path} line {number}: a JSON object is needed, like {{"text": ...}}')
        unknown = sorted(set(value) - IMPORTED - VECTOR_KEYS - IGNORED)
        if unknown:
            raise CliError(
                f"{path} line {number}: unknown key {unknown[0]!r}; known keys are "
                f"{', '.join(sorted(IMPORTED | VECTOR_KEYS))}"
            )
        item = {key: value[key] for key in IMPORTED if value.get(key) is not None}
        if isinstance(item.get("expires_at"), str):
            try:
                item["expires_at"] = datetime.fromisoformat(item["expires_at"])
            except ValueError:
                raise CliError(
                    f"{path} line {number}: expires_at {value['expires_at']!r} is not "
                    "ISO 8601; write e.g. 2027-01-31T12:00:00+00:00"
                ) from None
        vector = None
        if value.get("vector") is not None:
            vector = _vector(path, number, value.get("space_id"), value["vector"])
        yield number, item, vector


def _vector(path: str, number: int, space_id: object, text: object) -> tuple[EmbeddingSpace, bytes]:
    """A line's vector, checked: base64 of a finite unit vector of its space's size."""
    if not isinstance(space_id, str) or not isinstance(text, str):
        raise CliError(f"{path} line {number}: a vector needs a space_id and base64 text")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise CliError(f"{path} line {number}: vector is not base64") from None
    space = space_of(space_id, f"{path} line {number}")
    try:
        check_unit_vector(raw, space.dimensions)
    except EngramError as exc:
        raise CliError(f"{path} line {number}: {exc}") from None
    return space, raw


def _csv(path: str, text: str) -> Iterator[tuple[int, dict[str, Any], None]]:
    rows = csv.DictReader(io.StringIO(text))
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
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield number, {"text": line.strip()}, None


def space_of(space_id: str, where: str) -> EmbeddingSpace:
    """``provider/model@dimensions#variant`` → its ``EmbeddingSpace`` (``where`` names
    the line for the error)."""
    base, _, variant = space_id.partition("#")
    name, _, dimensions = base.rpartition("@")
    provider, _, model = name.partition("/")
    if not (provider and model and dimensions.isdigit()):
        raise CliError(f"{where}: space_id {space_id!r} is not of the form provider/model@N")
    try:
        return EmbeddingSpace(provider, model, int(dimensions), variant or None)
    except EngramError as exc:
        raise CliError(f"{where}: space_id {space_id!r}: {exc}") from None


def export_line(record: MemoryRecord, vector: tuple[str, bytes] | None) -> str:
    line: dict[str, Any] = {
        "id": record.id,
        "text": record.text,
        "metadata": record.metadata,
        "labels": record.labels,
        "importance": record.importance,
        "expires_at": iso(record.expires_at),
        "created_at": iso(record.created_at),
        "revision": record.revision,
    }
    if vector is not None:
        line["space_id"] = vector[0]
        line["vector"] = base64.b64encode(vector[1]).decode("ascii")
    return json.dumps(line, ensure_ascii=False, sort_keys=True)


def open_output(path: str | None) -> TextIO:
    if path is None:
        return sys.stdout
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path!r}: {exc.strerror}") from None
