"""The faces generated from the async ones (as httpcore does with unasync).

Each face is written once, async: ``AsyncBoundMemory`` (each operation with its
``@view_op`` declaration) in ``core/engramdb/flows/_view_faces_async.py`` and
``AsyncMemory`` in ``_memory_faces_async.py`` beside it. This script writes

* their sync twins, ``BoundMemory`` and ``Memory`` (``_view_faces_sync.py``,
  ``_memory_faces_sync.py``), by plain text rules: ``async def`` and ``await`` go,
  ``Async`` names lose their prefix, ``adrive`` and ``arun`` become ``drive`` and
  ``run``, ``_async`` modules become ``_sync`` ones, the declarations go (an operation
  is declared once);
* the client's ``AsyncRemoteMemory`` and ``RemoteMemory``
  (``drivers/engramdb/client/_faces.py``): the bound view's operations that have an
  HTTP route, with the parameters the route takes, each sending its request.

What differs in substance (starting the maintainer, closing, an async labeler, sending a
request) is hand-written in the lifecycle bases (``_memory.py``, ``_bound.py``, the
client's ``_remote.py``).

    python tools/unasync.py          # write the generated faces
    python tools/unasync.py --check  # fail if one differs from what its source makes

The output is formatted with ruff (the lint env runs ``--check``).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOWS = ROOT / "core" / "engramdb" / "flows"
VIEW = FLOWS / "_view_faces_async.py"
SOURCES = (VIEW, FLOWS / "_memory_faces_async.py")
REMOTE = ROOT / "drivers" / "engramdb" / "client" / "_faces.py"

RULES = (
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"\basync (with|for)\b", r"\1"),
    (r"\b(_?)Async([A-Z]\w*)", r"\1\2"),
    (r"\badrive\b", "drive"),
    (r"\barun\b", "run"),
    (r"\b(_\w+)_async\b", r"\1_sync"),
)


def target(source: Path) -> Path:
    return source.with_name(source.name.replace("_async", "_sync"))


def undeclared(text: str) -> str:
    """``text`` without its ``@view_op(...)`` declarations: an operation is declared once,
    on the async method (``engramdb.flows._view_ops``)."""
    kept, inside = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("    @view_op("):
            inside = not line.rstrip().endswith(")")
            continue
        if inside:
            inside = line.rstrip() != "    )"
            continue
        kept.append(line)
    return "".join(kept)


def unasync(text: str, source: Path) -> str:
    """The sync module ``source``'s text makes, before formatting: the rules applied to
    everything after the source's docstring, under a docstring saying where it comes from."""
    body = undeclared(text.split('"""', 2)[2])  # what follows the module docstring
    for pattern, replacement in RULES:
        body = re.sub(pattern, replacement, body)
    return (
        f'"""Generated from ``{source.name}`` by ``tools/unasync.py``: edit that file, then '
        'run\n``python tools/unasync.py``."""' + body
    )


