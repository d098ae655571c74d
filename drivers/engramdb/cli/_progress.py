"""Progress on standard error: a rich bar on a terminal when ``rich`` is installed
(``engramdb[cli]``), else plain lines such as ``import: 2560/20000 (12%)``, at most one a
second (and the first and the last)."""

from __future__ import annotations

import importlib
import sys
import time
from types import TracebackType
from typing import Any, TextIO

from ._render import unescaped

__all__ = ["Progress"]


class Progress:
    """``with Progress("import", total) as progress: progress(done, total)``."""

    def __init__(
        self, label: str, total: int | None = None, *, stream: TextIO | None = None
    ) -> None:
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else unescaped(sys.stderr)
        self._last = 0.0
        self._shown: tuple[int, int | None] | None = None
        self._rich: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.stream.isatty():
            try:  # the optional extra engramdb[cli]
                progress = importlib.import_module("rich.progress")
                console = importlib.import_module("rich.console")
            except ImportError:
                return self
            self._rich = progress.Progress(console=console.Console(file=self.stream))
            self._rich.start()
            self._task = self._rich.add_task(self.label, total=self.total)
        return self

    def __call__(self, done: int, total: int | None = None) -> None:
        total = self.total if total is None else total
        if self._rich is not None:
            self._rich.update(self._task, completed=done, total=total)
            return
        now = time.monotonic()
        if self._shown is not None and now - self._last < 1.0 and done != total:
            return
        self._line(done, total)
        self._last = now

    def _line(self, done: int, total: int | None) -> None:
        if (done, total) == self._shown:
            return
        self._shown = (done, total)
        share = f" ({100 * done // total}%)" if total else ""
        print(
            f"{self.label}: {done}/{total if total is not None else '?'}{share}", file=self.stream
        )
        self.stream.flush()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._rich is not None:
            self._rich.stop()
