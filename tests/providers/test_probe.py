"""python -m engramdb.providers.probe prints four facts and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from provider_fakes import FAKE_KEY, Script, openai_answer

from engramdb.providers import probe

ROOT = Path(__file__).resolve().parents[2]


def test_probe_runs_as_a_module_with_the_env_var() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "core"), str(ROOT / "drivers")]),
        "ENGRAMDB_EMBEDDER": "hash:64",
    }
    result = subprocess.run(
        [sys.executable, "-m", "engramdb.providers.probe"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "provider/model: hash/bow",
        "dimensions: 64",
        "finite: yes",
        "norm: 1.000000",
    ]


def test_probe_embeds_the_fixed_phrase_as_a_query(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    script = Script(openai_answer([[0.6, 0.8] + [0.0] * 1534]))  # the model's 1536
    status = probe.main(["openai:text-embedding-3-small"], transport=httpx.MockTransport(script))
    assert status == 0
    assert script.bodies()[0]["input"] == [probe.PHRASE]
    out = capsys.readouterr().out
    assert "dimensions: 1536" in out and "norm: 1.000000" in out


def test_probe_reports_configuration_errors_with_status_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert probe.main(["nope:model"]) == 1
    assert "ConfigurationError: unknown embedder scheme 'nope'" in capsys.readouterr().err
    assert probe.main(["a", "b"]) == 2
