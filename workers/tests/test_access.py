"""Who may call the Worker, and how much: grants in a ``TOKENS`` KV namespace (add,
rotate, revoke without a deploy), the ``ENGRAMDB_TOKENS`` secret beside or instead of it,
per-token rate limits, and request bodies read no further than the size limit.

The KV namespace and the rate limiter are miniflare's real ones (workerd's KV and its
in-memory "simple" limiter, `limit` requests per 60 s per key, offline), reached through
workers/tests/harness_bindings.mjs as ``KvNamespace`` and ``Ratelimit`` JS objects, the
names the ``workers`` SDK wraps in a Python Worker's env."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import engramdb_bindings
import js
import pytest
from js import Object
from pyodide.ffi import create_proxy, to_js
from workers import Request

from engramdb_workers import access, api
from engramdb_workers import worker as worker_module
from test_api import SAM, SAM_TOKEN, TOKENS, call

ALEX = ["acme", "user", "alex"]


def key(token: str) -> str:
    """The KV key of a token, as `printf %s "$TOKEN" | sha256sum` makes it."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


class Clock:
    """The grant cache's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def clock(monkeypatch: Any) -> Clock:
    fake = Clock()
    monkeypatch.setattr(access, "clock", fake)
    worker_module.reset_isolate()
    return fake


@pytest.fixture
def kv() -> Any:
    """A fresh KV namespace (the JS binding, as the Workers runtime hands it over)."""
    return engramdb_bindings.newKv()


async def status_of(worker: Any, token: str) -> tuple[int, Any]:
    status, body, _ = await call(worker, "GET", "/v1/status", token=token)
    return status, body


async def test_a_grant_stored_in_kv_authorizes_its_token(
    d1: Any, kv: Any, make_worker: Any
) -> None:
    """A KV key `sha256:<hex of the token>` holding a scope (or {"scope", "read"}) is the
    token's grant; no secret is needed."""
    await kv.put(key("kv-sam"), json.dumps(SAM))
    await kv.put(key("kv-alex"), json.dumps({"scope": ALEX, "read": [["acme", "shared"]]}))
    worker = make_worker(d1, None, TOKENS=kv)
    status, body, _ = await call(
        worker, "POST", "/v1/memories", token="kv-sam", body={"text": "Sam is vegetarian"}
    )
    assert (status, body["memory"]["scope"]) == (201, SAM)
    status, body = await status_of(worker, "kv-alex")
    assert (status, body["scope"], body["read"]) == (200, ALEX, [["acme", "shared"]])
    status, body = await status_of(worker, "kv-nobody")
    assert (status, body["error"]["code"]) == (401, "invalid_token")


async def test_a_revoked_token_is_refused_once_the_isolate_cache_expires(
    d1: Any, kv: Any, make_worker: Any, clock: Clock
) -> None:
    """Deleting the key revokes the token: an isolate that saw it keeps the grant for
    GRANT_CACHE_SECONDS, then answers 401 like for a token never known."""
    await kv.put(key("kv-sam"), json.dumps(SAM))
    worker = make_worker(d1, None, TOKENS=kv)
    assert (await status_of(worker, "kv-sam"))[0] == 200
    await kv.delete(key("kv-sam"))
    clock.now += access.GRANT_CACHE_SECONDS - 1
    assert (await status_of(worker, "kv-sam"))[0] == 200  # still cached
    clock.now += 2
    status, body = await status_of(worker, "kv-sam")
    assert (status, body["error"]["code"]) == (401, "invalid_token")


async def test_rotating_a_token_is_add_the_new_then_delete_the_old(
    d1: Any, kv: Any, make_worker: Any, clock: Clock
) -> None:
    worker = make_worker(d1, None, TOKENS=kv)
    await kv.put(key("sam-2025"), json.dumps(SAM))
    await call(worker, "POST", "/v1/memories", token="sam-2025", body={"text": "Sam: tea"})
    await kv.put(key("sam-2026"), json.dumps(SAM))
    assert (await status_of(worker, "sam-2026"))[0] == 200  # both work during the switch
    assert (await status_of(worker, "sam-2025"))[0] == 200
    await kv.delete(key("sam-2025"))
    clock.now += access.GRANT_CACHE_SECONDS + 1
    assert (await status_of(worker, "sam-2025"))[0] == 401
    _, body, _ = await call(worker, "GET", "/v1/memories", token="sam-2026")
    assert [m["text"] for m in body["memories"]] == ["Sam: tea"]  # same scope, same memories


