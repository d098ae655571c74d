"""The OpenAPI document against a real ``engramdb serve``: for every documented operation
and every status it documents, a request that gets that status, its answer validated
against the documented schema (jsonschema, 2020-12); the (path, method, status) seen are
exactly the documented ones but for the few a healthy ``engramdb serve`` cannot answer,
each listed with why; and any other method on a documented path is a 405 naming the
documented methods."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from engramdb import HashEmbedder, Memory
from engramdb.http_api import MAX_BODY_BYTES, MAX_DOCUMENT_BYTES, MAX_TEXT_BYTES, openapi_document
from engramdb.sqlite import SqliteStore

jsonschema = pytest.importorskip("jsonschema")  # openapi-spec-validator's dependency
referencing = pytest.importorskip("referencing")

from referencing.jsonschema import DRAFT202012  # noqa: E402  (after the skips)
from server_helpers import SAM, SAM_TOKEN, TOKENS, Server, free_port, start  # noqa: E402

DOCUMENT = openapi_document()
REGISTRY = referencing.Registry().with_resource(
    "urn:engramdb", DRAFT202012.create_resource(DOCUMENT)
)
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

UNREACHABLE_ON_SERVE = {
    **{
        (
            path,
            method.upper(),
            429,
        ): "engramdb serve has no rate limiter (the Worker's RATE_LIMITER)"
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
        if "429" in operation["responses"]
    },
    ("/v1/recall", "POST", 502): (
        "SQLite has a lexical index: a failed query embedding degrades the recall "
        "(200, status degraded); 502 needs a store without one"
    ),
}
"""Documented statuses a healthy ``engramdb serve`` cannot answer, and why."""


def documented() -> set[tuple[str, str, int]]:
    return {
        (path, method.upper(), int(status))
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
        for status in operation["responses"]
    }


def _pointer(*parts: str) -> str:
    return "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


@dataclass
class Seen:
    """The (path template, method, status) answered, each answer checked as it comes."""

    answered: set[tuple[str, str, int]] = field(default_factory=set)

    def check(self, template: str, response: httpx.Response) -> None:
        method = response.request.method
        key = (template, method, response.status_code)
        answer = DOCUMENT["paths"][template].get(method.lower(), {}).get("responses", {})
        assert str(key[2]) in answer, f"undocumented answer {key}: {response.text[:300]}"
        documented_answer = answer[str(key[2])]
        for header in documented_answer.get("headers", {}):
            assert header.lower() in response.headers, (key, header)
        if method == "HEAD":
            assert response.content == b"", key
        else:
            where = _pointer("paths", template, method.lower(), "responses", str(key[2]))
            schema = {"$ref": f"urn:engramdb#/{where}/content/application~1json/schema"}
            validator = jsonschema.Draft202012Validator(
                schema,
                registry=REGISTRY,
                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
            )
            validator.validate(response.json())
        self.answered.add(key)


def request_schema(template: str, method: str) -> Any:
    """A validator of the documented body of ``method`` on ``template``."""
    where = _pointer("paths", template, method.lower(), "requestBody")
    schema = {"$ref": f"urn:engramdb#/{where}/content/application~1json/schema"}
    return jsonschema.Draft202012Validator(schema, registry=REGISTRY)


class Caller:
    """Requests to one server, each answer checked by ``seen``."""

    def __init__(self, server: Server, seen: Seen) -> None:
        self.url = server.url
        self.seen = seen

    def __call__(
        self,
        method: str,
        template: str,
        path: str | None = None,
        *,
        token: str | None = SAM_TOKEN,
        body: Any = None,
        raw: bytes | None = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        headers = {"content-type": content_type}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        content = raw if raw is not None else None if body is None else json.dumps(body).encode()
        response = httpx.request(
            method,
            self.url + (path or template),
            headers=headers,
            content=content,
            params=params,
            timeout=30,
        )
        self.seen.check(template, response)
        return response


def one_part(text: str, source: str) -> dict[str, Any]:
    """The body of a document sent in one part (its last, so it is remembered)."""
    sha = hashlib.sha256(text.encode()).hexdigest()
    return {"text": text, "source": source, "part": 0, "parts": 1, "sha256": sha}


def valid_requests(call: Caller, memory_id: str) -> Iterator[tuple[str, str, str, Any]]:
    """(method, template, path, body) of a request each operation behind the token
    serves, for a memory ``memory_id`` of Sam's."""
    item = f"/v1/memories/{memory_id}"
    yield "POST", "/v1/memories", "/v1/memories", {"text": "Sam likes tea", "labels": {"t": "x"}}
    yield "GET", "/v1/memories", "/v1/memories?limit=1", None
    yield "POST", "/v1/memories/batch", "/v1/memories/batch", {"memories": [{"text": "Sam cooks"}]}
    yield "GET", "/v1/memories/{id}", item, None
    yield "PATCH", "/v1/memories/{id}", item, {"importance": 0.7}
    yield "GET", "/v1/memories/{id}/history", item + "/history", None
    turns = [{"speaker": "Sam", "text": "Sam likes tea"}, {"speaker": "Kim", "text": "with milk"}]
    yield "POST", "/v1/conversations", "/v1/conversations", {"turns": turns, "conversation": "c"}
    yield "POST", "/v1/recall", "/v1/recall", {"query": "tea", "top_k": 3, "context": 1}
    yield "POST", "/v1/complete", "/v1/complete", {"selection_id": "no-such-selection", "score": 1}
    yield "POST", "/v1/feedback", "/v1/feedback", {"memory_id": memory_id, "value": 0.5}
    yield "GET", "/v1/scopes", "/v1/scopes", None
    yield "GET", "/v1/status", "/v1/status", None
    yield "GET", "/v1/count", "/v1/count", None
    trip = {"text": "# Trip\n\nSam packs light.\n\nSam flies on Tuesday.", "source": "trip.md"}
    yield "POST", "/v1/documents", "/v1/documents", trip
    yield "DELETE", "/v1/documents", "/v1/documents?source=trip.md", None
    yield "POST", "/v1/documents/parts", "/v1/documents/parts", one_part("Sam swims.", "swim.md")
    yield "DELETE", "/v1/memories/{id}", item, None
    yield "DELETE", "/v1/scope", "/v1/scope", None


