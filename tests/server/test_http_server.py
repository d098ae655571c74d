"""``engramdb serve`` over real HTTP: the API of docs/http.md on uvicorn."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from server_helpers import (  # noqa: E402  (after the skips)
    ALEX,
    ALEX_TOKEN,
    BOB,
    BOB_TOKEN,
    SAM,
    SAM_TOKEN,
    Server,
    start,
)


def error_code(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/json")
    return str(response.json()["error"]["code"])


def test_missing_or_unknown_token_is_401_json(server: Server) -> None:
    """No token, a non-bearer header and an unknown token each get a 401 JSON error with a
    Bearer challenge, and the answer never echoes the token sent."""
    with server.client() as client:
        missing = client.get("/v1/status")
        basic = client.get("/v1/status", headers={"authorization": "Basic abc"})
        unknown = client.post(
            "/v1/memories",
            headers={"authorization": "Bearer not-a-known-token"},
            json={"text": "x"},
        )
    assert (missing.status_code, error_code(missing)) == (401, "missing_token")
    assert (basic.status_code, error_code(basic)) == (401, "missing_token")
    assert (unknown.status_code, error_code(unknown)) == (401, "invalid_token")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "not-a-known-token" not in unknown.text


def test_remember_get_list_update_history_forget(server: Server) -> None:
    """A memory goes through its whole life over HTTP: stored in the token's scope, read,
    listed, updated (compare-and-set: a stale revision is 409 and changes nothing), its
    history shown, then forgotten (404 after)."""
    with server.client(SAM_TOKEN) as sam:
        created = sam.post("/v1/memories", json={"text": "Sam is vegetarian", "importance": 0.8})
        assert created.status_code == 201
        memory = created.json()["memory"]
        assert memory["scope"] == SAM and memory["revision"] == 1
        assert created.headers["location"] == f"/v1/memories/{memory['id']}"
        got = sam.get(f"/v1/memories/{memory['id']}")
        assert got.json()["memory"]["text"] == "Sam is vegetarian"
        listed = sam.get("/v1/memories", params={"limit": 50}).json()
        assert memory["id"] in [m["id"] for m in listed["memories"]]

        updated = sam.patch(
            f"/v1/memories/{memory['id']}", json={"text": "Sam is vegan", "expected_revision": 1}
        )
        assert updated.status_code == 200
        assert updated.json()["memory"]["revision"] == 2
        stale = sam.patch(
            f"/v1/memories/{memory['id']}", json={"text": "Sam eats fish", "expected_revision": 1}
        )
        assert (stale.status_code, error_code(stale)) == (409, "revision_conflict")
        assert sam.get(f"/v1/memories/{memory['id']}").json()["memory"]["text"] == "Sam is vegan"

        history = sam.get(f"/v1/memories/{memory['id']}/history").json()
        assert [r["text"] for r in history["revisions"]] == ["Sam is vegetarian"]

        assert sam.delete(f"/v1/memories/{memory['id']}").json() == {
            "deleted": True,
            "id": memory["id"],
        }
        gone = sam.get(f"/v1/memories/{memory['id']}")
        assert (gone.status_code, error_code(gone)) == (404, "not_found")


def test_bulk_remember_recall_complete_feedback(server: Server) -> None:
    """A batch is stored in the token's scope; recall answers a receipt that completes once;
    feedback sets a memory's manual value."""
    with server.client(SAM_TOKEN) as sam:
        batch = sam.post(
            "/v1/memories/batch",
            json={"memories": [{"text": "Sam drinks green tea"}, {"text": "Sam lives in Oslo"}]},
        )
        assert batch.status_code == 201
        stored = batch.json()["memories"]
        assert [m["scope"] for m in stored] == [SAM, SAM]

        hits = sam.post("/v1/recall", json={"query": "green tea", "top_k": 3}).json()
        assert hits["hits"][0]["memory"]["text"] == "Sam drinks green tea"
        receipt = {"selection_id": hits["selection_id"], "score": 1.0}
        assert sam.post("/v1/complete", json=receipt).json()["completed"] is True
        assert sam.post("/v1/complete", json=receipt).json()["completed"] is False

        rated = sam.post("/v1/feedback", json={"memory_id": stored[1]["id"], "value": 0.5})
        assert rated.status_code == 200
        assert rated.json()["memory"]["id"] == stored[1]["id"]


