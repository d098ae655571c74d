"""The Worker's JSON HTTP API: :mod:`engramdb.http_api`, re-exported.

The API lives in the core so that the Worker and ``engramdb serve`` (CPython, uvicorn)
answer every request the same way; this module keeps the Worker's old import path.
"""

from __future__ import annotations

from engramdb.http_api import (
    MAX_BODY_BYTES,
    MAX_TEXT_BYTES,
    ApiError,
    Grant,
    Reply,
    authenticate,
    body_too_large,
    dumps,
    error_reply,
    handle,
    handle_granted,
    hit_json,
    parse_grant,
    parse_tokens,
    record_json,
    token_digest,
)

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_TEXT_BYTES",
    "ApiError",
    "Grant",
    "Reply",
    "authenticate",
    "body_too_large",
    "dumps",
    "error_reply",
    "handle",
    "handle_granted",
    "hit_json",
    "parse_grant",
    "parse_tokens",
    "record_json",
    "token_digest",
]
