"""What the store-level checks share: the check record, its registration, small helpers.

Each check is an ``async`` function of a fresh, empty :class:`StoreUnderTest` whose
docstring states the behaviour it pins down; ``_write_checks``, ``_read_checks``,
``_search_checks`` and the other ``_*_checks`` modules hold them. A check that needs a
capability the store does not declare is skipped (``StoreCheck.applies``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from engramdb._base.types import MemoryRecord, Scope
from engramdb.store import (
    GetItems,
    PutItem,
    PutVector,
    RegisterSpace,
    SearchResult,
    Stats,
    StoreStats,
)
from engramdb.testing._harness import (
    NOW,
    SPACE,
    StoreUnderTest,
    expect,
    sha256,
    unit_blob,
)

__all__ = [
    "KIM",
    "SAM",
    "StoreCheck",
    "check",
    "ids_of",
    "record_of",
    "stats_of",
    "store_items",
    "vector_of",
]

SAM: Scope = ("acme", "user", "sam")
KIM: Scope = ("acme", "user", "kim")

CheckFunction = Callable[[StoreUnderTest], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class StoreCheck:
    """One conformance check: ``await check.run(store_under_test)``."""

    name: str
    doc: str
    needs: tuple[str, ...]
    function: CheckFunction

    def applies(self, target: StoreUnderTest) -> str | None:
        """None if the check applies to ``target``, else why it is skipped."""
        for flag in self.needs:
            if flag == "another" and target.another is None:
                return "needs a second store object on the same storage"
            if flag == "read_only" and target.read_only is None:
                return "needs a read-only store object on the same storage"
            if flag not in ("another", "read_only") and not getattr(target.capabilities, flag):
                return f"the store does not declare {flag}"
        return None

    async def run(self, target: StoreUnderTest) -> None:
        await self.function(target)

    def __str__(self) -> str:
        return self.name


def check(into: list[StoreCheck], *needs: str) -> Callable[[CheckFunction], CheckFunction]:
    """Add the decorated check to ``into``; ``needs`` are capability flags (or
    ``"another"``: a second store object on the same storage; ``"read_only"``: a
    read-only one)."""

    def register(function: CheckFunction) -> CheckFunction:
        name = function.__name__.removeprefix("check_")
        doc = " ".join((function.__doc__ or "").split())
        into.append(StoreCheck(name, doc, needs, function))
        return function

    return register


async def store_items(t: StoreUnderTest, *records: MemoryRecord, vectors: bool = True) -> None:
    """Store ``records`` (and a vector for each text, unless ``vectors=False``)."""
    ops: list[Any] = [RegisterSpace(SPACE, NOW)]
    if vectors:
        for r in records:
            ops.append(PutVector(SPACE.id, r.content_sha256, vector_of(r.text), NOW))
    ops += [PutItem(r, NOW) for r in records]
    await t.batch(ops)


def vector_of(text: str) -> bytes:
    """A deterministic unit vector per text (the text's hash bytes, centred)."""
    digest = bytes.fromhex(sha256(text))
    return unit_blob([b - 127.5 for b in digest[:4]])


async def record_of(t: StoreUnderTest, item_id: str, now: Any = NOW) -> MemoryRecord | None:
    (found,) = await t.one(GetItems((item_id,), now))
    return found.record if found is not None else None


async def stats_of(t: StoreUnderTest, now: Any = NOW) -> StoreStats:
    stats = await t.one(Stats(SPACE.id, now))
    expect(isinstance(stats, StoreStats), f"Stats answered {stats!r}")
    return stats  # type: ignore[no-any-return]


def ids_of(result: SearchResult) -> list[str]:
    return [hit.record.id for hit in result.hits]
