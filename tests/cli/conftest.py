"""The ``cli`` fixture: ``engramdb`` run in process (``engramdb.cli.main``) on a SQLite
file under ``tmp_path``, with ``ENGRAMDB_EMBEDDER=hash:64`` (offline, deterministic,
fast), no other ``ENGRAMDB_*`` setting of the environment and no config file (an empty
``XDG_CONFIG_HOME``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from engramdb.cli import main


@pytest.fixture
def cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    """Run ``engramdb --db <tmp>/cli.db ARGS``: (exit status, stdout, stderr)."""
    for name in [name for name in os.environ if name.startswith("ENGRAMDB_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ENGRAMDB_EMBEDDER", "hash:64")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    db = str(tmp_path / "cli.db")

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        status = main(["--db", db, *args])
        out, err = capsys.readouterr()
        return status, out, err

    return run