def test_scopes_and_forget_scope_stay_within_the_grant(server: Server) -> None:
    """GET /v1/scopes lists only scopes under the token's scope; DELETE /v1/scope forgets
    exactly the token's scope, not its neighbour's in the same tenant."""
    with server.client(ALEX_TOKEN) as alex, server.client(SAM_TOKEN) as sam:
        assert alex.post("/v1/memories", json={"text": "Alex plays chess"}).status_code == 201
        assert sam.post("/v1/memories", json={"text": "Sam plays go"}).status_code == 201
        scopes = alex.get("/v1/scopes").json()["scopes"]
        assert [s["scope"] for s in scopes] == [ALEX]
        forgotten = alex.delete("/v1/scope").json()
        assert forgotten["scope"] == ALEX and forgotten["deleted"] >= 1
        assert alex.get("/v1/memories").json()["memories"] == []
        assert any(m["text"] == "Sam plays go" for m in sam.get("/v1/memories").json()["memories"])


def test_tenants_see_nothing_of_each_other_and_use_separate_files(server: Server) -> None:
    """Bob (tenant globex) cannot get, update, delete, rate or recall Sam's (tenant acme)
    memory, and each tenant's memories live in their own SQLite file."""
    with server.client(SAM_TOKEN) as sam, server.client(BOB_TOKEN) as bob:
        secret = sam.post("/v1/memories", json={"text": "Sam's locker code is 4711"}).json()
        item = secret["memory"]["id"]
        assert bob.post("/v1/memories", json={"text": "Bob likes sailing"}).status_code == 201
        assert bob.get(f"/v1/memories/{item}").status_code == 404
        assert bob.get(f"/v1/memories/{item}/history").status_code == 404
        assert bob.patch(f"/v1/memories/{item}", json={"text": "x"}).status_code == 404
        assert bob.delete(f"/v1/memories/{item}").status_code == 404
        assert bob.post("/v1/feedback", json={"memory_id": item, "value": 1}).status_code == 404
        assert bob.post("/v1/recall", json={"query": "locker code"}).json()["hits"] == []
        assert [s["scope"] for s in bob.get("/v1/scopes").json()["scopes"]] == [BOB]
        assert sam.get(f"/v1/memories/{item}").status_code == 200

    folder = server.db.parent / "memory.sqlite3.d"
    files = {
        tenant: folder / (hashlib.sha256(tenant.encode()).hexdigest() + ".sqlite3")
        for tenant in ("acme", "globex")
    }
    assert all(path.is_file() for path in files.values())
    assert b"4711" in files["acme"].read_bytes() + _wal(files["acme"])
    assert b"4711" not in files["globex"].read_bytes() + _wal(files["globex"])
    assert not server.db.exists()


def _wal(path: Path) -> bytes:
    wal = Path(str(path) + "-wal")
    return wal.read_bytes() if wal.exists() else b""


def test_a_body_naming_a_scope_is_refused_and_stores_nothing(server: Server) -> None:
    """The scope comes from the token: a body with 'scope' is a 400 and nothing is written."""
    with server.client(BOB_TOKEN) as bob:
        before = bob.get("/v1/memories").json()["memories"]
        refused = bob.post("/v1/memories", json={"text": "x y z", "scope": ["acme"]})
        assert (refused.status_code, error_code(refused)) == (400, "invalid_request")
        assert bob.get("/v1/memories").json()["memories"] == before


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"[1, 2]", "invalid_json"),
        (b"", "invalid_json"),
        (b'{"text": NaN}', "invalid_json"),
        (b'{"text": "x", "metadata": ' + b'{"a": ' * 40 + b"1" + b"}" * 41, "invalid_json"),
        (b"[" * 200_000 + b"]" * 200_000, "payload_too_large"),
        (b'{"text":' + b"[" * 50_000 + b"]" * 50_000 + b"}", "invalid_json"),
    ],
    ids=["malformed", "array", "empty", "nan", "nested-40", "nested-huge", "nested-deep"],
)
def test_bad_json_is_a_4xx_json_error(server: Server, body: bytes, code: str) -> None:
    """Malformed, non-object, NaN, deeply nested and oversized bodies each get one 4xx JSON
    error (never a 500), and the server answers the next request."""
    with server.client(BOB_TOKEN) as bob:
        response = bob.post(
            "/v1/memories", content=body, headers={"content-type": "application/json"}
        )
        assert 400 <= response.status_code < 500
        assert error_code(response) == code
        assert bob.get("/v1/status").status_code == 200


