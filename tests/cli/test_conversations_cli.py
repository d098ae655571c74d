"""``engramdb remember-conversation`` and ``engramdb recall --context`` as real
subprocesses on a SQLite file: the command creates the file as ``remember`` does, a hit
is shown with the turns around it, and a bad turn is one line naming it, with nothing
stored (``docs/conversations.md``)."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import ok, run

TURNS = [
    {"speaker": "Kim", "text": "Where should we go?"},
    {"speaker": "Sam", "text": "Porto, for the bridges"},
    {"speaker": "Kim", "text": "Then I book the train"},
]


def test_a_conversation_is_remembered_and_a_hit_shown_with_its_context(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    saved = json.loads(
        ok(db, "--scope", "acme/sam", "remember-conversation", json.dumps(TURNS), "trip")
    )
    assert [m["metadata"]["turn"] for m in saved["memories"]] == [0, 1, 2]
    shown = ok(db, "--scope", "acme/sam", "recall", "bridges", "--top-k", "1", "--context", "1")
    lines = shown.splitlines()
    assert "Porto, for the bridges" in lines[0]
    assert [line.split("  (")[0] for line in lines[1:]] == [
        "   | Where should we go?",
        "   | Then I book the train",
    ]
    hit = json.loads(
        ok(
            db,
            "--scope",
            "acme/sam",
            "--json",
            "recall",
            "bridges",
            "--top-k",
            "1",
            "--context",
            "1",
        )
    )
    assert [turn["text"] for turn in hit["context"]] == [TURNS[0]["text"], TURNS[2]["text"]]
    plain = json.loads(ok(db, "--scope", "acme/sam", "--json", "recall", "bridges", "--top-k", "1"))
    assert "context" not in plain


def test_a_bad_turn_is_one_line_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    ok(db, "--scope", "acme/sam", "remember", "a first memory")
    bad = [*TURNS, {"speaker": "Kim"}]
    done = run(db, "--scope", "acme/sam", "remember-conversation", json.dumps(bad), "trip")
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "turn 3" in done.stderr
    assert ok(db, "--scope", "acme/sam", "count").strip() == "1"
