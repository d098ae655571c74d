"""Every HTTP provider behaves the same under rate limits, outages and bad answers.

Each test runs once per provider (the ``case`` fixture), sync and async where it matters.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from provider_fakes import ProviderCase, Script, Sleeps, build, json_response, vectors_for

from engramdb import (
    ConfigurationError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
    ValidationError,
)


def test_a_good_answer_gives_one_vector_per_text_in_order(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(case.answer(vectors_for(2)))
    embedder = build(case, script, sleeps, dimensions=3)
    vectors = embedder.embed(["one", "two"], "document")
    assert [list(v) for v in vectors] == [[1.0, 0.5, 0.25], [2.0, 0.5, 0.25]]
    assert embedder.space.dimensions == 3
    assert sleeps.waits == []


async def test_aembed_gives_the_same_vectors(case: ProviderCase, sleeps: Sleeps) -> None:
    script = Script(case.answer(vectors_for(2)))
    embedder = build(case, script, sleeps, dimensions=3)
    vectors = await embedder.aembed(["one", "two"], "query")
    assert [list(v) for v in vectors] == [[1.0, 0.5, 0.25], [2.0, 0.5, 0.25]]
    await embedder.aclose()


def test_429_with_retry_after_waits_that_long_then_succeeds(
    case: ProviderCase, sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script(
        json_response({"error": "rate limited"}, 429, **{"retry-after": "3"}),
        case.answer(vectors_for(1)),
    )
    embedder = build(case, script, sleeps, dimensions=3)
    with caplog.at_level(logging.WARNING, logger="engramdb.providers"):
        vectors = embedder.embed(["x"])
    assert len(vectors) == 1
    assert sleeps.waits == [3.0]
    assert len(script.requests) == 2
    [record] = caplog.records
    assert "HTTP 429" in record.getMessage() and "retry 1 of 4" in record.getMessage()


async def test_503_twice_then_success_backs_off_exponentially(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(
        httpx.Response(503, text="upstream unavailable"),
        httpx.Response(503, text="upstream unavailable"),
        case.answer(vectors_for(1)),
    )
    embedder = build(case, script, sleeps, dimensions=3, random=lambda: 0.5)
    assert len(await embedder.aembed(["x"])) == 1
    assert sleeps.waits == [0.375, 0.75]  # 0.5 s and 1 s, times the jitter factor 0.75
    await embedder.aclose()


def test_503_until_retries_run_out_is_a_provider_http_error(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(*[httpx.Response(503, text="down")] * 5)
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderHTTPError) as info:
        embedder.embed(["x"])
    assert info.value.status == 503
    assert info.value.provider == embedder.provider
    assert "after 4 retries" in str(info.value)
    assert len(script.requests) == 5 and len(sleeps.waits) == 4


def test_timeouts_after_all_retries_are_a_provider_timeout_error(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(*[httpx.ReadTimeout("timed out")] * 5)
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderTimeoutError) as info:
        embedder.embed(["x"])
    assert "5 attempts" in str(info.value)
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)
    assert len(sleeps.waits) == 4


def test_one_timeout_then_success_is_retried(case: ProviderCase, sleeps: Sleeps) -> None:
    script = Script(httpx.ConnectTimeout("slow"), case.answer(vectors_for(1)))
    embedder = build(case, script, sleeps, dimensions=3)
    assert len(embedder.embed(["x"])) == 1
    assert len(sleeps.waits) == 1


def test_connection_errors_after_all_retries_are_a_provider_error(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(*[httpx.ConnectError("connection refused")] * 5)
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderError, match="could not reach"):
        embedder.embed(["x"])


def broken_gzip(request: httpx.Request) -> httpx.Response:
    """A 200 whose body claims gzip but is not: httpx raises DecodingError reading it."""
    return httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"not gzip")


def test_a_body_that_does_not_decode_is_retried_like_a_503(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(broken_gzip, case.answer(vectors_for(1)))
    embedder = build(case, script, sleeps, dimensions=3)
    assert len(embedder.embed(["x"])) == 1
    assert len(script.requests) == 2 and sleeps.waits == [0.25]


async def test_bodies_that_never_decode_are_a_provider_error_not_an_httpx_error(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    for face in ("embed", "aembed"):
        script = Script(*[broken_gzip] * 5)
        embedder = build(case, script, sleeps, dimensions=3)
        with pytest.raises(ProviderError, match="damaged body after 5 attempts") as info:
            if face == "embed":
                embedder.embed(["x"])
            else:
                await embedder.aembed(["x"])
        assert type(info.value) is ProviderError, face
        assert isinstance(info.value.__cause__, httpx.DecodingError), face
        await embedder.aclose()


def with_number(case: ProviderCase, literal: bytes) -> httpx.Response:
    """The provider's good answer for one vector whose second value is ``literal``."""
    good = case.answer([[0.5, "N", 0.25]])  # type: ignore[list-item]
    return httpx.Response(200, content=good.content.replace(b'"N"', literal), headers=good.headers)


