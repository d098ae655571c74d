"""Maintainer: passes on schedule, never overlapping, exponential back-off after
failures, and a snapshot without content, with an injected clock and sleep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engramdb import (
    AsyncMemory,
    HashEmbedder,
    InMemoryStore,
    Maintainer,
    MaintenanceReport,
    Memory,
    ProviderError,
    ValidationError,
)

SAM = ("acme", "user", "sam")
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Outage(HashEmbedder):
    """Fails while ``down`` (with a message that must not reach the snapshot)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True
        self.calls = 0
        self.during: Any = None  # called inside embed, to try an overlapping pass

    def embed(self, texts: list[str], kind: str = "document") -> list[list[float]]:
        self.calls += 1
        if self.during is not None:
            self.during()
        if self.down:
            raise ProviderError("503 for key sk-secret-in-message", provider="outage")
        return super().embed(texts, kind)


def _memory(embedder: Outage, clock: Clock, n: int = 5) -> Memory:
    memory = Memory(InMemoryStore(), embedder, clock=clock, defer_embedding=True)
    memory.remember_many({"text": f"pending note {i}", "scope": SAM} for i in range(n))
    return memory


def test_back_off_doubles_then_recovers() -> None:
    """Failures at 12:00, 12:00:30, 12:01:30, 12:03:30 (30 s, 60 s, 120 s apart); then the
    provider is back: one success empties the queue and the next pass is due after the
    interval. The snapshot follows each step and never holds the error's message."""
    clock, embedder = Clock(), Outage()
    maintainer = Maintainer(_memory(embedder, clock), interval=timedelta(minutes=5), max_items=10)
    assert maintainer.snapshot.state == "idle" and maintainer.snapshot.next_at is None
    failures_at = []
    for expected_wait in (30, 60, 120):
        assert maintainer.run_once() is None
        snap = maintainer.snapshot
        failures_at.append(snap.last_finished_at)
        assert snap.state == "backing_off" and snap.last_error == "ProviderError"
        assert snap.next_at == clock.now + timedelta(seconds=expected_wait)
        clock.now = snap.next_at
    assert failures_at == [T0, T0 + timedelta(seconds=30), T0 + timedelta(seconds=90)]
    assert maintainer.snapshot.consecutive_failures == 3
    embedder.down = False
    report = maintainer.run_once()
    assert report is not None and (report.embedded, report.pending) == (5, 0)
    snap = maintainer.snapshot
    assert (snap.runs, snap.successes, snap.failures, snap.consecutive_failures) == (4, 1, 3, 0)
    assert snap.state == "idle" and snap.next_at == clock.now + timedelta(minutes=5)
    assert snap.last_report == report and snap.last_success_at == clock.now
    assert "sk-secret" not in repr(snap) and "pending note" not in repr(snap)


def test_back_off_is_capped() -> None:
    clock, embedder = Clock(), Outage()
    maintainer = Maintainer(
        _memory(embedder, clock),
        backoff=timedelta(seconds=30),
        max_backoff=timedelta(minutes=2),
    )
    waits = []
    for _ in range(6):
        maintainer.run_once()
        waits.append((maintainer.snapshot.next_at - clock.now).total_seconds())
        clock.now = maintainer.snapshot.next_at
    assert waits == [30, 60, 120, 120, 120, 120]


def test_passes_never_overlap() -> None:
    """A pass started while one runs is refused (None) and counted as skipped."""
    clock, embedder = Clock(), Outage()
    embedder.down = False
    maintainer = Maintainer(_memory(embedder, clock))
    inner: list[Any] = []
    embedder.during = lambda: inner.append(maintainer.run_once())
    report = maintainer.run_once()
    assert report is not None and report.embedded == 5
    assert inner == [None] and maintainer.snapshot.skipped == 1
    assert maintainer.snapshot.runs == 1


