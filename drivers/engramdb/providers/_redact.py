"""Credentials that never print, and text that is safe to put in an error message."""

from __future__ import annotations

import base64
import logging
import re
import weakref
from collections.abc import Iterable

from engramdb import redact_secrets

__all__ = ["Secret", "redact", "scrub"]

_EXCERPT_CHARS = 200
_RUN = 8
"""A run of this many characters of a key, anywhere, is scrubbed: a proxy that echoes
``key[:-4] + "****"`` leaves no usable part of it (a shorter run, such as the ``sk-a...wxyz``
a dashboard shows, is left alone)."""

# Things that look like credentials even when we do not know their value: a provider
# may echo a key we never sent (from a proxy), or a partially masked one. Looser than
# ``redact_secrets`` (which runs first): an error excerpt may hold a key cut short.
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

    __slots__ = ("__weakref__", "_pattern", "_value")

    def __init__(self, value: str) -> None:
        self._value = value
        self._pattern: re.Pattern[str] | None = None
        _LIVE.add(self)  # scrubbed from the HTTP libraries' log records while it lives

    def reveal(self) -> str:
        return self._value

    def pattern(self) -> re.Pattern[str]:
        """Matches the value as a server or proxy may echo it: as is, URL-encoded (any
        mix of ``%XX`` escapes), JSON-escaped (``\\uXXXX``, ``\\/``), or inside base64
        text (standard or URL-safe alphabet, at any byte offset, as in a ``Basic``
        header)."""
        if self._pattern is None:
            self._pattern = _echo_pattern(self._value)
        return self._pattern

    def __repr__(self) -> str:
        return "'<secret>'"

    __str__ = __repr__

    def __reduce__(self) -> str:  # never pickle a key into a cache or a log
        raise TypeError("a Secret cannot be pickled")

    def __bool__(self) -> bool:
        return bool(self._value)


def _echo_pattern(value: str) -> re.Pattern[str]:
    escaped = "".join(_char_pattern(char) for char in value)
    fragments = sorted(_base64_fragments(value.encode()), key=len, reverse=True)
    return re.compile("|".join([escaped, *map(re.escape, fragments)]))


def _hex(byte: int) -> str:
    """Two hex digits matching either case."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{byte:02x}")


def _char_pattern(char: str) -> str:
    """One character: itself, its %XX bytes, its JSON escapes (``\\uXXXX``, ``\\/``,
    ``\\"``, ``\\\\``), and ``+`` for a space; escapes escaped again (``%252F``,
    ``\\\\u0046``) too, as an echo inside a JSON string or a URL holds them."""
    percent = "%(?:25)*"  # %2F, and %252F once the % itself was escaped
    backslashes = r"(?:\\)+"  # \u0046, and \\u0046 inside another JSON string
    forms = [re.escape(char), "".join(percent + _hex(byte) for byte in char.encode())]
    code = ord(char)
    if code <= 0xFFFF:
        forms.append(backslashes + "u" + _hex(code >> 8) + _hex(code & 0xFF))
    if char in '/"\\':
        forms.append(backslashes + re.escape(char))  # JSON's short escapes
    elif char == " ":
        forms.append(r"\+")
    return "(?:" + "|".join(forms) + ")"


def _base64_fragments(raw: bytes) -> set[str]:
    """The base64 characters that encode only bytes of ``raw``, for ``raw`` starting at
    each of the three byte offsets a base64 group has; both alphabets."""
    fragments = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        start = -(-8 * offset // 6)  # the first character made of raw's bits only
        end = 8 * (offset + len(raw)) // 6  # past the last one
        fragment = encoded[start:end]
        if len(fragment) >= 8:  # shorter ones could match ordinary base64 by chance
            fragments |= {fragment, fragment.translate(str.maketrans("+/", "-_"))}
    return fragments


def scrub(text: str, secrets: Iterable[Secret | None]) -> str:
    """``text`` with every known secret replaced by ``***``: in every encoding
    :meth:`Secret.pattern` knows, and any run of 8 or more of its characters (a key
    echoed cut short or partly masked)."""
    for secret in secrets:
        if secret:
            text = _without_runs(secret.pattern().sub("***", text), secret.reveal())
    return text


def _without_runs(text: str, value: str) -> str:
    """``text`` with each run of ``_RUN`` or more characters of ``value`` as ``***``."""
    if len(value) < _RUN or len(text) < _RUN:
        return text
    grams = {value[i : i + _RUN] for i in range(len(value) - _RUN + 1)}
    covered = [False] * len(text)
    for i in range(len(text) - _RUN + 1):
        if text[i : i + _RUN] in grams:
            covered[i : i + _RUN] = [True] * _RUN
    if not any(covered):
        return text
    out: list[str] = []
    for i, char in enumerate(text):
        if not covered[i]:
            out.append(char)
        elif i == 0 or not covered[i - 1]:
            out.append("***")
    return "".join(out)


def redact(text: str, secrets: Iterable[Secret | None] = (), *, limit: int = _EXCERPT_CHARS) -> str:
    """Return a one-line excerpt of ``text`` with credentials replaced by ``***``.

    Known secret values are removed first (:func:`scrub`, before cutting, so a key split
    by the cut cannot survive), then every credential :func:`engramdb.redact_secrets`
    recognises (``[REDACTED:<kind>]``), then anything else shaped like one, masked or
    cut short; whitespace is collapsed and the result cut to ``limit`` characters.
    """
    text = redact_secrets(scrub(text, secrets))
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


# -- log records of the HTTP libraries -------------------------------------------------------

_LIVE: weakref.WeakSet[Secret] = weakref.WeakSet()
_HTTP_LOGGERS = (
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)


class _ScrubSecrets(logging.Filter):
    """Takes every live key out of a record of httpx or httpcore: at DEBUG they log
    response headers, where a careless server or proxy may echo the key."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = list(_LIVE)
        if secrets:
            message = record.getMessage()
            cleaned = scrub(message, secrets)
            if cleaned != message:
                record.msg, record.args = cleaned, ()
        return True


_FILTER = _ScrubSecrets()
for _name in _HTTP_LOGGERS:
    logging.getLogger(_name).addFilter(_FILTER)