def test_a_body_over_the_limit_is_413(server: Server) -> None:
    """A body above 256 KiB is refused with 413 by its Content-Length."""
    with server.client(BOB_TOKEN) as bob:
        huge = b'{"text": "' + b"a" * (300 * 1024) + b'"}'
        response = bob.post("/v1/memories", content=huge)
        assert (response.status_code, error_code(response)) == (413, "payload_too_large")
        assert bob.get("/v1/status").status_code == 200


def chunks(parts: list[bytes]) -> Iterator[bytes]:
    yield from parts


def test_chunked_bodies_are_counted_as_they_arrive(server: Server) -> None:
    """A chunked body (no Content-Length) under the limit is read; one over the limit is
    a 413 JSON error while it streams, and the server answers afterwards."""
    with server.client(BOB_TOKEN) as bob:
        small = bob.post(
            "/v1/memories",
            content=chunks([b'{"text": ', b'"Bob sails on Sundays"}']),
            headers={"content-type": "application/json"},
        )
        assert small.status_code == 201
        assert "content-length" not in small.request.headers
        big = bob.post(
            "/v1/memories",
            content=chunks([b'{"text": "'] + [b"a" * 65536] * 8 + [b'"}']),
            headers={"content-type": "application/json"},
        )
        assert (big.status_code, error_code(big)) == (413, "payload_too_large")
        assert bob.get("/v1/status").status_code == 200


def test_a_lying_content_length_and_garbage_do_not_crash_it(server: Server) -> None:
    """Raw requests with a Content-Length larger than the body sent, or no HTTP at all,
    do not stop the server."""
    host, port = server.url.removeprefix("http://").split(":")
    for raw in (
        b"POST /v1/memories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + BOB_TOKEN.encode()
        + b"\r\nContent-Length: 100\r\n\r\n{}",
        b"\x00\x01garbage\r\n\r\n",
    ):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)
            sock.recv(65536)
    with server.client(BOB_TOKEN) as bob:
        assert bob.get("/v1/status").status_code == 200


def test_unknown_paths_methods_and_fields(server: Server) -> None:
    """Unknown paths are 404, wrong methods 405 with Allow, unknown fields 400."""
    with server.client(BOB_TOKEN) as bob:
        assert error_code(bob.get("/v1/nothing")) == "not_found"
        wrong = bob.put("/v1/recall", json={})
        assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
        extra = bob.post("/v1/recall", json={"query": "x", "bogus": 1})
        assert (extra.status_code, error_code(extra)) == (400, "invalid_request")
        empty = bob.post("/v1/memories/batch", json={"memories": []})
        assert (empty.status_code, error_code(empty)) == (400, "invalid_request")


def test_one_tenant_uses_the_db_file_itself(tmp_path: Path) -> None:
    """With grants of a single tenant, its memories live in --db (the file the CLI uses)."""
    single = start(tmp_path, tokens={SAM_TOKEN: SAM, ALEX_TOKEN: ALEX})
    try:
        with single.client(SAM_TOKEN) as sam:
            assert sam.post("/v1/memories", json={"text": "one file"}).status_code == 201
        assert single.db.is_file()
        assert not Path(str(single.db) + ".d").exists()
    finally:
        single.stop()


