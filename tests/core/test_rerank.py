"""The rerank stage: a reranker re-scores the first N fused hits of a recall.

Pinned here with a fake reranker whose scores are known: the re-scored hits come first
in score order (equal scores in fused order), the others keep their fused order after
them; every hit's evidence carries ``rerank_score`` (None when not re-scored); a failing
reranker leaves the fused order with ``status="degraded"``; ``rerank=0`` is off; the
texts go in ``max_batch`` batches and only redacted. The flow is also stepped by hand:
the stage is one more effect (``Rerank``), so it does no I/O of its own.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engramdb import (
    AsyncMemory,
    ConfigurationError,
    HashEmbedder,
    Hits,
    InMemoryStore,
    Memory,
    Policy,
    ProviderError,
    ProviderTimeoutError,
    Reranker,
    RerankGuard,
    ValidationError,
)
from engramdb.driver import run
from engramdb.flows import Embed, MemoryFlows, Rerank, Store
from engramdb.json_format import hit_to_json

SCOPE = ("acme", "notes")
TEXTS = [
    "lisbon lisbon lisbon trip",
    "lisbon trip notes for march",
    "a note about lisbon and porto",
    "lisbon",
    "we visited lisbon in may with sam",
    "the lisbon office opens at nine",
    "lisbon weather was warm",
]
# The reranker's opinion: a text's score, 0.0 for the others.
SCORES = {
    "we visited lisbon in may with sam": 0.9,
    "lisbon weather was warm": 0.7,
    "a note about lisbon and porto": 0.7,
    "lisbon": 0.1,
}


class FakeReranker:
    """Scores texts by :data:`SCORES`, records each call; ``answer`` may replace the
    scores (a wrong count, a NaN) and ``fail`` makes every call raise it."""

    id = "fake/table"

    def __init__(
        self,
        max_batch: int = 100,
        fail: Exception | None = None,
        answer: Callable[[list[float]], Any] | None = None,
    ) -> None:
        self.max_batch = max_batch
        self.fail = fail
        self.answer = answer
        self.calls: list[tuple[str, list[str]]] = []

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((query, list(texts)))
        if self.fail is not None:
            raise self.fail
        scores = [SCORES.get(text, 0.0) for text in texts]
        answer: list[float] = self.answer(scores) if self.answer else scores
        return answer

    async def arerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return self.rerank(query, texts)


def memory(reranker: Any = None, **options: Any) -> Memory:
    mem = Memory(InMemoryStore(), HashEmbedder(dimensions=64), reranker=reranker, **options)
    mem.remember_many({"text": text, "scope": SCOPE} for text in TEXTS)
    return mem


def fused(top_k: int = 10) -> list[str]:
    """The texts of a recall without a rerank stage, in fused order."""
    hits = memory().recall("lisbon", [SCOPE], top_k=top_k)
    assert hits.status == "used"
    return [hit.memory.text for hit in hits]


def expected(order: list[str], count: int) -> list[str]:
    head = sorted(range(min(count, len(order))), key=lambda i: (-SCORES.get(order[i], 0.0), i))
    return [order[i] for i in head] + order[count:]


def texts(hits: Hits) -> list[str]:
    return [hit.memory.text for hit in hits]


def test_the_fake_is_a_reranker() -> None:
    assert isinstance(FakeReranker(), Reranker)


def test_the_first_n_are_ordered_by_rerank_score_and_the_rest_keep_the_fused_order() -> None:
    order = fused()
    assert len(order) == len(TEXTS)
    reranker = FakeReranker()
    hits = memory(reranker).recall("lisbon", [SCOPE], rerank=5)
    assert hits.status == "used" and hits.error is None
    assert texts(hits) == expected(order, 5)
    assert texts(hits) != order  # the fake's opinion does change this order
    (call,) = reranker.calls
    assert call == ("lisbon", order[:5])
    for hit in hits:
        if hit.memory.text in order[:5]:
            assert hit.evidence["rerank_score"] == SCORES.get(hit.memory.text, 0.0)
        else:
            assert hit.evidence["rerank_score"] is None
    # equal scores (0.7, 0.0) keep the fused order among themselves
    zero = [text for text in texts(hits)[:5] if SCORES.get(text, 0.0) == 0.0]
    assert zero == [text for text in order[:5] if SCORES.get(text, 0.0) == 0.0]


def test_rerank_zero_is_off_and_a_memory_without_reranker_has_none() -> None:
    reranker = FakeReranker()
    hits = memory(reranker).recall("lisbon", [SCOPE], rerank=0)
    assert reranker.calls == []
    assert texts(hits) == fused()
    assert all(hit.evidence["rerank_score"] is None for hit in hits)
    plain = memory().recall("lisbon", [SCOPE])
    assert all(hit.evidence["rerank_score"] is None for hit in plain)


def test_a_memory_with_a_reranker_re_scores_the_first_30_by_default() -> None:
    reranker = FakeReranker()
    hits = memory(reranker).recall("lisbon", [SCOPE], top_k=3)
    (call,) = reranker.calls
    assert call[1] == fused()  # all 7 candidates (fewer than 30) were re-scored
    assert texts(hits) == expected(fused(), 30)[:3]


def test_n_beyond_the_hits_re_scores_them_all_in_batches_of_max_batch() -> None:
    reranker = FakeReranker(max_batch=3)
    guard = RerankGuard(calls=3)
    hits = memory(reranker, rerank_guard=guard).recall("lisbon", [SCOPE], rerank=1000)
    order = fused()
    assert [call[1] for call in reranker.calls] == [order[0:3], order[3:6], order[6:7]]
    assert texts(hits) == expected(order, len(order))
    assert all(hit.evidence["rerank_score"] is not None for hit in hits)


def test_a_recall_makes_at_most_the_guards_calls_and_the_rest_keep_the_fused_order() -> None:
    reranker = FakeReranker(max_batch=2)
    hits = memory(reranker).recall("lisbon", [SCOPE], rerank=1000)
    order = fused()
    # the default guard allows 2 calls: 4 of the 7 hits are re-scored, 3 keep their place
    assert [call[1] for call in reranker.calls] == [order[0:2], order[2:4]]
    assert texts(hits) == expected(order, 4)
    assert [hit.evidence["rerank_score"] is None for hit in hits] == [False] * 4 + [True] * 3
    one = FakeReranker(max_batch=2)
    memory(one, rerank_guard=RerankGuard(calls=1)).recall("lisbon", [SCOPE], rerank=1000)
    assert [call[1] for call in one.calls] == [order[0:2]]


def test_top_k_below_n_takes_the_best_of_the_re_scored() -> None:
    """``rerank=7, top_k=2``: the two best by the reranker among the fused first seven,
    even one the fused order put last."""
    order = fused()
    hits = memory(FakeReranker()).recall("lisbon", [SCOPE], top_k=2, rerank=7)
    assert texts(hits) == expected(order, 7)[:2]
    assert texts(hits)[0] == "we visited lisbon in may with sam"


@pytest.mark.parametrize(
    ("reranker", "reason"),
    [
        (FakeReranker(fail=ProviderTimeoutError("slow", provider="fake")), "rerank: "),
        (FakeReranker(fail=ProviderError("HTTP 500", provider="fake")), "rerank: ProviderError"),
        (FakeReranker(fail=RuntimeError("a bug in a custom reranker")), "rerank: RuntimeError"),
        (FakeReranker(answer=lambda scores: scores[:-1]), "answered 4 scores for 5 texts"),
        (FakeReranker(answer=lambda scores: [math.nan] * len(scores)), "not a finite number"),
        (FakeReranker(answer=lambda scores: [math.inf] * len(scores)), "not a finite number"),
        (FakeReranker(answer=lambda scores: [True] * len(scores)), "not a finite number"),
        (FakeReranker(answer=lambda scores: "0.5"), "not a list of scores"),
        (FakeReranker(answer=lambda scores: None), "not a list of scores"),
    ],
)
def test_a_failing_reranker_degrades_to_the_fused_order(reranker: Any, reason: str) -> None:
    hits = memory(reranker).recall("lisbon", [SCOPE], rerank=5)
    assert texts(hits) == fused()
    assert hits.status == "degraded"
    assert hits.error is not None and hits.error.startswith("rerank: ") and reason in hits.error
    assert all(hit.evidence["rerank_score"] is None for hit in hits)


def test_a_failure_in_a_later_batch_keeps_the_whole_fused_order() -> None:
    calls = 0

    def second_fails(scores: list[float]) -> list[float]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ProviderError("HTTP 503", provider="fake")
        return scores

    hits = memory(FakeReranker(max_batch=2, answer=second_fails)).recall(
        "lisbon", [SCOPE], rerank=5
    )
    assert texts(hits) == fused() and hits.status == "degraded"


def test_the_rerank_stage_sees_only_redacted_texts_and_query() -> None:
    """A text stored by a memory without redact is redacted again before it leaves
    for the reranker; the query is redacted as always."""
    store = InMemoryStore()
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    raw = Memory(store, HashEmbedder(dimensions=64), redact=None)
    raw.remember(f"lisbon deploy key {secret}", SCOPE)
    reranker = FakeReranker()
    Memory(store, HashEmbedder(dimensions=64), reranker=reranker).recall(
        f"lisbon {secret}", [SCOPE], rerank=5
    )
    ((query, sent),) = reranker.calls
    assert secret not in query and "[REDACTED:" in query
    assert len(sent) == 1 and secret not in sent[0] and "[REDACTED:" in sent[0]


@pytest.mark.parametrize("value", [-1, 1001, True, 2.0, "5"])
def test_a_bad_rerank_count_is_refused_before_any_effect(value: object) -> None:
    reranker = FakeReranker()
    with pytest.raises(ValidationError, match="rerank="):
        memory(reranker).recall("lisbon", [SCOPE], rerank=value)  # type: ignore[arg-type]
    assert reranker.calls == []


def test_rerank_without_a_reranker_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="needs a reranker"):
        memory().recall("lisbon", [SCOPE], rerank=5)


def test_a_reranker_without_the_protocol_is_refused() -> None:
    with pytest.raises(ValidationError, match="reranker"):
        Memory(InMemoryStore(), HashEmbedder(dimensions=64), reranker=object())  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="max_batch"):
        Memory(InMemoryStore(), HashEmbedder(dimensions=64), reranker=FakeReranker(max_batch=0))


def test_the_async_face_and_bound_views_rerank_the_same_way() -> None:
    order = fused()
    want = expected(order, 5)

    async def run_async() -> tuple[list[str], list[str]]:
        mem = AsyncMemory(InMemoryStore(), HashEmbedder(dimensions=64), reranker=FakeReranker())
        await mem.remember_many({"text": text, "scope": SCOPE} for text in TEXTS)
        hits = await mem.recall("lisbon", [SCOPE], rerank=5)
        bound = await mem.bind(SCOPE).recall("lisbon", top_k=10, rerank=5)
        return texts(hits), texts(bound)

    assert asyncio.run(run_async()) == (want, want)
    bound = memory(FakeReranker()).bind(SCOPE).recall("lisbon", top_k=3, rerank=5)
    assert texts(bound) == want[:3]
    assert bound[0].evidence["rerank_score"] == SCORES.get(want[0], 0.0)


def test_a_bound_view_with_a_policy_re_scores_the_first_n_of_the_policys_order() -> None:
    """With a policy that re-ranks (recency), the stage re-scores the first N of the
    policy's order, not the fused one, and the selection covers the final hits."""
    mem = memory(FakeReranker())
    policy = Policy(recency_half_life=timedelta(hours=1))
    policy_order = texts(mem.bind(SCOPE, policy=policy).recall("lisbon", top_k=10, rerank=0))
    hits = mem.bind(SCOPE, policy=policy).recall("lisbon", top_k=2, rerank=5)
    assert texts(hits) == expected(policy_order, 5)[:2]
    assert all("recency" in hit.boosts for hit in hits)


