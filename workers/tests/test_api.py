"""The Worker's HTTP API, through the entry's ``Default.fetch`` with real ``Request``s."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
from typing import Any

import js
import pytest
from js import Object
from pyodide.ffi import to_js
from workers import Request

from engramdb.store._sqlite import schema
from engramdb_workers import worker as worker_module

SAM_TOKEN = "sam-secret-token"
ALEX_TOKEN = "alex-secret-token"
SAM = ["acme", "user", "sam"]
ALEX = ["acme", "user", "alex"]
# Sam's token is configured by its SHA-256 (the recommended form), Alex's verbatim.
TOKENS = json.dumps(
    {
        "sha256:" + hashlib.sha256(SAM_TOKEN.encode()).hexdigest(): SAM,
        ALEX_TOKEN: {"scope": ALEX, "read": [["acme", "shared"]]},
    }
)


async def call(
    worker: Any,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: Any = None,
    raw_body: str | None = None,
    headers: dict[str, str] | None = None,
    sdk_request: bool = True,
) -> tuple[int, Any, Any]:
    """Send one request through ``worker.fetch``; return (status, JSON body, headers)."""
    init: dict[str, Any] = {"method": method, "headers": dict(headers or {})}
    if token is not None:
        init["headers"]["Authorization"] = f"Bearer {token}"
    if body is not None and method not in ("GET", "HEAD"):
        raw_body = json.dumps(body)
    if raw_body is not None:
        init["headers"].setdefault("Content-Type", "application/json")
        init["body"] = raw_body
    js_request = js.Request.new(
        f"https://memory.example.com{path}", to_js(init, dict_converter=Object.fromEntries)
    )
    request = Request(js_request) if sdk_request else js_request
    response = await worker.fetch(request)
    js_response = response.js_object
    text = await js_response.text()
    assert js_response.headers.get("content-type").startswith("application/json")
    return int(js_response.status), json.loads(text), js_response.headers


async def count_tables(d1: Any) -> int:
    rows = await d1.prepare(
        "SELECT count(*) FROM sqlite_master WHERE name IN ('items', 'engramdb_schema')"
    ).raw()
    return int(rows[0][0])


async def test_create_recall_list_delete_round_trip(d1: Any, make_worker: Any) -> None:
    worker = make_worker(d1, TOKENS)
    status, body, headers = await call(
        worker,
        "POST",
        "/v1/memories",
        token=SAM_TOKEN,
        body={"text": "Sam is vegetarian", "metadata": {"src": "chat"}, "labels": {"t": ["food"]}},
    )
    assert status == 201, body
    memory = body["memory"]
    assert memory["scope"] == SAM and memory["metadata"] == {"src": "chat"}
    assert headers.get("location") == f"/v1/memories/{memory['id']}"
    await call(worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "Sam plays cello"})

    status, body, _ = await call(
        worker, "POST", "/v1/recall", token=SAM_TOKEN, body={"query": "vegetarian", "top_k": 5}
    )
    assert status == 200, body
    assert body["status"] == "used"
    assert body["hits"][0]["memory"]["id"] == memory["id"]
    assert body["hits"][0]["evidence"]["space_id"] == "cloudflare/cf/baai/bge-base-en-v1.5@768"
    assert body["hits"][0]["similarity"] > 0

    status, body, _ = await call(worker, "GET", "/v1/memories?limit=10", token=SAM_TOKEN)
    assert status == 200 and len(body["memories"]) == 2 and body["next_before"] is None
    status, body, _ = await call(worker, "GET", "/v1/memories?limit=1", token=SAM_TOKEN)
    assert len(body["memories"]) == 1 and body["next_before"] == body["memories"][0]["id"]

    status, body, _ = await call(worker, "DELETE", f"/v1/memories/{memory['id']}", token=SAM_TOKEN)
    assert (status, body) == (200, {"deleted": True, "id": memory["id"]})
    status, body, _ = await call(
        worker, "POST", "/v1/recall", token=SAM_TOKEN, body={"query": "vegetarian"}
    )
    assert memory["id"] not in [hit["memory"]["id"] for hit in body["hits"]]
    status, body, _ = await call(worker, "DELETE", f"/v1/memories/{memory['id']}", token=SAM_TOKEN)
    assert status == 404 and body["error"]["code"] == "not_found"


async def test_update_history_batch_receipts_and_scopes_on_d1(d1: Any, make_worker: Any) -> None:
    """The endpoints beyond create/recall/list/delete work on D1 as on SQLite: update with
    compare-and-set (409 on a stale revision), history, batch, complete once, feedback,
    scopes within the grant, and forgetting the token's scope only."""
    worker = make_worker(d1, TOKENS)
    _, body, _ = await call(
        worker,
        "POST",
        "/v1/memories/batch",
        token=SAM_TOKEN,
        body={"memories": [{"text": "Sam is vegetarian"}, {"text": "Sam plays cello"}]},
    )
    first = body["memories"][0]
    assert [m["scope"] for m in body["memories"]] == [SAM, SAM]
    path = f"/v1/memories/{first['id']}"
    change = {"text": "Sam is vegan", "expected_revision": 1}
    status, body, _ = await call(worker, "PATCH", path, token=SAM_TOKEN, body=change)
    assert (status, body["memory"]["revision"]) == (200, 2)
    status, body, _ = await call(worker, "PATCH", path, token=SAM_TOKEN, body=change)
    assert (status, body["error"]["code"]) == (409, "revision_conflict")
    _, body, _ = await call(worker, "GET", path + "/history", token=SAM_TOKEN)
    assert [r["text"] for r in body["revisions"]] == ["Sam is vegetarian"]
    status, _, _ = await call(worker, "GET", path, token=ALEX_TOKEN)
    assert status == 404

    _, hits, _ = await call(worker, "POST", "/v1/recall", token=SAM_TOKEN, body={"query": "vegan"})
    receipt = {"selection_id": hits["selection_id"], "score": 1}
    _, body, _ = await call(worker, "POST", "/v1/complete", token=SAM_TOKEN, body=receipt)
    assert body["completed"] is True
    _, body, _ = await call(worker, "POST", "/v1/complete", token=SAM_TOKEN, body=receipt)
    assert body["completed"] is False
    rating = {"memory_id": first["id"], "value": 0.5}
    status, _, _ = await call(worker, "POST", "/v1/feedback", token=ALEX_TOKEN, body=rating)
    assert status == 404
    status, _, _ = await call(worker, "POST", "/v1/feedback", token=SAM_TOKEN, body=rating)
    assert status == 200

    await call(worker, "POST", "/v1/memories", token=ALEX_TOKEN, body={"text": "Alex is here"})
    _, body, _ = await call(worker, "GET", "/v1/scopes", token=SAM_TOKEN)
    assert body["scopes"] == [{"scope": SAM, "count": 2}]
    _, body, _ = await call(worker, "DELETE", "/v1/scope", token=SAM_TOKEN)
    assert body == {"deleted": 2, "scope": SAM}
    _, body, _ = await call(worker, "GET", "/v1/memories", token=ALEX_TOKEN)
    assert [m["text"] for m in body["memories"]] == ["Alex is here"]


