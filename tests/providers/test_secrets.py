"""Secret hygiene: the key is only ever in the outgoing header.

Every exception (with its chain), repr, str, log record and probe output produced by
failing and succeeding calls is scanned for the fake key.
"""

from __future__ import annotations

import base64
import gc
import logging
import pickle
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from loopback_server import ENCODABLE_KEY, echoes, serve
from provider_fakes import (
    FAKE_KEY,
    ProviderCase,
    Script,
    Sleeps,
    build,
    json_response,
    openai_answer,
    texts_of,
    vectors_for,
)

from engramdb import ConfigurationError, EngramError
from engramdb.providers import (
    AzureOpenAIEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    RetryPolicy,
    embedder_from_url,
    probe,
)
from engramdb.providers._redact import Secret, redact

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
    good = Script(openai_answer(vectors_for(1, dimensions=1536)))  # the model's size
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


def test_a_provider_error_shows_no_credential_of_any_kind_redact_secrets_knows() -> None:
    """An error excerpt built from a body that echoes someone's GitHub token, PEM key or
    Stripe key (made up here) holds none of it: the excerpt goes through
    redact_secrets, whose placeholders say what was there."""
    github = "ghp_" + "Zq7Xw2Lk9Pm4" * 3
    stripe = "sk_live_" + "Zq7Xw2Lk9Pm4" * 2
    dashes = "-" * 5
    label = "EC " + "PRIVATE KEY"
    pem = f"{dashes}BEGIN {label}{dashes}\nMHcCAQEE\n{dashes}END {label}{dashes}"
    cleaned = redact(f"denied for {github}; {stripe}; {pem}", limit=10_000)
    assert cleaned == (
        "denied for [REDACTED:github_token]; [REDACTED:stripe_key]; [REDACTED:private_key]"
    )


def test_redact_keeps_ordinary_text_and_cuts_it_short() -> None:
    assert redact("model  not\nfound") == "model not found"
    assert len(redact("x" * 1000)) == 200


KEYS = [FAKE_KEY, ENCODABLE_KEY]


@pytest.mark.parametrize("key", KEYS, ids=["plain", "encodable"])
def test_redact_removes_a_known_key_in_every_encoding_a_server_may_echo(key: str) -> None:
    secret = Secret(key)
    for form in echoes(key):
        cleaned = redact(f'{{"error": "bad key <{form}> sent"}}', [secret], limit=10_000)
        assert form not in cleaned, form
        assert cleaned.startswith('{"error": "bad key <') and cleaned.endswith('> sent"}')


def test_redact_leaves_a_partly_masked_key_and_other_base64_alone() -> None:
    secret = Secret(ENCODABLE_KEY)
    masked = f"{ENCODABLE_KEY[:4]}...{ENCODABLE_KEY[-4:]}"
    vector = base64.b64encode(bytes(range(256))).decode()
    assert redact(f"key {masked}", [secret]) == f"key {masked}"
    assert redact(vector, [secret], limit=10_000) == vector


@pytest.mark.parametrize(
    "make",
    [
        lambda url: OpenAIEmbedder("m", base_url=url),
        lambda url: OllamaEmbedder(host=url),
        lambda url: AzureOpenAIEmbedder("emb", endpoint=url, api_key=FAKE_KEY),
        lambda url: embedder_from_url(f"openai-compatible:m?base_url={quote(url, safe='')}"),
    ],
    ids=["openai", "ollama", "azure", "string"],
)
@pytest.mark.parametrize(
    "userinfo",
    [f"user:{FAKE_KEY}", FAKE_KEY, f"user:{quote(ENCODABLE_KEY, safe='')}"],
    ids=["user-and-key", "key-as-user", "url-encoded"],
)
def test_a_base_url_with_credentials_is_refused_without_echoing_them(
    make: Any, userinfo: str
) -> None:
    with pytest.raises(ConfigurationError, match="holds credentials before its host") as info:
        make(f"https://{userinfo}@llm.internal:8443/v1")
    assert "https://llm.internal:8443" in str(info.value)
    for text in texts_of(info.value):
        for key in KEYS:
            assert not any(form in text for form in echoes(key))


