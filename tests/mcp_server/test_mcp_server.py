"""The MCP server (``python -m engramdb.mcp_server``) through the SDK's own stdio client.

Each test starts the server as a subprocess of this interpreter, with this checkout's
code on ``PYTHONPATH`` and the deterministic ``hash:64`` embedder, and talks to it as any
MCP client would. Tests that need the ``mcp`` package skip where it is absent (Pyodide).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import engramdb

ROOT = Path(__file__).resolve().parents[2]
SCOPE = "acme/user/sam"
SCOPE_JSON = ["acme", "user", "sam"]
TOOLS = [
    "remember",
    "recall",
    "forget",
    "complete",
    "feedback",
    "remember_conversation",
    "remember_document",
    "status",
    "list_recent",
    "count",
]


def _pythonpath() -> str:
    """The folders this test imports engramdb from, so the subprocess runs the same code."""
    folders = [str(Path(p).parent) for p in engramdb.__path__]
    return os.pathsep.join([*folders, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


@asynccontextmanager
async def connect(
    db: Path | None, *args: str, scope: str | None = SCOPE, embedder: str = "hash:64"
) -> AsyncIterator[Any]:
    """A client session with ``python -m engramdb.mcp_server --db DB --scope SCOPE ARGS``
    (no ``--db`` or ``--scope`` when None; no config file but one ARGS names), embedding
    with ``embedder`` (``ENGRAMDB_EMBEDDER``; empty: the server's default)."""
    # (This folder is tests/mcp_server, not tests/mcp, so that it never shadows the
    # package; the submodule is what the test needs.)
    stdio = pytest.importorskip("mcp.client.stdio")
    import mcp

    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=[
            *("-m", "engramdb.mcp_server"),
            *(["--db", str(db)] if db is not None else []),
            *(["--scope", scope] if scope is not None else []),
            *args,
        ],
        env={"PYTHONPATH": _pythonpath(), **({"ENGRAMDB_EMBEDDER": embedder} if embedder else {})},
        cwd=str(ROOT),
    )
    async with (
        stdio.stdio_client(params) as (read, write),
        mcp.ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A successful call's structured answer (it must equal the JSON text it also sends)."""
    result = await session.call_tool(name, arguments)
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    answer: dict[str, Any] = result.structured_content
    return answer


async def error(session: Any, name: str, arguments: dict[str, Any]) -> str:
    """A failed call's message: an MCP tool error (``is_error``), not a protocol failure."""
    result = await session.call_tool(name, arguments)
    assert result.is_error, result.structured_content
    message: str = result.content[0].text
    return message


async def test_every_tool_round_trips_over_stdio(tmp_path: Path) -> None:
    """remember, recall (hits and their space), list_recent, feedback, complete, status and
    forget each answer through the SDK client, and the server keeps serving after errors."""
    async with connect(tmp_path / "m.db", "--session", "chat-1") as session:
        listed = await session.list_tools()
        assert [tool.name for tool in listed.tools] == TOOLS
        assert all(tool.description for tool in listed.tools)

        saved = await call(
            session,
            "remember",
            {"text": "Sam prefers aisle seats", "labels": {"Topic": ["Travel"]}, "importance": 0.8},
        )
        assert saved["durability"] == "shared" and saved["dropped"] == 0
        note = await call(
            session,
            "remember",
            {"text": "Sam is booking a flight", "durability": "session", "ttl_seconds": 3600},
        )
        assert note["durability"] == "session"

        found = await call(session, "recall", {"query": "aisle seats", "top_k": 3})
        assert [h["memory"]["id"] for h in found["hits"]] == [saved["id"]]
        hit = found["hits"][0]
        assert hit["memory"]["text"] == "Sam prefers aisle seats"
        assert hit["memory"]["labels"] == {"topic": ["travel"]}
        assert hit["memory"]["scope"] == SCOPE_JSON and hit["evidence"]["scope"] == SCOPE_JSON
        assert hit["score"] > 0
        assert found["mode"] == "hybrid"
        assert found["status"] in ("used", "partial", "degraded", "lexical_only")
        assert found["space"] is not None and found["space"].startswith("hash")

        recent = await call(session, "list_recent", {"limit": 5})
        assert [m["id"] for m in recent["memories"]] == [note["id"], saved["id"]]
        assert [m["durability"] for m in recent["memories"]] == ["session", "shared"]
        assert recent["memories"][1]["scope"] == SCOPE_JSON
        assert recent["memories"][1]["created_at"].endswith("Z")
        assert (await call(session, "list_recent", {"limit": 1}))["memories"][0]["id"] == note["id"]

        assert await call(session, "feedback", {"memory_id": saved["id"], "value": 1}) == {
            "id": saved["id"],
            "value": 1.0,
        }
        cleared = await call(session, "feedback", {"memory_id": saved["id"], "value": None})
        assert cleared["value"] is None

        done = await call(session, "complete", {"selection_id": found["selection_id"], "score": 1})
        assert done["completed"] is True
        again = await error(
            session, "complete", {"selection_id": found["selection_id"], "score": 1}
        )
        assert "already completed" in again

        status = await call(session, "status", {})
        assert (status["items"], status["scope"], status["session"]) == (2, SCOPE_JSON, "chat-1")
        assert status["space"] == found["space"]  # one word for it on every face
        assert isinstance(status["schema_version"], int)
        keys = {"scope", "session", "items", "space", "schema_version", "maintenance"}
        assert set(status) == keys

        assert await call(session, "forget", {"id": saved["id"]}) == {
            "forgotten": True,
            "id": saved["id"],
        }
        after = await call(session, "recall", {"query": "aisle seats"})
        assert after["hits"] == []


TRIP = "# Trip\n\nSam packs light.\n\n## Flights\n\nSam flies to Lisbon\non Tuesday morning."


async def test_a_document_remembered_by_the_tool_is_recalled_with_its_source_and_lines(
    tmp_path: Path,
) -> None:
    """remember_document stores a text as chunks and answers their ids (not their text);
    recall then says which source and which lines each chunk came from; the same text
    again adds nothing; forget_document is not a tool."""
    async with connect(tmp_path / "m.db") as session:
        saved = await call(session, "remember_document", {"text": TRIP, "source": "notes/trip.md"})
        assert saved["source"] == "notes/trip.md" and saved["added"] is True
        assert saved["document_id"].startswith("doc-") and len(saved["chunk_ids"]) >= 1
        found = await call(session, "recall", {"query": "Lisbon Tuesday", "top_k": 1})
        (hit,) = found["hits"]
        assert hit["memory"]["id"] in saved["chunk_ids"]
        place = hit["memory"]["metadata"]
        assert place["document_source"] == "notes/trip.md"
        assert TRIP[place["document_start"] : place["document_end"]] == hit["memory"]["text"]
        first, last = place["document_lines"]
        assert "\n".join(TRIP.split("\n")[first - 1 : last]).strip() == hit["memory"]["text"]
        again = await call(session, "remember_document", {"text": TRIP, "source": "notes/trip.md"})
        assert (again["added"], again["chunk_ids"]) == (False, saved["chunk_ids"])
        message = await error(session, "forget_document", {"source": "notes/trip.md"})
        assert "forget_document" in message


async def test_bad_arguments_and_unknown_ids_are_tool_errors(tmp_path: Path) -> None:
    """Each mistake answers one message naming it (an MCP tool error), writes nothing,
    and the server goes on serving."""
    async with connect(tmp_path / "m.db") as session:
        cases = [
            ("remember", {"text": "x", "scope": ["acme", "user", "kim"]}, "does not take 'scope'"),
            ("recall", {"query": "x", "namespace": "kim"}, "does not take 'namespace'"),
            ("remember", {"text": "x", "session": "other"}, "does not take 'session'"),
            ("remember", {}, "needs 'text'"),
            ("remember", {"text": "x", "importance": 3}, "importance=3 must be"),
            ("remember", {"text": "x", "expires_at": "tomorrow"}, "expires_at"),
            ("remember", {"text": "x", "ttl_seconds": "soon"}, "ttl"),
            ("remember", {"text": 5}, "text must be a string"),
            ("recall", {"query": "x", "labels": "nope"}, "labels='nope' must be"),
            ("remember", {"text": "x", "durability": "session"}, "needs a session bound"),
            ("recall", {"query": "x", "top_k": 0}, "top_k=0 must be"),
            ("recall", {"query": "x", "top_k": 21}, "top_k=21 must be"),
            ("list_recent", {"limit": 51}, "limit=51 must be"),
            ("feedback", {"memory_id": "nope", "value": 2}, "value=2 must be"),
            ("complete", {"selection_id": "nope", "score": 1}, "'nope' is unknown"),
            ("forget", {"id": "no-such-memory"}, "there is no memory 'no-such-memory'"),
            ("feedback", {"memory_id": "no-such-memory", "value": 1}, "there is no memory"),
            ("status", {"verbose": True}, "does not take 'verbose'"),
            ("teleport", {}, "there is no memory tool 'teleport'"),
        ]
        for name, arguments, expected in cases:
            message = await error(session, name, arguments)
            assert expected in message, (name, arguments, message)
            assert "\n" not in message
        assert (await call(session, "status", {}))["items"] == 0


async def test_no_tool_schema_offers_a_scope(tmp_path: Path) -> None:
    """No tool's input schema has a scope, namespace or session property, and every
    schema is closed, so the operator's scope is the only one."""
    async with connect(tmp_path / "m.db", "--session", "chat-1") as session:
        for tool in (await session.list_tools()).tools:
            schema = tool.input_schema
            assert schema["type"] == "object"
            assert schema["additionalProperties"] is False
            names = {name.lower() for name in schema.get("properties", {})}
            assert not names & {"scope", "namespace", "session", "scopes", "tenant"}, tool.name


async def test_the_server_announces_engramdb_and_its_version(tmp_path: Path) -> None:
    """A client learns which engramdb it talks to from the handshake (``serverInfo``)."""
    async with connect(tmp_path / "m.db") as session:
        assert session.server_info.name == "engramdb"
        assert session.server_info.version == engramdb.__version__


async def test_status_resource(tmp_path: Path) -> None:
    """``engramdb://status`` is listed and reads as the status tool's JSON, the server's
    own maintainer's state with it (without the store-wide counts of its last pass)."""
    async with connect(tmp_path / "m.db") as session:
        await call(session, "remember", {"text": "Sam is vegetarian"})
        resources = (await session.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["engramdb://status"]
        read = await session.read_resource("engramdb://status")
        shown = json.loads(read.contents[0].text)
        maintenance = shown.pop("maintenance")
        told = await call(session, "status", {})
        assert told.pop("maintenance")["state"] in ("idle", "running", "backing_off")
        assert shown == told
        assert maintenance["state"] in ("idle", "running", "backing_off")
        assert maintenance["last_report"] is None
        assert (shown["items"], shown["scope"], shown["session"]) == (1, SCOPE_JSON, None)

        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError, match="there is no resource 'engramdb://nope'") as raised:
            await session.read_resource("engramdb://nope")
        assert raised.value.code == -32002
        assert (await call(session, "status", {}))["items"] == 1


async def test_the_status_docs_show_is_what_the_server_answers(tmp_path: Path) -> None:
    """docs/mcp.md's status sample is the status tool's answer, exactly, on a server as
    a reader starts it (the default embedder, the current schema) with ``--no-maintain``
    and 12 memories: its space id and schema version cannot go stale."""
    page = (ROOT / "docs" / "mcp.md").read_text()
    start = page.index("```json\n", page.index("## The status resource")) + len("```json\n")
    sample = json.loads(page[start : page.index("```", start)])
    async with connect(tmp_path / "m.db", "--no-maintain", embedder="") as session:
        for n in range(12):
            await call(session, "remember", {"text": f"Sam's note number {n}"})
        assert await call(session, "status", {}) == sample


async def test_the_server_reads_its_config_file(tmp_path: Path) -> None:
    """``--config FILE`` gives the database (beside the file), the scope and
    ``maintain = false``, through the same ``resolve()`` as the CLI."""
    config = tmp_path / "config.toml"
    config.write_text('db = "m.db"\nscope = "acme/config"\nmaintain = false\n')
    async with connect(None, "--config", str(config), scope=None) as session:
        await call(session, "remember", {"text": "Sam is vegetarian"})
        read = await session.read_resource("engramdb://status")
        shown = json.loads(read.contents[0].text)
        assert (shown["scope"], shown["items"], shown["maintenance"]) == (
            ["acme", "config"],
            1,
            None,
        )
    assert (tmp_path / "m.db").exists()


async def test_servers_bound_to_different_scopes_do_not_see_each_other(tmp_path: Path) -> None:
    """Two servers over one file, bound to two scopes: neither recalls, lists, forgets,
    rates nor counts the other's memory."""
    db = tmp_path / "shared.db"
    async with connect(db, scope="acme/user/sam") as sam, connect(db, scope="acme/user/kim") as kim:
        sams = await call(sam, "remember", {"text": "The vault code is 4411"})
        kims = await call(kim, "remember", {"text": "The vault key is in the drawer"})

        for who, mine in ((kim, kims), (sam, sams)):
            found = await call(who, "recall", {"query": "vault"})
            assert [h["memory"]["id"] for h in found["hits"]] == [mine["id"]]
        assert [m["id"] for m in (await call(kim, "list_recent", {}))["memories"]] == [kims["id"]]
        assert "there is no memory" in await error(kim, "forget", {"id": sams["id"]})
        assert "there is no memory" in await error(
            kim, "feedback", {"memory_id": sams["id"], "value": -1}
        )
        assert [m["id"] for m in (await call(sam, "list_recent", {}))["memories"]] == [sams["id"]]
        assert (await call(kim, "status", {}))["items"] == 1  # Sam's memory is not counted


def test_without_mcp_main_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the mcp package the module still imports, and main() exits 1 with one
    line on stderr naming the install command (nothing on stdout, the protocol's)."""
    from engramdb import mcp_server

    for name in ["mcp", *(name for name in sys.modules if name.startswith("mcp."))]:
        monkeypatch.setitem(sys.modules, name, None)  # None: "import mcp..." fails
    assert mcp_server.main(["--db", str(tmp_path / "m.db"), "--scope", SCOPE]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == [
        "python -m engramdb.mcp_server: the MCP server needs the mcp package, which is not "
        "installed: pip install 'engramdb[mcp]'"
    ]
    assert not (tmp_path / "m.db").exists()


def test_a_bad_scope_option_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed --scope stops the server before it serves, with the settings' message."""
    pytest.importorskip("mcp.server.lowlevel")
    from engramdb import mcp_server

    assert mcp_server.main(["--db", str(tmp_path / "m.db"), "--scope", "acme//sam"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "has an empty part" in err and len(err.strip().splitlines()) == 1


def test_the_server_imports_only_public_engramdb_names() -> None:
    """The MCP server is a transport over public names (``engramdb``, its public
    modules): no import of a private ``engramdb._...`` module or ``_name`` (a dunder
    such as ``__version__`` is public)."""
    import ast

    from engramdb import mcp_server

    tree = ast.parse(Path(mcp_server.__file__).read_text(encoding="utf-8"))
    private = [
        f"{node.module}: {[alias.name for alias in node.names]}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("engramdb")
        and (
            any(part.startswith("_") for part in (node.module or "").split("."))
            or any(
                alias.name.startswith("_") and not alias.name.startswith("__")
                for alias in node.names
            )
        )
    ]
    assert private == []


async def test_the_server_maintains_its_database_unless_told_not_to(tmp_path: Path) -> None:
    """Texts stored pending in the file (by another process) are embedded by the server's
    own maintainer, with no ``maintain`` call; ``--no-maintain`` leaves them pending and
    shows no maintainer."""
    import asyncio

    from engramdb import HashEmbedder, Memory
    from engramdb.sqlite import SqliteStore

    for flag, embedded in (("--no-maintain", False), (None, True)):
        db = tmp_path / f"{flag or 'default'}.db"
        with Memory(SqliteStore(db), HashEmbedder(dimensions=64), defer_embedding=True) as other:
            other.remember("the deploy window is Friday", tuple(SCOPE_JSON))
        async with connect(db, *([flag] if flag else [])) as session:
            for _ in range(500):
                read = await session.read_resource("engramdb://status")
                maintenance = json.loads(read.contents[0].text)["maintenance"]
                if maintenance is None or maintenance["successes"] >= 1:
                    break
                await asyncio.sleep(0.01)
        assert (maintenance is not None) is embedded
        with Memory(SqliteStore(db), HashEmbedder(dimensions=64)) as reader:
            assert reader.status().pending == (0 if embedded else 1)


async def test_a_conversation_is_saved_once_and_a_turn_recalled_with_its_context(
    tmp_path: Path,
) -> None:
    """remember_conversation answers an id per turn (the same ids when sent again), and
    recall's ``context`` gives a hit its neighbouring turns in the hit's JSON form; a bad
    turn is a tool error naming it, and stores nothing."""
    turns = [
        {"speaker": "Sam", "text": "We are planning the autumn trip"},
        {"speaker": "Kim", "text": "Lisbon or Porto?", "at": "2026-05-08T13:56:00Z"},
        {"speaker": "Sam", "text": "Porto, I love the bridges over the river"},
    ]
    async with connect(tmp_path / "m.db") as session:
        bad = await error(
            session,
            "remember_conversation",
            {"turns": [*turns, {"speaker": "Sam", "text": "x", "at": "soon"}], "conversation": "t"},
        )
        assert "turn 3" in bad and "soon" in bad
        assert (await call(session, "count", {})) == {"count": 0}
        saved = await call(session, "remember_conversation", {"turns": turns, "conversation": "t"})
        assert saved["conversation"] == "t" and len(saved["ids"]) == 3
        again = await call(session, "remember_conversation", {"turns": turns, "conversation": "t"})
        assert again["ids"] == saved["ids"]
        found = await call(session, "recall", {"query": "bridges river", "top_k": 1, "context": 1})
        (hit,) = found["hits"]
        assert hit["memory"]["id"] == saved["ids"][2]
        assert [turn["id"] for turn in hit["context"]] == [saved["ids"][1]]
        assert hit["context"][0]["metadata"] == {
            "conversation": "t",
            "turn": 1,
            "speaker": "Kim",
            "at": "2026-05-08T13:56:00.000Z",
        }
