"""Fixtures of the SQLite-only tests (helpers live in sqlite_helpers.py; the filter
generators, shared with the PostgreSQL tests, in tests/contract/filter_cases.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "contract"))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A database path that does not exist yet."""
    return tmp_path / "memory.db"
