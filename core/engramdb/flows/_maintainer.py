"""``Maintainer``: ``maintain()`` passes on an interval, never overlapping, backing off
after failures, with a snapshot that holds no content.

The host drives it, so the same object serves every runtime:

- async CPython: ``asyncio.create_task(maintainer.arun_forever())``;
- sync code: ``maintainer.run_forever(stop=...)`` in a loop of your own (a thread or a
  process), or ``maintainer.run_once()`` from a scheduler;
- Cloudflare Workers: ``await maintainer.arun_once()`` from a cron trigger (or in
  ``ctx.waitUntil``).

A ``Memory`` or ``AsyncMemory`` can also own one: ``Memory(..., maintain=True)`` (or
``maintain=Maintenance(...)``) starts it with the memory (``AsyncMemory``: an asyncio task
on first use; ``Memory``: the ``runner`` given, e.g. ``engramdb.background.in_thread``,
since the core starts no thread) and stops it, after its running pass, before the store
closes. Its snapshot is in ``status().maintenance``.

A pass is the ``maintain`` flow; the waits between passes are ``Sleep`` effects, which
the drivers perform with ``time.sleep``/``asyncio.sleep`` or with the ``sleep`` given.
After a success the next pass is due after ``interval``, or at once while work is left
(``MaintenanceReport.work_left``: pending texts, an unfinished repair scan, a scope
being packed). After a failure it is due after ``backoff``,
doubling with each consecutive failure up to ``max_backoff``. The snapshot reports
counts, times, the error's class and the last pass's counts; never a text, a vector, a
prompt, an error message or a credential.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from engramdb._base.errors import ValidationError, shown
from engramdb.flows._effects import Flow, Sleep, Sleeper, adrive, drive
from engramdb.flows._maintenance import MaintenanceReport
from engramdb.json_format import format_time
from engramdb.validate import check_int

__all__ = ["Maintainer", "Maintenance", "MaintenanceRunner", "MaintenanceSnapshot", "in_task"]

State = Literal["idle", "running", "backing_off"]


@dataclass(frozen=True, slots=True)
class MaintenanceSnapshot:
    """The maintainer's state, content-free: safe to log or to expose on a health page."""

    state: State = "idle"
    runs: int = 0
    successes: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    skipped: int = 0  # passes refused because one was running
    last_started_at: datetime | None = None
    last_finished_at: datetime | None = None
    last_success_at: datetime | None = None
    next_at: datetime | None = None  # None: due now
    last_error: str | None = None  # the error's class name only
    last_report: MaintenanceReport | None = None

    def to_json(self) -> dict[str, Any]:
        """The snapshot as plain JSON values (times as RFC 3339 strings)."""
        report = self.last_report
        return {
            "state": self.state,
            "runs": self.runs,
            "successes": self.successes,
            "failures": self.failures,
            "consecutive_failures": self.consecutive_failures,
            "skipped": self.skipped,
            "last_started_at": format_time(self.last_started_at),
            "last_finished_at": format_time(self.last_finished_at),
            "last_success_at": format_time(self.last_success_at),
            "next_at": format_time(self.next_at),
            "last_error": self.last_error,
            "last_report": None
            if report is None
            else {
                "embedded": report.embedded,
                "repaired": report.repaired,
                "purged": report.purged,
                "pending": report.pending,
                "pruned": report.pruned,
            },
        }

    def scoped(self) -> MaintenanceSnapshot:
        """The snapshot for a bound view: without ``last_report``, whose counts are the
        whole store's (a scope's reader must not count another scope's texts)."""
        return replace(self, last_report=None)


def _duration(name: str, value: object) -> timedelta:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise ValidationError(f"{name}={shown(value)} must be a positive timedelta")
    return value