@pytest.fixture(scope="module")
def seen() -> Seen:
    return Seen()


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Server]]:
    """Servers that fail: 503 (``--db`` is not a database), 500 (the tenants'
    directory is a file), 502 (the embedder is a closed port; Sam's memory was
    remembered before, with the hash embedder)."""
    unavailable = tmp_path_factory.mktemp("unavailable")
    (unavailable / "memory.sqlite3").write_bytes(b"not a SQLite database " * 100)
    failing = tmp_path_factory.mktemp("failing")
    (failing / "memory.sqlite3.d").write_text("a file where a directory should be")
    offline = tmp_path_factory.mktemp("offline")
    with Memory(SqliteStore(str(offline / "memory.sqlite3")), HashEmbedder(64)) as memory:
        memory.remember("Sam likes tea", scope=tuple(SAM))
    embedder = f"ollama:nomic?host=http://127.0.0.1:{free_port()}&max_retries=0&dimensions=64"
    servers = {
        503: start(unavailable, "--no-maintain", tokens={SAM_TOKEN: SAM}),
        500: start(failing, "--no-maintain", tokens=TOKENS),
        502: start(offline, "--no-maintain", "--embedder", embedder, tokens={SAM_TOKEN: SAM}),
    }
    yield servers
    for server in servers.values():
        server.stop()


