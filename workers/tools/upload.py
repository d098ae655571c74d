"""The Worker's upload, as wrangler sends it, measured: ``workers/src`` plus the engramdb
package as ``pywrangler sync`` vendors it into ``python_modules/``, less the files that
``wrangler.jsonc``'s ``python_modules.exclude`` leaves out (the static table).

    python workers/tools/upload.py DIST_DIR    # the engramdb wheel there
    python workers/tools/upload.py             # the source tree, as the wheel packs it

Prints the upload's bytes and its gzip size, and exits 1 when the gzip size is above
the free plan's 3 MB (``tox -e wheel`` runs it on the wheel it builds). The gzip size is
that of every file's bytes one after another, gzip level 6: wrangler's own figure
(``wrangler deploy --dry-run``: "Total Upload: ... / gzip: ...") compresses its
multipart body the same way, so they differ by the form's headers, a few KB. Standard
library only: ``bench_cpu.py`` runs it in Pyodide too.
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import sys
import zipfile
from pathlib import Path

__all__ = ["FREE_PLAN_GZIP", "excluded", "report", "upload_files", "upload_size"]

FREE_PLAN_GZIP = 3 * 1000 * 1000
"""The Workers Free plan's limit on a Worker's size after gzip (3 MB)."""

WORKERS = Path(__file__).resolve().parents[1]
DEFAULT_EXCLUDE = ("**/*.pyc",)
"""wrangler's ``python_modules.exclude`` when the config sets none."""


def jsonc(text: str) -> object:
    """JSON with ``//`` comments (wrangler.jsonc), comments outside strings removed."""
    out: list[str] = []
    in_string = escaped = False
    i = 0
    while i < len(text):
        char = text[i]
        if in_string:
            out.append(char)
            in_string = escaped or char != '"'
            escaped = not escaped and char == "\\"
        elif text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                break
            continue
        else:
            out.append(char)
            in_string = char == '"'
        i += 1
    return json.loads("".join(out))


def excluded(config: Path = WORKERS / "wrangler.jsonc") -> tuple[str, ...]:
    """The ``python_modules.exclude`` patterns of a wrangler config."""
    raw = jsonc(config.read_text(encoding="utf-8"))
    modules = raw.get("python_modules", {}) if isinstance(raw, dict) else {}
    return tuple(modules.get("exclude", DEFAULT_EXCLUDE))


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    # wrangler's globs: "**/" matches any leading directories, none included.
    return any(
        fnmatch.fnmatchcase(name, pattern)
        or (pattern.startswith("**/") and fnmatch.fnmatchcase(name, pattern[3:]))
        for pattern in patterns
    )


def _tree() -> dict[str, bytes]:
    """The wheel's ``engramdb/`` as the source tree holds it (``core`` and ``drivers``
    merged, as ``[tool.hatch.build.targets.wheel]`` packs them), caches left out."""
    files: dict[str, bytes] = {}
    for part in ("core", "drivers"):
        root = WORKERS.parent / part
        for path in sorted((root / "engramdb").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                files[path.relative_to(root).as_posix()] = path.read_bytes()
    return files


def upload_files(wheel: Path | None, patterns: tuple[str, ...]) -> dict[str, bytes]:
    """``{path: bytes}`` of the upload: ``workers/src`` and the engramdb package of
    ``wheel`` (None: of the source tree), less what ``patterns`` exclude (matched as
    under ``python_modules/``)."""
    files = {
        f"src/{path.relative_to(WORKERS / 'src').as_posix()}": path.read_bytes()
        for path in sorted((WORKERS / "src").rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
    if wheel is None:
        vendored = _tree()
    else:
        with zipfile.ZipFile(wheel) as archive:
            vendored = {
                name: archive.read(name) for name in archive.namelist() if not name.endswith("/")
            }
    for name, data in sorted(vendored.items()):
        if not _matches(name, patterns):
            files[f"python_modules/{name}"] = data
    return files


def upload_size(wheel: Path | None, patterns: tuple[str, ...] | None = None) -> tuple[int, int]:
    """(bytes, gzip bytes) of the upload (:func:`upload_files`), with wrangler.jsonc's
    exclusions unless ``patterns`` are given."""
    files = upload_files(wheel, excluded() if patterns is None else patterns)
    body = b"".join(files[name] for name in sorted(files))
    return len(body), len(gzip.compress(body, compresslevel=6, mtime=0))


def report(wheel: Path | None) -> tuple[str, bool]:
    """A line on the upload, with and without the exclusions; and whether it fits the
    free plan."""
    raw, packed = upload_size(wheel)
    with_table = upload_size(wheel, DEFAULT_EXCLUDE)[1]
    line = (
        f"Worker upload with wrangler.jsonc's python_modules.exclude: {raw / 1024:,.0f} KiB, "
        f"gzip {packed / 1024:,.0f} KiB (free plan: {FREE_PLAN_GZIP / 1024:,.0f} KiB); "
        f"with the static table: gzip {with_table / 1024:,.0f} KiB"
    )
    return line, packed <= FREE_PLAN_GZIP


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print(__doc__)
        return 2
    wheel = None
    if argv:
        wheels = sorted(Path(argv[0]).glob("engramdb-*.whl"))
        if len(wheels) != 1:
            print(f"FAIL: expected one engramdb wheel in {argv[0]}, found {wheels}")
            return 1
        wheel = wheels[0]
    line, fits = report(wheel)
    print(line)
    if not fits:
        print("FAIL: the Worker does not fit the free plan's 3 MB after gzip")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
