"""Your own vectors over HTTP (issue 49), through a real ``python -m engramdb.server`` on
127.0.0.1 over a SQLite file (embedder ``hash:64``), through the client, and through the
API of a memory without an embedder under uvicorn. A recall takes your query vector; a
write takes none (a stored vector is shared by every scope's memory of its text, which
a token holder may neither learn of nor sway: docs/http.md, "Your own vectors").

Sam's and Alex's tokens share one store (tenant acme), in two scopes.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_helpers import ALEX_TOKEN, SAM_TOKEN, Server, free_port

from engramdb import AsyncMemory, EmbeddingSpace, HashEmbedder, Memory, ValidationError
from engramdb.client import AsyncRemoteMemory, RemoteMemory
from engramdb.driver import RetryPolicy
from engramdb.http_api import parse_tokens
from engramdb.server import App
from engramdb.sqlite import SqliteStore

OWN = EmbeddingSpace("mine", "pipeline-v1", 4)

NO_WAIT = RetryPolicy(initial_delay=0.0, max_delay=0.0)


def axis(i: int, size: int = 64) -> list[float]:
    """A unit vector no text's hash embedding is: it points along one axis."""
    return [1.0 if j == i else 0.0 for j in range(size)]


def vector_of(text: str) -> list[float]:
    """The server's own vector of ``text`` (its embedder is ``hash:64``)."""
    (blob,) = HashEmbedder(64).embed([text], "document")
    return [float(x) for x in blob]


def stored(client: httpx.Client) -> list[Any]:
    """What the token's scope holds, and the store's count (to prove nothing changed)."""
    return [
        client.get("/v1/memories", params={"limit": 100}).json()["memories"],
        client.get("/v1/status").json()["items"],
    ]


def test_recall_searches_your_query_vector_in_the_servers_space(server: Server) -> None:
    """``POST /v1/recall`` searches the body's vector instead of embedding the query: the
    stored text's own vector finds it at similarity 1.0 whatever the query's words, and
    the hit's evidence names the server's space."""
    text = "Sam rides a red bike"
    with server.client(SAM_TOKEN) as sam:
        space = sam.get("/v1/status").json()["space"]
        made = sam.post("/v1/memories", json={"text": text})
        assert made.status_code == 201, made.text
        answer = sam.post(
            "/v1/recall",
            json={"query": "weather", "vector": vector_of(text), "mode": "vector", "top_k": 1},
        )
    assert answer.status_code == 200, answer.text
    (hit,) = answer.json()["hits"]
    assert hit["memory"]["id"] == made.json()["memory"]["id"]
    assert hit["similarity"] == pytest.approx(1.0)
    assert hit["evidence"]["space_id"] == space and space.endswith("@64")


@pytest.mark.parametrize(
    "vector, says",
    [
        ([0.5, 0.5], "vector has 2 dimensions but this memory's space"),
        ("0.5,0.5", "'vector' is '0.5,0.5'; it must be a list"),
        ([0.0] * 64, "all zeros"),
        ([0.1] * 63 + ["x"], "must be a list of 64 finite numbers"),
    ],
)
def test_a_bad_query_vector_is_a_400_that_names_it(server: Server, vector: Any, says: str) -> None:
    """A query vector of another size, not an array of numbers, or all zeros: a 400
    ``invalid_request`` whose message names it."""
    with server.client(SAM_TOKEN) as sam:
        answer = sam.post("/v1/recall", json={"query": "kayak", "vector": vector})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_request"
    assert says in answer.json()["error"]["message"]


def test_a_nan_in_the_body_is_invalid_json(server: Server) -> None:
    """JSON has no NaN: a body that writes one is refused before any check of it."""
    with server.client(SAM_TOKEN) as sam:
        body = '{"query": "kayak", "vector": [NaN' + ", 0.1" * 63 + "]}"
        answer = sam.post("/v1/recall", content=body, headers={"content-type": "application/json"})
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, "invalid_json")


def test_a_write_takes_no_vector_and_stores_nothing(server: Server) -> None:
    """``POST /v1/memories`` and a batch's items refuse ``vector`` as an unknown field
    (400, nothing stored), whether or not another scope holds the text: the answer is
    the same either way, so it tells Alex nothing about Sam's memories."""
    text = "The team meets on Thursdays"
    with server.client(SAM_TOKEN) as sam, server.client(ALEX_TOKEN) as alex:
        assert sam.post("/v1/memories", json={"text": text}).status_code == 201
        before = stored(alex)
        answers = [
            alex.post("/v1/memories", json={"text": given, "vector": axis(8)})
            for given in (text, "A text nobody holds")
        ]
        batch = alex.post(
            "/v1/memories/batch", json={"memories": [{"text": text, "vector": axis(8)}]}
        )
        assert stored(alex) == before
    assert [a.status_code for a in (*answers, batch)] == [400, 400, 400]
    first, second = (a.json()["error"] for a in answers)
    assert first == second and "vector" in first["message"]  # the same answer either way


