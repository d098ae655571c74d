"""Conversations over HTTP, through a real ``engramdb serve`` on 127.0.0.1: the client's
``remember_conversation`` and ``recall(context=N)`` answer as the bound view does
(``hit.context`` read back as records), a bad turn is one 400 that names it and stores
nothing, and a hit's context never comes from another token's scope, nor from a read
scope's neighbour (``docs/conversations.md``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_helpers import ALEX_TOKEN, BOB_TOKEN, SAM_TOKEN, Server, start

from engramdb import Memory, MemoryRecord, ValidationError
from engramdb.client import AsyncRemoteMemory, RemoteMemory
from engramdb.driver import RetryPolicy
from engramdb.providers import embedder_from_url
from engramdb.sqlite import SqliteStore

NO_WAIT = RetryPolicy(initial_delay=0.0, max_delay=0.0)
TRIP = [
    {"speaker": "Sam", "text": "We are planning the autumn trip", "at": "2026-05-08T13:56:00Z"},
    {"speaker": "Kim", "text": "Lisbon or Porto?", "at": "2026-05-08T13:56:00Z"},
    {"speaker": "Sam", "text": "Porto, I love the bridges over the river"},
    {"speaker": "Kim", "text": "Then we book the train"},
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server of its own per test: each starts from an empty file."""
    running = start(tmp_path)
    yield running
    running.stop()


def test_the_client_remembers_a_conversation_and_recalls_a_turn_with_its_context(
    server: Server,
) -> None:
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        records = sam.remember_conversation(TRIP, conversation="trip")
        assert [r.metadata["turn"] for r in records] == [0, 1, 2, 3]
        assert records[0].metadata["at"] == "2026-05-08T13:56:00.000Z"
        assert [r.metadata["speaker"] for r in records] == ["Sam", "Kim", "Sam", "Kim"]
        again = sam.remember_conversation(TRIP, conversation="trip")
        assert [r.id for r in again] == [r.id for r in records]
        assert sam.count() == 4
        hits = sam.recall("bridges river", top_k=1, mode="lexical", context=1)
        (hit,) = hits
        assert hit.memory.id == records[2].id
        assert all(isinstance(r, MemoryRecord) for r in hit.context)
        assert [r.id for r in hit.context] == [records[1].id, records[3].id]
        assert sam.recall("bridges river", top_k=1, mode="lexical")[0].context == ()


async def test_the_async_client_reads_the_same_context(server: Server) -> None:
    async with AsyncRemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        records = await sam.remember_conversation(TRIP, conversation="trip")
        (hit,) = await sam.recall("bridges river", top_k=1, mode="lexical", context=2)
        assert [r.id for r in hit.context] == [records[0].id, records[1].id, records[3].id]


def test_a_bad_turn_is_one_400_naming_it_and_stores_nothing(server: Server) -> None:
    """A bad turn, more turns than the route takes, or a context past 20: each one 400
    that names it, and nothing is stored."""
    bad = [*TRIP[:2], {"speaker": "Sam", "text": "hi", "at": "last tuesday"}]
    with server.client(SAM_TOKEN) as http:
        answer = http.post("/v1/conversations", json={"turns": bad, "conversation": "trip"})
        assert answer.status_code == 400, answer.text
        assert "turn 2" in answer.json()["error"]["message"]
        assert "last tuesday" in answer.json()["error"]["message"]
        many = [{"speaker": "Sam", "text": f"line {i}"} for i in range(101)]
        answer = http.post("/v1/conversations", json={"turns": many, "conversation": "trip"})
        assert answer.status_code == 400 and "1 to 100 items" in answer.text
        assert http.get("/v1/count").json() == {"count": 0}
        sent = http.post("/v1/conversations", json={"turns": TRIP, "conversation": "trip"})
        assert sent.status_code == 201
        assert len(sent.json()["memories"]) == 4
        wide = http.post("/v1/recall", json={"query": "bridges", "context": 99})
        assert wide.status_code == 400
    with (
        RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam,
        pytest.raises(ValidationError, match="speaker"),
    ):
        sam.remember_conversation([{"text": "no speaker"}], conversation="trip")


def acme_file(server: Server) -> Path:
    """The file of the tenant "acme" (the server keeps a file per tenant)."""
    digest = hashlib.sha256(b"acme").hexdigest()
    return server.db.parent / "memory.sqlite3.d" / f"{digest}.sqlite3"


def test_context_never_comes_from_another_scope(server: Server) -> None:
    """Kim's conversation, in Sam's tenant file, has Sam's id and places; Sam's hits never
    bring Kim's turns, nor do Bob's (another tenant). Alex reads ("acme", "shared"): a
    hit there brings that scope's neighbours only, not those of the scope beside it with
    the same conversation id."""
    bobs = [{"speaker": "Bob", "text": f"Bob's private line {i}"} for i in range(4)]
    with (
        RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam,
        RemoteMemory(server.url, BOB_TOKEN, retry=NO_WAIT) as bob,
        RemoteMemory(server.url, ALEX_TOKEN, retry=NO_WAIT) as alex,
    ):
        sam.remember_conversation(TRIP, conversation="trip")
        bob.remember_conversation(bobs, conversation="trip")
        with Memory(SqliteStore(acme_file(server)), embedder_from_url("hash:64")) as operator:
            for scope, line in [
                (("acme", "user", "kim"), "Kim's private line"),
                (("acme", "shared"), "shared note"),
                (("acme", "hidden"), "hidden note"),
            ]:
                turns = [{"speaker": "Ops", "text": f"{line} {i}"} for i in range(4)]
                operator.remember_conversation(turns, scope, conversation="trip")
        hits = sam.recall("private line bridges", top_k=10, context=2)
        assert [hit.memory.scope for hit in hits] == [("acme", "user", "sam")]
        assert len(hits[0].context) == 3
        assert {r.scope for r in hits[0].context} == {("acme", "user", "sam")}
        hits = alex.recall("shared note 1", top_k=1, mode="lexical", context=1)
        assert hits[0].memory.scope == ("acme", "shared")
        assert [r.text for r in hits[0].context] == ["shared note 0", "shared note 2"]
