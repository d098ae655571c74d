"""Flows: a provider's behaviour written once, driven sync or async.

A *flow* is a generator that yields effects and receives their results, like
``httpx.Auth.auth_flow``:

- it yields an :class:`httpx.Request` and receives the :class:`httpx.Response`
  (or has the transport's :class:`httpx.TransportError` thrown in);
- it yields a :class:`Sleep` and receives ``None`` once the time has passed;
- its return value (``StopIteration.value``) is the result.

:func:`drive` runs a flow with an ``httpx.Client`` and a blocking sleep; :func:`adrive`
runs the same flow with an ``httpx.AsyncClient`` and an awaitable sleep, both through the
core's one trampoline (``engramdb.driver.run``/``arun``): an error of the transport is thrown into
the flow at its ``yield``. Flows do no I/O themselves, so tests step them by hand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

import httpx

from engramdb.driver import arun, run

__all__ = ["Effect", "Flow", "Sleep", "adrive", "adrive_all", "drive"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Sleep:
    """Ask the driver to wait ``seconds`` before resuming the flow (retry back-off)."""

    seconds: float


Effect: TypeAlias = "httpx.Request | Sleep"
Flow: TypeAlias = Generator["httpx.Request | Sleep", "httpx.Response | None", T]


def drive(flow: Flow[T], client: httpx.Client, sleep: Callable[[float], None]) -> T:
    """Run ``flow`` to completion with blocking I/O and return its result."""

    def perform(effect: httpx.Request | Sleep) -> httpx.Response | None:
        if isinstance(effect, Sleep):
            sleep(effect.seconds)
            return None
        return client.send(effect)

    return run(flow, perform)


async def adrive(
    flow: Flow[T], client: httpx.AsyncClient, sleep: Callable[[float], Awaitable[object]]
) -> T:
    """Run ``flow`` to completion with ``await`` and return its result."""

    async def perform(effect: httpx.Request | Sleep) -> httpx.Response | None:
        if isinstance(effect, Sleep):
            await sleep(effect.seconds)
            return None
        return await client.send(effect)

    return await arun(flow, perform)


async def adrive_all(
    flows: Sequence[Flow[T]],
    client: httpx.AsyncClient,
    sleep: Callable[[float], Awaitable[object]],
    max_concurrency: int = 1,
) -> list[T]:
    """Run ``flows`` with at most ``max_concurrency`` in flight; results in input order.

    If one flow fails, the others are cancelled and the first error is raised as is
    (never wrapped in an ``ExceptionGroup``).
    """
    if max_concurrency <= 1 or len(flows) <= 1:
        return [await adrive(flow, client, sleep) for flow in flows]
    gate = asyncio.Semaphore(max_concurrency)

    async def run(flow: Flow[T]) -> T:
        async with gate:
            return await adrive(flow, client, sleep)

    tasks = [asyncio.ensure_future(run(flow)) for flow in flows]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