async def test_plain_js_request_works_too(d1: Any, make_worker: Any) -> None:
    worker = make_worker(d1, TOKENS)
    status, body, _ = await call(worker, "GET", "/v1/status", token=SAM_TOKEN, sdk_request=False)
    assert status == 200
    assert body["scope"] == SAM
    assert body["space"] == "cloudflare/cf/baai/bge-base-en-v1.5@768"
    assert body["schema_version"] == len(schema.MIGRATIONS)


async def test_scopes_are_isolated_between_tokens(make_host: Any) -> None:
    worker = make_host(TOKENS)
    _, body, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "Sam is vegetarian"}
    )
    sams = body["memory"]["id"]
    alex = {"text": "Alex is vegetarian too"}
    await call(worker, "POST", "/v1/memories", token=ALEX_TOKEN, body=alex)

    _, body, _ = await call(
        worker, "POST", "/v1/recall", token=ALEX_TOKEN, body={"query": "Sam vegetarian"}
    )
    assert [hit["memory"]["scope"] for hit in body["hits"]] == [ALEX]
    _, body, _ = await call(worker, "GET", "/v1/memories", token=ALEX_TOKEN)
    assert [m["scope"] for m in body["memories"]] == [ALEX]
    status, body, _ = await call(worker, "DELETE", f"/v1/memories/{sams}", token=ALEX_TOKEN)
    assert status == 404  # another scope's memory is not revealed
    status, body, _ = await call(
        worker, "POST", "/v1/memories", token=ALEX_TOKEN, body={"text": "x", "scope": SAM}
    )
    assert status == 400 and "token" in body["error"]["message"]
    _, body, _ = await call(worker, "GET", "/v1/memories", token=SAM_TOKEN)
    assert [m["id"] for m in body["memories"]] == [sams]


