"""Every ``python`` code block in README.md and docs/ runs, in order, per file.

A block whose first line is ``# not run: <reason>`` is skipped (for example one that
needs a provider's credentials); everything else must run without error. The blocks of
one file share a namespace, in a fresh temporary working directory.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(path: Path) -> list[str]:
    return [b for b in BLOCK.findall(path.read_text()) if not b.startswith("# not run")]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_python_snippets_run(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documented code does what the document says (its asserts hold)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc_snippet__"}
    for number, source in enumerate(blocks(path), 1):
        code = compile(source, f"{path.name}[block {number}]", "exec")
        exec(code, namespace)
    capsys.readouterr()


def test_there_are_snippets_to_run() -> None:
    """The docs keep runnable examples (this test fails if the extraction breaks)."""
    assert sum(len(blocks(path)) for path in DOCUMENTS) >= 5
