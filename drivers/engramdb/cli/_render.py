"""What the CLI prints: reports as JSON-ready dicts with stable keys (records and hits
are :mod:`engramdb.json_format`'s, like every face's), and short human-readable lines."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from typing import Any

from engramdb import MemoryRecord
from engramdb.json_format import dumps, format_time
from engramdb.settings import format_scope

__all__ = ["human_record", "print_json", "report_dict"]


def report_dict(report: object) -> dict[str, Any]:
    """A dataclass report (``MemoryStatus``, ``MaintenanceReport``) as plain JSON values."""
    assert dataclasses.is_dataclass(report) and not isinstance(report, type)
    out: dict[str, Any] = {}
    for field in dataclasses.fields(report):
        value = getattr(report, field.name)
        if hasattr(value, "to_json"):  # a nested report (MaintenanceSnapshot)
            value = value.to_json()
        out[field.name] = list(value) if isinstance(value, tuple) else value
    return out


def human_record(record: MemoryRecord) -> str:
    lines = [f"{record.id}  [{format_scope(record.scope)}]  rev {record.revision}", record.text]
    extras: list[str] = []
    if record.metadata:
        extras.append(f"metadata {_compact(record.metadata)}")
    if record.labels:
        extras.append(f"labels {_compact(record.labels)}")
    extras.append(f"importance {record.importance:g}")
    extras.append(f"created {format_time(record.created_at)}")
    if record.expires_at is not None:
        extras.append(f"expires {format_time(record.expires_at)}")
    lines.append("  " + ", ".join(extras))
    return "\n".join(lines)


def _compact(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def print_json(value: object) -> None:
    """One JSON value on one line, written by the codec (compact, UTF-8, no NaN)."""
    sys.stdout.write(dumps(value) + "\n")