async def test_missing_or_unknown_token_is_401_and_touches_nothing(
    d1: Any, make_worker: Any, ai_stub: Any
) -> None:
    worker = make_worker(d1, TOKENS)
    cases = [
        (None, "missing_token"),
        ("", "missing_token"),
        ("not-a-known-token", "invalid_token"),
    ]
    for token, code in cases:
        for method, path in [("POST", "/v1/memories"), ("GET", "/v1/status"), ("GET", "/nope")]:
            status, body, headers = await call(
                worker, method, path, token=token, body={"text": "should not be stored"}
            )
            assert (status, body["error"]["code"]) == (401, code), (token, path, body)
            assert headers.get("www-authenticate").startswith("Bearer")
    status, body, _ = await call(
        worker, "GET", "/v1/status", headers={"Authorization": f"Basic {SAM_TOKEN}"}
    )
    assert (status, body["error"]["code"]) == (401, "missing_token")
    assert await count_tables(d1) == 0  # no migration, no write: D1 never touched
    assert ai_stub.calls == []
    assert "services" not in worker_module._isolate


async def test_bad_json_is_400_with_a_clear_message(make_host: Any) -> None:
    worker = make_host(TOKENS)
    status, body, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, raw_body='{"text": "unterminated'
    )
    assert status == 400
    assert body["error"]["code"] == "invalid_json"
    assert "not valid JSON" in body["error"]["message"]
    for raw, words in [("[1, 2]", "JSON object"), ("", "empty"), ('{"text": NaN}', "NaN")]:
        status, body, _ = await call(worker, "POST", "/v1/recall", token=SAM_TOKEN, raw_body=raw)
        assert status == 400 and words in body["error"]["message"], body
    status, body, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "x", "colour": "green"}
    )
    assert status == 400 and "colour" in body["error"]["message"]
    status, body, _ = await call(
        worker, "POST", "/v1/recall", token=SAM_TOKEN, body={"query": "x", "mode": "psychic"}
    )
    assert (status, body["error"]["code"]) == (400, "invalid_request")  # engramdb ValidationError
    status, body, _ = await call(
        worker,
        "POST",
        "/v1/memories",
        token=SAM_TOKEN,
        raw_body="text=hello",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 415


async def test_lone_surrogates_are_400_not_500(make_host: Any) -> None:
    # json.loads accepts an escaped lone surrogate; it is not text that UTF-8 can store.
    worker = make_host(TOKENS)
    for path, raw in [
        ("/v1/memories", '{"text": "half \\ud800 a pair"}'),
        ("/v1/memories", '{"text": "ok", "metadata": {"k": "\\udc80"}}'),
        ("/v1/recall", '{"query": "tea \\ud800"}'),
    ]:
        status, body, _ = await call(worker, "POST", path, token=SAM_TOKEN, raw_body=raw)
        assert (status, body["error"]["code"]) == (400, "invalid_request"), body
        assert "surrogate" in body["error"]["message"]
    status, body, _ = await call(worker, "GET", "/v1/memories", token=SAM_TOKEN)
    assert body["memories"] == []


async def test_oversized_text_is_413(make_host: Any) -> None:
    worker = make_host(TOKENS)
    status, body, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "é" * 20_000}
    )
    assert (status, body["error"]["code"]) == (413, "text_too_large")
    assert "40000 bytes" in body["error"]["message"]
    status, body, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "x" * 300_000}
    )
    assert (status, body["error"]["code"]) == (413, "payload_too_large")
    _, body, _ = await call(worker, "GET", "/v1/memories", token=SAM_TOKEN)
    assert body["memories"] == []


