"""``engramdb._embedders.shipped_vocabulary`` (what ``estimate_tokens`` counts with) is the
vocabulary of the shipped static table, as ``tools/shipped_vocabulary.py`` writes it, and
it is loaded on the first estimate, never by ``import engramdb``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

from engramdb._embedders.shipped_vocabulary import TOKENS

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "shipped_vocabulary_tool", ROOT / "tools" / "shipped_vocabulary.py"
)
assert _spec is not None and _spec.loader is not None
tool = importlib.util.module_from_spec(_spec)
sys.modules["shipped_vocabulary_tool"] = tool
_spec.loader.exec_module(tool)


def test_the_module_is_the_shipped_tables_vocabulary_as_the_tool_writes_it() -> None:
    """Else run ``python tools/shipped_vocabulary.py`` (a new table needs a new module)."""
    table = tool.table_vocabulary(tool.TABLE.read_bytes())
    assert len(table) == 29_528 and table[:2] == ["[PAD]", "[UNK]"]
    assert TOKENS.split("\n") == table  # \ and " come back as they are in the table
    assert tool.main(["--check"]) == 0


def test_the_vocabulary_loads_on_the_first_estimate_not_at_import() -> None:
    code = """
        import sys
        import engramdb, engramdb.agents
        from engramdb import format_context
        name = "engramdb._embedders.shipped_vocabulary"
        print(name in sys.modules)
        format_context([], budget_tokens=100)
        print(name in sys.modules)
        print(engramdb.agents.estimate_tokens("Sam likes aisle seats"), name in sys.modules)
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == ["False", "False", "4", "True"]
