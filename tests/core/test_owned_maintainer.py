"""A memory that owns its ``Maintainer`` (``maintain=``): started with the memory (an
``AsyncMemory`` on first use, in an asyncio task; a ``Memory`` on construction, with its
runner), stopped before the store closes after the pass in progress has finished, its
snapshot in ``status()``. The threaded runner is tested with SQLite in tests/sqlite."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from engramdb import (
    AsyncMemory,
    ConfigurationError,
    HashEmbedder,
    InMemoryStore,
    Maintainer,
    Maintenance,
    Memory,
    ValidationError,
)

SAM = ("acme", "user", "sam")
FAST = Maintenance(interval=timedelta(milliseconds=20))


class Gate(HashEmbedder):
    """An embedder whose ``aembed`` waits until ``release`` is set (a pass in progress)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def aembed(self, texts: list[str], kind: str = "document") -> list[list[float]]:
        self.entered.set()
        await self.release.wait()
        return self.embed(texts, kind)


class ClosingStore(InMemoryStore):
    """Records, at ``close()``, what the maintainer's snapshot said then."""

    def __init__(self) -> None:
        super().__init__()
        self.memory: Any = None
        self.closed_with: Any = None

    def close(self) -> None:
        self.closed_with = self.memory.maintainer.snapshot
        super().close()


async def until(condition: Any, seconds: float = 5.0) -> None:
    async with asyncio.timeout(seconds):
        while not await condition():
            await asyncio.sleep(0.005)


async def test_pending_texts_get_embedded_without_a_maintain_call() -> None:
    """Texts stored with deferred embedding are embedded by the memory's own maintainer;
    ``status().maintenance`` is its snapshot, and a bound view's is the same without the
    store-wide counts of the last pass."""
    memory = AsyncMemory(InMemoryStore(), HashEmbedder(), defer_embedding=True, maintain=FAST)
    await memory.remember_many({"text": f"release note {n}", "scope": SAM} for n in range(3))

    async def embedded() -> bool:
        status = await memory.status()
        return status.pending == 0 and status.maintenance.successes >= 1  # type: ignore[union-attr]

    await until(embedded)
    status = await memory.status()
    assert status.maintenance is not None and status.maintenance.successes >= 1
    assert memory.maintainer is not None and status.maintenance.runs >= 1
    hits = await memory.recall("release note", scopes=[SAM], mode="vector")
    assert len(hits) == 3
    bound = await memory.bind(SAM).status()
    assert bound.maintenance is not None and bound.maintenance.last_report is None
    assert bound.maintenance.successes >= 1
    await memory.aclose()


async def test_it_starts_on_first_use_or_async_with_and_not_before() -> None:
    """Building an ``AsyncMemory`` starts nothing (there may be no loop yet); its first
    call (or a bound view's) or ``async with`` does."""
    memory = AsyncMemory(InMemoryStore(), HashEmbedder(), maintain=FAST)
    await asyncio.sleep(0.05)
    assert memory.maintainer is not None and memory.maintainer.snapshot.runs == 0
    await memory.bind(SAM).list()

    async def ran() -> bool:
        return memory.maintainer is not None and memory.maintainer.snapshot.runs >= 1

    await until(ran)
    await memory.aclose()
    async with AsyncMemory(InMemoryStore(), HashEmbedder(), maintain=FAST) as other:
        await until(lambda: _ran(other))


async def _ran(memory: AsyncMemory) -> bool:
    return memory.maintainer is not None and memory.maintainer.snapshot.runs >= 1


async def test_close_lets_the_running_pass_finish_then_closes_the_store() -> None:
    """``aclose()`` during a pass waits for it (it completes: one more success), then
    closes the store; no pass runs after, however long one waits."""
    store, embedder = ClosingStore(), Gate()
    memory = AsyncMemory(store, embedder, defer_embedding=True, maintain=FAST)
    store.memory = memory
    await memory.remember("a note written while the model was busy", SAM)  # starts it
    await asyncio.wait_for(embedder.entered.wait(), 5)
    assert memory.maintainer is not None and memory.maintainer.snapshot.state == "running"
    closing = asyncio.ensure_future(memory.aclose())
    await asyncio.sleep(0.05)
    assert not closing.done() and store.closed_with is None  # draining the pass
    embedder.release.set()
    await asyncio.wait_for(closing, 5)
    snapshot = store.closed_with
    assert snapshot.state == "idle" and snapshot.successes == 1
    assert snapshot.last_report.embedded == 1
    await asyncio.sleep(0.1)  # five intervals
    assert memory.maintainer.snapshot == snapshot  # no pass after close


