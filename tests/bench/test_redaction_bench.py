"""``bench.redaction --turns``: redact_secrets' throughput on conversation turns, against
the redactor of a git revision. Checks the report's shape, never timings."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bench import redaction
from eval.synthetic import conversations


def test_the_turn_benchmark_times_today_against_a_git_revision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both redactors run over every turn, alternating, and the ratio is printed; the
    revision's redactor is the file as git holds it (here HEAD's), loaded beside
    today's."""
    inside = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"],
        cwd=redaction.ROOT,
        capture_output=True,
        check=False,
    )
    if shutil.which("git") is None or inside.returncode != 0:
        pytest.skip("needs a git checkout of the repository")
    data = tmp_path / "turns.json"
    data.write_text(json.dumps(conversations(count=1)), encoding="utf-8")
    head = redaction.redactor_at("HEAD")
    assert head("key " + "sk-proj-" + "Zq7Xw2Lk9Pm4" * 2) == "key [REDACTED:openai_key]"
    assert redaction.main(["--turns", str(data), "--versus", "HEAD", "--runs", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("turns, median of 2 passes:")
    assert out[1].startswith("  redact_secrets (today): ") and out[1].endswith("texts per second")
    assert out[2].startswith("  redact_secrets (HEAD): ")
    assert out[3].startswith("  today / HEAD: ") and out[3].endswith("x the throughput")
