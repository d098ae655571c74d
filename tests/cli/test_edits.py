"""``engramdb update`` and ``engramdb feedback`` change one memory of the bound scope
through the bound view; bad input is one line of error and changes nothing.

The CLI runs in process (the ``cli`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engramdb import HashEmbedder, Memory
from engramdb.sqlite import SqliteStore

Cli = Callable[..., tuple[int, str, str]]


def stored(tmp_path: Path, id: str) -> Any:
    with Memory(SqliteStore(tmp_path / "cli.db"), HashEmbedder(64)) as memory:
        return memory.bind(("acme",)).get(id)


def remember(cli: Cli, text: str) -> dict[str, Any]:
    status, out, err = cli("--scope", "acme", "--json", "remember", text)
    assert status == 0, err
    record: dict[str, Any] = json.loads(out)
    return record


def test_update_changes_the_given_fields_and_keeps_the_others(cli: Cli, tmp_path: Path) -> None:
    """A new text, labels, metadata and importance replace the old ones in one revision;
    what is not given stays; the earlier revision is in history."""
    first = remember(cli, "the deploy window is Tuesday")
    status, out, err = cli(
        "--scope", "acme", "--json", "update", first["id"], "the deploy window is Thursday",
        "--label", "team=ops", "--metadata", '{"src": "standup"}', "--importance", "0.9",
    )  # fmt: skip
    assert status == 0, err
    after = json.loads(out)
    assert (after["text"], after["labels"], after["metadata"], after["importance"]) == (
        "the deploy window is Thursday",
        {"team": ["ops"]},
        {"src": "standup"},
        0.9,
    )
    assert after["revision"] == 2 and after["created_at"] == first["created_at"]
    status, out, _ = cli("--scope", "acme", "--json", "update", first["id"], "--importance", "0.2")
    assert json.loads(out)["text"] == "the deploy window is Thursday"  # the text stays
    assert stored(tmp_path, first["id"]).importance == 0.2
    _, out, _ = cli("--scope", "acme", "--json", "history", first["id"])
    assert [r["text"] for r in json.loads(out)][-1] == "the deploy window is Tuesday"


def test_update_with_a_stale_expected_revision_exits_3_and_changes_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    """--expected-revision N changes the memory only at revision N: else exit 3 (a
    conflict, not an error of input), one line naming the revisions and the fix."""
    first = remember(cli, "Sam is vegetarian")
    ok, _, err = cli(
        "--scope", "acme", "update", first["id"], "Sam is vegan", "--expected-revision", "1"
    )
    assert ok == 0, err
    status, out, err = cli(
        "--scope", "acme", "update", first["id"], "Sam eats fish", "--expected-revision", "1"
    )
    assert (status, out) == (3, "")
    assert err.startswith("engramdb: error: ") and err.count("\n") == 1
    assert "at revision 2, not revision 1" in err and "--expected-revision" in err
    assert stored(tmp_path, first["id"]).text == "Sam is vegan"


@pytest.mark.parametrize(
    ("args", "status", "needle"),
    [
        (["update", "{id}"], 2, "names nothing to change; give a new TEXT"),
        (["update", "{id}", "--metadata", "[1]"], 2, "--metadata '[1]' must be a JSON object"),
        (["update", "{id}", "--label", "team"], 2, "--label 'team' must be NAME=VALUE"),
        (["update", "{id}", "--expires", "soon"], 2, "--expires 'soon' is not ISO 8601"),
        (["update", "{id}", "--expected-revision", "0"], 2, "'0' must be 1 or more"),
        (["update", "{id}", "--importance", "5"], 1, "importance=5.0 must be a number from 0.0"),
        (["feedback", "{id}", "2"], 2, "'2' is not a number from -1 to 1; pass e.g. 1"),
        (["feedback", "{id}", "nan"], 2, "'nan' is not a number from -1 to 1"),
        (["feedback", "{id}", "useful"], 2, "'useful' is not a number from -1 to 1"),
        (["--scope", "other", "update", "{id}", "x"], 1, "no memory '{id}' in scope other"),
        (["--scope", "other", "feedback", "{id}", "1"], 1, "no memory '{id}' in scope other"),
    ],
)
def test_bad_input_is_one_line_naming_the_value_and_changes_nothing(
    cli: Cli, tmp_path: Path, args: list[str], status: int, needle: str
) -> None:
    """Each bad value is named with its fix, in one line, and the memory is as it was
    (a memory of another scope is answered as missing, as get answers it)."""
    first = remember(cli, "Sam is vegetarian")
    done, out, err = cli("--scope", "acme", *[a.format(id=first["id"]) for a in args])
    assert (done, out) == (status, "")
    assert err.startswith("engramdb: error: ") and err.count("\n") == 1, err
    assert needle.format(id=first["id"]) in err
    record = stored(tmp_path, first["id"])
    assert (record.revision, record.importance, record.utility.manual) == (1, 0.5, None)


def test_feedback_sets_the_manual_value_through_the_bound_view(cli: Cli, tmp_path: Path) -> None:
    """feedback ID VALUE sets the memory's manual value; the text output says it, the
    JSON output is the record."""
    first = remember(cli, "Sam is vegetarian")
    status, out, err = cli("--scope", "acme", "feedback", first["id"], "-0.5")
    assert (status, out) == (0, f"{first['id']}: manual value -0.5\n"), err
    assert stored(tmp_path, first["id"]).utility.manual == -0.5
    status, out, _ = cli("--scope", "acme", "--json", "feedback", first["id"], "1")
    assert json.loads(out)["id"] == first["id"]
    assert stored(tmp_path, first["id"]).utility.manual == 1.0
