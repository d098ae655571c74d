"""``engramdb serve``'s probes over real HTTP: ``/healthz`` and ``/readyz`` answer a load
balancer without a token and say nothing about any tenant (docs/http.md, "Probes")."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from server_helpers import BOB_TOKEN, SAM, SAM_TOKEN, Server, start  # noqa: E402

from engramdb import __version__  # noqa: E402

# What a probe's answer must never hold: tenants, scopes, tokens, texts.
SECRETS = ("acme", "globex", "sam", "bob", "secret-token", "Sam likes", "Bob likes")


def assert_tells_nothing(response: httpx.Response) -> None:
    for word in SECRETS:
        assert word not in response.text


def test_probes_answer_without_a_token_and_name_no_tenant(server: Server) -> None:
    """After two tenants wrote, /healthz is 200 ``{"status": "ok", "engramdb"}`` and
    /readyz 200 with a store check, a maintainer check and the maintainers' coarse
    state, all without a token; neither names a tenant, a scope or a text, and
    /v1/status still needs a token."""
    with server.client(SAM_TOKEN) as sam, server.client(BOB_TOKEN) as bob:
        assert sam.post("/v1/memories", json={"text": "Sam likes tea"}).status_code == 201
        assert bob.post("/v1/memories", json={"text": "Bob likes rain"}).status_code == 201
    with server.client() as anyone:
        health = anyone.get("/healthz")
        ready = anyone.get("/readyz")
        unauthorized = anyone.get("/v1/status")
        with_garbage_token = anyone.get("/readyz", headers={"authorization": "Bearer nope"})
    assert (health.status_code, health.json()) == (200, {"status": "ok", "engramdb": __version__})
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert set(body) == {"status", "engramdb", "checks", "maintainer"}
    assert body["status"] == "ready"
    assert body["checks"] == {"store": "ok", "maintainer": "ok"}
    assert set(body["maintainer"]) == {"state", "last_pass_at", "last_success_at"}
    assert body["maintainer"]["state"] in ("idle", "running")
    for response in (health, ready):
        assert response.headers["content-type"].startswith("application/json")
        assert response.headers["cache-control"] == "no-store"
        assert_tells_nothing(response)
    assert unauthorized.status_code == 401
    assert with_garbage_token.status_code == 200


def test_probes_take_get_and_head_only_and_read_no_body(server: Server) -> None:
    """POST, PUT and DELETE are 405 with ``Allow: GET, HEAD`` — even with a body over the
    API's limit, which a probe never reads (not a 413); HEAD is 200 without a body."""
    too_big = b"x" * (300 * 1024)
    with server.client() as anyone:
        for method in ("POST", "PUT", "DELETE"):
            for path in ("/healthz", "/readyz"):
                refused = anyone.request(method, path, content=too_big)
                assert refused.status_code == 405, (method, path)
                assert refused.headers["allow"] == "GET, HEAD"
                assert refused.json()["error"]["code"] == "method_not_allowed"
        head = anyone.head("/readyz")
        assert (head.status_code, head.content) == (200, b"")
        assert anyone.get("/healthz/").status_code == 200
        assert anyone.get("/healthzz").status_code == 401  # not a probe: needs a token


def test_readyz_is_503_while_the_database_file_is_not_a_database(tmp_path: Path) -> None:
    """--db holding garbage: /healthz stays 200 (the process answers), /readyz is 503
    ``"store": "unreachable"`` without the path or the error, which go to the log; once
    the file is gone, the next probe opens a fresh database and is 200."""
    db = tmp_path / "memory.sqlite3"
    db.write_bytes(b"this is not a SQLite database, just bytes " * 100)
    served = start(tmp_path, tokens={SAM_TOKEN: SAM})
    try:
        with served.client() as anyone:
            assert anyone.get("/healthz").status_code == 200
            broken = anyone.get("/readyz")
            assert broken.status_code == 503
            assert broken.json()["status"] == "unavailable"
            assert broken.json()["checks"]["store"] == "unreachable"
            assert str(tmp_path) not in broken.text
            db.unlink()
            healed = anyone.get("/readyz")
            assert (healed.status_code, healed.json()["checks"]["store"]) == (200, "ok")
    finally:
        output = served.stop()
    assert "engramdb: readiness: store: StoreError" in output
    assert SAM_TOKEN not in output


def test_readyz_is_503_when_the_tenants_directory_cannot_be_made(tmp_path: Path) -> None:
    """Two tenants live under ``<db>.d/``; when that name is a file, their stores cannot
    open: /readyz is 503 ``"store": "unreachable"`` and a tenant's request a 503 too."""
    (tmp_path / "memory.sqlite3.d").write_text("a file where a directory should be")
    served = start(tmp_path)
    try:
        with served.client() as anyone, served.client(SAM_TOKEN) as sam:
            broken = anyone.get("/readyz")
            assert (broken.status_code, broken.json()["checks"]["store"]) == (503, "unreachable")
            assert_tells_nothing(broken)
            assert sam.get("/v1/status").status_code >= 500
    finally:
        served.stop()


def test_without_a_maintainer_readyz_says_off(tmp_path: Path) -> None:
    """--no-maintain: the maintainer's state is ``off`` and readiness rests on the store."""
    served = start(tmp_path, "--no-maintain", tokens={SAM_TOKEN: SAM})
    try:
        with served.client() as anyone:
            ready = anyone.get("/readyz")
    finally:
        served.stop()
    assert ready.status_code == 200
    assert ready.json()["maintainer"] == {
        "state": "off",
        "last_pass_at": None,
        "last_success_at": None,
    }


def shape(value: object) -> object:
    """``value`` with each leaf replaced by its type's name: what a sample shares with any
    real answer (times and states differ from run to run, keys and kinds do not)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    return type(value).__name__


def test_the_probe_answers_docs_http_shows_are_the_servers(server: Server) -> None:
    """docs/http.md's /healthz answer is the server's, exactly (its version too), and its
    /readyz sample has the real answer's status, version and checks, and its keys and
    kinds everywhere: the samples cannot go stale unnoticed."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
    health_row = page[page.index("| `GET /healthz` | 200 `") :].split("`")[3]
    ready_line = page[page.index("$ curl -s http://127.0.0.1:8080/readyz\n") :].splitlines()[1]
    health_sample, ready_sample = json.loads(health_row), json.loads(ready_line)
    with server.client(SAM_TOKEN) as sam:  # the sample shows a maintainer that has worked
        assert sam.post("/v1/memories", json={"text": "Sam likes tea"}).status_code == 201
    with server.client() as anyone:
        assert anyone.get("/healthz").json() == health_sample
        deadline = time.monotonic() + 30
        while (ready := anyone.get("/readyz").json())["maintainer"]["last_success_at"] is None:
            assert time.monotonic() < deadline, ready
            time.sleep(0.05)
    assert {k: ready[k] for k in ("status", "engramdb", "checks")} == {
        k: ready_sample[k] for k in ("status", "engramdb", "checks")
    }
    assert shape(ready) == shape(ready_sample)
