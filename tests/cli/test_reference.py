"""docs/cli.md documents every command and option exactly as the parser defines them."""

from __future__ import annotations

from pathlib import Path

from engramdb.cli import BEGIN, END, reference
from engramdb.cli._parser import COMMANDS

ROOT = Path(__file__).resolve().parents[2]


def test_docs_cli_md_holds_the_generated_reference() -> None:
    """The text between the markers equals reference(); regenerate it after a change:
    python -c "from engramdb.cli import reference; print(reference())"."""
    text = (ROOT / "docs" / "cli.md").read_text()
    start = text.index(BEGIN) + len(BEGIN)
    assert text[start : text.index(END)].strip("\n") == reference().strip("\n")


def test_the_reference_names_every_command_and_option() -> None:
    """Each command has a section, and options such as --with-vectors appear in it."""
    text = reference()
    for name in COMMANDS:
        assert f"### `engramdb {name}`" in text
    for option in ("--with-vectors", "--batch-size", "--explain", "--confirm", "--probe"):
        assert f"`{option}" in text


def test_the_reference_names_the_aliases_beside_their_commands() -> None:
    """remember and recall have sections; add and search are named in them, not apart."""
    text = reference()
    assert "### `engramdb add`" not in text and "### `engramdb search`" not in text
    remember = text.split("### `engramdb remember`", 1)[1].split("###", 1)[0]
    recall = text.split("### `engramdb recall`", 1)[1].split("###", 1)[0]
    assert "`engramdb add`" in remember and "`engramdb search`" in recall


def test_the_docs_index_links_the_cli_page() -> None:
    assert "(cli.md)" in (ROOT / "docs" / "index.md").read_text()
