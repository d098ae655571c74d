"""Check a built engramdb wheel the way a user with no extras would meet it.

Usage: python tests/packaging/check_wheel.py DIST_DIR

DIST_DIR must hold exactly one ``engramdb-*.whl``. The script checks that:

1. the wheel tag is ``py3-none-any`` (pure Python, any platform, incl. Pyodide);
2. METADATA has no unconditional ``Requires-Dist`` (every one carries ``extra ==``),
   so the core installs with zero dependencies;
3. its METADATA ``Version``, its file name and the installed ``engramdb.__version__``
   name the same version (``__version__`` is the one place it is written);
4. the wheel holds only the ``engramdb/`` package and its ``.dist-info``, with
   ``__init__.py`` and ``py.typed``;
5. installed with ``pip install --no-index`` into a fresh venv (no extras), every
   public module imports. Public = every ``.py`` file / package under the installed
   ``engramdb`` whose name (and every parent's) does not start with ``_``. A module
   may fail to import only with an ``ImportError`` caused by a
   ``ModuleNotFoundError`` for a distribution that METADATA declares under an extra
   (e.g. httpx for ``engramdb.providers``): that is reported as skipped, anything
   else fails.

Exits non-zero on any problem. Run through ``tox -e wheel``.
"""

from __future__ import annotations

import email.parser
import json
import re
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

# Runs inside the fresh venv, isolated (-I), from a temp dir: it can only see the wheel.
IMPORT_ALL = r"""
import importlib, json, pathlib, sys
import engramdb
roots = [pathlib.Path(p) for p in engramdb.__path__]
names = {"engramdb"}
for root in roots:
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(part.startswith("_") for part in parts):
            continue
        names.add(".".join(("engramdb", *parts)))
results = {}
for name in sorted(names):
    try:
        importlib.import_module(name)
    except BaseException as exc:
        # A module may re-raise a missing dependency as a friendlier ImportError
        # ("... install engramdb[http]"): look for the ModuleNotFoundError in the chain.
        cause, seen = exc, set()
        while cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            if isinstance(cause, ModuleNotFoundError) and isinstance(exc, ImportError):
                results[name] = ["missing", cause.name or "", repr(exc)]
                break
            cause = cause.__cause__ or cause.__context__
        else:
            results[name] = ["error", "", repr(exc)]
    else:
        results[name] = ["ok", "", ""]
print(json.dumps({
    "roots": [str(r) for r in roots], "results": results, "version": engramdb.__version__
}))
"""


def fail(problems: list[str], msg: str) -> None:
    print(f"FAIL: {msg}")
    problems.append(msg)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    wheels = sorted(Path(argv[0]).glob("engramdb-*.whl"))
    if len(wheels) != 1:
        print(f"FAIL: expected exactly one engramdb wheel in {argv[0]}, found {wheels}")
        return 1
    wheel = wheels[0]
    print(f"checking {wheel.name}")
    problems: list[str] = []

    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        parser = email.parser.Parser()
        wheel_meta = parser.parsestr(zf.read(f"{dist_info}/WHEEL").decode())
        metadata = parser.parsestr(zf.read(f"{dist_info}/METADATA").decode())

    # 1. tag
    tags = wheel_meta.get_all("Tag") or []
    if tags != ["py3-none-any"]:
        fail(problems, f"wheel tags are {tags}, expected ['py3-none-any']")
    if not wheel.name.endswith("-py3-none-any.whl"):
        fail(problems, f"wheel file name {wheel.name} does not end in -py3-none-any.whl")
    if (wheel_meta.get("Root-Is-Purelib") or "").strip().lower() != "true":
        fail(problems, "WHEEL Root-Is-Purelib is not true")

    # 2. dependencies
    extra_dists: dict[str, str] = {}
    for req in metadata.get_all("Requires-Dist") or []:
        match = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", req)
        if not match:
            fail(problems, f"unconditional dependency in METADATA: Requires-Dist: {req}")
            continue
        dist = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if dist:
            extra_dists[normalize(dist.group(1))] = match.group(1)
    print(f"requires-dist: {len(extra_dists)} optional dist(s), all behind extras: {extra_dists}")

    # 3. one version
    version = metadata.get("Version", "")
    if not wheel.name.startswith(f"engramdb-{version}-"):
        fail(problems, f"wheel file name {wheel.name} does not name its Version {version}")

    # 4. contents
    tops = sorted({n.split("/")[0] for n in names})
    if tops != ["engramdb", dist_info]:
        fail(problems, f"wheel top-level entries are {tops}, expected engramdb/ and {dist_info}/")
    for required in ("engramdb/__init__.py", "engramdb/py.typed"):
        if required not in names:
            fail(problems, f"{required} missing from the wheel")

    # 5. fresh venv, no extras, import everything public
    with tempfile.TemporaryDirectory(prefix="engramdb-wheel-") as tmp:
        env_dir = Path(tmp) / "venv"
        venv.EnvBuilder(with_pip=False).create(env_dir)
        py = env_dir / "bin" / "python"
        # This process's pip installs into the fresh venv (pip >= 22.3 --python);
        # --no-index proves the wheel needs nothing else.
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet",
             "--disable-pip-version-check", "--no-index", str(wheel.resolve())],
            check=True,
        )  # fmt: skip
        out = subprocess.run(
            [py, "-I", "-c", IMPORT_ALL], cwd=tmp, check=True, capture_output=True, text=True
        ).stdout
    report = json.loads(out)
    for root in report["roots"]:
        if not root.startswith(str(env_dir)):
            fail(problems, f"engramdb was imported from {root}, not from the fresh venv")
    if report["version"] != version:
        fail(problems, f"engramdb.__version__ is {report['version']}, METADATA says {version}")
    print(f"version {version}")
    results: dict[str, list[str]] = report["results"]
    for module, (status, missing, detail) in results.items():
        top = normalize(missing.split(".")[0]) if missing else ""
        if status == "ok":
            print(f"  ok       {module}")
        elif status == "missing" and top in extra_dists:
            print(f"  skipped  {module}: needs extra [{extra_dists[top]}] ({missing})")
        else:
            print(f"  FAILED   {module}: {detail}")
            fail(problems, f"import {module} failed: {detail}")
    ok = sum(1 for status, _, _ in results.values() if status == "ok")
    print(f"{ok} of {len(results)} public modules imported without extras")

    if problems:
        print(f"check_wheel: {len(problems)} problem(s)")
        return 1
    print("check_wheel: OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
