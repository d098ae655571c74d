"""The one rule: ``import engramdb`` needs only the standard library and does nothing."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

# The core's modules, read from the source tree (an installed wheel merges core/ and
# drivers/ into one folder, so the installed package cannot tell them apart).
CORE = Path(__file__).resolve().parents[2] / "core" / "engramdb"
BLOCKED = ["sqlite3", "httpx", "threading", "socket", "numpy", "_socket", "_sqlite3"]


def run_isolated(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-I", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_import_succeeds_with_io_and_thread_modules_blocked() -> None:
    """engramdb and every core module import with sqlite3, httpx, threading... blocked."""
    result = run_isolated(
        f"""
        import sys
        sys.path[:0] = {sys.path!r}
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {BLOCKED!r}:
                    raise ImportError("blocked: " + name)
        sys.meta_path.insert(0, Block())
        for name in {BLOCKED!r}:
            sys.modules.pop(name, None)
        import engramdb, pkgutil, importlib
        core = {str(CORE)!r}
        for info in pkgutil.walk_packages([core], "engramdb."):
            importlib.import_module(info.name)
        mem = engramdb.Memory(engramdb.InMemoryStore(), engramdb.HashEmbedder())
        mem.remember("it works", scope=("t",))
        print(len(mem.recall("works", scopes=[("t",)])))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


def test_import_reads_no_clock_randomness_or_files() -> None:
    """Importing the core calls no clock, random source, file or network function."""
    result = run_isolated(
        f"""
        import sys
        sys.path[:0] = {sys.path!r}
        import builtins, io, os, random, time
        calls = []
        def trap(name, original):
            def wrapper(*args, **kwargs):
                calls.append(name)
                return original(*args, **kwargs)
            return wrapper
        for module, names in [
            (time, ["time", "time_ns", "monotonic", "perf_counter", "sleep"]),
            (os, ["urandom", "getrandom"]),
            (random, ["random", "randbytes", "getrandbits", "seed"]),
        ]:
            for name in names:
                if hasattr(module, name):
                    setattr(module, name, trap(module.__name__ + "." + name, getattr(module, name)))
        real_open = io.open
        def guarded_open(file, *args, **kwargs):
            if not str(file).endswith((".py", ".pyc")):
                calls.append("open " + str(file))
            return real_open(file, *args, **kwargs)
        builtins.open = io.open = guarded_open
        import engramdb, pkgutil, importlib
        for info in pkgutil.walk_packages([{str(CORE)!r}], "engramdb."):
            importlib.import_module(info.name)
        print(sorted(set(calls)))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_core_sources_import_only_the_standard_library() -> None:
    """No core module imports a third-party package or an I/O driver module."""
    stdlib = sys.stdlib_module_names
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in BLOCKED or (top not in stdlib and top != "engramdb"):
                    offenders.append(f"{path.name}:{node.lineno}: {name}")
    assert offenders == []