def test_the_openapi_document_declares_vector_on_recall_only(server: Server) -> None:
    """The recall body declares ``vector`` as an array of numbers; the remember body
    has none."""
    spec = httpx.get(server.url + "/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert "vector" not in schemas["RememberBody"]["properties"]
    recall = spec["paths"]["/v1/recall"]["post"]["requestBody"]["content"]["application/json"]
    body = recall["schema"]
    properties = (
        schemas[body["$ref"].rsplit("/", 1)[1]]["properties"]
        if "$ref" in body
        else (body["properties"])
    )
    assert properties["vector"]["type"] == ["array", "null"]
    assert properties["vector"]["items"] == {"type": "number"}


def test_the_client_passes_your_query_vector(server: Server) -> None:
    """``RemoteMemory.recall`` takes ``vector`` and sends it; a bad one is the server's
    400, raised as ``ValidationError``."""
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        record = sam.remember("Sam sings in a choir")
        hits = sam.recall("x", vector=vector_of("Sam sings in a choir"), mode="vector", top_k=1)
        assert hits[0].memory.id == record.id
        assert hits[0].similarity == pytest.approx(1.0)
        with pytest.raises(ValidationError, match="2 dimensions"):
            sam.recall("choir", vector=[1.0, 0.0])


async def test_the_async_client_passes_your_query_vector(server: Server) -> None:
    """The same through ``AsyncRemoteMemory``."""
    async with AsyncRemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        record = await sam.remember("Sam paints on Sundays")
        hits = await sam.recall(
            "x", vector=vector_of("Sam paints on Sundays"), mode="vector", top_k=1
        )
    assert hits[0].memory.id == record.id
    assert math.isclose(hits[0].similarity or 0.0, 1.0, abs_tol=1e-6)


@pytest.fixture
def vectors_only(tmp_path: Path) -> Iterator[str]:
    """The HTTP API of a memory without an embedder (a SQLite file, space ``OWN``, where
    the operator stored one memory of Sam's with its vector) under uvicorn on 127.0.0.1,
    in a thread of this process; its URL. Sam's token."""
    import uvicorn

    with Memory(SqliteStore(tmp_path / "vectors.db"), None, space=OWN) as operator:
        operator.remember("Sam rides a red bike", ("acme", "user", "sam"), vector=[0, 0, 1, 0])
    store = SqliteStore(tmp_path / "vectors.db")
    memory = AsyncMemory(store, None, space=OWN)
    grants = parse_tokens(json.dumps({SAM_TOKEN: ["acme", "user", "sam"]}))
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            App(grants, lambda grant: memory),
            host="127.0.0.1",
            port=port,
            log_level="error",
            lifespan="off",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    store.close()


def test_a_server_without_an_embedder_searches_only_your_vectors(vectors_only: str) -> None:
    """The API of ``AsyncMemory(store, None, space=...)``: a write (with no vector, as
    every write over HTTP) is a 400 that names the fix, nothing stored; a recall with a
    vector searches the declared space, and one without is answered from the words alone
    (``lexical_only``), as the agent tools' recall is."""
    headers = {"authorization": f"Bearer {SAM_TOKEN}"}
    with httpx.Client(base_url=vectors_only, headers=headers, timeout=10) as sam:
        refused = sam.post("/v1/memories", json={"text": "Sam owns a kayak"})
        assert refused.status_code == 400, refused.text
        assert "no embedder" in refused.json()["error"]["message"]
        assert sam.get("/v1/status").json()["items"] == 1
        assert sam.get("/v1/status").json()["space"] == OWN.id

        by_vector = sam.post(
            "/v1/recall", json={"query": "x", "vector": [0, 0, 1, 0], "mode": "vector"}
        ).json()
        by_words = sam.post("/v1/recall", json={"query": "bike"}).json()

    assert by_vector["status"] == "used"
    assert by_vector["hits"][0]["similarity"] == pytest.approx(1.0)
    assert by_vector["hits"][0]["evidence"]["space_id"] == OWN.id
    assert (by_words["status"], by_words["hits"][0]["memory"]["text"]) == (
        "lexical_only",
        "Sam rides a red bike",
    )
