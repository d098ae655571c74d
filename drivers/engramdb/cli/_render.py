"""What the CLI prints: records, hits and reports as JSON-ready dicts with stable keys,
and as short human-readable lines."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from engramdb import Hit, MemoryRecord
from engramdb.settings import format_scope

__all__ = ["hit_dict", "human_record", "iso", "print_json", "record_dict", "report_dict"]


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def record_dict(record: MemoryRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "scope": format_scope(record.scope),
        "text": record.text,
        "metadata": record.metadata,
        "labels": record.labels,
        "importance": record.importance,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "expires_at": iso(record.expires_at),
        "revision": record.revision,
        "content_sha256": record.content_sha256,
    }


def hit_dict(hit: Hit) -> dict[str, Any]:
    evidence = hit.evidence
    return {
        "id": hit.memory.id,
        "scope": format_scope(hit.memory.scope),
        "text": hit.memory.text,
        "score": hit.score,
        "similarity": hit.similarity,
        "vector_rank": hit.vector_rank,
        "lexical_rank": hit.lexical_rank,
        "bm25": hit.bm25,
        "boosts": dict(hit.boosts),
        "evidence": {
            "id": evidence["id"],
            "scope": format_scope(evidence["scope"]),
            "revision": evidence["revision"],
            "content_sha256": evidence["content_sha256"],
            "space_id": evidence["space_id"],
            "embedded_at": iso(evidence["embedded_at"]),
        },
    }


def report_dict(report: object) -> dict[str, Any]:
    """A dataclass report (``MemoryStatus``, ``MaintenanceReport``) as plain JSON values."""
    assert dataclasses.is_dataclass(report) and not isinstance(report, type)
    out: dict[str, Any] = {}
    for field in dataclasses.fields(report):
        value = getattr(report, field.name)
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
    extras.append(f"created {iso(record.created_at)}")
    if record.expires_at is not None:
        extras.append(f"expires {iso(record.expires_at)}")
    lines.append("  " + ", ".join(extras))
    return "\n".join(lines)


def _compact(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, sort_keys=True) + "\n")
