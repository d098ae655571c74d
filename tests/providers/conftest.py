"""Fixtures for the provider tests (the fakes themselves live in provider_fakes.py and
loopback_server.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from loopback_server import Loopback, serve
from provider_fakes import CASES, ProviderCase, Sleeps


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture(params=CASES, ids=[case.name for case in CASES])
def case(request: pytest.FixtureRequest) -> ProviderCase:
    result: ProviderCase = request.param
    return result


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    with serve() as server:
        yield server
