"""``engramdb.client`` against a real ``engramdb serve`` on 127.0.0.1: the bound view's
methods over HTTP, answered as the bound view answers them, errors mapped onto the
error tree, and 429 / 5xx retried (through a real flaky proxy in front of the server)."""

from __future__ import annotations

import asyncio
import http.server
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_helpers import ALEX_TOKEN, BOB_TOKEN, SAM_TOKEN, Server

import engramdb
from engramdb import (
    ConfigurationError,
    ConflictError,
    Hits,
    Memory,
    MemoryRecord,
    StoreError,
    ValidationError,
)
from engramdb.client import AsyncRemoteMemory, RemoteMemory
from engramdb.driver import RetryPolicy
from engramdb.providers import embedder_from_url
from engramdb.sqlite import SqliteStore

NO_WAIT = RetryPolicy(initial_delay=0.0, max_delay=0.0)


def test_every_method_round_trips_as_engramdb_types(server: Server) -> None:
    """remember, get, recall (a hit's evidence cites the record), update with and
    without ``expected_revision``, history, list, list_scopes, complete, feedback,
    status, forget: each answers what the bound view answers, typed."""
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        tea = sam.remember("Sam drinks green tea", labels={"topic": ["drinks"]})
        assert isinstance(tea, MemoryRecord) and tea.scope == ("acme", "user", "sam")
        assert sam.get(tea.id) == tea
        hits = sam.recall("green tea")
        assert isinstance(hits, Hits) and hits.mode == "hybrid" and hits.selection_id
        assert hits[0].memory == tea and hits[0].evidence["revision"] == 1
        assert hits[0].evidence["content_sha256"] == tea.content_sha256
        changed = sam.update(tea.id, text="Sam drinks black tea", expected_revision=1)
        assert changed is not None and (changed.revision, changed.text) == (
            2,
            "Sam drinks black tea",
        )
        with pytest.raises(ConflictError, match="revision"):
            sam.update(tea.id, importance=0.9, expected_revision=1)
        assert sam.get(tea.id) == changed  # the refused update changed nothing
        assert [r.text for r in sam.history(tea.id) or []] == ["Sam drinks green tea"]
        assert tea.id in [r.id for r in sam.list(limit=10)]
        assert ("acme", "user", "sam") in [s.scope for s in sam.list_scopes()]
        assert sam.complete(hits.selection_id, 1.0) is True
        assert sam.complete(hits.selection_id, 1.0) is False  # a selection is used once
        valued = sam.feedback(tea.id, -0.5)
        assert valued is not None and valued.id == tea.id
        status = sam.status()
        assert (status.engramdb, status.scope) == (engramdb.__version__, ("acme", "user", "sam"))
        assert status.items >= 1 and status.schema_version is not None
        assert sam.forget(tea.id) is True
        assert sam.forget(tea.id) is False  # already gone: what a lost answer's retry sees
        assert sam.get(tea.id) is None and sam.history(tea.id) is None
        assert sam.update(tea.id, text="x") is None and sam.feedback(tea.id, 1.0) is None


def test_another_scope_is_invisible_through_the_client(server: Server) -> None:
    """A token sees its own scope and its read scopes only, whatever id it names."""
    with (
        RemoteMemory(server.url, BOB_TOKEN, retry=NO_WAIT) as bob,
        RemoteMemory(server.url, ALEX_TOKEN, retry=NO_WAIT) as alex,
    ):
        secret = bob.remember("Bob's locker code is 4711")
        assert alex.get(secret.id) is None and alex.forget(secret.id) is False
        assert alex.update(secret.id, text="stolen") is None
        assert all(h.memory.id != secret.id for h in alex.recall("locker code", top_k=20))
        assert bob.get(secret.id) == secret
        assert alex.status().read == (("acme", "shared"),)


def test_remember_many_sends_batches_of_100(server: Server) -> None:
    """More than one request's worth: every item stored, in order, none twice (the
    scope already holding a text answers its memory)."""
    texts = [f"fact number {i} about the fleet" for i in range(230)]
    with RemoteMemory(server.url, ALEX_TOKEN, retry=NO_WAIT) as alex:
        records = alex.remember_many({"text": t} for t in texts)
        assert [r.text for r in records] == texts
        again = alex.remember_many([{"text": texts[0]}, {"text": texts[229]}])
        assert [r.id for r in again] == [records[0].id, records[229].id]
        assert alex.forget_all() >= 230
        assert alex.list() == []


def test_errors_are_engramdb_errors_and_never_show_the_token(server: Server) -> None:
    with RemoteMemory(server.url, "not-a-token-anyone-knows", retry=NO_WAIT) as nobody:
        with pytest.raises(ConfigurationError, match="refused the token") as refused:
            nobody.recall("anything")
        assert "not-a-token-anyone-knows" not in str(refused.value) + repr(nobody)
    with RemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
        with pytest.raises(ValidationError, match="top_k"):
            sam.recall("tea", top_k=0)
        with pytest.raises(ValidationError, match="text"):
            sam.remember("")
        with pytest.raises(ValidationError, match="limit"):
            sam.list(limit=0)
    nowhere = RemoteMemory("http://127.0.0.1:9", SAM_TOKEN, retry=NO_WAIT)
    with nowhere, pytest.raises(StoreError, match=r"could not reach engramdb at 127\.0\.0\.1"):
        nowhere.status()
    with pytest.raises(ConfigurationError, match="token"):
        RemoteMemory(server.url, "")


