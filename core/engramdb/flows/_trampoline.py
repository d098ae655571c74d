"""The one trampoline: run a generator that yields requests and receives their results.

engramdb writes every behaviour that needs I/O as a generator: a memory flow yields
effects (embed, store), a SQL plan yields lists of statements, a provider's flow yields
HTTP requests. The code that performs the requests is the only thing that differs
between a blocking and an awaiting caller, between ``sqlite3`` and D1. :func:`run` and
:func:`arun` are the two ways to drive such a generator:

* each yielded value is handed to ``perform``, and its result is sent back;
* an exception raised by ``perform`` is thrown into the generator at its ``yield``, so
  the generator handles failures with ordinary ``try``/``except`` (and may go on);
* the generator's return value is the result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["arun", "run"]

Y = TypeVar("Y")
R = TypeVar("R")


def run(gen: Generator[Y, Any, R], perform: Callable[[Y], Any]) -> R:
    """Drive ``gen`` with plain calls of ``perform``; return its result."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as stop:
            result: R = stop.value
            return result
        try:
            value, error = perform(request), None
        except Exception as exc:
            value, error = None, exc


async def arun(gen: Generator[Y, Any, R], perform: Callable[[Y], Awaitable[Any]]) -> R:
    """Drive ``gen``, awaiting ``perform`` for each request; return its result."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as stop:
            result: R = stop.value
            return result
        try:
            value, error = await perform(request), None
        except Exception as exc:
            value, error = None, exc
