"""``count``: the view operation added by its declaration alone (``@view_op`` on
``AsyncBoundMemory.count``; ``tools/unasync.py`` wrote the sync view and the client). The
same number on every face: the library's views (sync and async), ``GET /v1/count`` of a
real ``engramdb serve`` (and its OpenAPI document), the client (sync and async), the
agent tool (so MCP) and the ``engramdb count`` command; another scope's memories, the
read scopes' and the session's own count as the view says."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path

import pytest
from server_helpers import ALEX_TOKEN, SAM_TOKEN, Server

from engramdb import AsyncMemory, HashEmbedder, InMemoryStore, Memory, memory_tools
from engramdb.cli import main
from engramdb.client import AsyncRemoteMemory, RemoteMemory
from engramdb.driver import RetryPolicy
from engramdb.http_api import openapi_document
from engramdb.sqlite import SqliteStore

NO_WAIT = RetryPolicy(initial_delay=0.0, max_delay=0.0)


def test_the_views_count_their_scope_and_session_only() -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    sam = memory.bind(("acme", "sam"), session="chat-1", read=[("acme", "shared")])
    memory.bind(("acme", "shared")).remember("the office opens at 9")
    memory.bind(("acme", "alex")).remember("Alex likes tea")
    assert sam.count() == 0
    sam.remember("Sam likes coffee")
    sam.remember("Sam is in Oslo today", durability="session")
    assert sam.count() == 2 == sam.status().items
    assert memory.bind(("acme", "sam")).count() == 1  # the session is its own


def test_the_async_view_counts_the_same() -> None:
    async def run() -> tuple[int, int]:
        memory = AsyncMemory(InMemoryStore(), HashEmbedder())
        view = memory.bind(("acme", "sam"))
        await view.remember_many([{"text": "one"}, {"text": "two"}, {"text": "three"}])
        await view.forget((await view.list(limit=1))[0].id)
        return await view.count(), (await view.status()).items

    assert asyncio.run(run()) == (2, 2)


def test_http_the_client_and_openapi_count_the_tokens_scope(server: Server) -> None:
    document = openapi_document()
    answer = document["paths"]["/v1/count"]["get"]["responses"]["200"]["content"]
    assert answer["application/json"]["schema"] == {"$ref": "#/components/schemas/CountAnswer"}
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        sam.forget_all()
        sam.remember_many([{"text": "Sam likes coffee"}, {"text": "Sam flies on Monday"}])
        with RemoteMemory(server.url, ALEX_TOKEN, retry=NO_WAIT) as alex:
            alex.forget_all()
            alex.remember("Alex likes tea")
            assert (sam.count(), alex.count()) == (2, 1)
        with server.client(SAM_TOKEN) as http:
            raw = http.get("/v1/count")
        assert (raw.status_code, raw.json()) == (200, {"count": 2})

        async def remote() -> int:
            async with AsyncRemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as view:
                return await view.count()

        assert asyncio.run(remote()) == 2
        sam.forget_all()


def test_the_tool_and_the_cli_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "cli.db"
    memory = Memory(SqliteStore(db), HashEmbedder(64))
    view = memory.bind(("acme", "sam"))
    view.remember_many([{"text": "a fact"}, {"text": "another fact"}])
    tools = memory_tools(view, tools=["count"])
    assert tools.specs[0]["function"]["parameters"]["properties"] == {}
    assert tools.dispatch("count", {}) == {"count": 2}
    assert tools.dispatch("count", {"scope": ["acme"]})["error"].startswith("count does not take")
    memory.close()

    monkeypatch.setenv("ENGRAMDB_EMBEDDER", "hash:64")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    assert _printed(db, "count") == "2"
    assert json.loads(_printed(db, "count", "--json")) == {"count": 2}


def _printed(db: Path, *args: str) -> str:
    """What ``engramdb --db DB --scope acme/sam ARGS`` prints, run in process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--db", str(db), "--scope", "acme/sam", *args]) == 0
    return out.getvalue().strip()
