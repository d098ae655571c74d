"""Your own vectors over HTTP (issue 49), through a real ``python -m engramdb.server`` on
127.0.0.1 over a SQLite file (embedder ``hash:64``), through the client, and through the
API of a memory without an embedder under uvicorn.

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

from engramdb import AsyncMemory, EmbeddingSpace, ValidationError
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


def stored(client: httpx.Client) -> list[Any]:
    """What the token's scope holds, and the store's count (to prove nothing changed)."""
    return [
        client.get("/v1/memories", params={"limit": 100}).json()["memories"],
        client.get("/v1/status").json()["items"],
    ]


def test_remember_and_recall_take_your_vector_in_the_servers_space(server: Server) -> None:
    """``POST /v1/memories`` stores the body's vector instead of embedding the text, and
    ``POST /v1/recall`` searches the body's vector: the hit's similarity is that of the
    two vectors (1.0 for the same one; the embedder's own vector of the text is far from
    an axis), and its evidence names the server's space."""
    with server.client(SAM_TOKEN) as sam:
        space = sam.get("/v1/status").json()["space"]
        made = sam.post("/v1/memories", json={"text": "Sam rides a red bike", "vector": axis(3)})
        assert made.status_code == 201, made.text
        memory_id = made.json()["memory"]["id"]

        answer = sam.post(
            "/v1/recall",
            json={"query": "bike", "vector": axis(3), "mode": "vector", "top_k": 1},
        )

    assert answer.status_code == 200, answer.text
    (hit,) = answer.json()["hits"]
    assert hit["memory"]["id"] == memory_id
    assert hit["similarity"] == pytest.approx(1.0)
    assert hit["evidence"]["space_id"] == space and space.endswith("@64")


@pytest.mark.parametrize(
    "vector, code, says",
    [
        ([0.5, 0.5], "invalid_request", "vector has 2 dimensions but this memory's space"),
        ("0.5,0.5", "invalid_request", "'vector' is '0.5,0.5'; it must be a list"),
        ([0.0] * 64, "invalid_request", "all zeros"),
        ([0.1] * 63 + ["x"], "invalid_request", "must be a list of 64 finite numbers"),
    ],
)
def test_a_bad_vector_is_a_400_that_names_it_and_stores_nothing(
    server: Server, vector: Any, code: str, says: str
) -> None:
    """A vector of another size, not an array of numbers, or all zeros: 400 with a
    message that names it, on remember and recall, and nothing is stored."""
    with server.client(SAM_TOKEN) as sam:
        before = stored(sam)
        for path, body in (
            ("/v1/memories", {"text": "Sam owns a blue kayak", "vector": vector}),
            ("/v1/recall", {"query": "kayak", "vector": vector}),
        ):
            answer = sam.post(path, json=body)
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["code"] == code
            assert says in answer.json()["error"]["message"]
        assert stored(sam) == before


def test_a_nan_in_the_body_is_invalid_json_and_stores_nothing(server: Server) -> None:
    """JSON has no NaN: a body that writes one is refused before any check of it."""
    with server.client(SAM_TOKEN) as sam:
        before = stored(sam)
        body = '{"text": "Sam owns a kayak", "vector": [NaN' + ", 0.1" * 63 + "]}"
        answer = sam.post(
            "/v1/memories", content=body, headers={"content-type": "application/json"}
        )
        assert (answer.status_code, answer.json()["error"]["code"]) == (400, "invalid_json")
        assert stored(sam) == before


def test_another_scope_cannot_give_a_stored_text_another_vector(server: Server) -> None:
    """Sam's vector of a text is never the vector of Alex's memory of that text: Alex
    writing the same text with another vector is refused (400), nothing is stored, and
    Sam's memory still scores with Sam's vector."""
    text = "The team meets on Thursdays"
    with server.client(SAM_TOKEN) as sam, server.client(ALEX_TOKEN) as alex:
        assert sam.post("/v1/memories", json={"text": text, "vector": axis(7)}).status_code == 201
        before = stored(alex)

        refused = alex.post("/v1/memories", json={"text": text, "vector": axis(8)})

        assert refused.status_code == 400, refused.text
        assert "differs from the vector this store already holds" in refused.text
        assert stored(alex) == before
        again = sam.post(
            "/v1/recall", json={"query": "team", "vector": axis(7), "mode": "vector"}
        ).json()
        assert again["hits"][0]["memory"]["text"] == text
        assert again["hits"][0]["similarity"] == pytest.approx(1.0)