async def test_routes_methods_and_configuration_errors(d1: Any, make_worker: Any) -> None:
    worker = make_worker(d1, TOKENS)
    status, body, _ = await call(worker, "GET", "/v2/whatever", token=SAM_TOKEN)
    assert (status, body["error"]["code"]) == (404, "not_found")
    status, body, headers = await call(worker, "PUT", "/v1/recall", token=SAM_TOKEN, body={})
    assert (status, body["error"]["code"]) == (405, "method_not_allowed")
    assert headers.get("allow") == "POST"
    status, body, _ = await call(worker, "GET", "/v1/memories?limit=0", token=SAM_TOKEN)
    assert status == 400

    unconfigured = make_worker(d1, None)
    status, body, _ = await call(unconfigured, "GET", "/v1/status", token=SAM_TOKEN)
    assert (status, body["error"]["code"]) == (500, "server_misconfigured")
    assert "ENGRAMDB_TOKENS" in body["error"]["message"]
    assert "not set" not in body["error"]["message"]  # the details stay in the logs
    assert SAM_TOKEN not in json.dumps(body)


async def test_embedding_failures(make_host: Any, ai_stub: Any) -> None:
    worker = make_host(TOKENS, EMBEDDING_MAX_RETRIES="0")
    await call(worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "Sam is vegetarian"})
    ai_stub.fail = "AiError: 3040: Capacity temporarily exceeded"
    status, body, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "not stored"}
    )
    assert (status, body["error"]["code"]) == (502, "embedding_failed")
    assert "Capacity" not in body["error"]["message"]  # the upstream's text is not echoed
    assert len(ai_stub.calls) == 2  # EMBEDDING_MAX_RETRIES=0: no retry
    status, body, _ = await call(
        worker, "POST", "/v1/recall", token=SAM_TOKEN, body={"query": "vegetarian"}
    )
    assert status == 200 and body["status"] == "degraded" and len(body["hits"]) == 1
    ai_stub.fail = None
    _, body, _ = await call(worker, "GET", "/v1/memories", token=SAM_TOKEN)
    assert [m["text"] for m in body["memories"]] == ["Sam is vegetarian"]


async def test_one_store_per_isolate_and_hash_embedder_option(d1: Any, make_worker: Any) -> None:
    # workerd builds a Default per request; the store (and its migrations) is per isolate.
    first = make_worker(d1, TOKENS, EMBEDDING_MODEL="hash", EMBEDDING_DIMENSIONS="64")
    await call(first, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "one"})
    services = worker_module._isolate["services"]
    second = make_worker(d1, TOKENS, EMBEDDING_MODEL="hash", EMBEDDING_DIMENSIONS="64")
    _, body, _ = await call(second, "GET", "/v1/status", token=SAM_TOKEN)
    assert worker_module._isolate["services"] is services
    assert body["space"] == "hash/bow@64"