TOO_LARGE = [b"1e400", b"-1e400", b"1e39", b"1" + b"0" * 400, b"9" * 5000]


@pytest.mark.parametrize("literal", TOO_LARGE, ids=lambda b: b[:8].decode())
def test_a_number_too_large_for_a_float_is_retried_like_a_503(
    case: ProviderCase, sleeps: Sleeps, literal: bytes
) -> None:
    script = Script(with_number(case, literal), case.answer(vectors_for(1)))
    embedder = build(case, script, sleeps, dimensions=3)
    assert [list(v) for v in embedder.embed(["x"])] == [[1.0, 0.5, 0.25]]
    assert len(script.requests) == 2 and sleeps.waits == [0.25]


@pytest.mark.parametrize("literal", TOO_LARGE, ids=lambda b: b[:8].decode())
def test_numbers_too_large_after_all_retries_are_a_provider_error_not_an_overflow(
    case: ProviderCase, sleeps: Sleeps, literal: bytes
) -> None:
    script = Script(*[with_number(case, literal)] * 5)
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderError, match="too large for a float32") as info:
        embedder.embed(["x"])
    assert type(info.value) is ProviderError
    assert len(script.requests) == 5


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_literals_fail_at_once(
    case: ProviderCase, sleeps: Sleeps, literal: bytes
) -> None:
    script = Script(with_number(case, literal))
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderError, match="NaN or infinite"):
        embedder.embed(["x"])
    assert len(script.requests) == 1 and sleeps.waits == []


def test_401_fails_at_once_without_retrying(case: ProviderCase, sleeps: Sleeps) -> None:
    script = Script(json_response({"error": {"message": "invalid api key"}}, 401))
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderHTTPError) as info:
        embedder.embed(["x"])
    assert info.value.status == 401
    assert "invalid api key" in info.value.body
    assert "check the API key" in str(info.value)
    assert len(script.requests) == 1 and sleeps.waits == []


def test_a_retry_after_longer_than_the_limit_fails_instead_of_waiting(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(httpx.Response(429, headers={"retry-after": "3600"}))
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderHTTPError, match="asked to wait 3600 s"):
        embedder.embed(["x"])
    assert sleeps.waits == []


def test_malformed_json_is_a_provider_error(case: ProviderCase, sleeps: Sleeps) -> None:
    script = Script(httpx.Response(200, text="<html>gateway</html>"))
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderError, match="not JSON") as info:
        embedder.embed(["x"])
    assert info.value.provider == embedder.provider


def test_a_missing_field_is_a_provider_error_naming_the_field(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(json_response({"unexpected": True}))
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderError, match=r"has no field '\w+'") as info:
        embedder.embed(["x"])
    assert embedder.provider in str(info.value)


def test_the_wrong_number_of_vectors_is_a_provider_error(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(case.answer(vectors_for(1)))
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderError, match="returned 1 vectors for 2 texts"):
        embedder.embed(["x", "y"])


def test_the_wrong_dimensions_are_a_provider_error(case: ProviderCase, sleeps: Sleeps) -> None:
    script = Script(case.answer(vectors_for(1, dimensions=4)))
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderError, match="returned vectors of 4 dimensions, expected 3"):
        embedder.embed(["x"])


