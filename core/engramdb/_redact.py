"""``redact_secrets``: common credential shapes replaced by typed placeholders.

Pass it as ``Memory(..., redact=redact_secrets)`` (or compose it with your own function):
the flows run ``redact`` on a memory's text and on every string in its metadata before
anything is embedded or stored, and on a recall's query before it is embedded or
searched (``docs/privacy.md``). Each match becomes ``[REDACTED:<kind>]``; the rest of the
text is kept as it was.

The patterns are deliberately specific (a known prefix or a keyword next to the value),
so ordinary text is left alone; they are not a data-loss-prevention system. The order
matters: a PEM block first, then the prefixed tokens, then the keyword forms.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._errors import ConfigurationError

__all__ = ["SECRET_KINDS", "redact_secrets", "redact_setting"]

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?"
            r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
            re.DOTALL,
        ),
    ),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("aws_access_key_id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
)

# Keyword forms: the keyword stays, the value goes.
_KEYED: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "aws_secret_access_key",
        re.compile(
            r"(?i)(\baws_?secret(?:_?access)?_?key\b[\"']?\s*[:=]\s*[\"']?)([A-Za-z0-9/+=]{40})\b"
        ),
    ),
    ("bearer_token", re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/-]{16,}=*)")),
    ("url_password", re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s/:@]+:)([^\s/@]+)(?=@)")),
)

# What every pattern above needs somewhere in a text before it can match (its literal
# prefix or keyword, with the same case rules): a text without any of these is returned
# as it is after one search instead of ten substitutions (most texts hold no secret).
_ANY_TRIGGER = re.compile(
    r"-----BEGIN |sk-|AKIA|ASIA|ABIA|ACCA|gh[pousr]_|github_pat_|xox[abposr]-|eyJ"
    r"|(?i:aws_?secret|bearer|://)"
)

SECRET_KINDS: tuple[str, ...] = tuple(kind for kind, _ in _PATTERNS + _KEYED)
"""The kinds ``redact_secrets`` recognises, as they appear in its placeholders."""


def _placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _keep_key(kind: str) -> Callable[[re.Match[str]], str]:
    return lambda match: match.group(1) + _placeholder(kind)


def redact_secrets(text: str) -> str:
    """``text`` with every recognised credential replaced by ``[REDACTED:<kind>]``."""
    if _ANY_TRIGGER.search(text) is None:  # no pattern can match: nothing to replace
        return text
    for kind, pattern in _PATTERNS:
        text = pattern.sub(_placeholder(kind), text)
    for kind, pattern in _KEYED:
        text = pattern.sub(_keep_key(kind), text)
    return text


def redact_setting(value: str, name: str = "ENGRAMDB_REDACT") -> Callable[[str], str] | None:
    """The ``redact`` a face's setting ``name`` asks for: ``secrets`` (or empty, the
    default) gives :func:`redact_secrets`, ``off`` gives None (texts kept as given)."""
    word = value.strip().lower()
    if word in ("", "secrets", "on"):
        return redact_secrets
    if word in ("off", "none"):
        return None
    raise ConfigurationError(
        f"{name}={value[:40]!r} is not understood; use secrets (the default) or off"
    )