def test_every_documented_answer_is_answered_and_nothing_else(
    server: Server, broken: dict[int, Server], seen: Seen
) -> None:
    """Each documented (path, method, status) is answered by some request, every answer
    matches its documented schema, and no request gets an undocumented one."""
    call = Caller(server, seen)
    first = call("POST", "/v1/memories", body={"text": "Sam drinks coffee"}).json()["memory"]
    for method, template, path, body in valid_requests(call, first["id"]):
        assert call(method, template, path, body=body).status_code < 300, (method, path)
        assert call(method, template, path, body=body, token=None).status_code == 401
        assert call(method, template, path, body=body, token="unknown").status_code == 401
        if body is not None:  # what reading a body adds: 400, 413, 415
            assert request_schema(template, method).is_valid(body), (method, path)
            assert not request_schema(template, method).is_valid({**body, "scope": ["x"]})
            assert call(method, template, path, raw=b"{not json").status_code == 400
            assert call(method, template, path, raw=b"[]").status_code == 400
            assert call(method, template, path, body={**body, "scope": ["x"]}).status_code == 400
            too_big = b" " * (MAX_BODY_BYTES + 1)
            assert call(method, template, path, raw=too_big).status_code == 413
            assert (
                call(method, template, path, raw=b"{}", content_type="text/plain").status_code
                == 415
            )
        for status, failing in broken.items():
            if status != 502:
                answer = Caller(failing, seen)(method, template, path, body=body)
                assert answer.status_code == status, (status, method, path, answer.text)

    missing = "/v1/memories/no-such-memory"
    too_long = "/v1/memories/" + "x" * 200
    for method, template, path in (
        ("GET", "/v1/memories/{id}", missing),
        ("PATCH", "/v1/memories/{id}", missing),
        ("DELETE", "/v1/memories/{id}", missing),
        ("GET", "/v1/memories/{id}/history", missing + "/history"),
    ):
        body = {"text": "x"} if method == "PATCH" else None
        assert call(method, template, path, body=body).status_code == 404
    assert (
        call("POST", "/v1/feedback", body={"memory_id": "nope", "value": None}).status_code == 404
    )
    for method, template, path in (
        ("GET", "/v1/memories/{id}", too_long),
        ("DELETE", "/v1/memories/{id}", too_long),
        ("GET", "/v1/memories/{id}/history", too_long + "/history"),
        ("GET", "/v1/memories", "/v1/memories?limit=0"),
        ("GET", "/v1/scopes", "/v1/scopes?cursor=nope"),
        ("DELETE", "/v1/documents", "/v1/documents"),
    ):
        assert call(method, template, path).status_code == 400, path
    item = "/v1/memories/" + call("POST", "/v1/memories", body={"text": "a"}).json()["memory"]["id"]
    stale = call("PATCH", "/v1/memories/{id}", item, body={"text": "b", "expected_revision": 9})
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "revision_conflict")
    for template, method, refused in (  # what the server refuses, the schema does too
        ("/v1/memories", "POST", {"text": ""}),
        ("/v1/memories/batch", "POST", {"memories": []}),
        ("/v1/conversations", "POST", {"turns": [], "conversation": "c"}),
        ("/v1/recall", "POST", {"query": "tea", "context": -1}),
        ("/v1/memories/{id}", "PATCH", {"expected_revision": 1}),
        ("/v1/complete", "POST", {"selection_id": "s", "score": 2}),
        ("/v1/feedback", "POST", {"memory_id": "m"}),
        ("/v1/documents", "POST", {"text": "a text without its source"}),
        ("/v1/documents/parts", "POST", {"text": "a part", "source": "s.md", "part": 0}),
    ):
        path = template.replace("{id}", "some-id")
        assert call(method, template, path, body=refused).status_code == 400, refused
        assert not request_schema(template, method).is_valid(refused), refused
    big_text = {"text": "x" * (MAX_TEXT_BYTES + 1)}
    assert call("POST", "/v1/memories", body=big_text).json()["error"]["code"] == "text_too_large"
    big_document = {"text": "x" * (MAX_DOCUMENT_BYTES + 1), "source": "big.md"}
    answer = call("POST", "/v1/documents", body=big_document).json()
    assert answer["error"]["code"] == "text_too_large"

    offline = Caller(broken[502], seen)
    kept = offline("GET", "/v1/memories", "/v1/memories?limit=1").json()["memories"][0]["id"]
    for method, template, path, body in (
        ("POST", "/v1/memories", None, {"text": "Sam likes rain"}),
        ("POST", "/v1/memories/batch", None, {"memories": [{"text": "Sam likes snow"}]}),
        ("POST", "/v1/documents", None, {"text": "Sam likes hail", "source": "hail.md"}),
        ("POST", "/v1/documents/parts", None, one_part("Sam likes fog", "fog.md")),
        (
            "POST",
            "/v1/conversations",
            None,
            {"turns": [{"speaker": "Sam", "text": "Sam likes hail"}], "conversation": "c"},
        ),
        ("PATCH", "/v1/memories/{id}", f"/v1/memories/{kept}", {"text": "Sam likes sun"}),
    ):
        answer = offline(method, template, path, body=body)
        assert (answer.status_code, answer.json()["error"]["code"]) == (502, "embedding_failed")
    degraded = offline("POST", "/v1/recall", body={"query": "tea"})
    assert (degraded.status_code, degraded.json()["status"]) == (200, "degraded")

    for failing in (server, broken[503]):
        probe = Caller(failing, seen)
        for method in ("GET", "HEAD"):
            probe(method, "/healthz", token=None)
            probe(method, "/readyz", token=None)
            served = probe(method, "/openapi.json", token=None)
    assert served.status_code == 200
    assert Caller(server, seen)("GET", "/openapi.json", token=None).json() == DOCUMENT

    expected = documented() - set(UNREACHABLE_ON_SERVE)
    assert set(UNREACHABLE_ON_SERVE) <= documented()
    assert seen.answered - documented() == set()
    assert expected - seen.answered == set(), "documented but never answered"


def test_any_other_method_on_a_documented_path_is_405(server: Server) -> None:
    """A method the document does not list for a path is a 405 ``method_not_allowed``
    whose Allow header is the documented methods, on every path."""
    for template, item in DOCUMENT["paths"].items():
        path = template.replace("{id}", "some-id")
        methods = {method.upper() for method in item}
        for method in set(METHODS) - methods:
            answer = httpx.request(
                method, server.url + path, headers={"authorization": f"Bearer {SAM_TOKEN}"}
            )
            assert answer.status_code == 405, (method, path)
            assert set(answer.headers["allow"].split(", ")) == methods, (method, path)
            if method != "HEAD":  # a HEAD answer has no body
                assert answer.json()["error"]["code"] == "method_not_allowed"
                jsonschema.validate(
                    answer.json(),
                    {"$ref": "urn:engramdb#/components/schemas/Error"},
                    registry=REGISTRY,
                )