class Maintainer:
    """Runs ``memory.maintain(max_items)`` passes for a ``Memory`` or ``AsyncMemory``.

    ``interval`` (5 minutes) between passes that left nothing to do; ``backoff`` (30 s)
    after a failure, doubling per consecutive failure up to ``max_backoff`` (1 hour).
    ``prune_spaces`` (False): passes drop other spaces' vectors once nothing is pending.
    ``sleep`` replaces the drivers' real sleep (a test's clock, a host's scheduler).
    """

    def __init__(
        self,
        memory: Any,
        *,
        interval: timedelta = timedelta(minutes=5),
        max_items: int = 1000,
        backoff: timedelta = timedelta(seconds=30),
        max_backoff: timedelta = timedelta(hours=1),
        prune_spaces: bool = False,
        sleep: Sleeper | None = None,
    ) -> None:
        self.memory = memory
        self.interval = _duration("interval", interval)
        self.max_items = check_int("max_items", max_items, 1, 1_000_000)
        self.backoff = _duration("backoff", backoff)
        self.max_backoff = _duration("max_backoff", max_backoff)
        if self.max_backoff < self.backoff:
            raise ValidationError("max_backoff must be at least backoff")
        if not isinstance(prune_spaces, bool):
            raise ValidationError(f"prune_spaces={shown(prune_spaces)} must be True or False")
        self.prune_spaces = prune_spaces
        self._sleep = sleep
        self._snapshot = MaintenanceSnapshot()
        self._running = False
        self._repair_after = ""

    def __repr__(self) -> str:
        return f"Maintainer({self.memory!r}, state={self._snapshot.state!r})"

    @property
    def snapshot(self) -> MaintenanceSnapshot:
        return self._snapshot

    def _now(self) -> datetime:
        return self.memory.flows.context.now()  # type: ignore[no-any-return]

    def _update(self, **changes: Any) -> None:
        self._snapshot = replace(self._snapshot, **changes)

    # -- flows ------------------------------------------------------------------------

    def pass_flow(self) -> Flow[MaintenanceReport | None]:
        """One pass (None: refused because a pass is running, or it failed)."""
        if self._running:
            self._update(skipped=self._snapshot.skipped + 1)
            return None
        self._running = True
        started = self._now()
        self._update(state="running", runs=self._snapshot.runs + 1, last_started_at=started)
        try:
            report: MaintenanceReport = yield from self.memory.flows.maintain(
                self.max_items, self._repair_after, self.prune_spaces
            )
        except Exception as exc:
            failures = self._snapshot.consecutive_failures + 1
            wait = min(self.max_backoff, self.backoff * 2 ** (failures - 1))
            now = self._now()
            self._update(
                state="backing_off",
                failures=self._snapshot.failures + 1,
                consecutive_failures=failures,
                last_finished_at=now,
                next_at=now + wait,
                last_error=type(exc).__name__,
            )
            return None
        finally:
            self._running = False
        self._repair_after = report.repair_after
        now = self._now()
        self._update(
            state="idle",
            successes=self._snapshot.successes + 1,
            consecutive_failures=0,
            last_finished_at=now,
            last_success_at=now,
            next_at=None if report.work_left else now + self.interval,
            last_report=report,
        )
        return report

    def loop_flow(self, stop: Callable[[], bool]) -> Flow[None]:
        """Passes when due, sleeping in between, until ``stop()`` is true."""
        while not stop():
            due = self._snapshot.next_at
            wait = 0.0 if due is None else (due - self._now()).total_seconds()
            if wait > 0:
                yield Sleep(wait)
                continue
            yield from self.pass_flow()

    # -- drivers ----------------------------------------------------------------------

    def run_once(self) -> MaintenanceReport | None:
        """One pass now, with a ``Memory``."""
        return drive(self.pass_flow(), self.memory.embedder, self.memory.store, self._sleep)

    async def arun_once(self) -> MaintenanceReport | None:
        """One pass now, with an ``AsyncMemory``."""
        flow = self.pass_flow()
        return await adrive(flow, self.memory.embedder, self.memory.store, self._sleep)

    def run_forever(
        self, stop: Callable[[], bool] = lambda: False, *, sleep: Sleeper | None = None
    ) -> None:
        """Passes on schedule until ``stop()`` is true, with a ``Memory``. ``sleep``
        (default: the maintainer's) performs the waits: a runner passes one that
        returns early when it is told to stop."""
        embedder, store = self.memory.embedder, self.memory.store
        drive(self.loop_flow(stop), embedder, store, sleep or self._sleep)

    async def arun_forever(
        self, stop: Callable[[], bool] = lambda: False, *, sleep: Sleeper | None = None
    ) -> None:
        """Passes on schedule until ``stop()`` is true (or the task is cancelled), with an
        ``AsyncMemory``; ``sleep`` as for :meth:`run_forever`."""
        flow = self.loop_flow(stop)
        await adrive(flow, self.memory.embedder, self.memory.store, sleep or self._sleep)