@pytest.mark.parametrize("url", [FAKE_KEY, f"openai:m?{FAKE_KEY}"], ids=["pasted", "option"])
def test_a_key_pasted_into_the_embedder_string_is_not_echoed(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        embedder_from_url(url)
    assert all(FAKE_KEY not in text for text in texts_of(info.value))


LOGGERS = ("engramdb", "httpx", "httpcore")


async def test_no_log_record_at_any_level_holds_the_key_in_any_encoding(
    caplog: pytest.LogCaptureFixture, sleeps: Sleeps
) -> None:
    """With DEBUG logging on engramdb, httpx and httpcore, real calls to a server on
    127.0.0.1 leave the key in no record and in no error: successes (sync and async),
    503s retried and 401s, whose bodies echo the key in each encoding of echoes() in
    turn."""
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    wrong = ENCODABLE_KEY[::-1]
    turns = len(echoes(ENCODABLE_KEY))
    errors: list[BaseException] = []
    with serve(key=ENCODABLE_KEY, faults=["echo-503"] * turns) as server:
        for api_key, calls in ((ENCODABLE_KEY, 1), (wrong, turns)):
            embedder = OpenAIEmbedder(
                "hash-bow",
                base_url=server.base_url,
                api_key=api_key,
                retry=RetryPolicy(max_retries=turns if api_key == ENCODABLE_KEY else 0),
                sleep=sleeps.sleep,
                asleep=sleeps.asleep,
            )
            for _ in range(calls):
                try:
                    embedder.embed(["Sam is vegetarian"])
                    await embedder.aembed(["Sam likes tofu"], "query")
                except EngramError as exc:
                    errors.append(exc)
            embedder.close()
            await embedder.aclose()
    assert len(server.seen) == turns + 2 + turns and len(sleeps.waits) == turns
    assert {type(e).__name__ for e in errors} == {"ProviderHTTPError"}
    assert len(errors) == turns
    assert {record.name.split(".")[0] for record in caplog.records} == set(LOGGERS)
    outputs = [caplog.text, *(texts for e in errors for texts in texts_of(e))]
    outputs += [record.getMessage() for record in caplog.records]
    outputs += [repr(vars(record)) for record in caplog.records]
    for key in (ENCODABLE_KEY, wrong):
        for form in echoes(key):
            assert not any(form in text for text in outputs), form
    assert all("as your key" in str(e) for e in errors)  # the echo was in the messages


def test_redact_scrubs_any_run_of_eight_characters_of_the_key() -> None:
    """A proxy that echoes ``key[:-4] + "****"`` (a key not shaped like ``sk-``) leaves
    no run of 8 of the key's characters; a dashboard's ``abcd...wxyz`` is left alone."""
    key = "Zq7" + ENCODABLE_KEY[3:]
    secret = Secret(key)
    masked = key[:-4] + "****"
    cleaned = redact(f"Overloaded; your key {masked} is fine", [secret])
    assert cleaned == "Overloaded; your key ******* is fine"
    assert not any(key[i : i + 8] in cleaned for i in range(len(key) - 7))
    short = f"{key[:4]}...{key[-4:]}"
    assert redact(f"key {short}", [secret]) == f"key {short}"


def test_no_run_of_a_fake_key_can_match_a_path_a_module_or_a_host_name() -> None:
    """The leak checks look for any run of 8 characters of the key in log records, whose
    file paths hold the checkout's folder name: a key beginning ``engramdb/`` failed them
    in a clone made the usual way (issue 45, finding 13). Every run of 8 of the keys the
    checks use holds a ``"`` or a ``&``, which no path, module, logger or host name holds,
    and none is in the paths of the modules loaded now, the interpreter's prefixes, the
    working folder or this host's name."""
    names = [str(getattr(module, "__file__", None)) for module in list(sys.modules.values())]
    names += [*sys.modules, *logging.root.manager.loggerDict, sys.prefix, sys.exec_prefix]
    names += [str(Path.cwd()), socket.gethostname()]
    for key in (ENCODABLE_KEY, ENCODABLE_KEY[::-1], "Zq7" + ENCODABLE_KEY[3:]):
        runs = {key[i : i + 8] for i in range(len(key) - 7)}
        assert all(set(run) & set('"&') for run in runs), key
        assert not [(run, name) for run in runs for name in names if run in name]
    assert not [name for name in names if FAKE_KEY in name]
    assert "engramdb" not in (FAKE_KEY + ENCODABLE_KEY).lower()


async def test_a_masked_echo_and_a_header_echo_reach_no_error_and_no_log(
    caplog: pytest.LogCaptureFixture, sleeps: Sleeps
) -> None:
    """Over real HTTP on 127.0.0.1, with DEBUG logging on httpx and httpcore: a 503 whose
    body echoes the key masked but for its last 4 characters, and a 200 whose response
    header echoes the key whole (httpcore logs response headers at DEBUG), leave no run
    of 8 of the key's characters in any error or log record."""
    gc.collect()  # keys of earlier tests that still live in cycles are scrubbed from logs too
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    key = ENCODABLE_KEY
    with serve(key=key, faults=["echo-masked-503", "echo-header"]) as server:
        embedder = OpenAIEmbedder(
            "hash-bow",
            base_url=server.base_url,
            api_key=key,
            retry=RetryPolicy(max_retries=0),
            sleep=sleeps.sleep,
            asleep=sleeps.asleep,
        )
        with pytest.raises(EngramError) as failed:
            embedder.embed(["Sam is vegetarian"])
        assert len(embedder.embed(["Sam likes tofu"])) == 1  # the header echo: a success
        embedder.close()
    assert any("x-echo-key" in record.getMessage() for record in caplog.records)
    outputs = [caplog.text, *texts_of(failed.value)]
    outputs += [record.getMessage() for record in caplog.records]
    outputs += [repr(vars(record)) for record in caplog.records]
    runs = [key[i : i + 8] for i in range(len(key) - 7)]
    assert not [run for run in runs for text in outputs if run in text]