def formatted(text: str, path: Path) -> str:
    """``text`` as ruff leaves it (imports sorted, unused ones dropped, formatted)."""
    name = str(path.relative_to(ROOT))
    for command in (
        ["ruff", "check", "--fix", "--select", "I,F401", "--stdin-filename", name, "-q", "-"],
        ["ruff", "format", "--stdin-filename", name, "-q", "-"],
    ):
        text = subprocess.run(
            command, input=text, capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
    return text


def generated(source: Path) -> str:
    return formatted(unasync(source.read_text(encoding="utf-8"), source), target(source))


# --- the remote faces: the bound view's operations that have an HTTP route -----------------

REMOTE_HEAD = '''"""Generated from ``core/engramdb/flows/_view_faces_async.py`` by
``tools/unasync.py``: the client's faces are the bound view's operations that have an
HTTP route (``engramdb.flows.VIEW_OPS``), with the parameters their routes take. Edit
the view (or its ``@view_op`` declaration), then run ``python tools/unasync.py``."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from engramdb import Hits, MemoryRecord, Scope, ScopeCount
from engramdb.documents import DEFAULT_MAX_CHARS, Document, DocumentUpload
from engramdb.flows import UNSET

from ._remote import Fusion, RecallMode, RemoteStatus, _AsyncRemoteMemoryBase, _RemoteMemoryBase

__all__ = ["AsyncRemoteMemory", "RemoteMemory"]


class AsyncRemoteMemory(_AsyncRemoteMemoryBase):
    __doc__ = _AsyncRemoteMemoryBase.__doc__
'''
ANSWERS = {"Remembered": "MemoryRecord", "BoundStatus": "RemoteStatus"}
"""What the client answers where the view's answer holds more than the HTTP API sends."""


def view_ops() -> dict[str, object]:
    sys.path.insert(0, str(ROOT / "core"))
    from engramdb.flows import VIEW_OPS

    return dict(VIEW_OPS)


def remote_method(method: ast.AsyncFunctionDef, op: object) -> str:
    """``method`` of ``AsyncBoundMemory`` as the client's: the parameters its route
    takes, the same defaults, and a body that asks the server."""
    taken = {f.name for f in op.fields}  # type: ignore[attr-defined]
    arguments = method.args
    positional = [a for a in arguments.args[1:] if a.arg in taken]
    defaults = dict(
        zip([a.arg for a in arguments.args[::-1]], arguments.defaults[::-1], strict=False)
    )
    keywords = [
        (a, d)
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if a.arg in taken
    ]
    method.args = ast.arguments(
        posonlyargs=[],
        args=[arguments.args[0], *positional],
        defaults=[defaults[a.arg] for a in positional if a.arg in defaults],
        kwonlyargs=[a for a, _ in keywords],
        kw_defaults=[d for _, d in keywords],
    )
    returns = ast.unparse(method.returns) if method.returns is not None else "Any"
    method.returns = ast.parse(ANSWERS.get(returns, returns), mode="eval").body
    names = [a.arg for a in (*positional, *(a for a, _ in keywords))]
    given = "{" + ", ".join(f"{name!r}: {name}" for name in names) + "}"
    answer = ast.unparse(method.returns)
    call = f"answer: {answer} = await self._run(self._flow({method.name!r}, {given}))"
    docstring = ast.get_docstring(method)
    method.body = [ast.Expr(ast.Constant(docstring)), *ast.parse(call + "\nreturn answer").body]
    method.decorator_list = []
    return textwrap.indent(ast.unparse(method), "    ")


def remote_faces() -> str:
    """The client's module: ``AsyncRemoteMemory`` written from the bound view's
    operations with a route, and ``RemoteMemory`` by the rules above."""
    ops = view_ops()
    tree = ast.parse(VIEW.read_text(encoding="utf-8"))
    (view,) = [c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "AsyncBoundMemory"]
    methods = [
        remote_method(node, ops[node.name])
        for node in view.body
        if isinstance(node, ast.AsyncFunctionDef)
        and node.name in ops
        and ops[node.name].route is not None  # type: ignore[attr-defined]
    ]
    async_face = REMOTE_HEAD + "\n\n".join(methods) + "\n"
    sync_face = async_face.split("\n\nclass AsyncRemoteMemory", 1)[1]
    for pattern, replacement in RULES:
        sync_face = re.sub(pattern, replacement, sync_face)
    return formatted(async_face + "\n\nclass RemoteMemory" + sync_face, REMOTE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on a stale sync face")
    args = parser.parse_args(argv)
    stale = []

    def settle(text: str, out: Path) -> None:
        if not args.check:
            out.write_text(text, encoding="utf-8")
        elif not out.is_file() or out.read_text(encoding="utf-8") != text:
            stale.append(str(out.relative_to(ROOT)))

    for source in SOURCES:
        settle(generated(source), target(source))
    # the view's sync twin is written before the client's faces: reading the
    # declarations imports engramdb, which imports it
    settle(remote_faces(), REMOTE)
    if stale:
        print(f"stale: {', '.join(stale)}; run `python tools/unasync.py`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
