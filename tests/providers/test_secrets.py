"""Secret hygiene: the key is only ever in the outgoing header.

Every exception (with its chain), repr, str, log record and probe output produced by
failing and succeeding calls is scanned for the fake key.
"""

from __future__ import annotations

import logging
import pickle

import httpx
import pytest
from provider_fakes import (
    FAKE_KEY,
    ProviderCase,
    Script,
    Sleeps,
    build,
    json_response,
    openai_answer,
    vectors_for,
)

from engramdb import EngramError
from engramdb.providers import probe
from engramdb.providers._redact import Secret, redact


def texts_of(exc: BaseException) -> list[str]:
    """str and repr of ``exc`` and of every exception chained to it."""
    found: list[str] = []
    seen: BaseException | None = exc
    while seen is not None:
        found += [str(seen), repr(seen), repr(seen.args)]
        found += [str(v) for v in vars(seen).values()] if hasattr(seen, "__dict__") else []
        seen = seen.__cause__ or seen.__context__
    return found


ECHOING_FAILURES = [
    # providers (or proxies) that echo what they were sent
    lambda r: json_response({"error": f"invalid key {FAKE_KEY}"}, 401),
    lambda r: json_response({"error": f"bad header Authorization: Bearer {FAKE_KEY}"}, 400),
    lambda r: httpx.Response(403, text=str(dict(r.headers))),
    lambda r: httpx.Response(404, text=FAKE_KEY * 50),
]


@pytest.mark.parametrize("answer", ECHOING_FAILURES)
def test_no_error_repr_or_log_holds_the_key(
    case: ProviderCase,
    sleeps: Sleeps,
    answer: object,
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script(
        httpx.Response(429, text=f"slow down {FAKE_KEY}", headers={"retry-after": "1"}),
        httpx.ConnectError(f"refused {FAKE_KEY[:4]}"),
        answer,  # type: ignore[arg-type]
    )
    embedder = build(case, script, sleeps, dimensions=3)
    with caplog.at_level(logging.DEBUG), pytest.raises(EngramError) as info:
        embedder.embed(["x"])
    assert script.requests  # the key was sent in a header...
    outputs = [*texts_of(info.value), repr(embedder), str(embedder), repr(embedder.space)]
    outputs += [record.getMessage() for record in caplog.records]
    outputs += [caplog.text]
    for text in outputs:  # ...and appears nowhere else
        assert FAKE_KEY not in text


def test_successful_calls_and_the_space_do_not_hold_the_key(
    case: ProviderCase, sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script(case.answer(vectors_for(1)))
    embedder = build(case, script, sleeps, dimensions=3)
    with caplog.at_level(logging.DEBUG):
        embedder.embed(["x"])
    assert FAKE_KEY in str(script.requests[0].headers.raw)
    for text in (repr(embedder), embedder.space.id, repr(vars(embedder)), caplog.text):
        assert FAKE_KEY not in text


def test_probe_output_never_holds_the_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, sleeps: Sleeps
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    good = Script(openai_answer(vectors_for(1)))
    bad = Script(json_response({"error": f"key {FAKE_KEY} revoked"}, 401))
    for script in (good, bad):
        probe.main(
            ["openai:text-embedding-3-small"],
            transport=httpx.MockTransport(script),
            sleep=sleeps.sleep,
        )
    out, err = capsys.readouterr()
    assert "provider/model: openai/text-embedding-3-small" in out
    assert "ProviderHTTPError" in err
    assert FAKE_KEY not in out + err


def test_a_secret_neither_prints_nor_pickles() -> None:
    secret = Secret(FAKE_KEY)
    assert FAKE_KEY not in repr(secret) + str(secret) + f"{secret}"
    with pytest.raises(TypeError):
        pickle.dumps(secret)


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer abc.def-ghi",
        '{"api_key": "zzz-123"}',
        "Incorrect API key provided: sk-proj-********************1234",
        "key=AIzaSyA-1234567890abcdefghij",
    ],
)
def test_redact_hides_credential_shaped_text(text: str) -> None:
    cleaned = redact(text)
    for fragment in ("abc.def-ghi", "zzz-123", "sk-proj", "AIzaSyA"):
        assert fragment not in cleaned


def test_redact_keeps_ordinary_text_and_cuts_it_short() -> None:
    assert redact("model  not\nfound") == "model not found"
    assert len(redact("x" * 1000)) == 200
