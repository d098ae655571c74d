"""Run ``async def`` tests without pytest-asyncio (which does not work in Pyodide).

On CPython each coroutine test runs in a fresh loop via ``asyncio.run``. In Pyodide
(``sys.platform == "emscripten"``) the WebLoop is always "running", so ``asyncio.run``
refuses; instead the coroutine is driven with the WebLoop's ``run_until_complete``,
which works when pytest itself was started from ``runPythonAsync`` under
``node --experimental-wasm-stack-switching`` (see tests/pyodide/run_pytest.mjs).
Only sync fixtures are supported; async fixtures are not.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from typing import Any

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    func = pyfuncitem.obj
    if not inspect.iscoroutinefunction(func):
        return None
    kwargs: dict[str, Any] = {
        name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames
    }
    coro = func(**kwargs)
    if sys.platform == "emscripten":
        asyncio.get_event_loop().run_until_complete(coro)
    else:
        asyncio.run(coro)
    return True
