"""The six faces of a memory agree: ``Memory``, ``BoundMemory`` and ``RemoteMemory``, each
sync and async.

* Each async face is its sync twin awaited: the same methods (``aclose`` for ``close``),
  each with the same parameters, kinds, defaults and annotations.
* ``RemoteMemory`` offers a bound view's operations over HTTP. Where it offers less, the
  gap is listed below with its reason, and the list is exact: a new gap fails this test,
  and so does a closed one still listed.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from engramdb import AsyncBoundMemory, AsyncMemory, BoundMemory, Memory
from engramdb.client import AsyncRemoteMemory, RemoteMemory

TWINS = [(Memory, AsyncMemory), (BoundMemory, AsyncBoundMemory), (RemoteMemory, AsyncRemoteMemory)]
# A name the async face spells otherwise; the context-manager methods are compared apart.
ASYNC_NAMES = {"close": "aclose"}
# Methods that return a face rather than do I/O: the same on both (``bind``).
NOT_AWAITED = {"bind"}

_NO_DOCUMENT_BATCH = "each document is its own POST /v1/documents: a folder passes a body's limit"
_BATCH = "the server stores a batch as one write: how it splits one is its own affair"
_SESSION = "the HTTP API has no sessions: what a token writes is shared"
_OWN_VECTOR = (
    "a stored vector is shared by every scope's memory of its text: a token holder may "
    "neither learn of nor sway another scope's (docs/http.md, Your own vectors)"
)

# What RemoteMemory leaves out of BoundMemory, and why: a method, or ``method(param)``,
# or ``method(param)=`` for a parameter whose default differs. The client's faces are
# written from the bound view's (``tools/unasync.py``) with the fields each route takes
# (``engramdb.flows.VIEW_OPS``), so a gap is a parameter no route declares.
NOT_OVER_HTTP = {
    "remember_documents": _NO_DOCUMENT_BATCH,
    "remember(durability)": _SESSION,
    "remember(vector)": _OWN_VECTOR,
    "remember_conversation(durability)": _SESSION,
    "remember_many(batch_size)": _BATCH,
}


def methods(face: type) -> dict[str, Any]:
    """A face's public methods (properties and dunders aside)."""
    return {
        name: member
        for name, member in vars(face).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def parameters(function: Any) -> list[tuple[str, Any, Any, Any]]:
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in inspect.signature(function).parameters.values()
    ]


@pytest.mark.parametrize("sync, async_", TWINS, ids=lambda face: face.__name__)
def test_each_async_face_is_its_sync_twin_awaited(sync: type, async_: type) -> None:
    ours, theirs = methods(sync), methods(async_)
    assert sorted(ASYNC_NAMES.get(name, name) for name in ours) == sorted(theirs)
    for name, method in ours.items():
        twin = theirs[ASYNC_NAMES.get(name, name)]
        assert parameters(method) == parameters(twin), name
        assert inspect.iscoroutinefunction(twin) == (name not in NOT_AWAITED), name
        assert not inspect.iscoroutinefunction(method), name
        returns = inspect.signature(method).return_annotation
        twin_returns = inspect.signature(twin).return_annotation
        assert returns == twin_returns or returns == twin_returns.replace("Async", ""), name


def gaps(view: type, remote: type) -> set[str]:
    """What ``remote`` leaves out of ``view`` (see NOT_OVER_HTTP), and what it has that
    ``view`` has not (a ``+``)."""
    found = set()
    ours, theirs = methods(view), methods(remote)
    for name, method in ours.items():
        if name not in theirs:
            found.add(name)
            continue
        mine = {p.name: p for p in inspect.signature(method).parameters.values()}
        other = {p.name: p for p in inspect.signature(theirs[name]).parameters.values()}
        found |= {f"{name}({p})" for p in mine.keys() - other.keys()}
        found |= {f"+{name}({p})" for p in other.keys() - mine.keys()}
        found |= {
            f"{name}({p})="
            for p in mine.keys() & other.keys()
            if (mine[p].default, mine[p].kind) != (other[p].default, other[p].kind)
        }
    found |= {f"+{name}" for name in theirs.keys() - ours.keys() - {"close", "aclose"}}
    return found


@pytest.mark.parametrize(
    "view, remote", [(BoundMemory, RemoteMemory), (AsyncBoundMemory, AsyncRemoteMemory)]
)
def test_the_remote_face_is_the_bound_view_but_for_the_listed_gaps(
    view: type, remote: type
) -> None:
    assert gaps(view, remote) == set(NOT_OVER_HTTP)


def test_the_gap_check_sees_each_kind_of_difference() -> None:
    class View:
        def recall(self, query: str, *, top_k: int = 5, exact: bool = False) -> None: ...
        def forget(self, id: str) -> None: ...

    class Remote:
        def recall(self, query: str, *, top_k: int = 10, timeout: float = 1.0) -> None: ...
        def ping(self) -> None: ...

    assert gaps(View, Remote) == {
        "forget",
        "recall(exact)",
        "+recall(timeout)",
        "recall(top_k)=",
        "+ping",
    }