def test_the_client_answers_as_a_local_bound_view(server: Server, tmp_path: Path) -> None:
    """The same operations through ``memory.bind(scope)`` on a local SQLite file and
    through the client (the server's own file, the same embedder): the same texts,
    revisions, scores, ranks, statuses and empty answers."""
    local_memory = Memory(SqliteStore(tmp_path / "local.db"), embedder_from_url("hash:64"))
    local = local_memory.bind(("globex", "user", "bob"))
    texts = ["Bob flies to Oslo on Monday", "Bob's badge number is 2231", "Oslo is cold"]
    answers: list[list[Any]] = []
    with RemoteMemory(server.url, BOB_TOKEN, retry=NO_WAIT) as remote:
        remote.forget_all()
        for view in (local, remote):
            seen: list[Any] = []
            records = view.remember_many({"text": t} for t in texts)
            seen.append([_shape(r) for r in records])
            for query, mode in (("Oslo", "hybrid"), ("badge", "lexical"), ("Bob flies", "vector")):
                hits = view.recall(query, mode=mode, top_k=3)
                seen.append((hits.status, hits.mode, [_hit(h) for h in hits]))
            updated = view.update(records[0].id, text="Bob flies to Bergen on Monday")
            seen.append(_shape(updated))
            seen.append([_shape(r) for r in view.history(records[0].id) or []])
            seen.append([_shape(r) for r in view.list(limit=2)])
            seen.append((view.forget(records[1].id), view.forget(records[1].id)))
            seen.append((view.get(records[1].id), view.update(records[1].id, text="x")))
            answers.append(seen)
        remote.forget_all()
    local_memory.close()
    assert answers[0] == answers[1]


def test_the_async_client_answers_the_same(server: Server) -> None:
    async def scenario() -> tuple[Any, ...]:
        async with AsyncRemoteMemory(server.url, SAM_TOKEN, retry=NO_WAIT) as sam:
            kept = await sam.remember("Sam's train leaves at 7")
            hits = await sam.recall("train")
            gone = await sam.forget(kept.id)
            return kept.text, hits[0].memory == kept, gone, await sam.get(kept.id)

    assert asyncio.run(scenario()) == ("Sam's train leaves at 7", True, True, None)


# --- retries, through a real proxy that fails on purpose ----------------------------------


class FlakyProxy:
    """An HTTP server on 127.0.0.1 that answers its first ``failures`` requests with
    ``status`` (and ``Retry-After: retry_after``), then passes each request to the real
    engramdb server and its answer back."""

    def __init__(self, upstream: str, failures: int, status: int, retry_after: str | None):
        self.seen = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                proxy.seen += 1
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                if proxy.seen <= failures:
                    self.send_response(status)
                    if retry_after is not None:
                        self.send_header("retry-after", retry_after)
                    error = b'{"error": {"code": "busy", "message": "try again"}}'
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(error)))
                    self.end_headers()
                    self.wfile.write(error)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                answer = httpx.request(
                    self.command, upstream + self.path, content=body, headers=headers
                )
                self.send_response(answer.status_code)
                for name in ("content-type", "content-length"):
                    self.send_header(name, answer.headers[name])
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PATCH = do_DELETE = _any

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def flaky(server: Server, request: pytest.FixtureRequest) -> Iterator[FlakyProxy]:
    failures, status, retry_after = request.param
    proxy = FlakyProxy(server.url, failures, status, retry_after)
    yield proxy
    proxy.close()


@pytest.mark.parametrize("flaky", [(2, 429, "3")], indirect=True)
def test_a_429_waits_as_retry_after_says_then_succeeds(flaky: FlakyProxy) -> None:
    waits: list[float] = []
    with RemoteMemory(flaky.url, SAM_TOKEN, sleep=waits.append) as sam:
        assert sam.status().scope == ("acme", "user", "sam")
    assert (flaky.seen, waits) == (3, [3.0, 3.0])


@pytest.mark.parametrize("flaky", [(3, 503, None)], indirect=True)
def test_5xx_is_retried_within_the_budget_then_a_store_error(flaky: FlakyProxy) -> None:
    waits: list[float] = []
    budget = RetryPolicy(max_retries=2, initial_delay=0.5, multiplier=2.0)
    with RemoteMemory(flaky.url, SAM_TOKEN, retry=budget, sleep=waits.append) as sam:
        with pytest.raises(StoreError, match=r"the server failed: try again \(busy, HTTP 503\)"):
            sam.status()
        assert flaky.seen == 3 and len(waits) == 2  # three attempts, two waits
        assert 0.25 <= waits[0] < 0.5 and 0.5 <= waits[1] < 1.0  # the policy's back-off
        assert sam.status().items >= 0  # the proxy passes the fourth request on


def _shape(record: MemoryRecord | None) -> tuple[Any, ...] | None:
    """A record without what differs between two stores (ids and times)."""
    if record is None:
        return None
    return (record.scope, record.text, record.metadata, record.labels, record.revision)


def _hit(hit: Any) -> tuple[Any, ...]:
    return (hit.memory.text, hit.score, hit.similarity, hit.vector_rank, hit.lexical_rank, hit.bm25)