def test_configuration_errors_are_one_line_and_never_show_a_token(tmp_path: Path) -> None:
    """Bad ENGRAMDB_TOKENS, or a grant reading another tenant, stop main() with exit 2 and
    one line that names the problem, not the token."""
    for tokens in ({"tok-123456": "not a scope"}, {"tok-123456": {"scope": BOB, "read": [SAM]}}):
        process = subprocess.run(
            [sys.executable, "-m", "engramdb.server", "--db", str(tmp_path / "x")],
            env={**os.environ, "ENGRAMDB_TOKENS": json.dumps(tokens)},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert process.returncode == 2
        assert process.stderr.startswith("engramdb serve: ")
        assert len(process.stderr.strip().splitlines()) == 1
        assert "tok-123456" not in process.stderr


def test_serve_reads_the_config_file(tmp_path: Path) -> None:
    """ENGRAMDB_CONFIG's file (or --config's) gives serve its database, beside the file,
    and maintain = false, through the same resolve() as the CLI; a bad file stops it."""
    from engramdb import ConfigurationError
    from engramdb.server import build

    config = tmp_path / "config.toml"
    config.write_text('db = "served.db"\nembedder = "hash:64"\nmaintain = false\n')
    (tmp_path / "served.db").touch()
    tokens = json.dumps({SAM_TOKEN: SAM, BOB_TOKEN: BOB})
    for argv, env in (
        ([], {"ENGRAMDB_TOKENS": tokens, "ENGRAMDB_CONFIG": str(config)}),
        (["--config", str(config)], {"ENGRAMDB_TOKENS": tokens}),
    ):
        app, _, notices = build(argv, env)
        assert app.maintaining is False
        assert notices == [
            f"notice: 2 tenants each use their own file under {tmp_path / 'served.db'}.d/; "
            f"{tmp_path / 'served.db'} itself is not served"
        ]
    config.write_text("port = 8080\n")
    with pytest.raises(ConfigurationError, match="unknown key 'port'"):
        build(["--config", str(config)], {"ENGRAMDB_TOKENS": tokens})


def test_a_tokens_file_wins_over_the_environment(tmp_path: Path) -> None:
    """--tokens-file is read instead of ENGRAMDB_TOKENS: its tokens work, the variable's
    do not."""
    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(json.dumps({SAM_TOKEN: SAM}), encoding="utf-8")
    served = start(tmp_path, "--tokens-file", str(tokens_file), tokens={BOB_TOKEN: BOB})
    try:
        with served.client(SAM_TOKEN) as sam, served.client(BOB_TOKEN) as bob:
            assert sam.get("/v1/status").json()["scope"] == SAM
            assert error_code(bob.get("/v1/status")) == "invalid_token"
    finally:
        served.stop()


def test_tokens_never_reach_the_log(tmp_path: Path) -> None:
    """After known and unknown tokens, good and bad requests, nothing the server printed
    holds a token."""
    served = start(tmp_path)
    with served.client(SAM_TOKEN) as sam, served.client("unknown-token-xyz") as stranger:
        sam.post("/v1/memories", json={"text": "Sam is here"})
        sam.post("/v1/memories", content=b"{broken")
        stranger.get("/v1/status")
    output = served.stop()
    assert "POST /v1/memories" in output  # the access log is in what was read
    for token in (SAM_TOKEN, "unknown-token-xyz", ALEX_TOKEN, BOB_TOKEN):
        assert token not in output


@pytest.mark.parametrize("flag", [None, "--no-maintain"])
def test_the_server_embeds_pending_texts_without_a_maintain_call(
    tmp_path: Path, flag: str | None
) -> None:
    """A text stored pending in the tenant's file (by another process) is embedded by the
    server's own maintainer, which starts with the tenant's first request; ``GET
    /v1/status`` shows its state without the store-wide counts of its last pass, and a
    vector recall then finds the text. ``--no-maintain`` runs none (``maintenance``:
    null; the text stays pending)."""
    from engramdb import HashEmbedder, Memory
    from engramdb.sqlite import SqliteStore

    db = tmp_path / "memory.sqlite3"
    with Memory(SqliteStore(db), HashEmbedder(dimensions=64), defer_embedding=True) as other:
        other.remember("the deploy window is Friday", tuple(SAM))
    server = start(tmp_path, *([flag] if flag else []), tokens={SAM_TOKEN: SAM})
    try:
        with server.client(SAM_TOKEN) as sam:
            for _ in range(500):
                maintenance = sam.get("/v1/status").json()["maintenance"]
                if maintenance is None or maintenance["successes"] >= 1:
                    break
                time.sleep(0.01)
            hits = sam.post("/v1/recall", json={"query": "deploy window", "mode": "vector"})
    finally:
        server.stop()
    texts = [hit["memory"]["text"] for hit in hits.json()["hits"]]
    with Memory(SqliteStore(db), HashEmbedder(dimensions=64)) as reader:
        pending = reader.status().pending
    if flag is None:
        assert maintenance is not None and maintenance["state"] in ("idle", "running")
        assert maintenance["last_report"] is None and maintenance["last_error"] is None
        assert (pending, texts) == (0, ["the deploy window is Friday"])
    else:
        assert (maintenance, pending, texts) == (None, 1, [])
