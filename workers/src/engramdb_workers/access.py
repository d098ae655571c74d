"""Who may call the Worker, and how often: token grants and the per-token rate limit.

* ``ENGRAMDB_TOKENS`` (a secret): the JSON token -> grant map of
  :func:`engramdb.http_api.parse_tokens`, parsed once per isolate per value.
* ``TOKENS`` (a KV namespace): ``sha256:<hex of the token>`` -> one grant, so grants can
  be added, rotated and revoked without a deploy (docs/workers.md gives the commands).
  Consulted after the secret; each isolate keeps a grant it read for
  :data:`GRANT_CACHE_SECONDS` (at most :data:`GRANT_CACHE_SIZE` of them).
* ``RATE_LIMITER`` (a Workers Rate Limiting binding), keyed by the token's digest and
  asked only for an authenticated token; ``RATE_LIMIT_PERIOD`` is sent as
  ``Retry-After``.

Tokens are looked up by their SHA-256 digest only: no secret string is compared.
"""

from __future__ import annotations

import time
from typing import Any

from engramdb import ConfigurationError

from . import api, config

__all__ = [
    "GRANT_CACHE_SECONDS",
    "GRANT_CACHE_SIZE",
    "HOW_TO_SET",
    "check",
    "grants",
    "lookup_grant",
    "rate_limit",
]

GRANT_CACHE_SECONDS = 60.0
"""How long an isolate keeps a grant read from the ``TOKENS`` KV namespace: a revoked
token may still work this long in an isolate that saw it (plus KV's own ~60 s)."""
GRANT_CACHE_SIZE = 1024
"""Most KV grants one isolate keeps (the oldest goes first)."""

HOW_TO_SET = "run `wrangler secret put ENGRAMDB_TOKENS`"
"""The advice of the error when no token is configured (the logs show it)."""

clock = time.monotonic
"""The grant cache's clock (tests replace it)."""

_isolate: dict[str, Any] = {}  # filled on first use, never at import


def reset() -> None:
    """Forget the parsed secret and the cached KV grants (tests; a fresh isolate)."""
    _isolate.clear()


def grants(env: Any) -> dict[str, api.Grant]:
    """The parsed ``ENGRAMDB_TOKENS`` (parsed once per isolate per secret value)."""
    secret = config.var(env, "ENGRAMDB_TOKENS")
    cached = _isolate.get("grants")
    if cached is not None and cached[0] == secret:
        return cached[1]  # type: ignore[no-any-return]
    parsed = api.parse_tokens(None if secret is None else str(secret), how_to_set=HOW_TO_SET)
    _isolate["grants"] = (secret, parsed)
    return parsed


def _secret_first(env: Any) -> bool:
    """Whether ``ENGRAMDB_TOKENS`` is consulted (set, or no ``TOKENS`` KV to fall back on)."""
    kv = config.var(env, "TOKENS")
    return kv is None or bool(str(config.var(env, "ENGRAMDB_TOKENS") or "").strip())


def check(env: Any) -> None:
    """Raise ``ConfigurationError`` when no token could be authorized: neither the
    ``TOKENS`` KV namespace is bound nor ``ENGRAMDB_TOKENS`` set, or the secret does not
    parse (readiness; no KV read)."""
    if _secret_first(env):
        grants(env)


async def lookup_grant(env: Any, digest: str) -> api.Grant | None:
    """The grant of a token's digest: from ``ENGRAMDB_TOKENS`` first (when set), then
    from the ``TOKENS`` KV namespace (when bound), whose grants each isolate keeps for
    :data:`GRANT_CACHE_SECONDS`. None: the token is unknown (401)."""
    kv = config.var(env, "TOKENS")
    if _secret_first(env):
        found = grants(env).get(digest)  # ConfigurationError (500) when nothing is set
        if found is not None or kv is None:
            return found
    cache: dict[str, tuple[float, api.Grant]] = _isolate.setdefault("kv_grants", {})
    now = clock()
    cached = cache.pop(digest, None)
    if cached is not None and cached[0] > now:
        cache[digest] = cached
        return cached[1]
    try:
        text = await kv.get(digest)
    except Exception as exc:
        print(f"engramdb: the TOKENS KV read failed ({type(exc).__name__})")
        raise api.ApiError(
            "store_unavailable", "the token store (TOKENS KV) failed; retry later"
        ) from None
    if text is None or (config.is_null(text)):
        return None
    where = f"the TOKENS grant {digest[:15]}..."  # a prefix of the digest, never the token
    try:
        grant = api.parse_grant(str(text), where)
    except ConfigurationError as exc:
        print(f"engramdb: configuration error: {exc}")
        raise api.ApiError(
            "server_misconfigured",
            f'{where} is malformed; put a scope such as ["acme", "user", "sam"] '
            "under its key (the logs say what is wrong)",
        ) from None
    while len(cache) >= GRANT_CACHE_SIZE:
        del cache[next(iter(cache))]
    cache[digest] = (now + GRANT_CACHE_SECONDS, grant)
    return grant


async def rate_limit(env: Any, digest: str) -> int | None:
    """Ask the ``RATE_LIMITER`` binding (when bound) about an authorized token's digest:
    None serves the request, else the seconds to wait (``RATE_LIMIT_PERIOD``, 60). A
    failing limiter serves the request (fail open) and says so in the logs."""
    limiter = config.var(env, "RATE_LIMITER")
    if limiter is None:
        return None
    try:
        outcome = await limiter.limit({"key": digest})
        success = outcome["success"] if isinstance(outcome, dict) else outcome.success
    except Exception as exc:
        print(f"engramdb: RATE_LIMITER failed ({type(exc).__name__}); request served")
        return None
    if success:
        return None
    return config.int_var(env, "RATE_LIMIT_PERIOD", "60") or 60
