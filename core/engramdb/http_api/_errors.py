"""The HTTP API's errors, each declared once.

An error answer is ``{"error": {"code", "message"}}`` with a status. :data:`ERRORS` holds
every code: its status, the core error a server answers with it (``caught``: the first
row whose class the error is, in the table's order, so a subclass comes before its
parent), what the server says then (``says``; None: the error's own words) and writes to
its log (``logs``), and the error an ``engramdb.client`` raises for it (``raised``, its
message ``told``). :func:`engramdb.http_api.error_reply` (the server), ``ApiError`` (a
code's status), the OpenAPI document (each operation's codes under their statuses) and
``engramdb.client`` (the error of an answer) all read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from engramdb._base.errors import (
    ConfigurationError,
    ConflictError,
    DimensionMismatchError,
    EngramError,
    NotFoundError,
    ProviderError,
    SchemaTooNewError,
    StoreError,
    ValidationError,
)

__all__ = ["ERRORS", "ErrorCode", "caught", "error_code"]


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One code of the API's error answers (see the module docstring). ``says`` and
    ``logs`` may name ``{kind}`` (the error's class) and ``{error}`` (its words);
    ``told`` may name ``{said}`` (the answer's message, code and status), ``{method}``
    and ``{path}``."""

    code: str
    status: int
    raised: type[EngramError]
    caught: type[Exception] | None = None
    says: str | None = None
    logs: str | None = None
    told: str = "{said}"


_URL = "{method} {path}: {said}; is the URL an engramdb server of this version?"
_TOKEN = "the server refused the token: {said}"
_FAILED = "the server failed: {said}"

ERRORS: tuple[ErrorCode, ...] = (
    ErrorCode("invalid_json", 400, ValidationError),
    ErrorCode("invalid_request", 400, ValidationError),
    ErrorCode("missing_token", 401, ConfigurationError, told=_TOKEN),
    ErrorCode("invalid_token", 401, ConfigurationError, told=_TOKEN),
    ErrorCode("not_found", 404, ConfigurationError, NotFoundError, told=_URL),
    ErrorCode("method_not_allowed", 405, ConfigurationError, told=_URL),
    ErrorCode("request_timeout", 408, StoreError, told=_FAILED),
    ErrorCode("revision_conflict", 409, ConflictError, ConflictError),
    ErrorCode("payload_too_large", 413, ValidationError),
    ErrorCode("text_too_large", 413, ValidationError),
    ErrorCode("unsupported_media_type", 415, ValidationError),
    ErrorCode("rate_limited", 429, StoreError, told=_FAILED),
    ErrorCode("schema_too_new", 503, StoreError, SchemaTooNewError, told=_FAILED),
    ErrorCode(
        "embedding_failed",
        502,
        ProviderError,
        DimensionMismatchError,
        told="the server's embedding model failed: {said}",
    ),
    ErrorCode(
        "embedding_failed",
        502,
        ProviderError,
        ProviderError,  # the upstream's own words stay out of the answer
        says="the embedding model failed ({kind}); retry",
        told="the server's embedding model failed: {said}",
    ),
    ErrorCode("invalid_request", 400, ValidationError, ValidationError),
    ErrorCode(
        "store_unavailable",
        503,
        StoreError,
        StoreError,
        says="the database failed; retry later",
        logs="engramdb: store error: {error}",
        told=_FAILED,
    ),
    ErrorCode(
        "server_misconfigured",
        500,
        StoreError,
        ConfigurationError,  # the details to the host's logs, not to a caller
        says="the server is misconfigured (ENGRAMDB_TOKENS, the database or the embedder); "
        "its logs say what to fix",
        logs="engramdb: configuration error: {error}",
        told=_FAILED,
    ),
    ErrorCode(
        "internal_error",
        500,
        StoreError,
        Exception,
        says="an unexpected error happened; see the logs",
        logs="engramdb: unexpected {kind}: {error}",
        told=_FAILED,
    ),
)
"""Every error code of the API; a code may have several rows (one per core error it
answers), which agree on its status and on what a client raises."""

_BY_CODE = {row.code: row for row in reversed(ERRORS)}  # a code's first row


def error_code(code: str) -> ErrorCode | None:
    """The row of ``code`` (its first), or None for a code this version does not know."""
    return _BY_CODE.get(code)


def caught(error: Exception) -> ErrorCode:
    """The row a server answers ``error`` with: the first whose ``caught`` it is."""
    return next(row for row in ERRORS if row.caught is not None and isinstance(error, row.caught))


def _check() -> None:
    """The rows of one code agree (a bug stops the import)."""
    for row in ERRORS:
        first = _BY_CODE[row.code]
        if (row.status, row.raised, row.told) != (first.status, first.raised, first.told):
            raise RuntimeError(f"the rows of error code {row.code!r} disagree")


_check()
