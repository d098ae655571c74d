"""Every ``python`` and ``sh`` code block in README.md and docs/ runs as written.

A block whose first line is ``# not run: <reason>`` is skipped (for example one that
needs a provider's credentials, or one that installs the package); everything else must
run without error.

Each Python block runs alone, as a reader pastes it into a file and runs it: in a fresh
process (``snippet_runner.py``) and a fresh temporary working directory, with warnings
as errors and without pytest (a reader has engramdb, not our test tools), so a block
cannot lean on an earlier block's imports or names. A block whose first line is
``# save as <name>.py`` asks the reader to keep it as that module: it runs as a block
too, and sits in the directory of each later block of its page, which imports it.

The shell blocks of one file run one after the other with ``bash -euo pipefail``, each
file's in a fresh temporary working directory (so that a second run passes too), with
this interpreter's scripts (``engramdb``) first on ``PATH``. Where a page shows what
its commands print (an ``sh`` block, a paragraph ``prints``, a ``text`` block), their
output must end with that text.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
SHELL = re.compile(r"^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(path: Path, pattern: re.Pattern[str] = BLOCK) -> list[str]:
    return [b for b in pattern.findall(path.read_text()) if not b.startswith("# not run")]


SAVE_AS = re.compile(r"# save as (\w+\.py)\n")


def python_blocks(path: Path) -> list[tuple[int, str, dict[str, str]]]:
    """Each block of ``path`` to run (its number among the page's ``python`` blocks,
    its source) with the modules the blocks before it asked the reader to save."""
    found, saved = [], {}
    for number, source in enumerate(BLOCK.findall(path.read_text()), 1):
        if not source.startswith("# not run"):
            found.append((number, source, dict(saved)))
        if name := SAVE_AS.match(source):
            saved[name.group(1)] = source
    return found


PYTHON_BLOCKS = [
    pytest.param(source, saved, id=f"{path.relative_to(ROOT).as_posix()}[{number}]")
    for path in DOCUMENTS
    for number, source, saved in python_blocks(path)
]


class Reader:
    """A reader with a fresh interpreter for each snippet (``snippet_runner.py``)."""

    def __init__(self) -> None:
        runner = Path(__file__).with_name("snippet_runner.py")
        self.process = subprocess.Popen(
            [sys.executable, "-W", "error", str(runner)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, source: str, directory: Path, saved: dict[str, str] | None = None) -> Ran:
        """Run ``source`` as a reader would: saved as ``snippet.py`` in ``directory``
        (beside the ``saved`` modules, by file name), alone, without pytest, warnings
        as errors."""
        assert self.process.stdin is not None and self.process.stdout is not None
        for name, module in (saved or {}).items():
            (directory / name).write_text(module)
        (directory / "snippet.py").write_text(source)
        self.process.stdin.write(f"{directory}\n")
        self.process.stdin.flush()
        code = int(self.process.stdout.readline())
        return Ran(code, (directory / "output.txt").read_text())

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.stdout.close()
        assert self.process.wait(timeout=60) == 0


class Ran(NamedTuple):
    returncode: int
    output: str


@pytest.fixture(scope="module")
def reader() -> Iterator[Reader]:
    started = Reader()
    yield started
    started.close()


@pytest.mark.parametrize(("source", "saved"), PYTHON_BLOCKS)
def test_python_snippet_runs_alone(
    source: str, saved: dict[str, str], tmp_path: Path, reader: Reader
) -> None:
    """The documented code, pasted alone, does what the document says (its asserts hold)."""
    done = reader.run(source, tmp_path, saved)
    assert done.returncode == 0, done.output[-3000:]


def test_a_snippet_runs_without_pytest_and_without_the_blocks_before_it(
    tmp_path: Path, reader: Reader
) -> None:
    """The runner is as strict as a reader's fresh file: no pytest, no earlier names, no
    earlier imports, warnings are errors, and a failure is a failure."""
    assert reader.run("import json\nassert json.loads('1') == 1\n", tmp_path).returncode == 0
    assert reader.run("import engramdb\nvalue = 1\n", tmp_path).returncode == 0
    assert "NameError" in reader.run("value\n", tmp_path).output
    assert "NameError" in reader.run("json\n", tmp_path).output
    assert "ModuleNotFoundError" in reader.run("import pytest\n", tmp_path).output
    assert "NameError" in reader.run("Memory\n", tmp_path).output
    failed = reader.run("assert False, 'said so'\n", tmp_path)
    assert failed.returncode == 1 and "said so" in failed.output
    warned = reader.run("import warnings\nwarnings.warn('old', DeprecationWarning)\n", tmp_path)
    assert warned.returncode == 1 and "DeprecationWarning: old" in warned.output
    assert "printed" in reader.run("print('printed')\n", tmp_path).output
    assert reader.run("import os, signal\nos.kill(os.getpid(), signal.SIGALRM)\n", tmp_path)[0] != 0


def test_a_saved_block_is_beside_the_later_blocks_of_its_document(
    tmp_path: Path, reader: Reader
) -> None:
    """``# save as x.py`` makes a block importable by the blocks after it, not before."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nimport example\n```\n"
        "```python\n# save as example.py\nVALUE = 1\n```\n"
        "```python\nfrom example import VALUE\n```\n"
    )
    first, saving, last = python_blocks(page)
    assert (first[2], saving[2]) == ({}, {})
    assert last[2] == {"example.py": "# save as example.py\nVALUE = 1\n"}
    run = tmp_path / "run"
    run.mkdir()
    assert "ModuleNotFoundError" in reader.run(first[1], run, first[2]).output
    assert reader.run(last[1], run, last[2]).returncode == 0


def test_there_are_snippets_to_run() -> None:
    """The docs keep runnable examples (this test fails if the extraction breaks)."""
    assert sum(len(blocks(path)) for path in DOCUMENTS) >= 5


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shell_snippets_run(path: Path, tmp_path: Path) -> None:
    """The documented commands work as written (the ones not marked ``# not run``)."""
    for number, source in enumerate(blocks(path, SHELL), 1):
        done = run_shell(source, tmp_path)
        assert done.returncode == 0, f"{path.name}[sh block {number}]:\n{done.stderr[-2000:]}"


def run_shell(source: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """``source`` (without its installs) run by ``bash -euo pipefail`` in ``directory``,
    this interpreter's scripts first on ``PATH`` and no engramdb config file of yours."""
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", "")}
    env["XDG_CONFIG_HOME"] = str(directory / "config")  # not your engramdb config file
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", without_installs(source)],
        stdin=subprocess.DEVNULL,  # a server on stdio (MCP) stops at its end
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# An ``sh`` block, a paragraph ``prints`` and a ``text`` block: what the commands print.
PRINTS = re.compile(
    r"^```sh\n((?:(?!```).)*)^```\n\nprints\n\n```text\n((?:(?!```).)*)^```",
    re.DOTALL | re.MULTILINE,
)


def test_a_shown_output_is_what_the_commands_print(tmp_path: Path) -> None:
    """Where a page shows what its commands print (an ``sh`` block, then ``prints``, then
    a ``text`` block), their output ends with exactly that text: it cannot go stale."""
    shown = [pair for path in DOCUMENTS for pair in PRINTS.findall(path.read_text())]
    assert len(shown) >= 1  # docs/cli.md's `engramdb config`
    for number, (commands, printed) in enumerate(shown):
        (tmp_path / str(number)).mkdir()
        done = run_shell(commands, tmp_path / str(number))
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.endswith(printed), (commands, done.stdout)


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
