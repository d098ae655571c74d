"""A sync ``Memory`` over a SQLite file that owns its maintainer in a thread
(``Maintenance(runner=engramdb.background.in_thread)``): passes run without a
``maintain()`` call, and ``close()`` stops the thread after the pass in progress, before
the file closes, without waiting out the interval."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from engramdb import ConfigurationError, HashEmbedder, InMemoryStore, Maintenance, Memory
from engramdb.background import in_thread
from engramdb.sqlite import SqliteStore

SAM = ("acme", "user", "sam")


class Gate(HashEmbedder):
    """Blocks each ``embed`` until ``release`` is set; ``entered`` says one began."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: list[str], kind: str = "document") -> list[list[float]]:
        self.entered.set()
        assert self.release.wait(10)
        return super().embed(texts, kind)


def maintainer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "engramdb-maintainer"]


def wait_for(condition: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_pending_texts_in_the_file_get_embedded_by_the_thread(tmp_path: Path) -> None:
    """Memories stored pending in the file (by another process, say) are embedded by the
    maintainer thread that starts when the memory is opened; its snapshot is in
    ``status()``; after ``close()`` the thread is gone."""
    db = tmp_path / "memory.db"
    with Memory(SqliteStore(db), HashEmbedder(), defer_embedding=True) as writer:
        writer.remember_many({"text": f"note {n}", "scope": SAM} for n in range(20))
        assert writer.status().pending == 20
    memory = Memory(
        SqliteStore(db),
        HashEmbedder(),
        maintain=Maintenance(runner=in_thread, max_items=8, interval=timedelta(hours=1)),
    )
    try:
        # Three passes embed (8, 8 and 4 texts; the first two use the whole budget, so
        # the repair scan waits), the third and two more scan the 20 vectors (8, 8, 4),
        # then an hour's wait.
        def done() -> bool:
            report = memory.status().maintenance.last_report  # type: ignore[union-attr]
            return report is not None and report.pending == 0 and report.repair_after == ""

        wait_for(done)
        assert memory.status().maintenance.successes == 5  # type: ignore[union-attr]
        assert memory.status().pending == 0
        assert len(memory.recall("note 7", scopes=[SAM], mode="vector")) > 0
        assert len(maintainer_threads()) == 1
    finally:
        started = time.monotonic()
        memory.close()
    assert time.monotonic() - started < 2  # the hour-long wait ends at once
    assert maintainer_threads() == []


def test_close_drains_the_pass_in_progress(tmp_path: Path) -> None:
    """``close()`` while a pass embeds: it returns only once that pass has finished and
    committed (the text has its vector in the file), and no pass runs after it."""
    db = tmp_path / "memory.db"
    with Memory(SqliteStore(db), HashEmbedder(), defer_embedding=True) as writer:
        writer.remember("the deploy window is Friday", SAM)
    embedder = Gate()
    fast = Maintenance(runner=in_thread, interval=timedelta(milliseconds=10))
    memory = Memory(SqliteStore(db), embedder, maintain=fast)
    closer = threading.Thread(target=memory.close)
    try:
        assert embedder.entered.wait(5)
        closer.start()
        closer.join(0.2)
        assert closer.is_alive()  # waiting for the pass
    finally:
        embedder.release.set()
        if closer.ident is None:  # it failed before close() began
            memory.close()
        else:
            closer.join(5)
    assert not closer.is_alive() and maintainer_threads() == []
    assert memory.maintainer is not None
    after = memory.maintainer.snapshot
    assert (after.state, after.successes, after.last_report.embedded) == ("idle", 1, 1)  # type: ignore[union-attr]
    time.sleep(0.1)  # ten intervals
    assert memory.maintainer.snapshot == after
    with Memory(SqliteStore(db), HashEmbedder()) as reader:
        assert reader.status().pending == 0


def test_a_store_that_threads_may_not_share_is_refused() -> None:
    """``InMemoryStore`` is not thread-safe, so its maintainer cannot run in a thread."""
    with pytest.raises(ConfigurationError, match="thread_safe"):
        Memory(InMemoryStore(), HashEmbedder(), maintain=Maintenance(runner=in_thread))
    assert maintainer_threads() == []
