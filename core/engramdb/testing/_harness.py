"""The store under test, the data the checks use, and small assertion helpers.

Everything here is the standard library only, so the checks run in Pyodide (and in a
Cloudflare Worker) as well as on CPython, under pytest or any other runner.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from engramdb._base.types import EmbeddingSpace, MemoryRecord, Scope, content_sha256
from engramdb._vectors.codec import encode_f32
from engramdb.store import Op, StoreCapabilities

__all__ = [
    "NOW",
    "SPACE",
    "CheckFailed",
    "StoreUnderTest",
    "expect",
    "raises",
    "record",
    "sha256",
    "unit_blob",
]

Face = Literal["sync", "async"]

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
"""The clock reading of the checks (ops carry their own ``now``)."""

SPACE = EmbeddingSpace("test", "unit", 4)
"""A 4-dimensional space: vectors small enough to reason about by hand."""


class CheckFailed(AssertionError):
    """A store answered differently from the protocol."""


def expect(condition: object, message: str) -> None:
    """Fail the check with ``message`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(message)


async def raises(error: type[BaseException], call: Awaitable[Any], what: str) -> BaseException:
    """Await ``call`` and return the ``error`` it raised; fail if it raised nothing else."""
    try:
        await call
    except error as caught:
        return caught
    except Exception as other:  # a different error is a failure of the check
        raise CheckFailed(
            f"{what}: expected {error.__name__}, got {type(other).__name__}: {other}"
        ) from other
    raise CheckFailed(f"{what}: expected {error.__name__}, nothing was raised")


sha256 = content_sha256


def unit_blob(values: Sequence[float]) -> bytes:
    """The stored bytes of ``values`` scaled to unit length."""
    norm = math.sqrt(sum(v * v for v in values))
    return encode_f32([v / norm for v in values])


def unit(values: Sequence[float]) -> tuple[float, ...]:
    norm = math.sqrt(sum(v * v for v in values))
    return tuple(v / norm for v in values)


def record(
    number: int,
    text: str,
    scope: Scope = ("acme", "user", "sam"),
    *,
    at: datetime = NOW,
    **fields: Any,
) -> MemoryRecord:
    """An item with the sortable id ``r<number>`` and the hash of ``text``, created ``at``."""
    return MemoryRecord(
        id=f"r{number:06d}",
        scope=scope,
        text=text,
        content_sha256=sha256(text),
        created_at=at,
        updated_at=at,
        **fields,
    )


def later(**delta: float) -> datetime:
    """``NOW`` plus ``delta`` (``later(seconds=5)``)."""
    return NOW + timedelta(**delta)


@dataclass
class StoreUnderTest:
    """A store seen through an awaitable ``batch``, in one of its two faces.

    ``face="sync"`` calls ``store.batch(ops)``, ``"async"`` awaits ``store.abatch(ops)``.
    ``another``, when given, opens a second store object on the same storage (a second
    connection or process's view); the checks that need it are skipped without it.
    ``read_only``, when given, opens a read-only store object on the same storage (its
    ``capabilities.read_only`` True); the checks that need it are skipped without it.
    """

    store: Any
    face: Face = "sync"
    another: Callable[[], Any] | None = None
    read_only: Callable[[], Any] | None = None

    @property
    def capabilities(self) -> StoreCapabilities:
        capabilities = getattr(self.store, "capabilities", None)
        return capabilities if isinstance(capabilities, StoreCapabilities) else StoreCapabilities()

    async def batch(self, ops: Sequence[Op]) -> list[Any]:
        if self.face == "async":
            return list(await self.store.abatch(list(ops)))
        return list(self.store.batch(list(ops)))

    async def one(self, op: Op) -> Any:
        """The result of a batch of one op."""
        (result,) = await self.batch([op])
        return result

    def second(self) -> StoreUnderTest | None:
        """Another store object on the same storage, in the same face, or None."""
        if self.another is None:
            return None
        return StoreUnderTest(self.another(), self.face)

    def reader(self) -> StoreUnderTest | None:
        """A read-only store object on the same storage, in the same face, or None."""
        if self.read_only is None:
            return None
        return StoreUnderTest(self.read_only(), self.face)

    async def close(self) -> None:
        if self.face == "async" and hasattr(self.store, "aclose"):
            await self.store.aclose()
        else:
            self.store.close()
