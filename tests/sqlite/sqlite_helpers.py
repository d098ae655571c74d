"""Helpers for the SQLite-only tests: records, unit vectors, a fixed time, fixtures."""

from __future__ import annotations

import hashlib
import importlib.util
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from engramdb._codec import encode_f32
from engramdb._types import EmbeddingSpace, MemoryRecord, Scope

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SPACE = EmbeddingSpace("test", "unit", 4)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def unit(values: Sequence[float]) -> tuple[float, ...]:
    norm = math.sqrt(sum(v * v for v in values))
    return tuple(v / norm for v in values)


def blob(values: Sequence[float]) -> bytes:
    return encode_f32(unit(values))


def record(
    number: int,
    text: str,
    scope: Scope = ("acme", "user", "sam"),
    **fields: object,
) -> MemoryRecord:
    """An item with a sortable id made from ``number`` and the hash of ``text``."""
    return MemoryRecord(
        id=f"01K{number:023d}",
        scope=scope,
        text=text,
        content_sha256=sha256(text),
        created_at=NOW,
        updated_at=NOW,
        **fields,  # type: ignore[arg-type]
    )


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def make_fixtures() -> ModuleType:
    """The fixture-writing script, imported by path (it knows the golden rows)."""
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
