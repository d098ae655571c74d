"""Durable Objects for the Worker tests: real SQLite-backed objects in miniflare, reached
synchronously from Pyodide through the harness (workers/tests/run.mjs)."""

from __future__ import annotations

import itertools
from typing import Any

import engramdb_harness

_names = itertools.count()


def new_object_state(name: str | None = None) -> Any:
    """A Durable Object's ``ctx`` (a JS ``DurableObjectState``); the same ``name`` reaches
    the same storage (the object after a restart), a new name an empty database."""
    state = engramdb_harness.newDurableObjectState(name or f"object-{next(_names)}")
    if hasattr(state, "then"):
        import asyncio

        state = asyncio.get_event_loop().run_until_complete(state)
    return state


def storage_of(state: Any) -> Any:
    """``self.ctx.storage`` as a Python Durable Object sees it (wrapped by the SDK)."""
    from workers.entrypoints import DurableObjectContext

    return DurableObjectContext(state).storage


class Objects:
    """A Durable Object namespace binding (``env.MEMORY``) over the entry's
    ``MemoryObject`` class: ``idFromName``/``get`` as workerd offers them, one live
    instance per name (its state kept between requests, as an active object keeps it),
    each over its own real SQLite-backed object in miniflare. ``restart(name)`` drops
    the instance: the next request builds a cold one over the same storage.

    The Worker sees a JS object named ``DurableObjectNamespace`` (so the SDK wraps it as
    in production) whose stubs call the Python object's RPC method with JS values.
    """

    def __init__(self, env: Any) -> None:
        from js import eval as js_eval
        from pyodide.ffi import create_proxy

        self.env = env
        self.instances: dict[str, Any] = {}
        self.states: dict[str, Any] = {}
        self._prefix = f"tenant-{next(_names)}-"
        namespace_class = js_eval(
            """(class DurableObjectNamespace {
                constructor(open) { this.open = open; }
                idFromName(name) { return { name, toString() { return name; } }; }
                get(id) {
                  const open = this.open;
                  return { handle: (request, body) => open(id.name).handle(request, body) };
                }
              })"""
        )
        self.binding = namespace_class.new(create_proxy(self.open))

    def open(self, name: str) -> Any:
        import entry  # workers/src/entry.py

        if name not in self.instances:
            if name not in self.states:
                self.states[name] = new_object_state(self._prefix + name)
            self.instances[name] = entry.MemoryObject(self.states[name], self.env)
        return self.instances[name]

    def restart(self, name: str) -> None:
        self.instances.pop(name, None)


def write_scope(
    memory: Any, n: int, scope: tuple[str, ...], count: int, *, packed: bool = True
) -> None:
    """``count`` short texts of the ``n``-th scope into ``scope``, 500 a call, as a
    tenant's user writes them (the object-memory test and benchmark fill objects so).
    ``packed=False``: the texts deferred, then embedded by ``reindex()``, so that the
    scope is left unpacked (as in a database from before packing on write)."""
    items = [
        {"text": f"fact {i} of {n}: w{i % 97} x{i % 31} y{i * 7 % 53}", "scope": scope}
        for i in range(count)
    ]
    for start in range(0, count, 500):
        memory.remember_many(items[start : start + 500], defer_embedding=not packed)
    if not packed:
        memory.reindex(batch_size=500)
