"""engramdb.server.App driven directly as ASGI (no uvicorn): how it reads a body."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from engramdb import AsyncMemory, HashEmbedder, InMemoryStore
from engramdb.http_api import MAX_BODY_BYTES, parse_tokens
from engramdb.server import App

GRANTS = parse_tokens(json.dumps({"tok": ["acme", "user", "sam"]}))


def run(
    app: App, messages: list[dict[str, Any]], endless: bytes | None = None
) -> tuple[int, Any, int]:
    """Send one POST /v1/memories; answer (status, JSON body, body messages consumed)."""
    sent: list[dict[str, Any]] = []
    consumed = 0

    async def receive() -> dict[str, Any]:
        nonlocal consumed
        consumed += 1
        if consumed <= len(messages):
            return messages[consumed - 1]
        assert endless is not None, "the app read past the last message"
        return {"type": "http.request", "body": endless, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/memories",
        "raw_path": b"/v1/memories",
        "query_string": b"",
        "headers": [(b"authorization", b"Bearer tok"), (b"content-type", b"application/json")],
    }
    asyncio.run(app(scope, receive, send))
    start, body = sent
    return start["status"], json.loads(body["body"]), consumed


def make_app() -> tuple[App, AsyncMemory]:
    memory = AsyncMemory(InMemoryStore(), HashEmbedder())
    return App(GRANTS, lambda grant: memory), memory


def test_an_endless_chunked_body_is_cut_off_at_the_limit() -> None:
    """A body with no end (no Content-Length) is read only until it passes the limit, then
    answered 413 payload_too_large; nothing is stored."""
    app, memory = make_app()
    chunk = b"a" * 65536
    status, body, consumed = run(app, [], endless=chunk)
    assert (status, body["error"]["code"]) == (413, "payload_too_large")
    assert consumed == MAX_BODY_BYTES // len(chunk) + 1
    assert asyncio.run(memory.list(("acme", "user", "sam"))) == []


def test_a_body_in_many_messages_is_joined() -> None:
    """A body split across ASGI messages is read whole and stored once."""
    app, memory = make_app()
    parts = [b'{"te', b'xt": "Sam is ', b'vegetarian"}']
    messages = [
        {"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]
    status, body, _ = run(app, messages)
    assert (status, body["memory"]["text"]) == (201, "Sam is vegetarian")
    assert len(asyncio.run(memory.list(("acme", "user", "sam")))) == 1


def test_a_client_that_leaves_mid_body_gets_a_4xx_and_nothing_is_stored() -> None:
    """http.disconnect before the body ends is a 400, not a crash, and stores nothing."""
    app, memory = make_app()
    messages = [
        {"type": "http.request", "body": b'{"text": "half', "more_body": True},
        {"type": "http.disconnect"},
    ]
    status, body, _ = run(app, messages)
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    assert asyncio.run(memory.list(("acme", "user", "sam"))) == []


def test_a_failing_memory_is_a_503_and_its_details_go_to_standard_error(
    capsys: Any,
) -> None:
    """The host writes the reply's log line (the core prints nothing); the body keeps the
    database's words out."""
    from engramdb import StoreError

    def broken(grant: Any) -> Any:
        raise StoreError("disk /srv/engramdb is full")

    app = App(GRANTS, broken)
    body = json.dumps({"text": "Sam is vegetarian"}).encode()
    status, answer, _ = run(app, [{"type": "http.request", "body": body}])
    assert (status, answer["error"]["code"]) == (503, "store_unavailable")
    assert "/srv/engramdb" not in json.dumps(answer)
    out, err = capsys.readouterr()
    assert out == "" and "engramdb: store error: disk /srv/engramdb is full" in err


def test_tenants_give_each_memory_the_reranker_engramdb_reranker_names(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """``engramdb serve``'s tenants (one memory each) share the reranker of
    ``ENGRAMDB_RERANKER``; without it they have none."""
    from engramdb.server import Tenants
    from engramdb.settings import resolve

    monkeypatch.setenv("COHERE_API_KEY", "engramdb-FAKE-KEY")
    (grant,) = GRANTS.values()
    db = str(tmp_path / "serve.db")
    settings = resolve(db=db, environ={"ENGRAMDB_RERANKER": "cohere:rerank-v3.5"})
    tenants = Tenants(settings, GRANTS, HashEmbedder(), maintain=False)
    reranker = tenants.memory(grant).reranker
    assert reranker is not None and reranker.id == "cohere/rerank-v3.5"
    asyncio.run(tenants.aclose())
    plain = Tenants(resolve(db=db, environ={}), GRANTS, HashEmbedder(), maintain=False)
    assert plain.memory(grant).reranker is None
    asyncio.run(plain.aclose())
