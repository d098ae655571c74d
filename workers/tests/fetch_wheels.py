"""Fetch and unpack the pure-Python wheels the Worker tests need inside Pyodide.

Usage: python workers/tests/fetch_wheels.py --python-version 3.13 --dest DIR

The core suite's list (tests/pyodide/requirements.txt: pytest and its closure) plus
workers/tests/requirements.txt (``workers-runtime-sdk``), fetched and unpacked into
``DIR/site`` by the core suite's own tool, tests/pyodide/fetch_wheels.py (same stamp,
so warm runs need no network).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORE_TOOL = HERE.parent.parent / "tests" / "pyodide" / "fetch_wheels.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python-version", required=True, help="Pyodide's Python, e.g. 3.13")
    parser.add_argument("--dest", required=True, type=Path, help="cache directory")
    args = parser.parse_args(argv)

    spec = importlib.util.spec_from_file_location("_core_fetch_wheels", CORE_TOOL)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)

    dest: Path = args.dest.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    combined = dest / "requirements.txt"
    text = tool.REQUIREMENTS.read_text() + "\n" + (HERE / "requirements.txt").read_text()
    if not combined.is_file() or combined.read_text() != text:
        combined.write_text(text)
    tool.REQUIREMENTS = combined
    return int(tool.main(["--python-version", args.python_version, "--dest", str(dest)]))


if __name__ == "__main__":
    sys.exit(main())
