"""WorkersAIEmbedder through an AI binding stub answering {shape, data} (HashEmbedder)."""

from __future__ import annotations

from typing import Any

import pytest
from workers import rpc

from conftest import ai_binding
from engramdb import AsyncMemory, ConfigurationError, HashEmbedder, ProviderError
from engramdb._embedders.retry_policy import RetryPolicy
from engramdb_workers.ai import WorkersAIEmbedder
from engramdb_workers.d1 import D1Store

SCOPE = ("acme", "user", "sam")


def test_space_id_names_the_model_like_the_rest_embedder(ai: Any) -> None:
    embedder = WorkersAIEmbedder(ai)
    assert embedder.space.id == "cloudflare/cf/baai/bge-base-en-v1.5@768"
    assert embedder.max_batch == 100
    small = WorkersAIEmbedder(ai, "@cf/baai/bge-small-en-v1.5")
    assert small.space.id == "cloudflare/cf/baai/bge-small-en-v1.5@384"
    assert WorkersAIEmbedder(ai, pooling="cls").space.id.endswith("#pooling-cls")
    with pytest.raises(ConfigurationError, match="dimensions"):
        WorkersAIEmbedder(ai, "@cf/someone/unknown-model")
    assert WorkersAIEmbedder(ai, "@cf/someone/unknown-model", 512).space.dimensions == 512
    with pytest.raises(ConfigurationError, match="AI binding"):
        WorkersAIEmbedder(None)
    with pytest.raises(ConfigurationError, match="async only"):
        embedder.embed(["x"])


async def test_batches_of_at_most_100_texts_in_order(ai: Any, ai_stub: Any) -> None:
    embedder = WorkersAIEmbedder(ai)
    texts = [f"text number {n}" for n in range(250)]
    vectors = await embedder.aembed(texts)
    assert [len(batch) for _, batch in ai_stub.calls] == [100, 100, 50]
    assert {model for model, _ in ai_stub.calls} == {"@cf/baai/bge-base-en-v1.5"}
    expected = HashEmbedder(dimensions=768).embed(texts)
    assert len(vectors) == 250
    assert all(list(v) == pytest.approx(list(e)) for v, e in zip(vectors, expected, strict=True))


async def test_long_texts_are_cut_to_the_model_budget(ai: Any, ai_stub: Any) -> None:
    await WorkersAIEmbedder(ai).aembed(["word " * 1000])
    assert len(ai_stub.calls[0][1][0]) == 1500
    with pytest.raises(Exception, match="at most 1500"):
        await WorkersAIEmbedder(ai, truncate="error").aembed(["word " * 1000])


class Waits:
    """Records the retry waits instead of waiting."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def retrying(ai: Any, **options: Any) -> tuple[WorkersAIEmbedder, Waits]:
    waits = Waits()
    embedder = WorkersAIEmbedder(ai, asleep=waits, random=lambda: 0.0, **options)
    return embedder, waits


async def test_binding_failures_and_bad_answers_are_provider_errors(ai: Any, ai_stub: Any) -> None:
    embedder, waits = retrying(ai)
    ai_stub.fail = "AiError: 3040: Capacity temporarily exceeded"
    with pytest.raises(ProviderError, match=r"after 5 attempts.*Capacity temporarily exceeded"):
        await embedder.aembed(["x"])
    assert len(ai_stub.calls) == 5 and waits.seconds == [0.25, 0.5, 1.0, 2.0]
    ai_stub.fail = None
    ai_stub.answer = lambda texts: {"shape": [0, 768], "data": []}
    with pytest.raises(ProviderError, match="0 vectors for 1 texts"):
        await embedder.aembed(["x"])
    ai_stub.answer = lambda texts: {"response": "hello"}
    with pytest.raises(ProviderError, match="'data'"):
        await embedder.aembed(["x"])
    assert len(ai_stub.calls) == 7  # a bad answer is not retried


async def test_a_capacity_error_is_retried_with_the_http_providers_policy(
    ai: Any, ai_stub: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Out of capacity (3040, HTTP 429) and internal errors are retried with back-off as
    RetryPolicy says, logged like the HTTP providers' retries; then the vectors come."""
    failures = iter(["AiError: 3040: Capacity temporarily exceeded", "AiError: 3043: Internal"])

    def flaky(texts: list[str]) -> Any:
        message = next(failures, None)
        if message is not None:
            return {"$error": message}
        data = [list(v) for v in HashEmbedder(dimensions=768).embed(texts)]
        return {"shape": [len(data), 768], "data": data}

    ai_stub.answer = flaky
    embedder, waits = retrying(ai, retry=RetryPolicy(initial_delay=1.0, multiplier=3.0))
    with caplog.at_level("WARNING", logger="engramdb.providers"):
        (vector,) = await embedder.aembed(["Sam is vegetarian"])
    assert len(vector) == 768
    assert len(ai_stub.calls) == 3 and waits.seconds == [0.5, 1.5]
    assert [r.getMessage() for r in caplog.records] == [
        "cloudflare at the AI binding: status 429; retry 1 of 4 in 0.50 s",
        "cloudflare at the AI binding: status 500; retry 2 of 4 in 1.50 s",
    ]


