"""Effects, and the two drivers that perform them.

Every memory operation is written once as a generator *flow* that yields effects and
receives their results (the pattern of httpx's ``Auth.auth_flow``):

- ``Embed(texts, kind)`` → the embedder's vectors, one per text;
- ``Store(ops)`` → the store's results, one per op;
- ``Sleep(seconds)`` → ``None`` after waiting.

An exception raised while performing an effect is thrown into the flow at its ``yield``,
so a flow handles failures with ordinary ``try``/``except``. :func:`drive` performs
effects with plain calls; :func:`adrive` awaits them. Neither uses threads.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ._embedder import Embedder
from ._errors import StoreError
from ._store import Op
from ._types import EmbedKind

__all__ = ["Effect", "Embed", "Flow", "Sleep", "Store", "adrive", "drive"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Embed:
    texts: tuple[str, ...]
    kind: EmbedKind


@dataclass(frozen=True, slots=True)
class Store:
    ops: tuple[Op, ...]


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


Effect = Embed | Store | Sleep
Flow = Generator[Effect, Any, T]


def drive(
    flow: Flow[T],
    embedder: Embedder,
    store: Any,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``flow`` to completion with synchronous calls."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        result, error = None, None
        try:
            if isinstance(effect, Embed):
                result = embedder.embed(list(effect.texts), effect.kind)
            elif isinstance(effect, Store):
                batch = getattr(store, "batch", None)
                if batch is None:
                    raise StoreError(
                        f"{type(store).__name__} is async-only; use AsyncMemory with it"
                    )
                result = batch(effect.ops)
            else:
                sleep(effect.seconds)
        except Exception as exc:
            error = exc


async def adrive(
    flow: Flow[T],
    embedder: Embedder,
    store: Any,
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> T:
    """Run ``flow`` to completion, awaiting each effect."""
    if sleep is None:
        # Imported here, not at module level: asyncio imports threading, which the
        # core must not need just to be imported.
        import asyncio

        sleep = asyncio.sleep
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        result, error = None, None
        try:
            if isinstance(effect, Embed):
                result = await embedder.aembed(list(effect.texts), effect.kind)
            elif isinstance(effect, Store):
                abatch = getattr(store, "abatch", None)
                if abatch is None:
                    raise StoreError(f"{type(store).__name__} is sync-only; use Memory with it")
                result = await abatch(effect.ops)
            else:
                await sleep(effect.seconds)
        except Exception as exc:
            error = exc


def results_of(value: Any, count: int) -> Sequence[Any]:
    """Check that a store answered ``count`` results (a store bug otherwise)."""
    if not isinstance(value, list) or len(value) != count:
        raise StoreError(f"the store returned {value!r} for a batch of {count} ops")
    return value
