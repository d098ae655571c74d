"""docs/langgraph.md's examples run (tests/docs skips them: the docs env has no
LangGraph)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "langgraph.md"
MARK = "# not run: needs the langgraph extra"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_the_page_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Python block of the page marked for this env runs, in order, and its
    asserts hold."""
    blocks = [b for b in BLOCK.findall(PAGE.read_text()) if b.startswith(MARK)]
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc_snippet__"}
    for number, source in enumerate(blocks, 1):
        exec(compile(source, f"{PAGE.name}[block {number}]", "exec"), namespace)
