"""Checks that the test harness itself works, on CPython and in Pyodide.

``async def`` tests are run by the hook in tests/conftest.py (no pytest-asyncio).
"""

from __future__ import annotations

import asyncio
import sys

import pytest

_async_body_finished: list[str] = []


def test_sync_test_runs() -> None:
    assert sys.version_info >= (3, 11)


async def test_async_test_body_runs_to_completion() -> None:
    steps: list[str] = []

    async def worker() -> None:
        await asyncio.sleep(0)
        steps.append("worker")

    task = asyncio.ensure_future(worker())
    await asyncio.sleep(0)
    await task
    steps.append("main")
    assert steps == ["worker", "main"]
    assert asyncio.get_running_loop() is not None
    _async_body_finished.append(sys.platform)


def test_async_body_really_ran(request: pytest.FixtureRequest) -> None:
    # Guards against a hook that creates the coroutine but never drives it: runs after
    # the async test (file order) and checks that its last line executed.
    names = {item.name for item in request.session.items}
    if "test_async_test_body_runs_to_completion" not in names:
        pytest.skip("async harness test not selected")
    assert _async_body_finished == [sys.platform]
