"""A failing rerank service over real HTTP on 127.0.0.1 (``tests/rerank_server.py``):
a recall's rerank stage answers within its budget (``RerankGuard``), degraded, in both
faces, whatever the reranker's own timeout and retries; after 3 failures in a row its
breaker sends nothing to the service until the cool-down ends; then one recall tries
it again. Also the Worker's reranker (``WorkersAIReranker``), which shares the
mechanism: the core's stage and its async driver.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engramdb import AsyncMemory, HashEmbedder, Hits, InMemoryStore, Memory, RerankGuard
from engramdb.driver import RetryPolicy
from engramdb.providers import TEIReranker
from rerank_server import Server, score, tei

BUDGET = 1.0
MARGIN = 4.0  # generous: a loaded 2-core machine may be slow to run a timer
SCOPE = ("acme", "pets")
TEXTS = ["the cat sat", "a dog and a cat", "nothing here", "cat dog bird"]
WORKERS_SRC = Path(__file__).resolve().parents[2] / "workers" / "src"


@pytest.fixture
def server() -> Iterator[Server]:
    with tei() as running:
        yield running


class Clock:
    """``time.monotonic`` moved ``shift`` seconds ahead: a cool-down passes without a
    wait, while budgets still run on real time."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.shift


def recall(reranker: Any, guard: RerankGuard, face: str, rerank: int | None = None) -> Hits:
    """A recall of "cat dog" by a fresh memory holding :data:`TEXTS`, in ``face``."""
    if face == "sync":
        mem = Memory(InMemoryStore(), HashEmbedder(dimensions=64), reranker=reranker,
                     rerank_guard=guard)  # fmt: skip
        mem.remember_many({"text": text, "scope": SCOPE} for text in TEXTS)
        return mem.recall("cat dog", [SCOPE], rerank=rerank)

    async def run() -> Hits:
        mem = AsyncMemory(InMemoryStore(), HashEmbedder(dimensions=64), reranker=reranker,
                          rerank_guard=guard)  # fmt: skip
        await mem.remember_many({"text": text, "scope": SCOPE} for text in TEXTS)
        return await mem.recall("cat dog", [SCOPE], rerank=rerank)

    return asyncio.run(run())


def fused() -> list[str]:
    return [hit.memory.text for hit in recall(None, RerankGuard(), "sync")]


def timed(reranker: Any, guard: RerankGuard, face: str) -> tuple[Hits, float]:
    started = time.monotonic()
    hits = recall(reranker, guard, face)
    return hits, time.monotonic() - started


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_recall_answers_within_its_budget_when_the_service_never_answers(
    server: Server, face: str
) -> None:
    """The service reads each request and never answers; the reranker keeps its
    defaults (30 s timeout, 4 retries: 155.7 s before the budget). The recall answers
    within its 1 s budget (+ margin) with its fused order, degraded, after one request."""
    server.always = "hang"
    hits, elapsed = timed(TEIReranker(base_url=server.url), RerankGuard(budget=BUDGET), face)
    assert elapsed < BUDGET + MARGIN
    assert [hit.memory.text for hit in hits] == fused()
    assert hits.status == "degraded"
    # the stage's clock or the reranker's own deadline may see the budget end first
    assert hits.error in ("rerank: no answer within the 1 s budget", "rerank: ProviderTimeoutError")
    assert len(server.bodies) == 1


@pytest.mark.parametrize("face", ["sync", "async"])
def test_retries_and_their_waits_end_within_the_budget(server: Server, face: str) -> None:
    """Every request answered 503 and the default retry policy (4 retries, waits of
    about 0.5, 1, 2, 4 s): the reranker stops before a wait that would end past the
    budget, so at most 3 of its 5 attempts are made, within the budget (+ margin)."""
    server.always = "503"
    hits, elapsed = timed(TEIReranker(base_url=server.url), RerankGuard(budget=BUDGET), face)
    assert elapsed < BUDGET + MARGIN
    assert hits.status == "degraded"
    # the reranker gives up before a wait past the budget; on a loaded machine its
    # requests take long enough that the stage's own clock may see the budget end first
    assert hits.error in ("rerank: ProviderHTTPError", "rerank: no answer within the 1 s budget")
    assert 1 <= len(server.bodies) <= 3


@pytest.mark.parametrize("face", ["sync", "async"])
def test_an_open_breaker_sends_nothing_until_its_cooldown_ends(server: Server, face: str) -> None:
    """Three recalls fail (503); the fourth, 29 s later by the guard's clock, sends no
    request and says why; after the 30 s cool-down one recall tries the service, now
    healthy, which closes the breaker: the recall is re-ranked."""
    server.always = "503"
    clock = Clock()
    guard = RerankGuard(budget=BUDGET, clock=clock)
    reranker = TEIReranker(base_url=server.url, retry=RetryPolicy(max_retries=0))
    for _ in range(3):
        assert recall(reranker, guard, face).error == "rerank: ProviderHTTPError"
    assert len(server.bodies) == 3 and guard.state == "open"
    clock.shift += 29.0
    skipped, elapsed = timed(reranker, guard, face)
    assert len(server.bodies) == 3  # no request reached the service
    assert skipped.status == "degraded" and elapsed < MARGIN
    assert skipped.error is not None and skipped.error.startswith(
        "rerank: skipped, the reranker failed 3 times in a row (next try in "
    )
    assert [hit.memory.text for hit in skipped] == fused()
    server.always = ""
    clock.shift += 1.5
    hits = recall(reranker, guard, face)
    assert len(server.bodies) == 4 and guard.state == "closed"
    assert hits.status == "used"
    assert [hit.evidence["rerank_score"] for hit in hits][:2] == [2.0, 2.0]
    assert {hit.memory.text for hit in hits[:2]} == {
        text for text in TEXTS if score("cat dog", text) == 2.0
    }


class NeverAnswers:
    """An AI binding stub whose ``run`` never resolves (a Workers AI call that hangs);
    it counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, model: str, inputs: Any) -> Any:
        self.calls += 1
        await asyncio.Event().wait()


def test_the_workers_ai_reranker_has_the_same_budget_and_breaker() -> None:
    """``WorkersAIReranker`` (async only) behind a binding that never answers: the
    core's async driver cancels the call at the budget, so the recall answers in time,
    degraded; three such recalls open the breaker and the fourth makes no call."""
    sys.path.insert(0, str(WORKERS_SRC))
    try:
        from engramdb_workers import WorkersAIReranker
    finally:
        sys.path.remove(str(WORKERS_SRC))
    binding = NeverAnswers()
    guard = RerankGuard(budget=0.5)
    reranker = WorkersAIReranker(binding)
    for _ in range(3):
        hits, elapsed = timed(reranker, guard, "async")
        assert elapsed < 0.5 + MARGIN
        assert hits.status == "degraded"
        assert hits.error == "rerank: no answer within the 0.5 s budget"
    assert binding.calls == 3 and guard.state == "open"
    assert recall(reranker, guard, "async").error.startswith("rerank: skipped")  # type: ignore[union-attr]
    assert binding.calls == 3
