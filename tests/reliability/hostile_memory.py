"""The memories the hostile-input tests attack, and the check every call goes through."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from engramdb import EngramError, HashEmbedder, InMemoryStore, Memory, ValidationError

KINDS = ["inmemory", "sqlite-file"]
CANARY_SCOPE = ("canary",)
CANARY_TEXT = "the canary sings; DROP TABLE memories stays a phrase"

MAX_MESSAGE = 1000  # an error message stays short however big the bad argument is
T = TypeVar("T")


@contextmanager
def hostile_memory(kind: str, directory: Path) -> Iterator[Memory]:
    """A sync ``Memory`` over a fresh store holding one canary memory that must survive
    every hostile call unchanged (nothing was executed as SQL, nothing else was touched)."""
    if kind == "inmemory":
        store: Any = InMemoryStore()
    else:
        from engramdb.sqlite import SqliteStore

        directory.mkdir(parents=True, exist_ok=True)
        store = SqliteStore(directory / "memory.db")
    memory = Memory(store, HashEmbedder())
    canary = memory.remember(CANARY_TEXT, CANARY_SCOPE, metadata={"k": "v"})
    try:
        yield memory
        after = memory.get(canary.id)
        assert after is not None
        assert (after.text, after.scope, after.metadata) == (CANARY_TEXT, CANARY_SCOPE, {"k": "v"})
        assert [h.memory.id for h in memory.recall("canary", [CANARY_SCOPE])] == [canary.id]
    finally:
        memory.close()


def accepted_or_refused(call: Callable[..., T], *args: Any, **kwargs: Any) -> T | ValidationError:
    """Run ``call(*args, **kwargs)``: its result, or the ``ValidationError`` it raised.
    Any other exception (a raw ``ValueError``, ``sqlite3.Error``, ``OverflowError``,
    ``RecursionError`` …, or another ``EngramError``) fails the test."""
    try:
        return call(*args, **kwargs)
    except ValidationError as exc:
        assert str(exc).strip(), "a ValidationError must say what is wrong"
        assert len(str(exc)) <= MAX_MESSAGE, f"a {len(str(exc))}-character message: {exc}"[:500]
        return exc
    except EngramError as exc:
        pytest.fail(f"expected a result or a ValidationError, got {exc!r}")
    except Exception as exc:  # any raw exception is the failure this looks for
        pytest.fail(f"raw {type(exc).__name__} escaped: {exc!r}"[:2000])
