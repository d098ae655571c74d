"""``engramdb serve`` without the ``server`` extra: one line that names the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path


def test_main_without_uvicorn_names_the_extra(tmp_path: Path) -> None:
    """With uvicorn unimportable, importing engramdb.server works and main() exits 1 with
    one line naming pip install 'engramdb[server]'; no database file is created."""
    code = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "uvicorn":
                    raise ImportError("blocked: " + name)
        sys.meta_path.insert(0, Block())
        from engramdb.server import main
        raise SystemExit(main(sys.argv[1:]))
        """
    )
    db = tmp_path / "memory.sqlite3"
    result = subprocess.run(
        [sys.executable, "-c", code, "--db", str(db), "--embedder", "hash:64"],
        env={
            **os.environ,
            "ENGRAMDB_TOKENS": json.dumps({"tok": ["acme"]}),
            "PYTHONPATH": os.pathsep.join(sys.path),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "engramdb serve needs uvicorn: pip install 'engramdb[server]'"
    ]
    assert not db.exists()