async def test_close_does_not_wait_for_the_interval() -> None:
    """Between passes the maintainer waits out ``interval`` (an hour here); ``aclose()``
    ends that wait at once."""
    memory = AsyncMemory(
        InMemoryStore(), HashEmbedder(), maintain=Maintenance(interval=timedelta(hours=1))
    )
    await memory.status()
    await until(lambda: _ran(memory))
    await asyncio.wait_for(memory.aclose(), 2)
    assert memory.maintainer is not None and memory.maintainer.snapshot.runs == 1


async def test_a_runner_of_the_host_starts_and_stops_it() -> None:
    """``Maintenance(runner=...)`` replaces the asyncio task: the runner gets the
    maintainer on first use, and what it returns is awaited by ``aclose()`` before the
    store closes."""
    events: list[str] = []

    def runner(maintainer: Maintainer) -> Any:
        events.append("start")

        async def stop() -> None:
            events.append("stop")

        return stop

    store = ClosingStore()
    memory = AsyncMemory(store, HashEmbedder(), maintain=Maintenance(runner=runner))
    store.memory = memory
    assert events == []
    await memory.status()
    await memory.status()
    assert events == ["start"]
    await memory.aclose()
    assert events == ["start", "stop"] and store.closed_with is not None
    await memory.aclose()  # closing twice stops nothing twice
    assert events == ["start", "stop"]


def test_a_sync_memory_starts_its_runner_on_construction_and_stops_it_on_close() -> None:
    """The core starts no thread: a ``Memory`` runs its maintainer with the runner it is
    given, started when the memory is built and stopped by ``close()`` before the store
    closes; without a runner ``maintain=True`` is a configuration error that names one."""
    events: list[str] = []
    store = ClosingStore()

    def runner(maintainer: Maintainer) -> Any:
        events.append("start")
        maintainer.run_once()
        return lambda: events.append("stop")

    with Memory(store, HashEmbedder(), maintain=Maintenance(runner=runner)) as memory:
        store.memory = memory
        assert events == ["start"]
        status = memory.status()
        assert status.maintenance is not None and status.maintenance.successes == 1
    assert events == ["start", "stop"] and store.closed_with is not None
    with pytest.raises(ConfigurationError, match=r"engramdb\.background import in_thread"):
        Memory(InMemoryStore(), HashEmbedder(), maintain=True)


def test_maintenance_is_off_unless_asked() -> None:
    """The library's default is no maintainer (``status().maintenance`` is None); a
    ``maintain=`` that is neither a bool nor ``Maintenance`` is refused, and so are bad
    settings (checked when the memory is built)."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    assert memory.maintainer is None and memory.status().maintenance is None
    assert memory.bind(SAM).status().maintenance is None
    with pytest.raises(ValidationError, match="maintain='yes'"):
        Memory(InMemoryStore(), HashEmbedder(), maintain="yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="interval"):
        AsyncMemory(InMemoryStore(), HashEmbedder(), maintain=Maintenance(interval=timedelta()))


def test_the_snapshot_as_json_holds_no_content() -> None:
    """``to_json()`` has plain values only: times as RFC 3339 text, the last pass's
    counts, the error's class; ``scoped()`` drops the store-wide counts."""
    memory = Memory(InMemoryStore(), HashEmbedder(), defer_embedding=True)
    memory.remember("the vault code is 4411", SAM)
    maintainer = Maintainer(memory)
    maintainer.run_once()
    shown = maintainer.snapshot.to_json()
    assert shown["last_report"] == {
        "embedded": 1,
        "repaired": 0,
        "purged": 0,
        "pending": 0,
        "pruned": 0,
    }
    assert shown["state"] == "idle" and shown["last_success_at"].endswith("Z")
    assert "4411" not in repr(shown)
    assert maintainer.snapshot.scoped().to_json()["last_report"] is None
