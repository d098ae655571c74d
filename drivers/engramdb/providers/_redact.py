"""Credentials that never print, and text that is safe to put in an error message."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["Secret", "redact"]

_EXCERPT_CHARS = 200

# Things that look like credentials even when we do not know their value: a provider
# may echo a key we never sent (from a proxy), or a partially masked one.
_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-*.]{6,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{10,}"),
    re.compile(
        r"(?i)(\"?(?:api[_-]?key|x-goog-api-key|access[_-]?token|token|secret|password)"
        r"\"?\s*[:=]\s*\"?)[^\s\"',;&}]+"
    ),
)


class Secret:
    """A credential. ``str``/``repr`` show ``'<secret>'``; :meth:`reveal` gives the value.

    The value is only ever revealed while building an outgoing request header.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'<secret>'"

    __str__ = __repr__

    def __reduce__(self) -> str:  # never pickle a key into a cache or a log
        raise TypeError("a Secret cannot be pickled")

    def __bool__(self) -> bool:
        return bool(self._value)


def redact(text: str, secrets: Iterable[Secret | None] = (), *, limit: int = _EXCERPT_CHARS) -> str:
    """Return a one-line excerpt of ``text`` with credentials replaced by ``***``.

    Known secret values are removed first (before cutting, so a key split by the cut
    cannot survive), then anything shaped like a credential; whitespace is collapsed and
    the result cut to ``limit`` characters.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret.reveal(), "***")
    for pattern in _PATTERNS:
        text = pattern.sub(_mask, text)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def _mask(match: re.Match[str]) -> str:
    if match.re.groups:
        return match.group(1) + ("***" if match.group(1)[-1:] in '=:"' else " ***")
    return "***"
