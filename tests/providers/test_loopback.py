"""A real HTTP round trip: an OpenAI-compatible server on 127.0.0.1, real sockets."""

from __future__ import annotations

import pytest
from loopback_server import Loopback
from provider_fakes import FAKE_KEY

from engramdb import HashEmbedder, ProviderHTTPError
from engramdb.providers import OpenAIEmbedder, RetryPolicy

TEXTS = ["Sam is vegetarian", "the cat sat on the mat", "Sam likes tofu"]


def expected(dimensions: int) -> list[list[float]]:
    return [list(v) for v in HashEmbedder(dimensions=dimensions).embed(TEXTS)]


def close_enough(got: list[list[float]], want: list[list[float]]) -> bool:
    return all(
        len(g) == len(w) and all(abs(a - b) < 1e-6 for a, b in zip(g, w, strict=True))
        for g, w in zip(got, want, strict=True)
    )


@pytest.mark.parametrize("encoding", ["base64", "float"])
def test_sync_round_trip(loopback: Loopback, encoding: str) -> None:
    with OpenAIEmbedder(
        "hash-bow",
        base_url=loopback.base_url,
        api_key=FAKE_KEY,
        encoding=encoding,  # type: ignore[arg-type]
        dimensions=64,
    ) as embedder:
        vectors = embedder.embed(TEXTS)
    assert close_enough([list(v) for v in vectors], expected(64))
    [seen] = loopback.seen
    assert seen["input"] == TEXTS and seen.get("encoding_format") == (
        "base64" if encoding == "base64" else None
    )


@pytest.mark.parametrize("encoding", ["base64", "float"])
async def test_async_round_trip_with_concurrent_batches(loopback: Loopback, encoding: str) -> None:
    embedder = OpenAIEmbedder(
        "hash-bow",
        base_url=loopback.base_url,
        api_key=FAKE_KEY,
        encoding=encoding,  # type: ignore[arg-type]
        max_batch=1,
        max_concurrency=3,
    )
    async with embedder:
        vectors = await embedder.aembed(TEXTS, "query")
    assert close_enough([list(v) for v in vectors], expected(256))
    assert len(loopback.seen) == 3
    assert embedder.space.id == "openai-compatible/hash-bow@256"  # learned from the answer


def test_a_wrong_key_is_a_401_from_the_real_server(loopback: Loopback) -> None:
    embedder = OpenAIEmbedder(
        "hash-bow", base_url=loopback.base_url, api_key="wrong", retry=RetryPolicy(max_retries=0)
    )
    with pytest.raises(ProviderHTTPError) as info:
        embedder.embed(["x"])
    assert info.value.status == 401
    assert "Incorrect API key" in info.value.body
    embedder.close()
