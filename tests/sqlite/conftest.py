"""Fixtures of the SQLite-only tests (helpers live in sqlite_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A database path that does not exist yet."""
    return tmp_path / "memory.db"