def test_the_json_of_a_hit_has_rerank_score_only_when_re_scored() -> None:
    hits = memory(FakeReranker()).recall("lisbon", [SCOPE], rerank=2)
    first, *_, last = [hit_to_json(hit) for hit in hits]
    assert first["evidence"]["rerank_score"] == 0.0 or first["evidence"]["rerank_score"] > 0
    assert "rerank_score" not in last["evidence"]


class _Clock:
    def __call__(self) -> datetime:
        return datetime(2026, 12, 1, tzinfo=UTC)


def test_the_recall_flow_stepped_by_hand_yields_one_rerank_effect() -> None:
    """Driven by a hand-written performer: the recall embeds, searches, then yields
    ``Rerank`` with the query and the fused texts; a failure thrown in at that yield
    ends in the fused order, degraded."""
    from engramdb.flows.context import FlowContext

    store = InMemoryStore()
    embedder = HashEmbedder(dimensions=64)
    mem = Memory(store, embedder, clock=_Clock())
    mem.remember_many({"text": text, "scope": SCOPE} for text in TEXTS)
    order = texts(mem.recall("lisbon", [SCOPE]))
    context = FlowContext.of(embedder, clock=_Clock(), reranker=FakeReranker())

    def stepped(answer: Callable[[Rerank], Any]) -> tuple[Hits, list[str]]:
        seen: list[str] = []

        def perform(effect: Any) -> Any:
            seen.append(type(effect).__name__)
            if isinstance(effect, Embed):
                return embedder.embed(list(effect.texts), effect.kind)
            if isinstance(effect, Store):
                return store.batch(effect.ops)
            assert isinstance(effect, Rerank)
            assert effect.query == "lisbon" and list(effect.texts) == order[:4]
            return answer(effect)

        hits = run(MemoryFlows(context).recall("lisbon", [SCOPE], rerank=4), perform)
        return hits, seen

    hits, seen = stepped(lambda effect: [SCORES.get(t, 0.0) for t in effect.texts])
    assert seen[-1] == "Rerank" and seen.count("Rerank") == 1
    assert texts(hits) == expected(order, 4)

    def fails(effect: Rerank) -> Any:
        raise ProviderError("HTTP 502", provider="fake")

    hits, _ = stepped(fails)
    assert texts(hits) == order and hits.status == "degraded"
    assert hits.error == "rerank: ProviderError"


