"""Every ``python`` and ``sh`` code block in README.md and docs/ runs, in order, per file.

A block whose first line is ``# not run: <reason>`` is skipped (for example one that
needs a provider's credentials, or one that installs the package); everything else must
run without error. The Python blocks of one file share a namespace, and the shell blocks
of one file run one after the other with ``bash -euo pipefail``, each file's in a fresh
temporary working directory (so that a second run passes too), with this interpreter's
scripts (``engramdb``) first on ``PATH``.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
SHELL = re.compile(r"^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(path: Path, pattern: re.Pattern[str] = BLOCK) -> list[str]:
    return [b for b in pattern.findall(path.read_text()) if not b.startswith("# not run")]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_python_snippets_run(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documented code does what the document says (its asserts hold)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc_snippet__"}
    try:
        for number, source in enumerate(blocks(path), 1):
            code = compile(source, f"{path.name}[block {number}]", "exec")
            exec(code, namespace)
    finally:
        _close_what_the_snippets_opened(namespace)
    capsys.readouterr()


def _close_what_the_snippets_opened(namespace: dict[str, object]) -> None:
    """Close the memories and stores a document left open (a snippet is short, so it
    rarely closes them), then collect: an unclosed SQLite connection warns now, in this
    test, not in whichever test the garbage collector happens to run next."""
    for value in list(namespace.values()):
        for target in (value, getattr(value, "store", None)):
            close = getattr(target, "close", None)
            if callable(close) and type(target).__module__.split(".")[0] == "engramdb":
                with contextlib.suppress(Exception):
                    close()
    namespace.clear()
    gc.collect()


def test_there_are_snippets_to_run() -> None:
    """The docs keep runnable examples (this test fails if the extraction breaks)."""
    assert sum(len(blocks(path)) for path in DOCUMENTS) >= 5


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shell_snippets_run(path: Path, tmp_path: Path) -> None:
    """The documented commands work as written (the ones not marked ``# not run``)."""
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", "")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # not your engramdb config file
    for number, source in enumerate(blocks(path, SHELL), 1):
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", without_installs(source)],
            stdin=subprocess.DEVNULL,  # a server on stdio (MCP) stops at its end
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{path.name}[sh block {number}]:\n{done.stderr[-2000:]}"


INSTALL = re.compile(
    r"^pip install (?:-e )?'?(?:\.|engramdb)(?:\[([a-z0-9,]+)\])?'?(?:\s+&&\s+|\s*(?:#.*)?$)"
)


def without_installs(source: str) -> str:
    """``source`` without its ``pip install`` of engramdb (the test environment has the
    package installed already): each extra it names must exist in pyproject.toml; what
    follows an ``&&`` still runs."""
    extras = set(re.findall(r"^(\w+) = \[", _optional_dependencies(), re.MULTILINE))
    kept = []
    for line in source.splitlines():
        match = INSTALL.match(line)
        if match is None:
            kept.append(line)
            continue
        named = set(filter(None, (match.group(1) or "").split(",")))
        assert named <= extras, f"{line!r} names extras that do not exist: {named - extras}"
        kept.append(line[match.end() :])
    return "\n".join(kept)


def _optional_dependencies() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    start = text.index("[project.optional-dependencies]")
    return text[start : text.index("\n[", start + 1)]


def test_install_lines_are_checked_not_run() -> None:
    """An install line is replaced by a check that its extras exist."""
    assert without_installs("pip install -e '.[cli]' && engramdb demo") == "engramdb demo"
    assert without_installs("pip install 'engramdb[http]'     # providers") == ""
    with pytest.raises(AssertionError, match="nonsense"):
        without_installs("pip install 'engramdb[nonsense]'")


def test_every_skipped_block_says_why() -> None:
    """A skipped block names its reason (``# not run: <reason>``)."""
    for path in DOCUMENTS:
        for pattern in (BLOCK, SHELL):
            for block in pattern.findall(path.read_text()):
                first = block.splitlines()[0] if block else ""
                if first.startswith("# not run"):
                    assert first.startswith("# not run: ") and len(first) > 15, (path, first)


def private_imports(source: str) -> list[str]:
    """The private engramdb modules and names ``source`` imports (a part starting with
    ``_``: ``engramdb._base``, ``engramdb.store._ops``, ``from engramdb.flows import _x``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [
            name
            for name in names
            if name.split(".")[0] == "engramdb" and any(p.startswith("_") for p in name.split("."))
        ]
    return found


def test_no_snippet_imports_a_private_module() -> None:
    """What the docs teach is the public API: no code block (run or not) imports a private
    engramdb module or name, which may move without notice."""
    every = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = {
        f"{path.relative_to(ROOT)}[block {number}]": names
        for path in every
        for number, source in enumerate(BLOCK.findall(path.read_text()), 1)
        if (names := private_imports(source))
    }
    assert found == {}


def test_the_private_import_check_finds_each_form() -> None:
    source = (
        "import engramdb._base.errors\n"
        "from engramdb.store._ops import PutItem\n"
        "from engramdb.flows import _memory\n"
        "from engramdb.providers._parse import field\n"
        "from engramdb import Memory\n"
        "from engramdb.store import encode_f32\n"
        "import __future__\n"
    )
    assert private_imports(source) == [
        "engramdb._base.errors",
        "engramdb.store._ops",
        "engramdb.store._ops.PutItem",
        "engramdb.flows._memory",
        "engramdb.providers._parse",
        "engramdb.providers._parse.field",
    ]
