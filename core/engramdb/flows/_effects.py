"""Effects, and the two drivers that perform them.

Every memory operation is written once as a generator *flow* that yields effects and
receives their results (the pattern of httpx's ``Auth.auth_flow``):

- ``Embed(texts, kind)`` → the embedder's vectors, one per text;
- ``Rerank(query, texts, timeout)`` → the reranker's scores, one per text
  (``ConfigurationError`` thrown in when the driver has no reranker). ``timeout`` (or
  None) is the seconds the call may take: handed to a reranker that
  ``supports_timeout``, and in :func:`adrive` the call is cancelled after it
  (``TimeoutError`` thrown in);
- ``Store(ops)`` → the store's results, one per op;
- ``Sleep(seconds)`` → None, after the pause (``time.sleep`` or ``asyncio.sleep``, or
  the ``sleep`` a caller passes, e.g. one that moves a test's clock).

:func:`drive` performs them with plain calls and :func:`adrive` awaits them, both through
the one trampoline (``_trampoline``): an exception raised while performing an effect is
thrown into the flow at its ``yield``. Neither uses threads.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from engramdb._base.errors import ConfigurationError, StoreError
from engramdb._base.types import EmbedKind
from engramdb._embedders.embedder import Embedder
from engramdb.flows._trampoline import arun, run
from engramdb.ranking._reranker import Reranker
from engramdb.store import Op

__all__ = ["Effect", "Embed", "Flow", "Rerank", "Sleep", "Store", "adrive", "drive"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Embed:
    texts: tuple[str, ...]
    kind: EmbedKind


@dataclass(frozen=True, slots=True)
class Rerank:
    query: str
    texts: tuple[str, ...]
    timeout: float | None = None  # seconds the call may take (the stage's budget left)


@dataclass(frozen=True, slots=True)
class Store:
    ops: tuple[Op, ...]


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


Effect = Embed | Rerank | Store | Sleep
Flow = Generator[Effect, Any, T]
Sleeper = Callable[[float], Any]


def drive(
    flow: Flow[T],
    embedder: Embedder,
    store: Any,
    sleep: Sleeper | None = None,
    *,
    reranker: Reranker | None = None,
) -> T:
    """Run ``flow`` to completion with synchronous calls."""
    batch = getattr(store, "batch", None)

    def perform(effect: Effect) -> Any:
        if isinstance(effect, Sleep):
            return (sleep or time.sleep)(effect.seconds)
        if isinstance(effect, Embed):
            return embedder.embed(list(effect.texts), effect.kind)
        if isinstance(effect, Rerank):
            model = _reranker(reranker)
            return model.rerank(effect.query, list(effect.texts), **_timed(model, effect))
        if batch is None:
            raise StoreError(f"{type(store).__name__} is async-only; use AsyncMemory with it")
        return batch(effect.ops)

    return run(flow, perform)


async def adrive(
    flow: Flow[T],
    embedder: Embedder,
    store: Any,
    sleep: Sleeper | None = None,
    *,
    reranker: Reranker | None = None,
) -> T:
    """Run ``flow`` to completion, awaiting each effect."""
    abatch = getattr(store, "abatch", None)

    async def perform(effect: Effect) -> Any:
        if isinstance(effect, Sleep):
            if sleep is None:
                import asyncio  # here, not at import: asyncio loads threading

                return await asyncio.sleep(effect.seconds)
            paused = sleep(effect.seconds)
            return (await paused) if inspect.isawaitable(paused) else paused
        if isinstance(effect, Embed):
            return await embedder.aembed(list(effect.texts), effect.kind)
        if isinstance(effect, Rerank):
            model = _reranker(reranker)
            call = model.arerank(effect.query, list(effect.texts), **_timed(model, effect))
            if effect.timeout is None:
                return await call
            import asyncio  # here, not at import: asyncio loads threading

            return await asyncio.wait_for(call, effect.timeout)
        if abatch is None:
            raise StoreError(f"{type(store).__name__} is sync-only; use Memory with it")
        return await abatch(effect.ops)

    return await arun(flow, perform)


def _reranker(reranker: Reranker | None) -> Reranker:
    if reranker is None:
        raise ConfigurationError("this memory has no reranker: pass Memory(..., reranker=...)")
    return reranker


def _timed(reranker: Reranker, effect: Rerank) -> dict[str, float]:
    """``timeout=`` for a reranker whose ``supports_timeout`` is True, else nothing."""
    if effect.timeout is None or getattr(reranker, "supports_timeout", False) is not True:
        return {}
    return {"timeout": effect.timeout}
