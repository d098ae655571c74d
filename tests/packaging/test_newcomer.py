"""A newcomer's first session, as real subprocesses in an empty folder, with the installed
package (no checkout on the path but what the test environment itself runs from): each
step is a script or a command a new user would write after reading the README, and each
prints what it found.

1. ``engramdb.open()`` with no argument: remember, then recall by meaning; the CLI in
   the same folder sees the same memories.
2. Your own vectors: ``engramdb.open(path, space=...)`` stores and searches them.
3. A conversation: ``remember_conversation`` and ``recall(context=1)`` bring each hit's
   neighbouring turns.
4. A read-only copy: a copy of the database opened with ``read_only=True`` (and the CLI
   with ``--read-only``) recalls, writes nothing and names why it has no receipt.
5. A missing extra: an embedder whose package is not installed is one line naming the
   ``pip install`` that brings it, from the library and from the CLI, and no file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BLOCKER = """
import os, sys

class Blocker:
    "Acts as if the packages named in ENGRAMDB_TEST_BLOCK were not installed."

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in os.environ.get("ENGRAMDB_TEST_BLOCK", "").split(","):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty working folder; a ``sitecustomize`` beside it can hide a package."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCKER)
    return work


def environment(folder: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAMDB_")}
    env.pop("OPENAI_API_KEY", None)
    paths = [str(folder.parent / "site"), *sys.path]  # what this test runs from: the install
    return {**env, "PYTHONPATH": os.pathsep.join(paths), "XDG_CONFIG_HOME": str(folder), **extra}


def python(folder: Path, script: str, **extra: str) -> subprocess.CompletedProcess[str]:
    (folder / "step.py").write_text(textwrap.dedent(script))
    return subprocess.run(
        [sys.executable, "step.py"],
        cwd=folder,
        env=environment(folder, **extra),
        capture_output=True,
        text=True,
        timeout=300,
    )


def engramdb(folder: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engramdb.cli", *args],
        cwd=folder,
        env=environment(folder, **extra),
        capture_output=True,
        text=True,
        timeout=300,
    )


def answer(done: subprocess.CompletedProcess[str]) -> object:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_open_remember_recall_with_no_argument(folder: Path) -> None:
    found = answer(
        python(
            folder,
            """
            import json, engramdb

            with engramdb.open() as memory:
                sam = ("acme", "user", "sam")
                memory.remember("Sam is vegetarian", scope=sam)
                memory.remember("The car needs new tyres before winter", scope=sam)
                hits = memory.recall("a dinner without meat", scopes=[sam], top_k=1)
                print(json.dumps([hits[0].memory.text, hits.status]))
            """,
        )
    )
    assert found == ["Sam is vegetarian", "used"]
    assert sorted(p.name for p in folder.glob("*.sqlite3")) == ["engramdb.sqlite3"]
    recalled = engramdb(folder, "--scope", "acme/user/sam", "recall", "tyres for winter")
    assert recalled.returncode == 0, recalled.stderr
    assert "The car needs new tyres before winter" in recalled.stdout.splitlines()[0]


def test_your_own_vectors(folder: Path) -> None:
    found = answer(
        python(
            folder,
            """
            import json, engramdb
            from engramdb import EmbeddingSpace

            space = EmbeddingSpace("mine", "pipeline-v1", 4)
            with engramdb.open("mine.db", space=space, scope=("acme", "sam")) as sam:
                sam.remember("Sam is vegetarian", vector=[0.9, 0.1, 0.0, 0.0])
                sam.remember("Sam plays the cello", vector=[0.0, 0.0, 1.0, 0.2])
                hits = sam.recall("food", vector=[1.0, 0.0, 0.0, 0.0], mode="vector")
                print(json.dumps([hits[0].memory.text, hits[0].evidence["space_id"]]))
            """,
        )
    )
    assert found == ["Sam is vegetarian", "mine/pipeline-v1@4"]


def test_a_conversation_with_its_context(folder: Path) -> None:
    found = answer(
        python(
            folder,
            """
            import json, engramdb

            turns = [
                {"speaker": "Sam", "text": "I am flying to Oslo on Monday"},
                {"speaker": "Ana", "text": "Which hotel did you book?"},
                {"speaker": "Sam", "text": "The one by the harbour, breakfast included"},
                {"speaker": "Ana", "text": "Lovely, send me a postcard"},
            ]
            with engramdb.open("chat.db", scope=("acme", "sam")) as sam:
                sam.remember_conversation(turns, conversation="trip")
                (hit,) = sam.recall("harbour hotel breakfast", top_k=1, context=1)
                print(json.dumps([hit.memory.text, [t.text for t in hit.context]]))
            """,
        )
    )
    assert found == [
        "The one by the harbour, breakfast included",
        ["Which hotel did you book?", "Lovely, send me a postcard"],
    ]


def test_a_read_only_copy_recalls_and_writes_nothing(folder: Path) -> None:
    wrote = python(
        folder,
        """
        import engramdb

        with engramdb.open("live.db", scope=("acme", "sam")) as sam:
            sam.remember("Sam's passport expires in March")
        """,
    )
    assert wrote.returncode == 0, wrote.stderr
    shutil.copy(folder / "live.db", folder / "copy.db")
    before = (folder / "copy.db").read_bytes()
    found = answer(
        python(
            folder,
            """
            import json, engramdb

            with engramdb.open("copy.db", scope=("acme", "sam"), read_only=True) as sam:
                hits = sam.recall("when does the passport expire")
                try:
                    sam.remember("a write")
                except engramdb.StoreError as refused:
                    said = str(refused)
                print(json.dumps([hits[0].memory.text, hits.selection_id, hits.error, said]))
            """,
        )
    )
    text, selection_id, error, refused = found  # type: ignore[misc]
    assert (text, selection_id) == ("Sam's passport expires in March", None)
    assert error.startswith("read-only")
    assert "read-only" in refused
    recalled = engramdb(
        folder, "--db", "copy.db", "--scope", "acme/sam", "--read-only", "recall", "passport"
    )
    assert recalled.returncode == 0, recalled.stderr
    assert "Sam's passport expires in March" in recalled.stdout
    assert (folder / "copy.db").read_bytes() == before


def test_a_missing_extra_is_one_line_naming_its_install_and_leaves_no_file(
    folder: Path,
) -> None:
    done = python(
        folder,
        """
        import engramdb

        try:
            engramdb.open("never.db", embedder="openai:text-embedding-3-small")
        except ImportError as missing:
            print(str(missing).replace("\\n", " | "))
        """,
        ENGRAMDB_TEST_BLOCK="httpx",
        OPENAI_API_KEY="k",
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'engramdb[http]'" in done.stdout
    cli = engramdb(
        folder,
        "--db",
        "never.db",
        "--embedder",
        "openai:text-embedding-3-small",
        "remember",
        "x",
        ENGRAMDB_TEST_BLOCK="httpx",
        OPENAI_API_KEY="k",
    )
    assert cli.returncode == 1
    assert cli.stderr.count("\n") == 1 and "pip install 'engramdb[http]'" in cli.stderr
    assert not list(folder.glob("never*"))
