"""``engramdb.open()`` and ``engramdb.open_async()``: one call from nothing to a memory.
With no path the database is the CLI's (``ENGRAMDB_DB``, the config file, else
``./engramdb.sqlite3``), so a script and ``engramdb recall`` in one folder share their
memories; with no embedder, the CLI's too (the static table). ``scope=`` answers the
bound view, which closes the memory when it closes; a bad argument opens nothing."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

import engramdb
from engramdb import (
    AsyncBoundMemory,
    AsyncMemory,
    BoundMemory,
    ConfigurationError,
    HashEmbedder,
    Memory,
    ValidationError,
)

SAM = ("acme", "user", "sam")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with no database setting and no config file around."""
    for name in ("ENGRAMDB_DB", "ENGRAMDB_EMBEDDER", "ENGRAMDB_CONFIG", "ENGRAMDB_SCOPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(folder: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "engramdb.cli", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_open_with_no_argument_is_the_clis_database_and_embedder(folder: Path) -> None:
    with engramdb.open() as memory:
        assert type(memory) is Memory
        assert memory.embedder.space.provider == "static"
        memory.remember("Sam is vegetarian", scope=("default",))
    assert (folder / "engramdb.sqlite3").is_file()
    assert "Sam is vegetarian" in cli(folder, "recall", "a dinner without meat")
    cli(folder, "remember", "The car needs new tyres before winter")
    with engramdb.open(scope=("default",)) as view:
        assert view.recall("tyres")[0].memory.text == "The car needs new tyres before winter"


def test_the_environment_names_the_database_and_an_argument_wins(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGRAMDB_DB", str(folder / "from-env.db"))
    with engramdb.open() as memory:
        memory.remember("from the environment", scope=SAM)
    with engramdb.open(folder / "given.db") as memory:
        memory.remember("given", scope=SAM)
    assert sorted(p.name for p in folder.glob("*.db")) == ["from-env.db", "given.db"]
    assert not (folder / "engramdb.sqlite3").exists()


def test_an_embedder_is_a_provider_string_or_an_embedder(folder: Path) -> None:
    with engramdb.open("a.db", embedder="hash:64") as memory:
        assert memory.embedder.space.id == HashEmbedder(64).space.id
    own = HashEmbedder(32)
    with engramdb.open("b.db", embedder=own) as memory:
        assert memory.embedder is own


def test_a_scope_answers_the_bound_view_which_closes_its_memory(folder: Path) -> None:
    with engramdb.open("notes.db", scope=SAM, session="chat-1") as sam:
        assert type(sam) is BoundMemory
        assert (sam.scope, sam.session) == (SAM, "chat-1")
        sam.remember("Sam prefers aisle seats")
        memory = sam._memory
    assert memory._closed
    with engramdb.open("notes.db") as memory:
        assert [r.text for r in memory.list(SAM)] == ["Sam prefers aisle seats"]


def test_a_view_from_bind_leaves_its_memory_to_its_maker(folder: Path) -> None:
    with engramdb.open("notes.db") as memory:
        with memory.bind(SAM) as sam:
            sam.remember("Sam likes tea")
        assert not memory._closed
        assert memory.bind(SAM).count() == 1


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"scope": "acme/user/sam"}, "must be a tuple of strings"),
        ({"scope": ()}, "scope"),
        ({"session": "chat-1"}, "pass scope= as well"),
        ({"scope": SAM, "session": ""}, "scope"),
        ({"embedder": 42}, "must be a provider string"),
    ],
)
def test_a_bad_argument_is_one_error_and_opens_nothing(
    folder: Path, arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        engramdb.open("never.db", **arguments)  # type: ignore[call-overload]
    assert not list(folder.glob("never*"))


def test_an_embedder_that_cannot_be_built_leaves_no_file(folder: Path) -> None:
    with pytest.raises(ConfigurationError, match="nosuch"):
        engramdb.open("never.db", embedder="nosuch:model")
    assert not list(folder.glob("never*"))


def test_open_async_answers_the_async_faces(folder: Path) -> None:
    async def main() -> list[str]:
        async with engramdb.open_async("notes.db") as memory:
            assert type(memory) is AsyncMemory
            await memory.remember("Sam is vegetarian", scope=SAM)
        async with engramdb.open_async("notes.db", scope=SAM) as sam:
            assert type(sam) is AsyncBoundMemory
            hits = await sam.recall("a dinner without meat")
        assert sam._memory._closed
        return [hit.memory.text for hit in hits]

    assert asyncio.run(main()) == ["Sam is vegetarian"]


def test_the_one_call_functions_are_the_opening_modules() -> None:
    from engramdb import opening

    for name in opening.__all__:
        assert getattr(engramdb, name) is getattr(opening, name)
    with pytest.raises(AttributeError, match="no attribute 'opne'"):
        engramdb.opne  # type: ignore[attr-defined]  # noqa: B018


def test_read_only_opens_a_copy_that_recalls_and_refuses_writes(folder: Path) -> None:
    with engramdb.open("live.db", scope=SAM) as sam:
        sam.remember("Sam's passport expires in March")
    before = (folder / "live.db").read_bytes()
    with engramdb.open("live.db", scope=SAM, read_only=True) as sam:
        hits = sam.recall("passport")
        assert (hits[0].memory.text, hits.selection_id) == ("Sam's passport expires in March", None)
        with pytest.raises(engramdb.StoreError, match="read-only"):
            sam.remember("a write")
    assert (folder / "live.db").read_bytes() == before
    with pytest.raises(ValidationError, match="read_only='yes' must be True or False"):
        engramdb.open("live.db", read_only="yes")  # type: ignore[call-overload]


def test_a_space_without_an_embedder_is_a_memory_of_your_own_vectors(folder: Path) -> None:
    space = engramdb.EmbeddingSpace("mine", "pipeline-v1", 2)
    with engramdb.open("mine.db", space=space) as memory:
        assert memory.embedder.space == space
        memory.remember("Sam is vegetarian", scope=SAM, vector=[1.0, 0.0])
        hits = memory.recall("food", scopes=[SAM], vector=[1.0, 0.0], mode="vector")
        assert hits[0].evidence["space_id"] == "mine/pipeline-v1@2"
    with pytest.raises(ConfigurationError, match="space="):
        engramdb.open("mine.db", embedder="hash:64", space=space)