async def test_the_secret_alone_still_works_and_is_consulted_before_kv(
    d1: Any, kv: Any, make_worker: Any
) -> None:
    secret_only = make_worker(d1, TOKENS)
    assert (await status_of(secret_only, SAM_TOKEN))[1]["scope"] == SAM
    assert (await status_of(secret_only, "kv-only"))[0] == 401

    await kv.put(key(SAM_TOKEN), json.dumps(ALEX))  # a conflicting KV grant: the secret wins
    await kv.put(key("kv-only"), json.dumps(ALEX))
    both = make_worker(d1, TOKENS, TOKENS=kv)
    assert (await status_of(both, SAM_TOKEN))[1]["scope"] == SAM
    assert (await status_of(both, "kv-only"))[1]["scope"] == ALEX


async def test_a_malformed_stored_grant_is_a_500_naming_a_digest_prefix_only(
    d1: Any, kv: Any, make_worker: Any
) -> None:
    """The reply says which key to fix by a prefix of its digest; neither the token nor
    the whole digest appears in it."""
    token = "kv-sam-secret-value"
    worker = make_worker(d1, None, TOKENS=kv)
    for stored in ("not json", '{"scope": "acme"}', '["acme", ""]'):
        await kv.put(key(token), stored)
        worker_module.reset_isolate()
        status, body = await status_of(worker, token)
        assert (status, body["error"]["code"]) == (500, "server_misconfigured"), body
        text = json.dumps(body)
        assert key(token)[:15] in text
        assert key(token)[:16] not in text and token not in text
    status, body = await status_of(worker, "kv-unknown-secret")
    assert status == 401 and "kv-unknown-secret" not in json.dumps(body)
    assert key("kv-unknown-secret")[7:15] not in json.dumps(body)


async def test_a_failing_kv_read_is_a_503_and_the_secret_still_answers(
    d1: Any, make_worker: Any
) -> None:
    worker = make_worker(d1, TOKENS, TOKENS=engramdb_bindings.brokenKv())
    status, body = await status_of(worker, "kv-token")
    assert (status, body["error"]["code"]) == (503, "store_unavailable")
    assert "kv-token" not in json.dumps(body)
    assert (await status_of(worker, SAM_TOKEN))[0] == 200  # the secret needs no KV read


async def test_no_secret_and_no_kv_is_a_500(d1: Any, make_worker: Any) -> None:
    status, body = await status_of(make_worker(d1, None), SAM_TOKEN)
    assert (status, body["error"]["code"]) == (500, "server_misconfigured")


async def test_the_rate_limit_answers_429_after_its_budget(
    d1: Any, kv: Any, make_worker: Any, ai_stub: Any
) -> None:
    """Each token has its own budget (keyed by its digest); past it a request is a 429
    with Retry-After, before any memory work; unknown tokens get a 401 and spend none."""
    limiter = engramdb_bindings.newRateLimiter()
    budget = int(engramdb_bindings.rateLimit)
    await kv.put(key("kv-alex"), json.dumps(ALEX))
    worker = make_worker(d1, TOKENS, TOKENS=kv, RATE_LIMITER=limiter)
    await engramdb_bindings.freshWindow(20)
    for _ in range(budget + 2):  # asked before authorizing, the limiter would 429 these
        assert (await status_of(worker, "stranger"))[0] == 401
    for _ in range(budget):
        assert (await status_of(worker, SAM_TOKEN))[0] == 200
    embedded = len(ai_stub.calls)
    status, body, headers = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "over budget"}
    )
    assert (status, body["error"]["code"]) == (429, "rate_limited")
    assert headers.get("retry-after") == "60"
    assert len(ai_stub.calls) == embedded  # nothing embedded, nothing stored
    assert (await status_of(worker, "kv-alex"))[0] == 200  # Alex's budget is his own
    ten = make_worker(d1, TOKENS, RATE_LIMITER=limiter, RATE_LIMIT_PERIOD="10")
    _, _, headers = await call(ten, "GET", "/v1/status", token=SAM_TOKEN)
    assert headers.get("retry-after") == "10"