async def test_without_an_ai_binding_the_worker_recalls_by_meaning_with_the_static_table(
    d1: Any, make_worker: Any
) -> None:
    """No AI binding and no EMBEDDING_MODEL: the table shipped in the wheel embeds in the
    Worker itself, and the vector leg finds facts that share no word with the query."""
    worker = make_worker(d1, TOKENS, AI=None)
    facts = [
        "Sam is vegetarian and loves mushroom risotto",
        "The car needs new tyres before winter",
        "Sam's daughter Mia starts school in September",
    ]
    for text in facts:
        status, _, _ = await call(
            worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": text}
        )
        assert status == 201
    _, body, _ = await call(worker, "GET", "/v1/status", token=SAM_TOKEN)
    assert body["space"].startswith("static/minilm-l6-256@256#")
    for query, expected in [
        ("a dinner without meat", facts[0]),
        ("vehicle maintenance", facts[1]),
        ("when does the school year begin?", facts[2]),
    ]:
        status, body, _ = await call(
            worker, "POST", "/v1/recall", token=SAM_TOKEN,
            body={"query": query, "mode": "vector", "top_k": 1},
        )  # fmt: skip
        assert status == 200 and body["status"] == "used"
        assert body["hits"][0]["memory"]["text"] == expected, (query, body["hits"])


async def test_an_upload_without_the_static_table_names_the_fix_when_static_is_asked(
    d1: Any, make_worker: Any, monkeypatch: Any, capsys: Any
) -> None:
    """wrangler.jsonc leaves the table out of the upload (python_modules.exclude, for the
    free plan): a Worker that then embeds with it answers a 500 (a client is not told the
    server's setup), logs one error that names both ways out, and stores nothing."""
    from engramdb import StaticEmbedder
    from engramdb_workers import config

    monkeypatch.setattr(StaticEmbedder, "SHIPPED_FILE", "data/left-out-of-the-upload.bin")
    config.static_embedder.cache_clear()
    try:
        worker = make_worker(d1, TOKENS, AI=None)
        status, body, _ = await call(
            worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "Sam is vegetarian"}
        )
    finally:
        config.static_embedder.cache_clear()
    assert status == 500 and "misconfigured" in body["error"]["message"], body
    logged = capsys.readouterr().out
    assert "EMBEDDING_MODEL=static" in logged and "python_modules.exclude" in logged
    assert "@cf/baai/bge-base-en-v1.5" in logged
    tables = await d1.prepare("SELECT name FROM sqlite_master WHERE name = 'items'").all()
    assert list(tables.results) == []  # refused before the store was even set up


def test_importing_the_worker_does_no_io_and_no_randomness(monkeypatch: Any) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Cannot use random outside of request context")

    for name in ("random", "getrandbits", "randbytes", "choice"):
        monkeypatch.setattr(random, name, refuse)
    monkeypatch.setattr(os, "urandom", refuse)
    import engramdb_workers
    import entry
    from engramdb_workers import ai, api, d1, worker

    for module in (api, ai, d1, worker, engramdb_workers, entry):
        importlib.reload(module)
    assert worker._isolate == {}


@pytest.fixture(autouse=True)
def _fresh_isolate() -> Any:
    worker_module.reset_isolate()
    yield
    worker_module.reset_isolate()


async def test_the_cron_handler_runs_a_maintenance_pass(d1: Any, make_worker: Any) -> None:
    """scheduled() embeds what is pending and purges what expired, in one bounded pass."""
    from datetime import timedelta

    from engramdb import AsyncMemory, HashEmbedder
    from engramdb_workers.d1 import D1Store

    worker = make_worker(d1, TOKENS, EMBEDDING_MODEL="hash")
    later = AsyncMemory(D1Store(d1), HashEmbedder(), defer_embedding=True)
    await later.remember("a note written while the model was busy", ("acme", "user", "sam"))
    await later.remember("gone soon", ("acme", "user", "sam"), ttl=timedelta(milliseconds=1))
    before = await later.status()
    assert (before.pending, before.expired) == (1, 1)
    await worker.scheduled(None)
    status = await later.status()
    assert (status.pending, status.items, status.expired) == (0, 1, 0)


