"""Documents over HTTP: ``POST /v1/documents``, ``DELETE /v1/documents?source=...`` and
``POST /v1/documents/parts`` against a real ``engramdb serve`` on 127.0.0.1, through
``engramdb.client`` (sync and async) as the bound view answers them; the size limit the
OpenAPI document states (a larger text is one ``text_too_large`` naming the limit, and
stores nothing); and a document sent in parts, invisible until its last part, through a
wrong checksum and a server restart in the middle."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import pytest
from server_helpers import SAM_TOKEN, Server, start

from engramdb import MemoryRecord, ValidationError
from engramdb.client import AsyncRemoteMemory, RemoteMemory
from engramdb.documents import Document
from engramdb.driver import RetryPolicy
from engramdb.http_api import MAX_BODY_BYTES, MAX_DOCUMENT_BYTES, openapi_document

NO_WAIT = RetryPolicy(initial_delay=0.0, max_delay=0.0)
TRIP = "# Trip\n\nSam packs light.\n\n## Flights\n\nSam flies to Lisbon\non Tuesday morning.\n"


def test_a_document_round_trips_through_the_client(server: Server) -> None:
    """remember_document answers the Document the bound view answers (its chunks'
    records say where in the source, and which lines, each comes from); the same text
    again adds nothing; recall finds a chunk; forget_document forgets every chunk."""
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        document = sam.remember_document(TRIP, source="notes/trip.md", max_chars=60)
        assert isinstance(document, Document) and document.added
        assert document.source == "notes/trip.md" and len(document.chunks) == 2
        assert all(isinstance(chunk, MemoryRecord) for chunk in document.chunks)
        flights = document.chunks[1]
        assert flights.text == "## Flights\n\nSam flies to Lisbon\non Tuesday morning."
        assert flights.metadata["document_lines"] == [5, 8]
        assert TRIP[flights.metadata["document_start"] : flights.metadata["document_end"]] == (
            flights.text
        )
        again = sam.remember_document(TRIP, source="notes/trip.md", max_chars=60)
        assert (again.added, again.chunks) == (False, document.chunks)
        hits = sam.recall("Lisbon on Tuesday", top_k=1)
        assert hits[0].memory.id == flights.id
        assert sam.forget_document("notes/trip.md") == 2
        assert sam.forget_document("notes/trip.md") == 0
        assert sam.list(filter={"metadata": {"document_id": document.id}}) == []


async def test_the_async_client_remembers_and_forgets_a_document(server: Server) -> None:
    async with AsyncRemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        document = await sam.remember_document(TRIP, source="async.md", metadata={"k": 1})
        assert document.added and document.chunks[0].metadata["k"] == 1
        assert await sam.forget_document("async.md") == len(document.chunks)


def test_the_openapi_document_states_the_size_limit() -> None:
    """The body of POST /v1/documents states the text's limit (characters and UTF-8
    bytes), and the body limit leaves room for it escaped and with its metadata."""
    text = openapi_document()["components"]["schemas"]["RememberDocumentBody"]["properties"]
    assert text["text"]["maxLength"] == MAX_DOCUMENT_BYTES
    assert text["text"]["x-max-utf8-bytes"] == MAX_DOCUMENT_BYTES
    assert 2 * MAX_DOCUMENT_BYTES + 16 * 1024 + 8 * 1024 <= MAX_BODY_BYTES


def test_a_document_at_the_limit_fits_the_body_however_it_escapes(server: Server) -> None:
    """A text of exactly the limit, every character one JSON escapes to two bytes (a
    quote), with 12 KiB of metadata, is one body the server reads and stores."""
    text = '"' * MAX_DOCUMENT_BYTES
    metadata = {"note": "m" * 12 * 1024}
    body = json.dumps({"text": text, "source": "quotes.md", "metadata": metadata})
    assert len(body.encode()) <= MAX_BODY_BYTES
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        document = sam.remember_document(text, source="quotes.md", metadata=metadata)
        assert "".join(chunk.text for chunk in document.chunks) == text
        assert sam.forget_document("quotes.md") == len(document.chunks)


def test_a_document_over_the_limit_is_one_clear_error_and_stores_nothing(server: Server) -> None:
    """One byte of UTF-8 over the limit (fewer characters than the limit: a two-byte
    character) is a 413 text_too_large that names the size and the limit; the client
    raises it as a ValidationError; nothing of the document is stored."""
    text = "é" * (MAX_DOCUMENT_BYTES // 2) + "x"
    assert len(text) < MAX_DOCUMENT_BYTES < len(text.encode())
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        before = sam.count()
        with pytest.raises(ValidationError, match=f"send at most {MAX_DOCUMENT_BYTES}"):
            sam.remember_document(text, source="big.md")
        assert sam.count() == before
    answer = httpx.post(
        server.url + "/v1/documents",
        json={"text": text, "source": "big.md"},
        headers={"authorization": f"Bearer {SAM_TOKEN}"},
    )
    assert (answer.status_code, answer.json()["error"]["code"]) == (413, "text_too_large")
    assert f"{len(text.encode())} bytes" in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    "body, said",
    [
        ({"text": "a\x00b", "source": "nul.md"}, "NUL character"),
        ({"text": "text", "source": " "}, "source"),
        ({"text": "text", "source": "s.md", "max_chars": 3}, "max_chars"),
        ({"text": "text", "source": "s.md", "metadata": {"document_id": "x"}}, "document_id"),
    ],
)
def test_a_bad_document_is_a_400_naming_the_fault_and_stores_nothing(
    server: Server, body: dict[str, object], said: str
) -> None:
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        before = sam.count()
        answer = httpx.post(
            server.url + "/v1/documents",
            json=body,
            headers={"authorization": f"Bearer {SAM_TOKEN}"},
        )
        assert answer.status_code == 400 and said in answer.json()["error"]["message"]
        assert sam.count() == before


LONG = "".join(f"## Day {n}\n\nSam walks {n} km along the river.\n\n" for n in range(1, 13))
SHA = hashlib.sha256(LONG.encode()).hexdigest()


def thirds(text: str) -> list[str]:
    """``text`` in three parts, cut anywhere (the server joins them before cutting chunks)."""
    third = len(text) // 3
    return [text[:third], text[third : 2 * third], text[2 * third :]]


def send(sam: RemoteMemory, source: str, part: int, text: str, sha: str = SHA) -> object:
    return sam.remember_document_part(text, source=source, part=part, parts=3, sha256=sha)


def held_chunks(sam: RemoteMemory, source: str) -> list[MemoryRecord]:
    return sam.list(limit=500, filter={"metadata": {"document_source": source}})


def test_a_document_sent_in_parts_is_stored_only_when_its_last_part_arrives(
    server: Server,
) -> None:
    """Parts 0 and 2 store nothing (no chunk is listed or recalled); part 2 again
    changes nothing; part 1 completes the text, which is remembered as one document;
    every part sent again remembers the same text: nothing added, the same chunks."""
    parts = thirds(LONG)
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        first = send(sam, "walks.md", 0, parts[0])
        assert (first.received, first.document) == ((0,), None)
        assert send(sam, "walks.md", 2, parts[2]).received == (0, 2)
        assert send(sam, "walks.md", 2, parts[2]).received == (0, 2)
        assert held_chunks(sam, "walks.md") == []
        hits = sam.recall("Sam walks 12 km along the river", top_k=20)
        assert all(hit.memory.metadata.get("document_source") != "walks.md" for hit in hits)

        done = send(sam, "walks.md", 1, parts[1])
        assert done.received == (0, 1, 2) and done.document is not None
        assert done.document.added and done.document.sha256 == SHA
        assert "".join(chunk.text + "\n\n" for chunk in done.document.chunks) == LONG
        assert sorted(r.id for r in held_chunks(sam, "walks.md")) == sorted(
            chunk.id for chunk in done.document.chunks
        )
        for position in (0, 1):
            assert send(sam, "walks.md", position, parts[position]).document is None
        again = send(sam, "walks.md", 2, parts[2])
        assert again.document is not None and not again.document.added
        assert again.document.chunks == done.document.chunks
        assert sam.forget_document("walks.md") == len(done.document.chunks)


def test_parts_that_do_not_make_the_declared_text_store_nothing(server: Server) -> None:
    """A part sent with another text than the one the SHA-256 names: the last part is a
    400 saying so, nothing is stored, and the parts are dropped (a correct
    part then starts again)."""
    parts = thirds(LONG)
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        send(sam, "wrong.md", 0, parts[0])
        send(sam, "wrong.md", 1, parts[1].replace("river", "RIVER"))
        with pytest.raises(ValidationError, match=r"\(a part differs\); send every part again"):
            send(sam, "wrong.md", 2, parts[2])
        assert held_chunks(sam, "wrong.md") == []
        assert send(sam, "wrong.md", 0, parts[0]).received == (0,)


@pytest.mark.parametrize(
    "fields, said",
    [
        ({"part": 3, "parts": 3}, "part=3 must be a part's position, from 0 to 2"),
        ({"part": 0, "parts": 65}, "parts"),
        ({"part": 0, "parts": 2, "sha256": "ABC"}, "sha256='ABC' must be the SHA-256"),
    ],
)
def test_a_bad_part_is_a_400_and_holds_nothing(
    server: Server, fields: dict[str, object], said: str
) -> None:
    body = {"text": "some text", "source": "bad.md", "sha256": SHA, **fields}
    answer = httpx.post(
        server.url + "/v1/documents/parts",
        json=body,
        headers={"authorization": f"Bearer {SAM_TOKEN}"},
    )
    assert answer.status_code == 400 and said in answer.json()["error"]["message"]


def test_a_restart_in_the_middle_leaves_nothing_and_says_what_to_send_again(
    tmp_path: Path,
) -> None:
    """The parts wait in the server's memory, not in the store: after a restart between
    two parts nothing of the document is stored, the next part's answer says it holds
    that part only, and sending the others completes the document."""
    parts = thirds(LONG)
    before = start(tmp_path)
    try:
        with RemoteMemory(before.url, SAM_TOKEN, retry=NO_WAIT) as sam:
            send(sam, "walks.md", 0, parts[0])
            send(sam, "walks.md", 1, parts[1])
    finally:
        before.stop()
    after = start(tmp_path)
    try:
        with RemoteMemory(after.url, SAM_TOKEN, retry=NO_WAIT) as sam:
            upload = send(sam, "walks.md", 2, parts[2])
            assert (upload.received, upload.document) == ((2,), None)
            assert sam.count() == 0
            send(sam, "walks.md", 0, parts[0])
            done = send(sam, "walks.md", 1, parts[1])
            assert done.document is not None and sam.count() == len(done.document.chunks)
    finally:
        after.stop()
