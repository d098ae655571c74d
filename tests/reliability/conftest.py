"""The reliability suite: crashes, concurrency, provider faults, hostile input, scope
isolation, corruption and secrets (docs/reliability.md publishes what it measures).

Run it with ``tox -e reliability`` (CI does), or ``pytest tests/reliability``; the other
test envs leave it out. Loops are sized for CI; ``--long`` runs each one about ten times
longer (``long_factor`` says by how much), for a soak before a release.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The suites reuse the helpers of the provider and SQLite tests (loopback_server,
# provider_fakes, sqlite_helpers), imported by module name as their own tests do.
_TESTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(_TESTS / "providers"), str(_TESTS / "sqlite"), str(_TESTS / "postgres")]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="run the reliability loops about ten times longer than in CI",
    )


@pytest.fixture(scope="session")
def long_factor(request: pytest.FixtureRequest) -> int:
    """How much longer than the CI size each loop runs (1, or 10 with ``--long``)."""
    return 10 if request.config.getoption("--long") else 1


@pytest.fixture(scope="session")
def pg_admin() -> Iterator[str]:
    """The DSN of a PostgreSQL server whose role may ``CREATE DATABASE``: ``PG_DSN``'s,
    or a throwaway one of tests/postgres/pg_server.py for the session. Skipped, saying
    why, only when psycopg is not installed or no PostgreSQL with pgvector is found."""
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("psycopg is not installed (pip install 'psycopg[binary]>=3.2')")
    import pg_server

    if not os.environ.get("PG_DSN"):
        try:
            pg_server.bin_dir()
        except RuntimeError as exc:
            pytest.skip(f"no PostgreSQL server: {exc}")
    with pg_server.admin_dsn() as dsn:
        yield dsn