# -- the budget and the breaker (RerankGuard) ---------------------------------------------


class Seconds:
    """A guard's clock that moves only when told (or when a fake reranker works)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TimedReranker(FakeReranker):
    """A fake that ``supports_timeout``: records the ``timeout`` each call gets and
    moves ``clock`` by ``takes`` seconds per call (its work)."""

    supports_timeout = True

    def __init__(self, clock: Seconds, takes: float = 0.0, **options: Any) -> None:
        super().__init__(**options)
        self.clock = clock
        self.takes = takes
        self.timeouts: list[float | None] = []

    def rerank(
        self, query: str, texts: Sequence[str], *, timeout: float | None = None
    ) -> list[float]:
        self.timeouts.append(timeout)
        self.clock.now += self.takes
        return super().rerank(query, texts)

    async def arerank(
        self, query: str, texts: Sequence[str], *, timeout: float | None = None
    ) -> list[float]:
        return self.rerank(query, texts, timeout=timeout)


def test_each_call_is_handed_the_time_left_of_the_recalls_budget() -> None:
    """A reranker that ``supports_timeout`` gets, per call, what is left of the stage's
    budget (2 s; each call here takes 0.5 s), in both faces; one without the flag is
    called as before (the fake above)."""
    clock = Seconds()
    guard = RerankGuard(budget=2.0, calls=3, clock=clock)
    reranker = TimedReranker(clock, takes=0.5, max_batch=2)
    hits = memory(reranker, rerank_guard=guard).recall("lisbon", [SCOPE], rerank=6)
    assert hits.status == "used"
    assert reranker.timeouts == [2.0, 1.5, 1.0]

    async def run_async() -> list[float | None]:
        timed = TimedReranker(clock, takes=0.5, max_batch=3)
        guard = RerankGuard(budget=2.0, clock=clock)
        mem = AsyncMemory(
            InMemoryStore(), HashEmbedder(dimensions=64), reranker=timed, rerank_guard=guard
        )
        await mem.remember_many({"text": text, "scope": SCOPE} for text in TEXTS)
        assert (await mem.recall("lisbon", [SCOPE], rerank=6)).status == "used"
        return timed.timeouts

    assert asyncio.run(run_async()) == [2.0, 1.5]
    default = memory(FakeReranker()).rerank_guard  # without rerank_guard=: a guard of its own
    assert default is not None
    assert (default.budget, default.calls, default.failures, default.cooldown) == (5.0, 2, 3, 30.0)
    assert memory().rerank_guard is None


def test_a_stage_past_its_budget_answers_the_fused_order_and_uses_no_late_answer() -> None:
    """Calls that take 0.75 s against a 1 s budget: the second answer comes after the
    budget and is not used; the recall answers the fused order, degraded, and says so;
    no third call is made."""
    clock = Seconds()
    reranker = TimedReranker(clock, takes=0.75, max_batch=2)
    guard = RerankGuard(budget=1.0, clock=clock)
    hits = memory(reranker, rerank_guard=guard).recall("lisbon", [SCOPE], rerank=6)
    assert texts(hits) == fused() and hits.status == "degraded"
    assert hits.error == "rerank: no answer within the 1 s budget"
    assert all(hit.evidence["rerank_score"] is None for hit in hits)
    assert len(reranker.calls) == 2 and reranker.timeouts == [1.0, 0.25]


def test_after_three_failures_the_stage_is_skipped_until_the_cooldown_ends() -> None:
    """Three failed stages in a row open the breaker: the next recalls yield no
    ``Rerank`` effect (the reranker is not called) and say so; after the 30 s cool-down
    one recall tries it: a failure opens the breaker again, a success closes it."""
    clock = Seconds()
    guard = RerankGuard(clock=clock)
    reranker = FakeReranker(fail=ProviderError("HTTP 503", provider="fake"))
    mem = memory(reranker, rerank_guard=guard)
    for _ in range(3):
        assert mem.recall("lisbon", [SCOPE]).error == "rerank: ProviderError"
    assert len(reranker.calls) == 3 and guard.state == "open"
    clock.now += 29.2
    skipped = mem.recall("lisbon", [SCOPE])
    assert texts(skipped) == fused() and skipped.status == "degraded"
    assert (
        skipped.error == "rerank: skipped, the reranker failed 3 times in a row (next try in 1 s)"
    )
    assert len(reranker.calls) == 3
    clock.now += 1.0
    assert guard.state == "half-open"
    assert mem.recall("lisbon", [SCOPE]).error == "rerank: ProviderError"  # the trial
    assert len(reranker.calls) == 4 and guard.state == "open"
    assert mem.recall("lisbon", [SCOPE]).error.startswith("rerank: skipped")  # type: ignore[union-attr]
    assert len(reranker.calls) == 4
    clock.now += 30.0
    reranker.fail = None
    hits = mem.recall("lisbon", [SCOPE], rerank=5)
    assert hits.status == "used" and texts(hits) == expected(fused(), 5)
    assert len(reranker.calls) == 5 and guard.state == "closed"


def test_one_failure_between_successes_does_not_open_the_breaker() -> None:
    """The breaker counts failures in a row: fail, fail, succeed, fail, fail keeps it
    closed, and every recall calls the reranker."""
    outcomes = iter([True, True, False, True, True])

    def sometimes(scores: list[float]) -> list[float]:
        if next(outcomes):
            raise ProviderError("HTTP 502", provider="fake")
        return scores

    reranker = FakeReranker(answer=sometimes)
    mem = memory(reranker, rerank_guard=RerankGuard(clock=Seconds()))
    statuses = [mem.recall("lisbon", [SCOPE]).status for _ in range(5)]
    assert statuses == ["degraded", "degraded", "used", "degraded", "degraded"]
    assert len(reranker.calls) == 5 and mem.rerank_guard is not None
    assert mem.rerank_guard.state == "closed"


def test_while_a_trial_runs_other_recalls_skip_the_reranker() -> None:
    """Stepped by hand: after the cool-down the first recall's stage is the trial; a
    second recall meanwhile yields no ``Rerank`` effect; once the trial has taken its
    whole budget without an outcome (its task was cancelled), another recall may try."""
    from engramdb.flows.context import FlowContext
    from engramdb.ranking._rerank import rerank_stage

    clock = Seconds()
    guard = RerankGuard(budget=5.0, failures=1, cooldown=10.0, clock=clock)
    guard.failed()
    clock.now += 10.0
    context = FlowContext.of(
        HashEmbedder(dimensions=64), clock=_Clock(), reranker=FakeReranker(), rerank_guard=guard
    )
    hits = memory().recall("lisbon", [SCOPE])
    trial = rerank_stage(context, "lisbon", list(hits), 3)
    effect = next(trial)
    assert isinstance(effect, Rerank) and effect.timeout == 5.0
    other = rerank_stage(context, "lisbon", list(hits), 3)
    with pytest.raises(StopIteration) as skipped:
        next(other)
    assert skipped.value.value.error == (
        "rerank: skipped, another recall is trying the reranker after its failures"
    )
    trial.close()  # cancelled: no outcome
    clock.now += 5.0
    assert isinstance(next(rerank_stage(context, "lisbon", list(hits), 3)), Rerank)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"budget": 0}, "budget=0 must be a number of seconds above 0 and at most 3600"),
        ({"budget": math.nan}, "budget=nan must be"),
        ({"cooldown": -1.0}, "cooldown=-1.0 must be"),
        ({"cooldown": 1e9}, "cooldown=1000000000.0 must be"),
        ({"failures": 0}, "failures=0 must be an integer from 1 to 1000"),
        ({"failures": 2.5}, "failures=2.5 must be an integer"),
        ({"calls": 0}, "calls=0 must be an integer from 1 to 1000"),
        ({"calls": True}, "calls=True must be an integer"),
        ({"clock": "now"}, "clock='now' must be a function"),
    ],
)
def test_a_bad_guard_setting_is_one_configuration_error(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        RerankGuard(**options)
    assert str(raised.value).startswith(message)


def test_a_guard_that_is_not_a_rerank_guard_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"must be an engramdb\.RerankGuard"):
        memory(FakeReranker(), rerank_guard={"budget": 5})


def test_the_async_face_cancels_a_call_still_running_at_the_budget() -> None:
    """A reranker whose ``arerank`` never finishes (a service that never answers, the
    Worker's AI binding stuck): the async driver cancels it when the 0.05 s budget ends,
    and the recall answers its fused order, degraded (also inside Pyodide)."""
    cancelled = []

    class Stuck(FakeReranker):
        async def arerank(self, query: str, texts: Sequence[str]) -> list[float]:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(query)
                raise
            return []

    async def run_async() -> Hits:
        guard = RerankGuard(budget=0.05)
        mem = AsyncMemory(
            InMemoryStore(), HashEmbedder(dimensions=64), reranker=Stuck(), rerank_guard=guard
        )
        await mem.remember_many({"text": text, "scope": SCOPE} for text in TEXTS)
        return await asyncio.wait_for(mem.recall("lisbon", [SCOPE]), 30)

    hits = asyncio.run(run_async())
    assert texts(hits) == fused() and hits.status == "degraded"
    assert hits.error == "rerank: no answer within the 0.05 s budget"
    assert cancelled == ["lisbon"]
