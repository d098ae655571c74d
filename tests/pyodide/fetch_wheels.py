"""Download the pure-Python test wheels for Pyodide and unpack them into a site dir.

Usage: python tests/pyodide/fetch_wheels.py --python-version 3.13 --dest DIR

Wheels listed in tests/pyodide/requirements.txt are fetched with
``pip download --only-binary=:all: --platform any --implementation py --no-deps``
for the *target* Python (the one inside Pyodide, not the one running this script),
then unpacked (they are plain zip files) into ``DIR/site``. The Node runner mounts
``DIR/site`` into Pyodide and puts it on ``sys.path``; unpacking avoids zipimport
quirks (e.g. package data read from inside a wheel).

Re-running is a no-op when ``DIR/site/.stamp`` matches the requirements and the
target Python, so warm runs need no network.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python-version", required=True, help="Pyodide's Python, e.g. 3.13")
    parser.add_argument("--dest", required=True, type=Path, help="cache directory")
    args = parser.parse_args(argv)

    dest: Path = args.dest.resolve()
    wheels = dest / "wheels"
    site = dest / "site"
    stamp_text = hashlib.sha256(
        REQUIREMENTS.read_bytes() + args.python_version.encode()
    ).hexdigest()
    stamp = site / ".stamp"
    if stamp.is_file() and stamp.read_text() == stamp_text:
        print(f"fetch_wheels: {site} is up to date")
        return 0

    shutil.rmtree(wheels, ignore_errors=True)
    shutil.rmtree(site, ignore_errors=True)
    wheels.mkdir(parents=True)
    cmd = [
        sys.executable, "-m", "pip", "download",
        "--disable-pip-version-check", "--quiet",
        "--only-binary=:all:", "--no-deps",
        "--platform", "any", "--implementation", "py",
        "--python-version", args.python_version,
        "--dest", str(wheels),
        "-r", str(REQUIREMENTS),
    ]  # fmt: skip
    print("fetch_wheels:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)

    site.mkdir(parents=True)
    found = sorted(wheels.glob("*.whl"))
    pinned = [
        line.split("==")[0].strip().lower().replace("-", "_")
        for line in REQUIREMENTS.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    names = {whl.name.split("-")[0].lower() for whl in found}
    missing = [name for name in pinned if name not in names]
    if missing:
        print(f"fetch_wheels: missing wheels for {missing}", file=sys.stderr)
        return 1
    for whl in found:
        with zipfile.ZipFile(whl) as zf:
            zf.extractall(site)
    stamp.write_text(stamp_text)
    print(f"fetch_wheels: unpacked {len(found)} wheels into {site}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
