"""redact_secrets: each credential shape becomes a typed placeholder; ordinary text stays."""

from __future__ import annotations

import pytest

from engramdb import redact_secrets
from engramdb._redact import _KEYED, _PATTERNS, SECRET_KINDS

# Every value below is a made-up example in the documented shape of its kind.
SECRETS = {
    "openai_key": "sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789",
    "anthropic_key": "sk-ant-api03-Ab3dEfGh1jKlMnOpQrStUvWxYz01234567-Q",
    "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789",
    "slack_token": "xoxb-123456789012-1234567890123-Ab3dEfGh1jKl",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFU",
    "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n"
    "-----END OPENSSH PRIVATE KEY-----",
}
KEYED = {
    "aws_secret_access_key": (
        "aws_secret_access_key = ",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    "bearer_token": ("Authorization: Bearer ", "Ab3dEfGh1jKlMnOpQrSt.uv-wx_yz"),
    "url_password": ("postgres://admin:", "hunter2-Secret"),
}


def test_every_kind_has_an_example() -> None:
    assert set(SECRETS) | set(KEYED) == set(SECRET_KINDS)


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_a_prefixed_secret_becomes_its_placeholder(kind: str) -> None:
    text = f"note: {SECRETS[kind]} (keep this)"
    assert redact_secrets(text) == f"note: [REDACTED:{kind}] (keep this)"


@pytest.mark.parametrize("kind", sorted(KEYED))
def test_a_keyed_secret_keeps_its_keyword(kind: str) -> None:
    keyword, value = KEYED[kind]
    redacted = redact_secrets(f"{keyword}{value}@db.example.com")
    assert value not in redacted
    assert redacted.startswith(keyword) and f"[REDACTED:{kind}]" in redacted


@pytest.mark.parametrize(
    "text",
    [
        "Sam is vegetarian and skips lunch on Fridays",
        "the task-runner uses sk-8 and ghp is a team name",
        "bearer bonds are old-fashioned",
        "https://example.com/path?q=1 and user@example.com",
        "AKIA is a prefix; eyJ alone is not a token",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


def test_redaction_is_idempotent() -> None:
    once = redact_secrets(" ".join(SECRETS.values()))
    assert redact_secrets(once) == once


def _every_substitution(text: str) -> str:
    """redact_secrets without its pre-screen: every pattern substituted in turn."""
    for kind, pattern in _PATTERNS:
        text = pattern.sub(f"[REDACTED:{kind}]", text)
    for kind, pattern in _KEYED:
        text = pattern.sub(lambda m, kind=kind: f"{m.group(1)}[REDACTED:{kind}]", text)
    return text


def test_the_pre_screen_never_changes_a_result() -> None:
    """A text that no pattern's literal part could start is returned at once; every other
    gives what the ten substitutions give, in any letter case (the keyword forms match
    case-insensitively, Unicode folding included: the long s and the Kelvin sign)."""
    texts = [f"x {v} y" for v in SECRETS.values()] + ["".join(pair) for pair in KEYED.values()]
    texts += [
        "AUTHORIZATION: BEARER Ab3dEfGh1jKlMnOpQrSt",
        "AWS_SECRET_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "awſ_ſecret_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "\u212aey bearer Ab3dEfGh1jKlMnOpQrSt, POSTGRES://u:p@h",
        "Sam is vegetarian and skips lunch on Fridays",
    ]
    changed = 0
    for text in texts + [t.upper() for t in texts] + [t.lower() for t in texts]:
        assert redact_secrets(text) == _every_substitution(text), text
        changed += redact_secrets(text) != text
    assert changed >= len(texts)


KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2"


def test_a_memory_redacts_secrets_unless_told_not_to() -> None:
    """redact_secrets is the default of Memory: a key in a text or its metadata is never
    stored (nor embedded, nor searched for); redact=None keeps texts as given."""
    from engramdb import HashEmbedder, InMemoryStore, Memory

    memory = Memory(InMemoryStore(), HashEmbedder())
    record = memory.remember(f"my key is {KEY}", ("sam",), metadata={"note": KEY})
    assert KEY not in record.text and "[REDACTED:openai_key]" in record.text
    assert record.metadata == {"note": "[REDACTED:openai_key]"}
    raw = Memory(InMemoryStore(), HashEmbedder(), redact=None)
    assert raw.remember(f"my key is {KEY}", ("sam",)).text == f"my key is {KEY}"


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", redact_secrets), ("secrets", redact_secrets), (" OFF ", None), ("none", None)],
)
def test_the_faces_redaction_setting(value: str, expected: object) -> None:
    from engramdb import redact_setting

    assert redact_setting(value) is expected


def test_an_unknown_redaction_setting_names_itself_and_the_choices() -> None:
    from engramdb import ConfigurationError, redact_setting

    with pytest.raises(ConfigurationError, match=r"REDACT='maybe'.*secrets.*off"):
        redact_setting("maybe", "REDACT")
