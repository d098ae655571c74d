"""``engramdb.connect(url, token)`` and ``engramdb.connect_async``: the one-call start of
a remote engramdb answers the client of a real ``engramdb serve``, bound to the token's
scope, as ``engramdb.open(scope=...)`` answers a local view."""

from __future__ import annotations

import asyncio

from server_helpers import ALEX_TOKEN, SAM_TOKEN, Server

import engramdb
from engramdb.client import AsyncRemoteMemory, RemoteMemory


def test_connect_answers_the_remote_view_of_the_tokens_scope(server: Server) -> None:
    with engramdb.connect(server.url, SAM_TOKEN) as sam:
        assert type(sam) is RemoteMemory
        sam.remember("Sam prefers aisle seats on long flights")
        assert sam.recall("seat preference")[0].memory.text.startswith("Sam prefers aisle")
    with engramdb.connect(server.url, ALEX_TOKEN) as alex:
        assert [h.memory.text for h in alex.recall("seat preference")] == []


def test_connect_async_answers_the_async_client(server: Server) -> None:
    async def main() -> tuple[int, int]:
        async with engramdb.connect_async(server.url, SAM_TOKEN) as sam:
            assert type(sam) is AsyncRemoteMemory
            before = await sam.count()
            await sam.remember("Sam drinks green tea in the afternoon")
            return before, await sam.count()

    before, after = asyncio.run(main())
    assert after == before + 1
