"""WorkersAIReranker through the AI binding stub: Workers AI's documented reranker wire
(``{query, contexts: [{text}]}`` in, ``{response: [{id, score}]}`` out), retries, bad
answers, and a recall on D1 re-ordered by it or degraded when it fails."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import ai_binding
from engramdb import AsyncMemory, ConfigurationError, ProviderError, Reranker
from engramdb._embedders.retry_policy import RetryPolicy
from engramdb_workers import WorkersAIReranker
from engramdb_workers.ai import WorkersAIEmbedder
from engramdb_workers.d1 import D1Store

SCOPE = ("acme", "user", "sam")
MODEL = "@cf/baai/bge-reranker-base"
TEXTS = ["the cat sat", "a dog and a cat", "nothing here", "cat dog bird"]


class Waits:
    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def test_identity_and_sync_refusal(ai: Any) -> None:
    reranker = WorkersAIReranker(ai)
    assert isinstance(reranker, Reranker)
    assert reranker.id == "cloudflare/cf/baai/bge-reranker-base"
    assert reranker.max_batch == 100
    with pytest.raises(ConfigurationError, match="async only"):
        reranker.rerank("q", ["x"])
    with pytest.raises(ConfigurationError, match="AI binding"):
        WorkersAIReranker(None)


async def test_scores_come_back_in_input_order_in_batches(ai: Any, ai_stub: Any) -> None:
    reranker = WorkersAIReranker(ai, max_batch=3)
    assert await reranker.arerank("cat dog", TEXTS) == [1.0, 2.0, 0.0, 2.0]
    assert ai_stub.calls == [
        (MODEL, ["cat dog", *TEXTS[:3]]),
        (MODEL, ["cat dog", *TEXTS[3:]]),
    ]


async def test_the_query_and_each_text_are_cut_at_max_chars(ai: Any, ai_stub: Any) -> None:
    """As the embedder cuts: a 30 KB memory sends 1,500 characters, not 30,000."""
    long = "cat " * 7_500
    reranker = WorkersAIReranker(ai)
    assert reranker.max_chars == 1_500
    await reranker.arerank(long, [long, "dog"])
    ((model, sent),) = ai_stub.calls
    assert model == MODEL and sent == [long[:1_500], long[:1_500], "dog"]
    await WorkersAIReranker(ai, max_chars=8).arerank("cat dog bird", ["a dog and a cat"])
    assert ai_stub.calls[-1][1] == ["cat dog ", "a dog an"]
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigurationError, match=rf"max_chars={bad!r} must be a positive int"):
            WorkersAIReranker(ai, max_chars=bad)


async def test_a_recall_with_rerank_1000_makes_at_most_the_guards_two_calls(
    d1: Any, ai: Any, ai_stub: Any
) -> None:
    """rerank=1000 over 250 memories, 100 texts a call: 2 calls (200 texts), not 3."""
    memory = AsyncMemory(D1Store(d1), WorkersAIEmbedder(ai), reranker=WorkersAIReranker(ai))
    await memory.remember_many([{"text": f"cat note {i}", "scope": SCOPE} for i in range(250)])
    ai_stub.calls.clear()
    hits = await memory.recall("cat", scopes=[SCOPE], rerank=1000, top_k=250)
    reranks = [sent for model, sent in ai_stub.calls if model == MODEL]
    assert [len(sent) - 1 for sent in reranks] == [100, 100]  # the query, then the texts
    assert hits.status == "used"
    assert sum(hit.evidence["rerank_score"] is not None for hit in hits) == 200


async def test_the_raw_binding_works_too(ai_stub: Any) -> None:
    assert await WorkersAIReranker(ai_binding(ai_stub)).arerank("bird", TEXTS) == [
        0.0,
        0.0,
        0.0,
        1.0,
    ]


async def test_capacity_is_retried_and_bad_answers_are_provider_errors(
    ai: Any, ai_stub: Any
) -> None:
    waits = Waits()
    failures = iter([{"$error": "AiError: 3040: Capacity temporarily exceeded"}])

    def flaky(query: str, contexts: list[str]) -> Any:
        failed = next(failures, None)
        return failed or {"response": [{"id": i, "score": 0.5} for i in range(len(contexts))]}

    ai_stub.rerank_answer = flaky
    reranker = WorkersAIReranker(ai, asleep=waits, random=lambda: 0.0)
    assert await reranker.arerank("q", ["a", "b"]) == [0.5, 0.5]
    assert len(ai_stub.calls) == 2 and waits.seconds == [0.25]
    for answer, message in [
        ({"response": [{"id": 0, "score": 0.5}]}, "scored 1 of 2"),
        ({"response": [{"id": 0, "score": 0.5}, {"id": 0, "score": 0.4}]}, "new id"),
        ({"response": [{"id": 5, "score": 0.5}, {"id": 1, "score": 0.4}]}, "new id"),
        ({"data": [[0.1]]}, "'response'"),
    ]:
        ai_stub.rerank_answer = lambda query, contexts, answer=answer: answer
        with pytest.raises(ProviderError, match=message):
            await reranker.arerank("q", ["a", "b"])


async def test_memory_on_d1_recall_reranked_or_degraded(d1: Any, ai: Any, ai_stub: Any) -> None:
    reranker = WorkersAIReranker(ai, retry=RetryPolicy(max_retries=0))
    memory = AsyncMemory(D1Store(d1), WorkersAIEmbedder(ai), reranker=reranker)
    for text in TEXTS:
        await memory.remember(text, scope=SCOPE)
    fused = [hit.memory.text for hit in await memory.recall("cat dog", scopes=[SCOPE], rerank=0)]
    hits = await memory.recall("cat dog", scopes=[SCOPE], top_k=2)
    assert hits.status == "used"
    assert [hit.evidence["rerank_score"] for hit in hits] == [2.0, 2.0]
    assert {hit.memory.text for hit in hits} == {"a dog and a cat", "cat dog bird"}
    ai_stub.rerank_answer = lambda query, contexts: {"$error": "AiError: 3040: Capacity"}
    degraded = await memory.recall("cat dog", scopes=[SCOPE])
    assert [hit.memory.text for hit in degraded] == fused
    assert degraded.status == "degraded" and degraded.error == "rerank: ProviderError"
