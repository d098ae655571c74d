"""Every operation of a bound view is declared once (``engramdb.flows.VIEW_OPS``, the
``@view_op`` on its method) and reachable from each face the declaration names (HTTP, the
agent tools and so MCP, the Python client, the CLI), or the declaration says why it is
not offered there. A new view operation fails this test until it is declared; a face
that loses an operation it declares fails it too.
"""

from __future__ import annotations

import inspect

import pytest

from engramdb import BoundMemory
from engramdb.agents import TOOLS
from engramdb.cli._parser import COMMANDS
from engramdb.client import RemoteMemory
from engramdb.flows import VIEW_OPS
from engramdb.flows._view_ops import FACES
from engramdb.http_api import OPERATIONS


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
        op.name: op.offered(face)
        for op in VIEW_OPS.values()
        if op.offered(face) is not None and op.offered(face) not in names
    }
    assert missing == {}, f"declared but not offered by {face}"
    for op in VIEW_OPS.values():
        reason = op.not_offered.get(face)
        assert (op.offered(face) is None) == (reason is not None), (op.name, face)
        assert reason is None or " " in reason, f"{op.name}: a reason is a sentence"