def test_a_batch_takes_each_items_vector(server: Server) -> None:
    """Each item of ``POST /v1/memories/batch`` may carry its ``vector``."""
    with server.client(SAM_TOKEN) as sam:
        made = sam.post(
            "/v1/memories/batch",
            json={
                "memories": [
                    {"text": "Sam has a cat", "vector": axis(11)},
                    {"text": "Sam has a dog", "vector": axis(12)},
                ]
            },
        )
        assert made.status_code == 201, made.text
        hits = sam.post(
            "/v1/recall", json={"query": "pet", "vector": axis(12), "mode": "vector"}
        ).json()["hits"]
    assert hits[0]["memory"]["text"] == "Sam has a dog"
    assert hits[0]["similarity"] == pytest.approx(1.0)


def test_the_openapi_document_declares_vector_as_an_array_of_numbers(server: Server) -> None:
    """The remember and recall bodies declare ``vector`` with its schema."""
    spec = httpx.get(server.url + "/openapi.json").json()
    schemas = spec["components"]["schemas"]
    remember = schemas["RememberBody"]["properties"]["vector"]
    assert (remember["type"], remember["items"]) == (["array", "null"], {"type": "number"})
    recall = spec["paths"]["/v1/recall"]["post"]["requestBody"]["content"]["application/json"]
    body = recall["schema"]
    properties = (
        schemas[body["$ref"].rsplit("/", 1)[1]]["properties"]
        if "$ref" in body
        else (body["properties"])
    )
    assert properties["vector"]["items"] == {"type": "number"}


def test_the_client_passes_your_vectors(server: Server) -> None:
    """``RemoteMemory.remember``/``recall`` take ``vector`` and send it; a bad one is the
    server's 400, raised as ``ValidationError``."""
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        record = sam.remember("Sam sings in a choir", vector=axis(20))
        hits = sam.recall("choir", vector=axis(20), mode="vector", top_k=1)
        assert hits[0].memory.id == record.id
        assert hits[0].similarity == pytest.approx(1.0)
        with pytest.raises(ValidationError, match="2 dimensions"):
            sam.remember("Sam sings loudly", vector=[1.0, 0.0])


async def test_the_async_client_passes_your_vectors(server: Server) -> None:
    """The same through ``AsyncRemoteMemory``."""
    async with AsyncRemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        record = await sam.remember("Sam paints on Sundays", vector=axis(30))
        hits = await sam.recall("paint", vector=axis(30), mode="vector", top_k=1)
    assert hits[0].memory.id == record.id
    assert math.isclose(hits[0].similarity or 0.0, 1.0, abs_tol=1e-6)


@pytest.fixture
def vectors_only(tmp_path: Path) -> Iterator[str]:
    """The HTTP API of a memory without an embedder (a SQLite file, space ``OWN``) under
    uvicorn on 127.0.0.1, in a thread of this process; its URL. Sam's token."""
    import uvicorn

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


def test_a_server_without_an_embedder_stores_and_searches_only_your_vectors(
    vectors_only: str,
) -> None:
    """The API of ``AsyncMemory(store, None, space=...)``: a memory without a vector is
    a 400 that names the fix (nothing stored); with one it is stored in the declared
    space; a recall with a vector searches it, and one without is answered from the
    words alone (``lexical_only``), as the agent tools' recall is."""
    headers = {"authorization": f"Bearer {SAM_TOKEN}"}
    with httpx.Client(base_url=vectors_only, headers=headers, timeout=10) as sam:
        refused = sam.post("/v1/memories", json={"text": "Sam rides a red bike"})
        assert refused.status_code == 400, refused.text
        assert "no embedder" in refused.json()["error"]["message"]
        assert sam.get("/v1/status").json()["items"] == 0

        made = sam.post(
            "/v1/memories", json={"text": "Sam rides a red bike", "vector": [0, 0, 1, 0]}
        )
        assert made.status_code == 201, made.text
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
