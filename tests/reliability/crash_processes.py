"""Child Pythons for the crash and corruption tests: writers and the ``engramdb`` CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def child_env() -> dict[str, str]:
    """The environment of a child Python that imports the engramdb this test imports."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    return env


def engramdb_cli(db: Path, *args: str, dimensions: int = 16) -> subprocess.CompletedProcess[str]:
    """Run the real ``engramdb`` CLI (``python -m engramdb.cli``) on ``db``."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "engramdb.cli",
            "--db",
            str(db),
            "--embedder",
            f"hash:{dimensions}",
            *args,
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
        check=False,
    )