def test_run_forever_drains_then_waits_for_the_interval() -> None:
    """With work left a pass follows at once; then the loop sleeps until the interval is
    up (the injected sleep moves the clock), and stops when told. A pass that spends its
    whole budget embedding leaves the repair scan for the passes after the backlog."""
    clock, embedder = Clock(), Outage()
    embedder.down = False
    memory = _memory(embedder, clock, n=25)
    maintainer = Maintainer(memory, interval=timedelta(minutes=10), max_items=10, sleep=clock.sleep)
    reports: list[tuple[datetime, Any]] = []

    def stop() -> bool:
        snap = maintainer.snapshot
        if snap.last_report is not None and len(reports) < snap.runs:
            reports.append((snap.last_started_at, snap.last_report))
        return bool(reports) and reports[-1][0] > T0

    maintainer.run_forever(stop=stop)
    assert memory.status().pending == 0
    at_once = [report for started, report in reports if started == T0]
    # 25 texts, 10 per pass: two full passes (no scan), then 5 texts and the scan's first
    # page, then the scan's pages until it reaches the end ("") ...
    assert [r.embedded for r in at_once] == [10, 10, 5] + [0] * (len(at_once) - 3)
    assert [r.repair_after for r in at_once[:2]] == ["", ""]
    assert at_once[2].repair_after != "" and at_once[-1].repair_after == ""
    assert all(r.repair_after != "" for r in at_once[2:-1])
    # ... and the next pass came 10 minutes later.
    assert reports[-1][0] == T0 + timedelta(minutes=10) and len(reports) == len(at_once) + 1


@pytest.mark.parametrize(
    ("counts", "left"),
    [
        ({}, False),
        ({"pending": 3}, True),
        ({"repair_after": "01K"}, True),
        ({"packed": 325}, True),  # a large scope packs a few segments per pass
        ({"embedded": 10, "purged": 2, "pruned": 4}, False),
    ],
)
def test_a_pass_leaves_work_while_texts_wait_a_scan_goes_on_or_it_packed(
    counts: dict[str, Any], left: bool
) -> None:
    report = {"embedded": 0, "repaired": 0, "purged": 0, "pending": 0, "repair_after": ""}
    assert MaintenanceReport(**{**report, **counts}).work_left is left


async def test_the_async_face_runs_the_same_schedule() -> None:
    clock, embedder = Clock(), Outage()
    memory = AsyncMemory(InMemoryStore(), embedder, clock=clock, defer_embedding=True)
    await memory.remember("pending note", SAM)
    maintainer = Maintainer(memory, sleep=clock.sleep)
    assert await maintainer.arun_once() is None
    assert maintainer.snapshot.next_at == T0 + timedelta(seconds=30)
    embedder.down = False
    await maintainer.arun_forever(stop=lambda: maintainer.snapshot.successes >= 1)
    assert maintainer.snapshot.last_started_at == T0 + timedelta(seconds=30)
    assert (await memory.status()).pending == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"interval": 300}, "interval=300"),
        ({"backoff": timedelta(0)}, "backoff"),
        ({"max_items": 0}, "max_items"),
        ({"backoff": timedelta(hours=2)}, "max_backoff must be at least backoff"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Maintainer(Memory(InMemoryStore(), HashEmbedder()), **options)


class Batches(HashEmbedder):
    """Records the size of each embedding call; fails the call numbered ``fail_at``."""

    def __init__(self, max_batch: int, fail_at: int = 0) -> None:
        super().__init__()
        self._max_batch, self.fail_at, self.sizes = max_batch, fail_at, []

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def embed(self, texts: list[str], kind: str = "document") -> list[list[float]]:
        self.sizes.append(len(texts))
        if len(self.sizes) == self.fail_at:
            raise ProviderError("down", provider="batches")
        return super().embed(texts, kind)


class Reads(InMemoryStore):
    """Counts the PendingTexts reads."""

    pending_reads = 0

    def batch(self, ops: Any) -> list[Any]:
        self.pending_reads += sum(type(op).__name__ == "PendingTexts" for op in ops)
        return super().batch(ops)


def test_a_pass_reads_its_pending_texts_once_and_commits_each_batch() -> None:
    """maintain(max_items=n) reads up to n pending texts in one store read (once the
    embedder knows its space), embeds them max_batch at a time and commits each batch:
    a provider failure keeps the batches before it."""
    embedder = Batches(max_batch=2)
    store = Reads()
    memory = Memory(store, embedder, clock=Clock(), defer_embedding=True)
    memory.remember("a first note, embedded", SAM, defer_embedding=False)
    memory.remember_many({"text": f"pending note {i}", "scope": SAM} for i in range(5))
    store.pending_reads, embedder.sizes = 0, []
    report = memory.maintain(max_items=5)
    assert (report.embedded, report.pending, embedder.sizes) == (5, 0, [2, 2, 1])
    assert store.pending_reads == 1  # all five at once; the budget is spent
    memory.remember_many({"text": f"later note {i}", "scope": SAM} for i in range(5))
    embedder.sizes, embedder.fail_at = [], 2
    with pytest.raises(ProviderError):
        memory.maintain(max_items=5)
    assert embedder.sizes == [2, 2] and memory.status().pending == 3