Stop = Callable[[], Any]
"""What a runner returns: called (and awaited, if it returns an awaitable) to stop the
maintainer; it returns once the pass in progress, if any, has finished."""

MaintenanceRunner = Callable[[Maintainer], Stop]
"""Starts a memory's own maintainer in the background and returns how to stop it:
:func:`in_task` (asyncio), ``engramdb.background.in_thread`` (a thread), or a host's."""


def in_task(maintainer: Maintainer) -> Callable[[], Awaitable[None]]:
    """Run ``maintainer.arun_forever()`` as a task of the running asyncio loop; the
    stop function wakes its wait, lets the pass in progress finish, and awaits the task.
    ``AsyncMemory``'s default runner."""
    import asyncio  # here, not at import: asyncio loads threading

    wake = asyncio.Event()
    stopping = False

    async def sleep(seconds: float) -> None:
        with contextlib.suppress(TimeoutError):  # the wait is over: due again
            await asyncio.wait_for(wake.wait(), seconds)

    task = asyncio.get_running_loop().create_task(
        maintainer.arun_forever(lambda: stopping, sleep=sleep), name="engramdb-maintainer"
    )

    async def stop() -> None:
        nonlocal stopping
        stopping = True
        wake.set()
        if task.get_loop() is asyncio.get_running_loop():
            await task
        else:  # the loop it ran in is gone (or another one): nothing runs there now
            task.cancel()

    return stop


@dataclass(frozen=True, slots=True)
class Maintenance:
    """How a memory's own maintainer runs: ``Memory(..., maintain=Maintenance(...))``.

    The fields are :class:`Maintainer`'s (``interval``, ``max_items``, ``backoff``,
    ``max_backoff``, ``prune_spaces``) and ``runner``, which starts it in the background
    (:data:`MaintenanceRunner`). ``runner=None``: an ``AsyncMemory`` runs it in an asyncio
    task (:func:`in_task`); a ``Memory`` needs one, e.g. ``engramdb.background.in_thread``
    (the core starts no thread).
    """

    interval: timedelta = timedelta(minutes=5)
    max_items: int = 1000
    backoff: timedelta = timedelta(seconds=30)
    max_backoff: timedelta = timedelta(hours=1)
    prune_spaces: bool = False
    runner: MaintenanceRunner | None = None

    @classmethod
    def of(cls, maintain: object) -> Maintenance | None:
        """``maintain=`` as settings: False -> None, True -> the defaults."""
        if maintain is False or maintain is None:
            return None
        if maintain is True:
            return cls()
        if isinstance(maintain, cls):
            return maintain
        raise ValidationError(f"maintain={shown(maintain)} must be True, False or Maintenance(...)")

    def maintainer(self, memory: Any) -> Maintainer:
        """A :class:`Maintainer` of ``memory`` with these settings (checked here)."""
        if self.runner is not None and not callable(self.runner):
            raise ValidationError(f"runner={shown(self.runner)} must be callable")
        return Maintainer(
            memory,
            interval=self.interval,
            max_items=self.max_items,
            backoff=self.backoff,
            max_backoff=self.max_backoff,
            prune_spaces=self.prune_spaces,
        )
