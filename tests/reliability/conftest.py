"""The reliability suite: crashes, concurrency, provider faults, hostile input, scope
isolation, corruption and secrets (docs/reliability.md publishes what it measures).

Run it with ``tox -e reliability`` (CI does), or ``pytest tests/reliability``; the other
test envs leave it out. Loops are sized for CI; ``--long`` runs each one about ten times
longer (``long_factor`` says by how much), for a soak before a release.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The suites reuse the helpers of the provider and SQLite tests (loopback_server,
# provider_fakes, sqlite_helpers), imported by module name as their own tests do.
_TESTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(_TESTS / "providers"), str(_TESTS / "sqlite")]


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
