"""The sync faces, generated from the async ones (as httpcore does with unasync).

Each face is written once, async: ``AsyncMemory`` and ``AsyncBoundMemory`` in
``core/engramdb/flows/_faces_async.py``, ``AsyncRemoteMemory`` in
``drivers/engramdb/client/_faces_async.py``. This script writes their sync twins
(``Memory``, ``BoundMemory``, ``RemoteMemory``: ``_faces_sync.py`` beside each) by plain
text rules: ``async def`` and
``await`` go, ``Async`` names lose their prefix, ``adrive`` and ``arun`` become ``drive``
and ``run``, ``_async`` modules become ``_sync`` ones. What differs in substance between
the two (starting the maintainer, closing, an async labeler) is hand-written in the
faces' lifecycle bases (``_memory.py``, ``_bound.py``, the client's ``_remote.py``).

    python tools/unasync.py          # write the sync faces
    python tools/unasync.py --check  # fail if one differs from what its source makes

The output is formatted with ruff (the lint env runs ``--check``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (
    ROOT / "core" / "engramdb" / "flows" / "_faces_async.py",
    ROOT / "drivers" / "engramdb" / "client" / "_faces_async.py",
)

RULES = (
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"\basync (with|for)\b", r"\1"),
    (r"\b(_?)Async([A-Z]\w*)", r"\1\2"),
    (r"\badrive\b", "drive"),
    (r"\barun\b", "run"),
    (r"\b(_\w+)_async\b", r"\1_sync"),
)


def target(source: Path) -> Path:
    return source.with_name(source.name.replace("_async", "_sync"))


def unasync(text: str, source: Path) -> str:
    """The sync module ``source``'s text makes, before formatting: the rules applied to
    everything after the source's docstring, under a docstring saying where it comes from."""
    body = text.split('"""', 2)[2]  # what follows the module docstring
    for pattern, replacement in RULES:
        body = re.sub(pattern, replacement, body)
    return (
        f'"""Generated from ``{source.name}`` by ``tools/unasync.py``: edit that file, then '
        'run\n``python tools/unasync.py``."""' + body
    )


def formatted(text: str, path: Path) -> str:
    """``text`` as ruff leaves it (imports sorted, unused ones dropped, formatted)."""
    name = str(path.relative_to(ROOT))
    for command in (
        ["ruff", "check", "--fix", "--select", "I,F401", "--stdin-filename", name, "-q", "-"],
        ["ruff", "format", "--stdin-filename", name, "-q", "-"],
    ):
        text = subprocess.run(
            command, input=text, capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
    return text


def generated(source: Path) -> str:
    return formatted(unasync(source.read_text(encoding="utf-8"), source), target(source))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on a stale sync face")
    args = parser.parse_args(argv)
    stale = []
    for source in SOURCES:
        text, out = generated(source), target(source)
        if args.check:
            if not out.is_file() or out.read_text(encoding="utf-8") != text:
                stale.append(str(out.relative_to(ROOT)))
        else:
            out.write_text(text, encoding="utf-8")
    if stale:
        print(f"stale: {', '.join(stale)}; run `python tools/unasync.py`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
