"""The core does no I/O (DESIGN §1): it prints nothing and opens no file; hosts do. The
HTTP API hands the line a host should log back with its reply."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from engramdb import ConfigurationError, StoreError
from engramdb.http_api import error_reply

# the core's source (an installed wheel merges core/ and drivers/ into one package)
CORE = Path(__file__).resolve().parents[2] / "core" / "engramdb"
_IO_CALLS = {"print", "open", "input"}
_IO_METHODS = {"read_bytes", "read_text", "write_bytes", "write_text"}


def _io_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if (isinstance(node.func, ast.Name) and name in _IO_CALLS) or (
            isinstance(node.func, ast.Attribute) and name in _IO_METHODS
        ):
            found.append(f"{path.relative_to(CORE)}:{node.lineno} {name}()")
    return found


def test_no_module_of_the_core_prints_or_opens_a_file() -> None:
    files = sorted(CORE.rglob("*.py"))
    assert len(files) > 20  # the core itself, not an empty directory
    calls = [call for path in files for call in _io_calls(path)]
    assert calls == [], calls


@pytest.mark.parametrize(
    ("error", "status", "logged"),
    [
        (StoreError("disk /var/lib/x is full"), 503, "engramdb: store error: disk /var/lib/x"),
        (ConfigurationError("ENGRAMDB_TOKENS is not JSON"), 500, "configuration error"),
        (RuntimeError("boom at 0x7f"), 500, "engramdb: unexpected RuntimeError: boom"),
    ],
)
def test_a_server_side_failure_keeps_its_details_for_the_hosts_log(
    error: Exception, status: int, logged: str
) -> None:
    """The body names no internal detail; ``reply.log`` carries it for the host."""
    reply = error_reply(error)
    assert reply.status == status
    assert str(error) not in json.dumps(reply.body)
    assert reply.log is not None and logged in reply.log and str(error) in reply.log


def test_a_callers_mistake_has_nothing_to_log() -> None:
    from engramdb import ValidationError

    reply = error_reply(ValidationError("top_k must be an int"))
    assert reply.status == 400 and reply.log is None