@pytest.mark.parametrize(
    "message",
    [
        "AiError: 5007: No such model @cf/baai/nope or task",
        "AiError: 3036: You have used up your daily free allocation of 10,000 neurons",
    ],
)
async def test_a_request_or_quota_error_fails_at_once(ai: Any, ai_stub: Any, message: str) -> None:
    embedder, waits = retrying(ai)
    ai_stub.fail = message
    with pytest.raises(ProviderError, match=message.split(": ")[-1][:20]) as info:
        await embedder.aembed(["x"])
    assert "attempts" not in str(info.value)
    assert len(ai_stub.calls) == 1 and waits.seconds == []


async def test_max_retries_zero_makes_one_attempt(ai: Any, ai_stub: Any) -> None:
    embedder, waits = retrying(ai, retry=RetryPolicy(max_retries=0))
    ai_stub.fail = "AiError: 3040: Capacity temporarily exceeded"
    with pytest.raises(ProviderError):
        await embedder.aembed(["x"])
    assert len(ai_stub.calls) == 1 and waits.seconds == []


async def test_raw_ai_binding_without_the_sdk_wrapper(ai_stub: Any) -> None:
    embedder = WorkersAIEmbedder(ai_binding(ai_stub))
    (vector,) = await embedder.aembed(["raw binding"])
    assert len(vector) == 768


async def test_the_sdk_wrapper_is_looked_through_to_its_binding(
    ai: Any, ai_stub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's wrapper converts each number of an answer in Python; the embedder calls
    the JS binding the wrapper holds, with the same answers, and calls a wrapper without
    one as it is."""
    converted: list[Any] = []
    convert = rpc.python_from_rpc
    monkeypatch.setattr(rpc, "python_from_rpc", lambda obj: converted.append(obj) or convert(obj))
    texts = ["through the wrapper", "another text"]
    vectors = await WorkersAIEmbedder(ai).aembed(texts)
    assert converted == []
    assert vectors == await WorkersAIEmbedder(ai_binding(ai_stub)).aembed(texts)

    class Opaque:  # a wrapper that does not show its binding
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def run(self, *args: Any) -> Any:
            return self._inner.run(*args)

    assert await WorkersAIEmbedder(Opaque(ai)).aembed(texts) == vectors
    assert len(converted) == 1  # through the SDK's conversion


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        (0, True),  # JS numbers that are whole come as ints
        (1e308, True),  # finite, though the sum of two overflows
        (True, False),
        ("0.5", False),
        (None, False),
        (float("nan"), False),
        (float("-inf"), False),
        (10**400, False),  # beyond float64
    ],
)
async def test_each_value_of_an_answer_is_a_finite_number(
    ai: Any, ai_stub: Any, value: Any, accepted: bool
) -> None:
    ai_stub.answer = lambda texts: {"shape": [1, 3], "data": [[0.5, value, 1e308]]}
    embedder = WorkersAIEmbedder(ai, "@cf/someone/unknown-model", 3)
    if accepted:
        assert await embedder.aembed(["x"]) == [[0.5, float(value), 1e308]]
    else:
        with pytest.raises(ProviderError, match=r"data\[0\] that is not a list of finite"):
            await embedder.aembed(["x"])


async def test_memory_on_d1_with_workers_ai(d1: Any, ai: Any, ai_stub: Any) -> None:
    memory = AsyncMemory(D1Store(d1), WorkersAIEmbedder(ai))
    kept = await memory.remember("Sam is vegetarian", scope=SCOPE)
    await memory.remember("The office wifi rotates on Monday", scope=SCOPE)
    assert len(ai_stub.calls) == 2  # one embedding call per write
    hits = await memory.recall("vegetarian", scopes=[SCOPE], mode="vector")
    assert len(ai_stub.calls) == 3  # and one per recall
    assert hits.status == "used"
    assert hits[0].memory.id == kept.id
    assert hits[0].evidence["space_id"] == "cloudflare/cf/baai/bge-base-en-v1.5@768"
    ai_stub.fail = "AiError: down"
    degraded = await memory.recall("vegetarian", scopes=[SCOPE])
    assert degraded.status == "degraded"
    assert degraded[0].memory.id == kept.id