async def test_a_body_that_is_not_utf8_is_a_400_and_stores_nothing(make_host: Any) -> None:
    """The Worker reads a body's bytes: invalid UTF-8 is refused, never stored as U+FFFD."""
    worker = make_host(TOKENS)
    body = js.Uint8Array.new(to_js(list(b'{"text": "caf\xe9 bad"}')))
    init = {
        "method": "POST",
        "headers": {"Authorization": f"Bearer {SAM_TOKEN}", "Content-Type": "application/json"},
        "body": body,
    }
    js_request = js.Request.new(
        "https://memory.example.com/v1/memories", to_js(init, dict_converter=Object.fromEntries)
    )
    response = (await worker.fetch(Request(js_request))).js_object
    reply = json.loads(await response.text())
    assert (int(response.status), reply["error"]["code"]) == (400, "invalid_json")
    _, listed, _ = await call(worker, "GET", "/v1/memories", token=SAM_TOKEN)
    assert listed["memories"] == []


@pytest.mark.parametrize(("redact", "stored"), [(None, "[REDACTED:openai_key]"), ("off", "KEY")])
async def test_a_key_in_a_memory_is_redacted_unless_redact_is_off(
    make_host: Any, redact: str | None, stored: str
) -> None:
    """Both hosts redact credentials before anything is embedded or stored, unless the
    var REDACT is "off"."""
    key = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0P9o8"
    variables = {} if redact is None else {"REDACT": redact}
    worker = make_host(TOKENS, **variables)
    status, body, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": f"deploy key {key}"}
    )
    assert status == 201, body
    assert body["memory"]["text"] == "deploy key " + stored.replace("KEY", key)


async def test_maintenance_the_cron_uses_the_memorys_own_maintainer(
    d1: Any, make_worker: Any
) -> None:
    """The cron's pass is the D1 memory's own maintainer's: ``/v1/status`` shows its
    snapshot; with ``MAINTAIN=off`` the cron does nothing and status shows null."""
    from engramdb import AsyncMemory, HashEmbedder
    from engramdb_workers.d1 import D1Store

    later = AsyncMemory(D1Store(d1), HashEmbedder(), defer_embedding=True)
    await later.remember("a note written while the model was busy", ("acme", "user", "sam"))
    off = make_worker(d1, TOKENS, EMBEDDING_MODEL="hash", MAINTAIN="off")
    await off.scheduled(None)
    assert (await later.status()).pending == 1
    status, body, _ = await call(off, "GET", "/v1/status", token=SAM_TOKEN)
    assert status == 200 and body["maintenance"] is None
    worker_module.reset_isolate()
    on = make_worker(d1, TOKENS, EMBEDDING_MODEL="hash")
    await on.scheduled(None)
    assert (await later.status()).pending == 0
    status, body, _ = await call(on, "GET", "/v1/status", token=SAM_TOKEN)
    assert body["maintenance"]["successes"] == 1 and body["maintenance"]["last_report"] is None


async def test_vector_cache_mb_bounds_the_indexes_of_a_d1_isolate(
    d1: Any, make_worker: Any
) -> None:
    """Over D1 the isolate's one store answers to ``VECTOR_CACHE_MB`` as an object does
    (default 24 MiB); a bad value is a configuration error, and nothing is stored."""
    budgets = {}
    for setting, text in ((None, "one"), ("3", "uno")):
        worker_module.reset_isolate()
        worker = make_worker(d1, TOKENS, EMBEDDING_MODEL="hash", VECTOR_CACHE_MB=setting)
        status, _, _ = await call(
            worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": text}
        )
        assert status == 201
        budgets[setting] = worker_module._isolate["services"].store._cache._budget
    assert budgets == {None: 24 * 2**20, "3": 3 * 2**20}
    worker_module.reset_isolate()
    worker = make_worker(d1, TOKENS, EMBEDDING_MODEL="hash", VECTOR_CACHE_MB="0")
    status, body, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "two"}
    )
    assert (status, body["error"]["code"]) == (500, "server_misconfigured")
    _, body, _ = await call(
        make_worker(d1, TOKENS, EMBEDDING_MODEL="hash"), "GET", "/v1/memories", token=SAM_TOKEN
    )
    assert sorted(m["text"] for m in body["memories"]) == ["one", "uno"]
