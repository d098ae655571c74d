"""``engramdb.client`` against a real ``engramdb serve`` on 127.0.0.1: the bound view's
methods over HTTP, answered as the bound view answers them, errors mapped onto the
error tree, and 429 / 5xx retried (through a real flaky proxy in front of the server);
then against a raw socket server on 127.0.0.1 that answers what no engramdb server
would (malformed answers, huge ones, gzip bombs, a byte at a time): every call ends in
an engramdb error, within its timeout, holding at most ``max_answer_bytes``."""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import socket
import socketserver
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_helpers import ALEX_TOKEN, BOB_TOKEN, SAM_TOKEN, Server

import engramdb
from engramdb import (
    ConfigurationError,
    ConflictError,
    EngramError,
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


def test_the_parameters_each_route_now_takes_act_as_on_the_local_view(
    server: Server, tmp_path: Path
) -> None:
    """What HTTP did not carry before the view operations were declared once (expiry on
    remember and update, a batch's dedupe, recall's fusion, weights and exact, list's
    filter and below) reaches the server and answers as the same call on a local view."""
    local_memory = Memory(SqliteStore(tmp_path / "local.db"), embedder_from_url("hash:64"))
    local = local_memory.bind(("globex", "user", "bob"))
    when = datetime(2031, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    answers: list[list[Any]] = []
    with RemoteMemory(server.url, BOB_TOKEN, retry=NO_WAIT) as remote:
        remote.forget_all()
        for view in (local, remote):
            seen: list[Any] = []
            kept = view.remember("Bob's visa runs out", expires_at=when, metadata={"k": 1})
            brief = view.remember("Bob is in Oslo this week", ttl=timedelta(days=2))
            seen.append((kept.expires_at, brief.expires_at is not None))
            cleared = view.update(kept.id, expires_at=None)
            seen.append(cleared.expires_at if cleared else "absent")
            twice = view.remember_many([{"text": "Oslo is cold"}] * 2, dedupe=False)
            seen.append(len({r.id for r in twice}))
            for options in ({"fusion": "rrf"}, {"weights": {"vector": 0.2, "lexical": 0.8}}):
                hits = view.recall("Oslo cold", top_k=3, exact=True, **options)
                seen.append([_hit(h) for h in hits])
            seen.append([r.text for r in view.list(filter={"metadata": {"k": 1}})])
            newest = view.list(limit=1)[0]
            below = view.list(below=(newest.created_at, newest.id))
            seen.append([r.text for r in below])
            answers.append(seen)
        remote.forget_all()
    local_memory.close()
    assert answers[0][0] == (when, True) and answers[0][1] is None
    assert answers[0][2] == 2 and answers[0][5] == ["Bob's visa runs out"]
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


# --- a server that answers what no engramdb server would ----------------------------------

MiB = 1024 * 1024
NO_RETRY = RetryPolicy(max_retries=0)
FREE_FORM = frozenset({"metadata", "labels", "boosts"})  # objects of any keys in the API
# keys an answer may leave out (the API's schemas do not require them)
OPTIONAL = frozenset({"vector_share", "lexical_share", "rerank_score"})


class RawServer:
    """An HTTP/1.1 server on 127.0.0.1 over a bare socket: it reads each request whole,
    then ``respond(server, conn)`` writes whatever the test wants (a malformed body, a
    gzip bomb, a byte at a time) and the connection is closed. ``sent`` counts the bytes
    written, ``requests`` the requests read."""

    def __init__(self) -> None:
        self.respond: Callable[[RawServer, socket.socket], None] = lambda server, conn: None
        self.sent = 0
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            try:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(65536) or b"\r\n\r\n"
                head, _, body = head.partition(b"\r\n\r\n")
                length = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
                while length and len(body) < int(length.group(1)):
                    body += conn.recv(65536)
                self.requests += 1
                self.respond(self, conn)
            except OSError:  # the client closed the connection: how a refusal looks here
                pass

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def answer(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        """Answer every request with ``status``, ``body`` and ``headers``."""
        self.respond = lambda server, conn: server.send(conn, response(status, body, headers))

    def close(self) -> None:
        self._listener.close()


def response(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> bytes:
    fields = {"content-type": "application/json", "content-length": str(len(body))}
    fields |= headers or {}
    lines = [f"HTTP/1.1 {status} Whatever", "connection: close"]
    lines += [f"{name}: {value}" for name, value in fields.items() if value]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.fixture
def raw() -> Iterator[RawServer]:
    server = RawServer()
    yield server
    server.close()


class Raw(str):
    """A JSON literal written as it is: ``1e999``, an integer of 400 digits, ``NaN``."""


def encode(value: Any) -> bytes:
    """``value`` as JSON, each :class:`Raw` in it written as its literal."""
    literals: list[str] = []

    def swap(item: Any) -> Any:
        if isinstance(item, Raw):
            literals.append(item)
            return f"\x00raw{len(literals) - 1}\x00"
        if isinstance(item, dict):
            return {key: swap(inner) for key, inner in item.items()}
        if isinstance(item, list):
            return [swap(inner) for inner in item]
        return item

    text = json.dumps(swap(value))
    for index, literal in enumerate(literals):
        text = text.replace(json.dumps(f"\x00raw{index}\x00"), literal)
    return text.encode()


# Values no field of any answer may hold.
NEVER_VALID = {
    "1e999": Raw("1e999"),
    "10**400": Raw("1" + "0" * 400),
    "NaN": Raw("NaN"),
    "a lone surrogate": Raw('"\\ud800"'),
    "2,000 levels deep": Raw("[" * 2000 + "]" * 2000),
}
# Values of the wrong type for most fields (some fields take one: then the call answers).
WRONG_MOSTLY = {
    "null": None,
    "true": True,
    "a string": "x",
    "-1": -1,
    "0.5": 0.5,
    "[]": [],
    "{}": {},
}


@dataclass(frozen=True)
class Answer:
    """A real answer of ``engramdb serve`` to one method, and what the call names."""

    status: int
    body: Any


# Each client method, called with what the captured answers are about (``ids``).
CALLS: dict[str, Callable[[Any, Mapping[str, str]], Any]] = {
    "remember": lambda m, ids: m.remember("Alex keeps the fleet logbook"),
    "remember_many": lambda m, ids: m.remember_many([{"text": "Alex sails on Fridays"}]),
    "recall": lambda m, ids: m.recall("fleet logbook", top_k=10),
    "get": lambda m, ids: m.get(ids["id"]),
    "update": lambda m, ids: m.update(ids["id"], text="Alex keeps the logbook at sea"),
    "forget": lambda m, ids: m.forget(ids["id"]),
    "history": lambda m, ids: m.history(ids["id"]),
    "list": lambda m, ids: m.list(),
    "list_scopes": lambda m, ids: m.list_scopes(),
    "forget_all": lambda m, ids: m.forget_all(),
    "complete": lambda m, ids: m.complete(ids["selection"], 1.0),
    "feedback": lambda m, ids: m.feedback(ids["id"], 0.5),
    "status": lambda m, ids: m.status(),
}


@pytest.fixture(scope="module")
def answers(server: Server) -> tuple[dict[str, Answer], dict[str, str]]:
    """What the real server answers to each method of the client (Alex's scope, which
    has a read scope), and the ids those answers name."""
    out: dict[str, Answer] = {}
    with server.client(ALEX_TOKEN) as http:

        def take(name: str, method: str, path: str, **given: Any) -> Any:
            answer = http.request(method, path, **given)
            out[name] = Answer(answer.status_code, answer.json())
            return answer.json()

        text = "Alex keeps the fleet logbook"
        details = {"metadata": {"ship": {"deck": [1, 2]}}, "labels": {"topic": ["fleet"]}}
        memory = take("remember", "POST", "/v1/memories", json={"text": text, **details})
        item = f"/v1/memories/{memory['memory']['id']}"
        take("update", "PATCH", item, json={"text": "Alex keeps the logbook at sea"})
        take("get", "GET", item)
        take("history", "GET", item + "/history")
        batch = {"memories": [{"text": "Alex sails on Fridays"}]}
        take("remember_many", "POST", "/v1/memories/batch", json=batch)
        hits = take("recall", "POST", "/v1/recall", json={"query": "fleet logbook"})
        take("list", "GET", "/v1/memories")
        take("list_scopes", "GET", "/v1/scopes")
        selection = {"selection_id": hits["selection_id"], "score": 1.0}
        take("complete", "POST", "/v1/complete", json=selection)
        take(
            "feedback",
            "POST",
            "/v1/feedback",
            json={"memory_id": memory["memory"]["id"], "value": 0.5},
        )
        take("status", "GET", "/v1/status")
        take("forget", "DELETE", item)
        take("forget_all", "DELETE", "/v1/scope")
    assert set(out) == set(CALLS) and hits["hits"], out
    return out, {"id": memory["memory"]["id"], "selection": hits["selection_id"]}


def nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value inside ``value`` (an array's first item only)."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from nodes(inner, (*path, key))
    elif isinstance(value, list) and value:
        yield from nodes(value[0], (*path, 0))


_GONE = object()


def changed(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A copy of ``value`` with the value at ``path`` replaced by ``new`` (removed: _GONE)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    if rest or new is not _GONE:
        copy[head] = changed(value[head], rest, new)
    else:
        del copy[head]
    return copy


@dataclass(frozen=True)
class Case:
    """One answer to one method: what the raw server sends, what the test calls it."""

    method: str
    what: str
    status: int
    body: bytes
    headers: Mapping[str, str] | None = None


def outcomes(face: str, raw: RawServer, ids: Mapping[str, str], cases: list[Case]) -> list[object]:
    """What each case answers through the ``face`` client (``sync`` or ``async``): the
    call's value, or the exception it raised."""
    results: list[object] = []
    if face == "sync":
        with RemoteMemory(raw.url, ALEX_TOKEN, retry=NO_RETRY, timeout=20) as memory:
            for case in cases:
                raw.answer(case.status, case.body, case.headers)
                try:
                    results.append(CALLS[case.method](memory, ids))
                except Exception as exc:
                    results.append(exc)
        return results

    async def run_all() -> None:
        async with AsyncRemoteMemory(raw.url, ALEX_TOKEN, retry=NO_RETRY, timeout=20) as memory:
            for case in cases:
                raw.answer(case.status, case.body, case.headers)
                try:
                    results.append(await CALLS[case.method](memory, ids))
                except Exception as exc:
                    results.append(exc)

    asyncio.run(run_all())
    return results


def escaped(cases: list[Case], results: list[object]) -> list[str]:
    """The cases whose call raised something other than an engramdb error."""
    return [
        f"{case.method}, {case.what}: {type(result).__name__}: {str(result)[:200]}"
        for case, result in zip(cases, results, strict=True)
        if isinstance(result, BaseException) and not isinstance(result, EngramError)
    ]


def malformed(name: str, answer: Answer) -> list[Case]:
    """Answers to ``name`` that are not the API, whatever the call: not JSON, not the
    answer's form, another status, and each field (at any depth) missing or holding a
    value no field may hold."""
    body, status = answer.body, answer.status
    other = 200 if status == 201 else 201
    cases = [
        Case(
            name, "HTML", status, b"<html>Welcome to nginx!</html>", {"content-type": "text/html"}
        ),
        Case(name, "an empty body", status, b""),
        Case(name, "an array", status, b"[]"),
        Case(name, "null", status, b"null"),
        Case(name, "a string", status, b'"ok"'),
        Case(name, "an empty object", status, b"{}"),
        Case(name, "100,000 levels deep", status, b"[" * 100_000 + b"]" * 100_000),
        Case(name, "100,000 [ unclosed", status, b"[" * 100_000),
        Case(name, "cut short", status, encode(body)[:-7]),
        Case(name, "an unknown field", status, encode({**body, "surprise": 1})),
        Case(name, "no content", 204, b""),
        Case(name, f"HTTP {other}", other, encode(body)),
    ]
    for path in nodes(body):
        where = ".".join(map(str, path))
        if (
            isinstance(path[-1], str)
            and path[-1] not in OPTIONAL
            and not FREE_FORM & set(path[:-1])
        ):  # a required key
            cases.append(Case(name, f"{where} missing", status, encode(changed(body, path, _GONE))))
        for what, value in NEVER_VALID.items():
            cases.append(
                Case(name, f"{where} = {what}", status, encode(changed(body, path, value)))
            )
    return cases


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_malformed_answer_is_a_store_error_for_every_method(
    raw: RawServer, answers: tuple[dict[str, Answer], dict[str, str]], face: str
) -> None:
    """Every method, sync and async, answered something that is not the API (not JSON,
    100,000 levels deep, a field missing, 1e999, an integer of 400 digits, NaN, a lone
    surrogate, another 2xx status...): a StoreError naming it, never a KeyError,
    TypeError, ValueError, OverflowError or RecursionError, never an answer."""
    real, ids = answers
    cases = [case for name in CALLS for case in malformed(name, real[name])]
    results = outcomes(face, raw, ids, cases)
    assert len(cases) > 1000
    assert escaped(cases, results) == []
    answered = [
        f"{case.method}, {case.what}: {result!r}"[:300]
        for case, result in zip(cases, results, strict=True)
        if not isinstance(result, StoreError)
    ]
    assert answered == []
    assert "not the engramdb API" in str(results[0]) and "/v1/memories" in str(results[0])


def test_a_field_of_another_type_never_escapes_the_error_tree(
    raw: RawServer, answers: tuple[dict[str, Answer], dict[str, str]]
) -> None:
    """Each field of each real answer, at any depth, replaced by null, true, a string,
    -1, 0.5, [] or {}: the call answers (where the field takes that value) or raises a
    StoreError, and the most raise."""
    real, ids = answers
    cases = [
        Case(
            name,
            f"{'.'.join(map(str, path))} = {what}",
            answer.status,
            encode(changed(answer.body, path, value)),
        )
        for name, answer in real.items()
        for path in nodes(answer.body)
        for what, value in WRONG_MOSTLY.items()
    ]
    results = outcomes("sync", raw, ids, cases)
    assert escaped(cases, results) == []
    refused = sum(isinstance(result, StoreError) for result in results)
    assert refused / len(cases) > 0.8, (refused, len(cases))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(list(NEVER_VALID.values())),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_random_change_to_a_real_answer_never_escapes_the_error_tree(
    raw: RawServer, answers: tuple[dict[str, Answer], dict[str, str]], data: st.DataObject
) -> None:
    """A real answer with one value anywhere in it (or the whole body) replaced by any
    JSON, raw literals included: the call answers, or raises an engramdb error."""
    real, ids = answers
    name = data.draw(st.sampled_from(sorted(CALLS)))
    answer = real[name]
    path = data.draw(st.sampled_from([(), *nodes(answer.body)]))
    body = encode(changed(answer.body, path, data.draw(json_values)))
    case = Case(name, "random", answer.status, body)
    assert escaped([case], outcomes("sync", raw, ids, [case])) == []


@pytest.mark.parametrize("status", [400, 404, 503])
def test_a_malformed_error_answer_is_still_an_engramdb_error(
    raw: RawServer, answers: tuple[dict[str, Answer], dict[str, str]], status: int
) -> None:
    """An error status whose body is not the API's error form (100,000 levels deep, not
    JSON, 1e999 as its code): still the engramdb error of that status, for every
    method."""
    ids = answers[1]
    bodies = {
        "100,000 levels deep": b"[" * 100_000 + b"]" * 100_000,
        "HTML": b"<html>Bad Gateway</html>",
        "1e999 as its code": b'{"error": {"code": 1e999, "message": "x"}}',
        "an error that is a string": b'{"error": "not_found"}',
    }
    cases = [Case(name, what, status, body) for name in CALLS for what, body in bodies.items()]
    results = outcomes("sync", raw, ids, cases)
    assert escaped(cases, results) == []
    assert all(isinstance(result, EngramError) for result in results)


# --- boolean answers come from their field --------------------------------------------------


def test_forget_answers_the_deleted_field_not_the_status(raw: RawServer) -> None:
    """``forget`` is the answer's ``deleted``: False when it says false, and a 200 without
    it (or about another memory) is a StoreError, not True."""
    with RemoteMemory(raw.url, SAM_TOKEN, retry=NO_RETRY) as sam:
        raw.answer(200, encode({"deleted": False, "id": "m1"}))
        assert sam.forget("m1") is False
        raw.answer(200, encode({"deleted": True, "id": "m1"}))
        assert sam.forget("m1") is True
        for body in ({"id": "m1"}, {"deleted": True, "id": "m2"}, {"deleted": "yes", "id": "m1"}):
            raw.answer(200, encode(body))
            with pytest.raises(StoreError, match="not the engramdb API"):
                sam.forget("m1")
        raw.answer(204, b"")
        with pytest.raises(StoreError, match="HTTP 204"):
            sam.forget("m1")


def test_complete_answers_the_completed_field_not_the_status(raw: RawServer) -> None:
    """``complete`` is the answer's ``completed``; a 200 without it is a StoreError."""
    with RemoteMemory(raw.url, SAM_TOKEN, retry=NO_RETRY) as sam:
        raw.answer(200, encode({"completed": False, "selection_id": "s1"}))
        assert sam.complete("s1", 1.0) is False
        raw.answer(200, encode({"completed": True, "selection_id": "s1"}))
        assert sam.complete("s1", 1.0) is True
        for body in ({"selection_id": "s1"}, {"completed": 1, "selection_id": "s1"}, {}):
            raw.answer(200, encode(body))
            with pytest.raises(StoreError, match="not the engramdb API"):
                sam.complete("s1", 1.0)


# --- the size of an answer ------------------------------------------------------------------


def streamed(
    head: Mapping[str, str], first: bytes, block: bytes, count: int, status: int = 200
) -> Callable[[RawServer, socket.socket], None]:
    """An answer with ``head``'s headers, whose chunked body is ``first`` then ``count``
    times ``block``, for as long as the client reads."""

    def respond(server: RawServer, conn: socket.socket) -> None:
        lines = [
            f"HTTP/1.1 {status} Whatever",
            "transfer-encoding: chunked",
            *(f"{k}: {v}" for k, v in head.items()),
        ]
        server.send(conn, ("\r\n".join(lines) + "\r\n\r\n").encode())
        for part in (first, *(block for _ in range(count))):
            server.send(conn, b"%x\r\n" % len(part))
            server.send(conn, part)
            server.send(conn, b"\r\n")
        server.send(conn, b"0\r\n\r\n")

    return respond


def peak_bytes(call: Callable[[], object]) -> tuple[object, int]:
    """What ``call`` answers (or raises), and the most bytes Python held during it."""
    tracemalloc.start()
    try:
        try:
            result: object = call()
        except Exception as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("face", ["sync", "async"])
def test_an_answer_over_max_answer_bytes_is_refused_as_it_arrives(
    raw: RawServer, face: str
) -> None:
    """A 300 MB answer to a client capped at 1 MiB: refused with one StoreError naming
    the cap and the option, once past 1 MiB (a chunked body) or at once (a declared
    Content-Length): the server could send little of it, the client held little."""
    block = b" " * MiB

    def status_call() -> object:
        if face == "sync":
            with RemoteMemory(raw.url, SAM_TOKEN, retry=NO_RETRY, max_answer_bytes=MiB) as sam:
                return sam.status()

        async def status() -> object:
            async with AsyncRemoteMemory(
                raw.url, SAM_TOKEN, retry=NO_RETRY, max_answer_bytes=MiB
            ) as sam:
                return await sam.status()

        return asyncio.run(status())

    raw.respond = streamed({"content-type": "application/json"}, b"{", block, 300)
    refused, held = peak_bytes(status_call)
    assert isinstance(refused, StoreError), refused
    assert "with more than max_answer_bytes=1,048,576 (counted after" in str(refused)
    assert "raise max_answer_bytes=" in str(refused)
    assert raw.sent < 64 * MiB and held < 24 * MiB, (raw.sent, held)

    raw.sent = 0

    def declared(server: RawServer, conn: socket.socket) -> None:
        server.send(conn, b"HTTP/1.1 200 OK\r\ncontent-length: 300000000\r\n\r\n")
        for _ in range(300):
            server.send(conn, block)

    raw.respond = declared
    refused, held = peak_bytes(status_call)
    assert isinstance(refused, StoreError) and "with 300,000,000 bytes, more than max" in str(
        refused
    ), refused
    assert raw.sent < 64 * MiB and held < 24 * MiB, (raw.sent, held)

    raw.sent = 0  # an error answer of 300 MB: its first 64 KiB are read, its status decides
    raw.respond = streamed({"content-type": "text/plain"}, b"busy", block, 300, status=503)
    failed, held = peak_bytes(status_call)
    assert isinstance(failed, StoreError) and "HTTP 503: busy" in str(failed), failed
    assert raw.sent < 64 * MiB and held < 24 * MiB, (raw.sent, held)


def test_a_gzip_bomb_is_refused_without_inflating_it(raw: RawServer) -> None:
    """A gzip answer of 1 MiB per KiB that inflates to 1 GiB: refused once 1 MiB (the
    cap) is inflated; the client never holds much more than the cap."""
    zeros = b"\0" * MiB
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    assert len(zlib.decompressobj(31).decompress(first + block * 3)) == 4 * MiB
    assert len(block) < 2048  # 1 GiB inflated is about 1 MB sent
    head = {"content-type": "application/json", "content-encoding": "gzip"}
    raw.respond = streamed(head, first, block, 1023)
    with RemoteMemory(raw.url, SAM_TOKEN, retry=NO_RETRY, max_answer_bytes=MiB) as sam:
        refused, held = peak_bytes(sam.status)
    assert isinstance(refused, StoreError), refused
    assert "more than max_answer_bytes=1,048,576 (counted after decompression)" in str(refused)
    assert held < 24 * MiB, held


def test_max_answer_bytes_must_be_a_whole_number_of_bytes() -> None:
    assert RemoteMemory("http://127.0.0.1:9", SAM_TOKEN).max_answer_bytes == 64 * MiB
    for wrong in (0, -1, True, 1.5, "1MB"):
        with pytest.raises(ConfigurationError, match="max_answer_bytes"):
            RemoteMemory("http://127.0.0.1:9", SAM_TOKEN, max_answer_bytes=wrong)  # type: ignore[arg-type]


# --- the deadline of a call -----------------------------------------------------------------


def trickled(data: bytes, start: int, count: int) -> Callable[[RawServer, socket.socket], None]:
    """Send ``data``: its first ``start`` bytes at once, the next ``count`` a byte every
    0.3 s, then the rest."""

    def respond(server: RawServer, conn: socket.socket) -> None:
        server.send(conn, data[:start])
        for index in range(start, start + count):
            time.sleep(0.3)
            server.send(conn, data[index : index + 1])
        server.send(conn, data[start + count :])

    return respond


@pytest.mark.parametrize("face", ["sync", "async"])
@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_server_trickling_its_answer_cannot_hold_a_call_past_its_timeout(
    raw: RawServer, answers: tuple[dict[str, Answer], dict[str, str]], face: str, part: str
) -> None:
    """A server that sends its answer a byte every 0.3 s (every read well within the
    timeout): a call with timeout=1 and the default retries fails with a StoreError
    naming the timeout within a few seconds, not when the last byte arrives (18 s
    here)."""
    body = encode(answers[0]["status"].body)
    data = response(200, body)
    start = 0 if part == "headers" else len(data) - len(body)
    raw.respond = trickled(data, start, 60)
    began = time.monotonic()
    if face == "sync":
        sam = RemoteMemory(raw.url, SAM_TOKEN, timeout=1)
        with sam, pytest.raises(StoreError, match=r"within timeout=1 s") as failed:
            sam.status()
    else:

        async def status() -> None:
            async with AsyncRemoteMemory(raw.url, SAM_TOKEN, timeout=1) as sam:
                await sam.status()

        with pytest.raises(StoreError, match=r"within timeout=1 s") as failed:
            asyncio.run(status())
    assert time.monotonic() - began < 5
    assert "raise timeout=" in str(failed.value) and SAM_TOKEN not in str(failed.value)


def test_a_retry_whose_wait_ends_past_the_deadline_is_not_waited_for(raw: RawServer) -> None:
    """A 503 asking to retry after 5 s, to a call with timeout=2: one attempt, no wait,
    a StoreError naming the timeout and the status."""
    error = encode({"error": {"code": "store_unavailable", "message": "retry later"}})
    raw.answer(503, error, {"retry-after": "5"})
    waits: list[float] = []
    sam = RemoteMemory(raw.url, SAM_TOKEN, timeout=2, sleep=waits.append)
    with sam, pytest.raises(StoreError, match=r"within timeout=2 s.*HTTP 503.*wait of 5\.0 s"):
        sam.status()
    assert (raw.requests, waits) == (1, [])


def test_retries_and_their_waits_end_by_the_deadline(raw: RawServer) -> None:
    """A server that always answers 503, to a call with timeout=1.5 and six retries
    doubling from 0.5 s (31 s of waits in all): the call ends within a few seconds, its
    waits inside the deadline."""
    raw.answer(503, encode({"error": {"code": "store_unavailable", "message": "later"}}))
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    policy = RetryPolicy(max_retries=6, initial_delay=0.5, multiplier=2.0)
    began = time.monotonic()
    sam = RemoteMemory(raw.url, SAM_TOKEN, timeout=1.5, retry=policy, sleep=sleep)
    with sam, pytest.raises(StoreError, match=r"within timeout=1\.5 s"):
        sam.status()
    assert time.monotonic() - began < 5 and sum(waits) < 1.5 and raw.requests <= 3


# --- each error code raises the error its row names ----------------------------------------


def test_each_error_code_raises_what_the_error_table_names(raw: RawServer) -> None:
    """An error answer of each code of ``engramdb.http_api.ERRORS``, at its status,
    raises the row's error, its message naming the code and the status; a code this
    version does not know raises what its status's first row names, and an unknown
    status a StoreError (the one table the server answers from, read both ways)."""
    from engramdb.http_api import ERRORS

    rows = {row.code: row for row in reversed(ERRORS)}
    cases = [(code, row.status, row.raised) for code, row in sorted(rows.items())] + [
        ("from_the_future", 409, ConflictError),
        ("teapot", 418, StoreError),
    ]
    with RemoteMemory(raw.url, ALEX_TOKEN, retry=NO_RETRY, timeout=20) as memory:
        for code, status, raised in cases:
            raw.answer(status, encode({"error": {"code": code, "message": "said so"}}))
            with pytest.raises(EngramError) as caught:
                memory.status()
            assert type(caught.value) is raised, (code, caught.value)
            assert f"said so ({code}, HTTP {status})" in str(caught.value)
    assert len(cases) > 15
