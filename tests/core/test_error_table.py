"""The HTTP API's errors are declared once (``engramdb.http_api.ERRORS``): each code's
status, the core error a server answers with it and what it says and logs; the answers
``error_reply`` makes and the statuses ``ApiError`` and the OpenAPI document give come
from it."""

from __future__ import annotations

import pytest

from engramdb import (
    ConfigurationError,
    ConflictError,
    DimensionMismatchError,
    IngestError,
    NotFoundError,
    ProviderError,
    SchemaTooNewError,
    StoreError,
    ValidationError,
)
from engramdb.http_api import ERRORS, ApiError, error_code, error_reply, openapi_document

SECRET = "postgres://admin:hunter2@db"  # words that must stay in the log


@pytest.mark.parametrize(
    ("error", "status", "code", "shows_its_words", "logged"),
    [
        (ValidationError("top_k=0 must be 1 or more"), 400, "invalid_request", True, False),
        (NotFoundError("no memory 'x'"), 404, "not_found", True, False),
        (ConflictError("revision 3, not 2"), 409, "revision_conflict", True, False),
        (
            DimensionMismatchError("768 dimensions, not 384", expected=384, actual=768),
            502,
            "embedding_failed",
            True,
            False,
        ),
        (ProviderError(SECRET, provider="openai"), 502, "embedding_failed", False, False),
        (IngestError(SECRET, committed=[], index=0), 502, "embedding_failed", False, False),
        (
            SchemaTooNewError("schema 9 is newer than 8", found=9, supported=8),
            503,
            "schema_too_new",
            True,
            False,
        ),
        (StoreError(SECRET), 503, "store_unavailable", False, True),
        (ConfigurationError(SECRET), 500, "server_misconfigured", False, True),
        (RuntimeError(SECRET), 500, "internal_error", False, True),
    ],
)
def test_each_error_is_answered_as_its_row_says(
    error: Exception, status: int, code: str, shows_its_words: bool, logged: bool
) -> None:
    reply = error_reply(error)
    assert (reply.status, reply.body["error"]["code"]) == (status, code)
    said = reply.body["error"]["message"]
    assert (str(error) in said) is shows_its_words
    if not shows_its_words:
        assert SECRET not in said
    assert (reply.log is not None and SECRET in reply.log) is logged


def test_a_code_has_one_status_and_an_unknown_code_is_refused() -> None:
    for row in ERRORS:
        first = error_code(row.code)
        assert first is not None and first.status == row.status
        assert ApiError(row.code, "x").status == row.status
    with pytest.raises(ValueError, match="no error code 'teapot'"):
        ApiError("teapot", "short and stout")


def test_the_openapi_document_lists_each_code_under_its_status() -> None:
    listed = 0
    for path in openapi_document()["paths"].values():
        for operation in path.values():
            for status, answer in operation["responses"].items():
                schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
                codes = schema.get("properties", {}).get("error", {}).get("properties", {})
                for code in codes.get("code", {}).get("enum", ()):
                    row = error_code(code)
                    assert row is not None and str(row.status) == status, (code, status)
                    listed += 1
    assert listed > 50
