"""``eval.redaction``: how many turns of a LoCoMo-format file redaction changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval import redaction
from eval.synthetic import conversations

PASTED = "Ben: the staging key is " + "sk_live_" + "Zq7Xw2Lk9Pm4" * 2 + ", rotate it"


def made_up_turns(path: Path) -> Path:
    """Two made-up conversations, one turn of which pastes a (made-up) Stripe key."""
    samples: list[dict[str, Any]] = conversations(count=2)
    talk = samples[0]["conversation"]["session_1"]
    talk.append({"speaker": "Ben", "dia_id": "D1:99", "text": PASTED.removeprefix("Ben: ")})
    path.write_text(json.dumps(samples), encoding="utf-8")
    return path


def test_the_rate_counts_changed_turns_among_all_and_shows_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every turn is redacted as the harness remembers it; only the pasted key's turn
    changes, and --show prints it before and after."""
    data = made_up_turns(tmp_path / "turns.json")
    total = len(redaction.turns(data))
    assert PASTED in redaction.turns(data)
    assert redaction.main(["--data", str(data), "--show"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"- {PASTED}",
        "+ Ben: the staging key is [REDACTED:stripe_key], rotate it",
        f"redaction changed 1 of {total} turns ({1 / total:.2%})",
        "  stripe_key: 1",
    ]
