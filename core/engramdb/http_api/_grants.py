"""Who may call the HTTP API: tokens, their digests, and the grant each one holds.

``ENGRAMDB_TOKENS`` maps a token (or, better, its ``sha256:`` digest) to a grant: the scope
the caller writes to and the scopes it may also read. The operator sets it; a request
never names a scope. A host may also keep one grant per digest elsewhere (the Worker's
``TOKENS`` KV namespace) and read it with :func:`parse_grant`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from engramdb._base.errors import ConfigurationError, ValidationError
from engramdb._base.types import Scope, validate_scope

__all__ = ["Grant", "parse_grant", "parse_tokens", "token_digest"]


@dataclass(frozen=True, slots=True)
class Grant:
    """What one token may do: write/list/delete in ``scope``, recall ``scope`` + ``read``."""

    scope: Scope
    read: tuple[Scope, ...] = ()

    @property
    def recall_scopes(self) -> list[Scope]:
        return [self.scope, *(s for s in self.read if s != self.scope)]


def token_digest(token: str) -> str:
    """The form a token is looked up by: ``sha256:`` + hex of its UTF-8 SHA-256."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_tokens(
    config: str | None, *, how_to_set: str = "set ENGRAMDB_TOKENS"
) -> dict[str, Grant]:
    """Parse ``ENGRAMDB_TOKENS``: a JSON object from token to grant.

    Keys are ``"sha256:<64 hex>"`` (recommended: the secret then never holds the token
    itself; make one with ``printf %s "$TOKEN" | sha256sum``) or the token itself. A
    value is a scope (``["acme", "user", "sam"]``) or an object ``{"scope": [...],
    "read": [[...], ...]}``. Raises ``ConfigurationError`` naming the bad entry (never
    the token). ``how_to_set`` is the host's own advice when nothing is set, e.g. the
    Worker's ``run `wrangler secret put ENGRAMDB_TOKENS```.
    """
    if config is None or not str(config).strip():
        raise ConfigurationError(
            f"ENGRAMDB_TOKENS is not set; {how_to_set} with a JSON object such as "
            '{"sha256:<hex>": ["acme", "user", "sam"]}'
        )
    try:
        data = json.loads(str(config))
    except ValueError as exc:
        raise ConfigurationError(f"ENGRAMDB_TOKENS is not valid JSON ({exc.args[0]})") from None
    if not isinstance(data, dict) or not data:
        raise ConfigurationError("ENGRAMDB_TOKENS must be a non-empty JSON object")
    grants: dict[str, Grant] = {}
    for position, (key, value) in enumerate(data.items()):
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"ENGRAMDB_TOKENS entry {position} has an empty token")
        if key.startswith("sha256:"):
            hexpart = key[7:].lower()
            if len(hexpart) != 64 or any(c not in "0123456789abcdef" for c in hexpart):
                raise ConfigurationError(
                    f"ENGRAMDB_TOKENS entry {position}: a sha256: key needs 64 hex digits"
                )
            digest = "sha256:" + hexpart
        else:
            digest = token_digest(key)
        grants[digest] = _grant(f"ENGRAMDB_TOKENS entry {position}", value)
    return grants


def parse_grant(text: str, where: str) -> Grant:
    """Parse one stored grant (JSON: a scope, or ``{"scope": [...], "read": [[...]]}``, as
    a value of ``ENGRAMDB_TOKENS``). ``where`` names it in the ``ConfigurationError``;
    it must not hold the token."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{where} is not valid JSON ({exc.args[0]})") from None
    return _grant(where, value)


def _grant(where: str, value: Any) -> Grant:
    try:
        if isinstance(value, list):
            return Grant(validate_scope(value))
        if isinstance(value, dict) and set(value) <= {"scope", "read"} and "scope" in value:
            read = value.get("read", [])
            if not isinstance(read, list):
                raise ConfigurationError(f"{where}: 'read' must be a list of scopes")
            return Grant(validate_scope(value["scope"]), tuple(validate_scope(s) for s in read))
    except ValidationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
    raise ConfigurationError(
        f'{where} must be a scope like ["acme", "user", "sam"] or {{"scope": [...], '
        '"read": [[...]]}'
    )
