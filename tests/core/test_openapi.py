"""The OpenAPI document: valid OpenAPI 3.1 (by openapi-spec-validator, where it is
installed), built from the same operations the router answers, and served at
``/openapi.json`` before any token (also in Pyodide)."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest

from engramdb import AsyncMemory, HashEmbedder, InMemoryStore, __version__
from engramdb.http_api import handle, openapi_document, parse_tokens

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
SAM_TOKEN = "sam-token"
GRANTS = parse_tokens(json.dumps({SAM_TOKEN: ["acme", "user", "sam"]}))


def documented() -> dict[str, set[str]]:
    """Each documented path -> its methods."""
    return {
        path: {method.upper() for method in item}
        for path, item in openapi_document()["paths"].items()
    }


async def call(method: str, path: str, token: str | None = SAM_TOKEN, body: Any = None) -> Any:
    memory = AsyncMemory(InMemoryStore(), HashEmbedder())

    async def read_body() -> str:
        return json.dumps(body)

    headers = {"authorization": f"Bearer {token}"} if token else {}
    return await handle(
        method, path, headers, read_body, grants=lambda: GRANTS, memory=lambda grant: memory
    )


def test_the_document_is_valid_openapi_3_1() -> None:
    """openapi-spec-validator finds nothing wrong with the document, and does find a
    broken copy wrong (the check can fail)."""
    if importlib.util.find_spec("openapi_spec_validator") is None:
        pytest.skip("openapi-spec-validator is not installed (pip install openapi-spec-validator)")
    from openapi_spec_validator import OpenAPIV31SpecValidator, validate

    document = openapi_document()
    validate(document, cls=OpenAPIV31SpecValidator)
    broken = openapi_document()
    del broken["paths"]["/v1/status"]["get"]["responses"]["200"]["description"]
    assert list(OpenAPIV31SpecValidator(broken).iter_errors())


def test_the_document_names_the_version_the_token_and_the_open_paths() -> None:
    """info.version is engramdb's; every operation needs the bearer token but the
    probes and the document itself; every path of the API is there."""
    document = openapi_document()
    assert (document["openapi"], document["info"]["version"]) == ("3.1.0", __version__)
    assert document["security"] == [{"bearer": []}]
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "a token of ENGRAMDB_TOKENS (or the Worker's TOKENS)",
    }
    open_paths = {
        path
        for path, item in document["paths"].items()
        for operation in item.values()
        if operation.get("security") == []
    }
    assert open_paths == {"/healthz", "/readyz", "/openapi.json"}
    assert set(documented()) == {
        "/v1/memories",
        "/v1/memories/batch",
        "/v1/memories/{id}",
        "/v1/memories/{id}/history",
        "/v1/recall",
        "/v1/complete",
        "/v1/feedback",
        "/v1/scopes",
        "/v1/scope",
        "/v1/status",
        "/v1/count",
        "/v1/documents",
        "/v1/documents/parts",
        "/v1/conversations",
        "/healthz",
        "/readyz",
        "/openapi.json",
    }


def test_an_error_answer_names_its_codes_per_status() -> None:
    """Each error status lists the codes it answers: a PATCH's 409 is revision_conflict,
    its 413 either size, a GET's 401 either token failure."""
    paths = openapi_document()["paths"]

    def codes(path: str, method: str, status: str) -> list[str]:
        schema = paths[path][method]["responses"][status]["content"]["application/json"]
        return list(schema["schema"]["properties"]["error"]["properties"]["code"]["enum"])

    assert codes("/v1/memories/{id}", "patch", "409") == ["revision_conflict"]
    assert codes("/v1/memories/{id}", "patch", "413") == ["payload_too_large", "text_too_large"]
    assert codes("/v1/complete", "post", "413") == ["payload_too_large"]
    assert codes("/v1/status", "get", "401") == ["missing_token", "invalid_token"]
    assert "404" not in paths["/v1/status"]["get"]["responses"]


def test_the_document_is_a_fresh_copy_each_time() -> None:
    """Changing the answered document changes neither the next one nor what is served."""
    mine = openapi_document()
    mine["info"]["version"] = "0"
    assert openapi_document()["info"]["version"] == __version__


async def test_every_documented_method_is_routed_and_every_other_is_405() -> None:
    """Each documented (path, method) reaches an operation (never the unknown path's 404
    nor a 405), and any other method on that path is a 405 whose Allow header lists the
    documented methods exactly: the router answers what the document says, no more."""
    for path, methods in documented().items():
        concrete = path.replace("{id}", "no-such-memory")
        for method in METHODS:
            reply = await call(method, concrete, body={})
            code = reply.body.get("error", {}).get("code")
            if method in methods:
                assert reply.status != 405, (method, path, reply.body)
                assert "no such endpoint" not in repr(reply.body), (method, path)
            else:
                assert (reply.status, code) == (405, "method_not_allowed"), (method, path)
                assert set(reply.headers["allow"].split(", ")) == methods, (method, path)


async def test_an_unknown_path_is_404_and_not_in_the_document() -> None:
    """A path the document does not list is a 404 with a token, a 401 without."""
    for path in ("/v1/memory", "/v1/memories/a/b", "/openapi.yaml", "/"):
        assert path not in documented()
        assert (await call("GET", path)).status == 404
        assert (await call("GET", path, token=None)).status == 401


async def test_openapi_json_is_served_without_a_token() -> None:
    """GET /openapi.json answers the document, 200, without a token (a sent one is
    ignored); HEAD too; another method is a 405."""
    for token in (None, "not-a-token"):
        reply = await call("GET", "/openapi.json", token=token)
        assert (reply.status, reply.body) == (200, openapi_document())
    assert (await call("HEAD", "/openapi.json", token=None)).status == 200
    refused = await call("POST", "/openapi.json", token=None)
    assert (refused.status, refused.headers["allow"]) == (405, "GET, HEAD")
