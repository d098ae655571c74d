"""Every operation of a bound view is reachable from each face that serves it (HTTP, the
agent tools and so MCP, the Python client, the CLI), or is listed here as not offered
there, with the reason. A new view operation fails this test until it says where it is
offered; a face that gains it fails it until the reason goes.
"""

from __future__ import annotations

import inspect

import pytest

from engramdb import BoundMemory
from engramdb.agents import _TABLE as TOOLS
from engramdb.cli._parser import COMMANDS
from engramdb.client import RemoteMemory
from engramdb.http_api import OPERATIONS

FACES = ("http", "tool", "client", "cli")
_DOCUMENTS = "documents are library and CLI only: no HTTP route, no tool yet (issue 49)"
_SMALL_TOOLSET = "not a tool: a model's set stays small (recall and list_recent show ids)"
_NO_WIPE = "not a tool: a model may not delete a whole scope"
_NO_BATCH = "not a tool: a model remembers one fact at a time"
_NOT_YET = "no CLI command yet (the view-op table of issue 48 will derive one)"

# view operation -> face -> the name it has there, or why it is not offered (a sentence)
VIEW_OPS: dict[str, dict[str, str]] = {
    "remember": {"http": "remember", "tool": "remember", "client": "remember", "cli": "remember"},
    "recall": {"http": "recall", "tool": "recall", "client": "recall", "cli": "recall"},
    "get": {"http": "get", "tool": _SMALL_TOOLSET, "client": "get", "cli": "get"},
    "list": {"http": "list", "tool": "list_recent", "client": "list", "cli": "list"},
    "forget": {"http": "forget", "tool": "forget", "client": "forget", "cli": "forget"},
    "forget_all": {"http": "forget_all", "tool": _NO_WIPE, "client": "forget_all", "cli": "forget"},
    "update": {"http": "update", "tool": _SMALL_TOOLSET, "client": "update", "cli": "update"},
    "history": {"http": "history", "tool": _SMALL_TOOLSET, "client": "history", "cli": "history"},
    "feedback": {"http": "feedback", "tool": "feedback", "client": "feedback", "cli": "feedback"},
    "complete": {"http": "complete", "tool": "complete", "client": "complete", "cli": _NOT_YET},
    "remember_many": {
        "http": "remember_many",
        "tool": _NO_BATCH,
        "client": "remember_many",
        "cli": "import",
    },
    "list_scopes": {
        "http": "list_scopes",
        "tool": _SMALL_TOOLSET,
        "client": "list_scopes",
        "cli": "scopes",
    },
    "status": {"http": "status", "tool": "status", "client": "status", "cli": "status"},
    "remember_document": {
        "http": _DOCUMENTS,
        "tool": _DOCUMENTS,
        "client": _DOCUMENTS,
        "cli": "import",
    },
    "remember_documents": {
        "http": _DOCUMENTS,
        "tool": _DOCUMENTS,
        "client": _DOCUMENTS,
        "cli": "import",
    },
    "forget_document": {
        "http": _DOCUMENTS,
        "tool": _DOCUMENTS,
        "client": _DOCUMENTS,
        "cli": _NOT_YET,
    },
}


def offered() -> dict[str, set[str]]:
    """What each face offers, by the names it gives its operations."""
    return {
        "http": {operation.operation_id for operation in OPERATIONS},
        "tool": set(TOOLS),
        "client": {
            name
            for name, member in vars(RemoteMemory).items()
            if not name.startswith("_") and inspect.isfunction(member)
        },
        "cli": set(COMMANDS),
    }


def view_operations() -> set[str]:
    return {
        name
        for name, member in vars(BoundMemory).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def test_every_view_operation_is_declared() -> None:
    assert set(VIEW_OPS) == view_operations()


@pytest.mark.parametrize("face", FACES)
def test_each_face_offers_each_operation_or_says_why_not(face: str) -> None:
    names = offered()[face]
    missing = {
        op: where[face]
        for op, where in VIEW_OPS.items()
        if " " not in where[face] and where[face] not in names
    }
    assert missing == {}, f"named but not offered by {face}"
    gained = {op for op, where in VIEW_OPS.items() if " " in where[face] and op in names}
    assert gained == set(), f"{face} offers these now: name them instead of the reason"
