"""The Worker serves the API's OpenAPI document at ``/openapi.json`` through
``Default.fetch`` with real ``Request``s: 200 without a token, the core's document, on
either setup (one D1 database, one Durable Object per tenant, whose objects it never
wakes)."""

from __future__ import annotations

from typing import Any

from engramdb.http_api import openapi_document
from test_api import SAM_TOKEN, TOKENS, call


async def test_openapi_json_is_the_core_document_without_a_token(make_host: Any) -> None:
    """GET /openapi.json is 200 without a token and equals openapi_document() (a token
    sent along is ignored); POST is a 405 with Allow: GET, HEAD."""
    worker = make_host(TOKENS, EMBEDDING_MODEL="hash")
    for token in (None, SAM_TOKEN, "not-a-token"):
        status, document, _ = await call(worker, "GET", "/openapi.json", token=token)
        assert (status, document) == (200, openapi_document())
    status, body, headers = await call(worker, "POST", "/openapi.json", raw_body="{}")
    assert (status, body["error"]["code"]) == (405, "method_not_allowed")
    assert headers.get("allow") == "GET, HEAD"
    objects = getattr(worker, "objects", None)
    assert objects is None or objects.instances == {}
