"""What the CLI prints: reports as JSON-ready dicts with stable keys (records and hits
are :mod:`engramdb.json_format`'s, like every face's), and short human-readable lines."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from typing import Any

from engramdb import Hit, Hits, MemoryRecord
from engramdb.json_format import dumps, format_time, hit_to_json
from engramdb.settings import format_scope

__all__ = ["human_record", "print_hits", "print_json", "report_dict"]


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


def print_hits(hits: Hits, shown: list[Hit], *, as_json: bool, explain: bool) -> None:
    """The ``shown`` hits of a recall (JSON Lines, or a numbered line each and with
    ``explain`` its ranks, similarity, bm25, boosts and evidence), after one line on
    standard error when the recall's status is not ``used``."""
    if hits.status != "used":
        coverage = "" if hits.coverage is None else f", coverage {hits.coverage:.0%}"
        error = "" if hits.error is None else f", {hits.error}"
        print(f"recall status: {hits.status}{coverage}{error}", file=sys.stderr)
    for rank, hit in enumerate(shown, 1):
        if as_json:
            print_json(hit_to_json(hit))
            continue
        print(f"{rank}. {hit.score:.4f}  {hit.memory.text}  ({hit.memory.id})")
        if explain:
            data = hit_to_json(hit)
            similarity = "-" if hit.similarity is None else f"{hit.similarity:.4f}"
            bm25 = "-" if hit.bm25 is None else f"{hit.bm25:.4g}"
            print(
                f"   vector rank {hit.vector_rank or '-'}, lexical rank "
                f"{hit.lexical_rank or '-'}, similarity {similarity}, bm25 {bm25}, "
                f"boosts {json.dumps(data['boosts'], sort_keys=True)}"
                + _reranked(hit.evidence.get("rerank_score"))
            )
            evidence = data["evidence"]
            print(
                f"   evidence: scope {format_scope(evidence['scope'])}, revision "
                f"{evidence['revision']}, space {evidence['space_id']}, embedded "
                f"{evidence['embedded_at']}, sha256 {evidence['content_sha256'][:16]}"
            )


def _reranked(score: float | None) -> str:
    return "" if score is None else f", rerank score {score:.4g}"
