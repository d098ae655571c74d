"""The Worker's probes through ``Default.fetch`` with real ``Request``s: ``/healthz`` and
``/readyz`` without a token, over one D1 database (miniflare's) or one Durable Object
per tenant, whose objects a probe never wakes."""

from __future__ import annotations

from typing import Any

import engramdb_bindings

from engramdb import __version__
from engramdb_workers import worker as worker_module
from test_api import SAM_TOKEN, TOKENS, call

SECRETS = ("acme", "sam", "alex", "secret-token", "Sam likes")


def tells_nothing(body: Any) -> bool:
    text = repr(body)
    return not any(word in text for word in SECRETS)


async def test_probes_answer_without_a_token_on_either_setup(make_host: Any) -> None:
    """/healthz is 200 with the version, /readyz 200 ``ready``, both without a token and
    naming no tenant; /v1/status still needs a token; other methods are 405."""
    worker = make_host(TOKENS, EMBEDDING_MODEL="hash")
    status, body, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "Sam likes tea"}
    )
    assert status == 201
    status, health, _ = await call(worker, "GET", "/healthz")
    assert (status, health) == (200, {"status": "ok", "engramdb": __version__})
    status, ready, _ = await call(worker, "GET", "/readyz")
    assert (status, ready["status"]) == (200, "ready"), ready
    assert ready["checks"]["tokens"] == ready["checks"]["config"] == "ok"
    assert tells_nothing(health) and tells_nothing(ready)
    status, body, _ = await call(worker, "GET", "/v1/status")
    assert (status, body["error"]["code"]) == (401, "missing_token")
    status, body, headers = await call(worker, "POST", "/readyz", raw_body="{}")
    assert (status, body["error"]["code"]) == (405, "method_not_allowed")
    assert headers.get("allow") == "GET, HEAD"


async def test_d1_readiness_reads_the_database(d1: Any, make_worker: Any) -> None:
    """With one D1 database, /readyz reads it: ``"store": "ok"``; a database written by a
    newer engramdb is 503 ``"store": "schema_too_new"``, the details in the log only."""
    worker = make_worker(d1, TOKENS, EMBEDDING_MODEL="hash")
    status, ready, _ = await call(worker, "GET", "/readyz")
    assert (status, ready["checks"]) == (200, {"tokens": "ok", "config": "ok", "store": "ok"})

    newer = await _new_d1()
    await newer.prepare(
        "CREATE TABLE engramdb_schema (id INTEGER PRIMARY KEY CHECK (id = 1), "
        "version INTEGER NOT NULL)"
    ).run()
    await newer.prepare("INSERT INTO engramdb_schema (id, version) VALUES (1, 999)").run()
    worker_module.reset_isolate()
    stale = make_worker(newer, TOKENS, EMBEDDING_MODEL="hash")
    status, ready, _ = await call(stale, "GET", "/readyz")
    assert (status, ready["status"]) == (503, "unavailable")
    assert ready["checks"]["store"] == "schema_too_new"
    assert "999" not in repr(ready)


async def _new_d1() -> Any:
    from conftest import new_d1

    return await new_d1()


async def test_readiness_fails_on_a_configuration_the_front_would_refuse(make_host: Any) -> None:
    """No tokens at all (no ENGRAMDB_TOKENS, no TOKENS KV), or a bad MAINTAIN: 503 with
    ``"tokens"``/``"config"``: ``"misconfigured"``; a KV namespace alone is enough."""
    status, ready, _ = await call(make_host(None), "GET", "/readyz")
    assert (status, ready["checks"]["tokens"]) == (503, "misconfigured")
    status, ready, _ = await call(make_host(TOKENS, MAINTAIN="sometimes"), "GET", "/readyz")
    assert (status, ready["checks"]["config"]) == (503, "misconfigured")
    status, ready, _ = await call(
        make_host(None, TOKENS=engramdb_bindings.newKv()), "GET", "/readyz"
    )
    assert (status, ready["checks"]["tokens"]) == (200, "ok")


async def test_durable_object_readiness_wakes_no_object(make_worker: Any) -> None:
    """With one object per tenant /readyz checks tokens and vars only (a bad
    VECTOR_FLOATS_UP_TO is 503) and never builds or reaches a tenant's object; a
    request with a token then does."""
    broken = make_worker(None, TOKENS, objects=True, VECTOR_FLOATS_UP_TO="lots")
    status, ready, _ = await call(broken, "GET", "/readyz")
    assert (status, ready["checks"]) == (503, {"tokens": "ok", "config": "misconfigured"})

    worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash")
    for path in ("/healthz", "/readyz", "/readyz"):
        status, _, _ = await call(worker, "GET", path)
        assert status == 200
    status, ready, _ = await call(worker, "GET", "/readyz")
    assert ready["checks"] == {"tokens": "ok", "config": "ok"}
    assert worker.objects.instances == {} and worker.objects.states == {}
    status, _, _ = await call(worker, "GET", "/v1/status", token=SAM_TOKEN)
    assert status == 200
    assert len(worker.objects.instances) == 1
