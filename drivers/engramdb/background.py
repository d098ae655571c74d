"""Background work for a sync ``Memory``, in a thread (the core starts none).

:func:`in_thread` is a maintenance runner: ``Memory(store, embedder,
maintain=Maintenance(runner=in_thread))`` starts the memory's own ``Maintainer`` in a
daemon thread when the memory is built, and ``memory.close()`` stops it (the pass in
progress, if any, finishes first; the wait between passes ends at once) and joins the
thread before the store closes. See ``docs/maintenance.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from engramdb import ConfigurationError, Maintainer

__all__ = ["in_thread"]


def in_thread(maintainer: Maintainer) -> Callable[[], None]:
    """Run ``maintainer.run_forever()`` in a daemon thread; return the function that
    stops it and waits for it. The memory's store must be thread-safe
    (``capabilities.thread_safe``: ``SqliteStore``, ``PostgresStore``)."""
    store = maintainer.memory.store
    capabilities = getattr(store, "capabilities", None)
    if not getattr(capabilities, "thread_safe", False):
        raise ConfigurationError(
            f"{type(store).__name__} may not be shared by threads (capabilities.thread_safe "
            "is False), so its maintainer cannot run in one: use a thread-safe store "
            "(SqliteStore, PostgresStore), or AsyncMemory, whose maintainer runs in a task"
        )
    stopping = threading.Event()
    thread = threading.Thread(
        target=maintainer.run_forever,
        kwargs={"stop": stopping.is_set, "sleep": stopping.wait},
        name="engramdb-maintainer",
        daemon=True,  # a process that never closes its memory still exits
    )
    thread.start()

    def stop() -> None:
        stopping.set()
        if thread is not threading.current_thread():
            thread.join()

    return stop