def test_dimensions_are_learned_from_the_first_answer_then_enforced(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(case.answer(vectors_for(2, dimensions=5)), case.answer(vectors_for(1, 4)))
    embedder = build(case, script, sleeps, model="custom-model")
    with pytest.raises(ConfigurationError, match="not known until the first response"):
        embedder.space  # noqa: B018
    assert not embedder.dimensions_learned
    embedder.embed(["x", "y"])
    assert embedder.space.dimensions == 5 and embedder.dimensions_learned
    with pytest.raises(ProviderError, match="expected 5"):
        embedder.embed(["z"])


def test_a_learned_size_an_answer_disagrees_with_is_forgotten_not_pinned(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    """A wrong first answer of one size does not pin the embedder: the next answer of
    another size fails, the learned size is dropped, and the one after teaches again."""
    script = Script(
        case.answer(vectors_for(1, dimensions=5)),  # the wrong size, learned
        case.answer(vectors_for(1, dimensions=3)),
        case.answer(vectors_for(1, dimensions=3)),
    )
    embedder = build(case, script, sleeps, model="custom-model")
    embedder.embed(["x"])
    with pytest.raises(ProviderError, match="3 dimensions, expected 5; the size learned"):
        embedder.embed(["x"])
    with pytest.raises(ConfigurationError, match="not known until the first response"):
        embedder.space  # noqa: B018
    embedder.embed(["x"])
    assert embedder.space.dimensions == 3


def test_a_configured_size_is_never_forgotten(case: ProviderCase, sleeps: Sleeps) -> None:
    script = Script(case.answer(vectors_for(1, dimensions=5)))
    embedder = build(case, script, sleeps, model="custom-model", dimensions=3)
    with pytest.raises(ProviderError, match="expected 3; check the model"):
        embedder.embed(["x"])
    assert embedder.space.dimensions == 3 and not embedder.dimensions_learned


INVALID_FIRST_ANSWERS = {
    "mixed sizes": [[1.0, 0.5, 0.25], [2.0, 0.5]],
    "a zero vector": [[1.0, 0.5, 0.25], [0.0, 0.0, 0.0]],
    "too few vectors": [[1.0, 0.5, 0.25]],
}


@pytest.mark.parametrize("vectors", INVALID_FIRST_ANSWERS.values(), ids=INVALID_FIRST_ANSWERS)
def test_an_invalid_first_answer_teaches_no_size(
    case: ProviderCase, sleeps: Sleeps, vectors: list[list[float]]
) -> None:
    """Only a valid answer (one vector per text, all one size, finite, none all zeros)
    teaches the dimensions."""
    script = Script(case.answer(vectors), case.answer(vectors_for(2, dimensions=4)))
    embedder = build(case, script, sleeps, model="custom-model")
    with pytest.raises(ProviderError):
        embedder.embed(["x", "y"])
    with pytest.raises(ConfigurationError, match="not known until the first response"):
        embedder.space  # noqa: B018
    embedder.embed(["x", "y"])
    assert embedder.space.dimensions == 4


def test_a_zero_vector_is_a_provider_error(case: ProviderCase, sleeps: Sleeps) -> None:
    script = Script(case.answer([[0.0, 0.0, 0.0]]))
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderError, match="vector of zeros at position 0"):
        embedder.embed(["x"])


def test_a_nan_in_a_vector_is_a_provider_error(case: ProviderCase, sleeps: Sleeps) -> None:
    script = Script(case.answer([[0.1, float("nan"), 0.3]]))
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderError, match="NaN or infinite"):
        embedder.embed(["x"])


def test_a_non_number_in_a_vector_is_a_provider_error(case: ProviderCase, sleeps: Sleeps) -> None:
    script = Script(case.answer([[0.1, "x", 0.3]]))  # type: ignore[list-item]
    embedder = build(case, script, sleeps, dimensions=3)
    with pytest.raises(ProviderError, match=r"not a number|not valid base64"):
        embedder.embed(["x"])


def test_over_long_texts_are_cut_at_the_end_by_the_character_budget(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(case.answer(vectors_for(1)))
    embedder = build(case, script, sleeps, dimensions=3, max_chars=10, document_prefix="")
    embedder.embed(["0123456789abcdef"])
    assert "0123456789" in script.requests[0].content.decode()
    assert "abcdef" not in script.requests[0].content.decode()


def test_truncate_error_refuses_over_long_texts_before_any_request(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script()
    embedder = build(
        case, script, sleeps, dimensions=3, max_chars=10, truncate="error", document_prefix=""
    )
    with pytest.raises(ValidationError, match="texts\\[1\\] has 11 characters"):
        embedder.embed(["short", "x" * 11])
    assert script.requests == []


def test_query_and_document_prefixes_are_added_and_change_the_space(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    script = Script(case.answer(vectors_for(1)), case.answer(vectors_for(1)))
    embedder = build(
        case, script, sleeps, dimensions=3, query_prefix="query: ", document_prefix="passage: "
    )
    embedder.embed(["sam"], "query")
    embedder.embed(["sam"], "document")
    sent = [request.content.decode() for request in script.requests]
    assert "query: sam" in sent[0] and "passage: sam" in sent[1]
    assert embedder.space.variant is not None
    assert embedder.space.variant.startswith("prefix-")


def test_no_texts_send_no_request(case: ProviderCase, sleeps: Sleeps) -> None:
    embedder = build(case, Script(), sleeps, dimensions=3)
    assert embedder.embed([]) == []


def test_a_bad_kind_is_a_validation_error(case: ProviderCase, sleeps: Sleeps) -> None:
    embedder = build(case, Script(), sleeps, dimensions=3)
    with pytest.raises(ValidationError):
        embedder.embed(["x"], "passage")  # type: ignore[arg-type]


def test_every_request_carries_a_timeout(case: ProviderCase, sleeps: Sleeps) -> None:
    script = Script(case.answer(vectors_for(1)))
    embedder = build(case, script, sleeps, dimensions=3, timeout=12.5)
    embedder.embed(["x"])
    timeout: dict[str, Any] = script.requests[0].extensions["timeout"]
    assert timeout == {"connect": 12.5, "read": 12.5, "write": 12.5, "pool": 12.5}
    assert json.loads(script.requests[0].content)  # a JSON body
