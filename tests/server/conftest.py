"""Fixtures of the server tests (helpers live in server_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from server_helpers import Server, start


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module: its tenants' files under a fresh directory."""
    pytest.importorskip("uvicorn")
    running = start(tmp_path_factory.mktemp("server"))
    yield running
    running.stop()