async def test_a_failing_rate_limiter_serves_the_request(d1: Any, make_worker: Any) -> None:
    """Fail open: the caller is already authenticated; a limiter outage is logged and
    does not take the memory API down with it."""
    worker = make_worker(d1, TOKENS, RATE_LIMITER=engramdb_bindings.brokenRateLimiter())
    assert (await status_of(worker, SAM_TOKEN))[0] == 200


def stream_request(stream: Any, token: str = SAM_TOKEN) -> Any:
    """A POST /v1/memories whose body is ``stream``: no Content-Length (chunked)."""
    init = {
        "method": "POST",
        "headers": {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        "body": stream,
        "duplex": "half",
    }
    request = js.Request.new(
        "https://memory.example.com/v1/memories", to_js(init, dict_converter=Object.fromEntries)
    )
    assert not isinstance(request.headers.get("content-length"), str)
    return Request(request)


async def test_a_chunked_body_over_the_limit_is_413_without_reading_it_all(make_host: Any) -> None:
    """An endless body with no Content-Length: the Worker stops pulling chunks as soon
    as the bytes read pass MAX_BODY_BYTES."""
    chunk = 64 * 1024
    counter = engramdb_bindings.countingStream(chunk)
    worker = make_host(TOKENS)
    response = (await worker.fetch(stream_request(counter.stream))).js_object
    body = json.loads(await response.text())
    assert (int(response.status), body["error"]["code"]) == (413, "payload_too_large")
    assert counter.pulled <= api.MAX_BODY_BYTES // chunk + 2


class DeclaredRequest:
    """A POST /v1/memories whose headers declare ``length`` bytes, with an endless body
    (a plain object, as a request reaches ``serve``: a JS runtime would not let a test set
    Content-Length itself)."""

    def __init__(self, stream: Any, length: str, token: str = SAM_TOKEN) -> None:
        self.method = "POST"
        self.url = "https://memory.example.com/v1/memories"
        self.body = stream
        self.headers = {
            "authorization": f"Bearer {token}",
            "content-type": "application/json",
            "content-length": length,
        }


@pytest.mark.parametrize("length", [str(api.MAX_BODY_BYTES + 1), "9" * 5000])
async def test_a_declared_length_over_the_limit_is_413_before_any_byte_is_read(
    make_host: Any, length: str
) -> None:
    """Both hosts (one D1 database, and one Durable Object per tenant, which forwards the
    body to its object) refuse a Content-Length over MAX_BODY_BYTES without pulling a
    chunk: a 5,000-digit length too (no int() of it, no 500)."""
    counter = engramdb_bindings.countingStream(64 * 1024)
    worker = make_host(TOKENS)
    response = (await worker.fetch(DeclaredRequest(counter.stream, length))).js_object
    body = json.loads(await response.text())
    assert (int(response.status), body["error"]["code"]) == (413, "payload_too_large")
    assert counter.pulled == 0


async def test_a_chunked_body_under_the_limit_is_read_whole(make_host: Any) -> None:
    """Chunks are joined as bytes, so a UTF-8 character split between two chunks is kept."""
    raw = json.dumps({"text": "Sam drinks café au lait"}, ensure_ascii=False).encode()
    cut = raw.index("é".encode()) + 1
    parts = [raw[:cut], raw[cut:]]

    def start(controller: Any) -> None:
        for part in parts:
            controller.enqueue(js.Uint8Array.new(to_js(list(part))))
        controller.close()

    source = to_js({"start": create_proxy(start)}, dict_converter=Object.fromEntries)
    worker = make_host(TOKENS)
    response = (await worker.fetch(stream_request(js.ReadableStream.new(source)))).js_object
    body = json.loads(await response.text())
    assert (int(response.status), body["memory"]["text"]) == (201, "Sam drinks café au lait")


async def test_probes_are_4xx_json_errors_never_500(make_host: Any) -> None:
    """A body nested 5,000 deep and a non-ASCII digit limit are 400s (invalid UTF-8 and
    an upstream's 502 are in test_api.py)."""
    worker = make_host(TOKENS)
    deep = '{"text": "x", "metadata": ' + '{"k": ' * 5000 + "1" + "}" * 5001
    status, body, _ = await call(worker, "POST", "/v1/memories", token=SAM_TOKEN, raw_body=deep)
    assert (status, body["error"]["code"]) == (400, "invalid_json")
    status, body, _ = await call(worker, "GET", "/v1/memories?limit=%C2%B2", token=SAM_TOKEN)
    assert (status, body["error"]["code"]) == (400, "invalid_request")
