"""Fixtures for the provider tests (the fakes themselves live in provider_fakes.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from provider_fakes import CASES, Loopback, LoopbackHandler, ProviderCase, Sleeps


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture(params=CASES, ids=[case.name for case in CASES])
def case(request: pytest.FixtureRequest) -> ProviderCase:
    result: ProviderCase = request.param
    return result


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    seen: list[dict[str, Any]] = []
    handler = type("Handler", (LoopbackHandler,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield Loopback(f"http://{host}:{port}/v1", seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
