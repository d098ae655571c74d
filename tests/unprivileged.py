"""Python run by a user who may not write what the tests make read-only.

``chmod a-w`` stops an ordinary user, not the superuser (root writes anything but a
read-only file system). So :func:`run_python` runs a Python command as this process's
user, or as ``nobody`` when the tests run as root (with a Python ``nobody`` may run: the
test's own interpreter, else the system's); :func:`shared_folder` is a folder outside the
tests' private temporary folders (pytest makes those 0700) that such a user can read.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import engramdb
import engramdb.sqlite as sqlite

_UNPRIVILEGED = "nobody"
_PROBE = "import sqlite3, sys; assert sys.version_info >= (3, 11)"


def _python() -> tuple[str, str | None]:
    """The Python to run and the user to run it as (None: this process's)."""
    if os.geteuid() != 0:
        return sys.executable, None
    for candidate in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if candidate is None or not os.path.exists(candidate):
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(
                [candidate, "-c", _PROBE],
                user=_UNPRIVILEGED,
                capture_output=True,
                timeout=30,
                check=False,
            )
            if done.returncode == 0:
                return candidate, _UNPRIVILEGED
    pytest.skip(
        "the tests run as root, whom chmod a-w does not stop, and no Python 3.11+ runs "
        f"as {_UNPRIVILEGED!r} to stand in for an ordinary user"
    )


@functools.cache
def _readable_engramdb() -> str:
    """The engramdb the tests import, copied where any user may read it: its folders
    (``core`` and ``drivers`` in a checkout, one in an install) may sit below one only
    root may enter (tox makes ``.tox`` 0700). Answers the path to import it from."""
    copy = Path(tempfile.mkdtemp(prefix="engramdb-lib-"))
    atexit.register(shutil.rmtree, copy, ignore_errors=True)
    paths = []
    for number, folder in enumerate(
        dict.fromkeys(Path(m.__file__).parent for m in (engramdb, sqlite))
    ):
        target = copy / str(number) / "engramdb"
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns("__pycache__"))
        paths.append(str(target.parent))
    for path in (copy, *copy.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return os.pathsep.join(paths)


def run_python(args: Sequence[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` as a user that ``chmod a-w`` stops, importing the engramdb the
    tests import (a copy that user may read), in ``env``."""
    python, user = _python()
    path = (
        _readable_engramdb()
        if user is not None
        else os.pathsep.join(str(Path(m.__file__).parents[1]) for m in (engramdb, sqlite))
    )
    env = {**env, "PYTHONPATH": path, "HOME": tempfile.gettempdir()}
    return subprocess.run(
        [python, *args],
        user=user,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@contextlib.contextmanager
def shared_folder() -> Iterator[Path]:
    """A new folder (0755) that :func:`run_python`'s user can read; removed after, with
    write permission given back to whatever a test took it from."""
    folder = Path(tempfile.mkdtemp(prefix="engramdb-ro-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in (folder, *folder.rglob("*")):
            with contextlib.suppress(OSError):
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(folder, ignore_errors=True)


def make_read_only(*paths: Path) -> None:
    """``chmod a-w`` each of ``paths``."""
    for path in paths:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
