"""The policy contract: bound views, receipts, evidence, reinforcement, forgetting and
labels, on every store, sync and async (D1 included), with an injected clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fakes import ManualClock

from engramdb import (
    ConfigurationError,
    Forgetting,
    LabelRules,
    Policy,
    ScopePrefix,
    ValidationError,
)
from fixtures import bound

SAM = ("acme", "user", "sam")
KIM = ("acme", "user", "kim")
SHARED = ("acme", "shared")
DAY = timedelta(days=1)


def bind(memory: Any, scope: tuple[str, ...] = SAM, **options: Any) -> Any:
    return bound(memory, scope, **options)


async def texts(hits: Any) -> list[str]:
    return [hit.memory.text for hit in hits]


# -- bound authority -----------------------------------------------------------------------


async def test_a_bound_view_writes_to_its_scope_and_its_session(memory: Any) -> None:
    """Shared writes go to the bound scope, session writes to (*scope, "session", id)."""
    view = bind(memory, session="s1")
    shared = await view.remember("Sam likes green tea")
    private = await view.remember("Sam is debugging the deploy", durability="session")
    assert shared.scope == SAM
    assert private.scope == (*SAM, "session", "s1")
    assert view.session_scope == (*SAM, "session", "s1")


async def test_a_views_count_is_its_scope_and_sessions_live_memories(
    memory: Any, clock: ManualClock
) -> None:
    """``count()`` (a view operation) counts the bound scope's and the session's live
    memories: not a scope below it, not another scope, not a read scope, not a memory
    forgotten or expired; the number ``status()`` reports as ``items``."""
    view = bind(memory, session="s1", read=[SHARED])
    await bind(memory, SHARED).remember("the office opens at nine")
    await bind(memory, KIM).remember("Kim likes tea")
    await bind(memory, (*SAM, "projects")).remember("a note in a scope below")
    assert await view.count() == 0
    kept = await view.remember("Sam likes green tea")
    await view.remember("Sam is debugging the deploy", durability="session")
    gone = await view.remember("Sam's old phone number")
    await view.remember("Sam's visa runs out", ttl=timedelta(hours=1))
    assert await view.count() == 4
    assert await view.forget(gone.id)
    clock.advance(hours=2)
    assert await view.count() == 2 == (await view.status()).items
    assert await bind(memory).count() == 1  # the scope without its session
    assert kept.scope == SAM


async def test_a_session_write_without_a_bound_session_is_refused(memory: Any) -> None:
    """No bound session: durability='session' is a ValidationError and writes nothing."""
    view = bind(memory)
    with pytest.raises(ValidationError, match="session"):
        await view.remember("a private note", durability="session")
    with pytest.raises(ValidationError, match="durability"):
        await view.remember("a note", durability="global")
    assert await memory.list_scopes() == []


async def test_recall_sees_only_the_scope_its_session_and_the_read_scopes(memory: Any) -> None:
    """Memories of another user, another session, a child scope or a sibling never come
    back, however well they match; the read scopes do."""
    await memory.remember("the deploy window is Tuesday", SAM)
    await memory.remember("the deploy window for Sam's session", (*SAM, "session", "s1"))
    await memory.remember("the deploy window of another session", (*SAM, "session", "s2"))
    await memory.remember("the deploy window of Kim", KIM)
    await memory.remember("the deploy window in a child scope", (*SAM, "drafts"))
    await memory.remember("the company deploy window policy", SHARED)
    view = bind(memory, session="s1", read=[SHARED])
    found = sorted(await texts(await view.recall("deploy window", top_k=10)))
    assert found == [
        "the company deploy window policy",
        "the deploy window for Sam's session",
        "the deploy window is Tuesday",
    ]


async def test_get_forget_and_feedback_answer_as_if_other_scopes_did_not_exist(
    memory: Any,
) -> None:
    """A view gets memories it can see (read scopes included), forgets and gives feedback
    only on its own; a memory elsewhere is None/False and is left untouched."""
    kim = await memory.remember("Kim's secret plan", KIM)
    shared = await memory.remember("The company policy", SHARED)
    view = bind(memory, read=[SHARED])
    assert await view.get(kim.id) is None
    assert (await view.get(shared.id)).text == "The company policy"
    assert await view.forget(kim.id) is False
    assert await view.forget(shared.id) is False
    assert await view.feedback(shared.id, 1.0) is None
    assert await memory.get(kim.id) is not None
    assert (await memory.get(shared.id)).utility.manual is None
    own = await view.remember("Sam's own note")
    assert await view.forget(own.id) is True
    assert await memory.get(own.id) is None


async def test_a_read_prefix_widens_recall_only(memory: Any) -> None:
    """A ScopePrefix in ``read`` is searched; writes still go to the bound scope."""
    await memory.remember("team lunch is on Friday", ("acme", "teams", "core"))
    view = bind(memory, read=[ScopePrefix(("acme", "teams"))])
    assert await texts(await view.recall("team lunch")) == ["team lunch is on Friday"]
    assert (await view.remember("team lunch moved")).scope == SAM


async def test_a_selection_can_only_be_completed_by_its_scope_and_session(memory: Any) -> None:
    """Another scope's view, or another session's, cannot consume a selection."""
    sam = bind(memory, session="s1")
    await sam.remember("Sam prefers short answers")
    await sam.remember("short answers only in this chat", durability="session")
    hits = await sam.recall("short answers")
    assert len(hits) == 2
    for other in (bind(memory, KIM), bind(memory), bind(memory, session="s2")):
        assert await other.complete(hits.selection_id, 1.0) is False
    assert await sam.complete(hits.selection_id, 1.0) is True


# -- receipts and evidence -----------------------------------------------------------------


async def test_recall_counts_one_exposure_per_returned_memory(
    memory: Any, clock: ManualClock
) -> None:
    """Each memory a bound recall returns from the view's own scope gets one exposure at
    the clock's time; get() counts none; read-scope memories get none from readers."""
    shared = await memory.remember("deploys happen on Tuesday", SHARED)
    view = bind(memory, read=[SHARED])
    own = await view.remember("Sam deploys on Tuesday too")
    unused = await view.remember("Sam likes chess")
    assert (await view.get(own.id)).utility.exposures == 0
    await view.recall("deploys Tuesday")
    clock.advance(minutes=5)
    await view.recall("deploys Tuesday")
    record = await view.get(own.id)
    assert record.utility.exposures == 2
    assert record.utility.last_exposed_at == clock.now
    assert (await view.get(unused.id)).utility.exposures == 0
    assert (await memory.get(shared.id)).utility.exposures == 0


async def test_complete_applies_a_score_once_to_exactly_the_selection(
    memory: Any, clock: ManualClock
) -> None:
    """complete(): True once; the score is shared by the selection's memories; a memory
    that was not selected gets nothing; again, it is False and changes nothing."""
    view = bind(memory)
    a = await view.remember("the deploy window is Tuesday")
    b = await view.remember("deploy freezes start in December")
    other = await view.remember("Sam plays the cello")
    hits = await view.recall("deploy")
    assert sorted(hit.memory.id for hit in hits) == sorted([a.id, b.id])
    clock.advance(minutes=1)
    assert await view.complete(hits.selection_id, 0.8) is True
    assert await view.complete(hits.selection_id, 0.8) is False
    for item in (a, b):
        utility = (await view.get(item.id)).utility
        assert (utility.eval_count, utility.eval_sum) == (1, 0.4)
    assert (await view.get(other.id)).utility.eval_count == 0


async def test_bad_scores_and_values_are_refused_and_change_nothing(memory: Any) -> None:
    """A score or feedback value outside [-1, 1] is a ValidationError; the receipt stays
    usable."""
    view = bind(memory)
    record = await view.remember("Sam prefers tea")
    hits = await view.recall("tea")
    for bad in (1.5, -2, float("nan"), "1", True):
        with pytest.raises(ValidationError, match="score"):
            await view.complete(hits.selection_id, bad)
        with pytest.raises(ValidationError, match="value"):
            await view.feedback(record.id, bad)
    assert await view.complete(hits.selection_id, 1.0) is True
    assert (await view.get(record.id)).utility.manual is None


async def test_receipts_expire(memory: Any, clock: ManualClock) -> None:
    """A selection can be completed until selection_ttl has passed, not after."""
    view = bind(memory, policy=Policy(selection_ttl=timedelta(minutes=10)))
    await view.remember("Sam prefers tea")
    early, late = await view.recall("tea"), await view.recall("tea")
    clock.advance(minutes=9)
    assert await view.complete(early.selection_id, 1.0) is True
    clock.advance(minutes=1)
    assert await view.complete(late.selection_id, 1.0) is False


async def test_at_most_max_selections_receipts_are_kept(memory: Any, clock: ManualClock) -> None:
    """The oldest receipts of a scope beyond max_selections are evicted."""
    view = bind(memory, policy=Policy(max_selections=2))
    await view.remember("Sam prefers tea")
    selections = []
    for _ in range(3):
        selections.append((await view.recall("tea")).selection_id)
        clock.advance(seconds=1)
    assert [await view.complete(s, 0.5) for s in selections] == [False, True, True]


async def test_feedback_sets_and_clears_the_manual_value(memory: Any, clock: ManualClock) -> None:
    """feedback(id, v) records v and its time; feedback(id, None) clears it."""
    view = bind(memory)
    record = await view.remember("Sam prefers tea")
    after = await view.feedback(record.id, 0.5)
    assert (after.utility.manual, after.utility.manual_updated_at) == (0.5, clock.now)
    clock.advance(minutes=1)
    cleared = await view.feedback(record.id, None)
    assert (cleared.utility.manual, cleared.utility.manual_updated_at) == (None, clock.now)
    assert await view.feedback("01NOTANID0000000000000000", 0.5) is None


async def test_evidence_is_kept_per_label_context(memory: Any) -> None:
    """A recall's labels are its context: evaluations are summarised per context too,
    keeping the max_contexts most recent."""
    view = bind(memory, policy=Policy(max_contexts=1))
    record = await view.remember("Sam prefers tea")
    first = await view.recall("tea", labels={"Task": ["Drinks"]})
    await view.complete(first.selection_id, 1.0)
    contexts = (await view.get(record.id)).utility.contexts
    assert [(c.key, c.eval_count, c.eval_sum) for c in contexts] == [
        ('{"task":["drinks"]}', 1, 1.0)
    ]


# -- reinforcement -------------------------------------------------------------------------


async def _deploy_rounds(memory: Any, reinforcement: bool, rounds: int) -> list[str]:
    """The worked scenario of docs/policy.md: two memories answer "when can we deploy?";
    the older one is wrong. Each round the agent recalls one memory and completes the
    selection with +1 when it got the right answer, -1 otherwise."""
    view = bind(memory, policy=Policy(reinforcement=reinforcement))
    wrong = await view.remember("The deploy window is Tuesday afternoon")
    right = await view.remember("Since March the deploy window is Thursday morning")
    shown = []
    for _ in range(rounds):
        hits = await view.recall("deploy window", top_k=1)
        shown.append("right" if hits[0].memory.id == right.id else "wrong")
        await view.complete(hits.selection_id, 1.0 if hits[0].memory.id == right.id else -1.0)
    assert wrong.id != right.id
    return shown


async def test_reinforcement_lets_the_useful_memory_rise(memory: Any) -> None:
    """With reinforcement, negative evaluations sink the wrong memory until the right
    one is shown, and positive ones keep it first; without, nothing changes."""
    assert await _deploy_rounds(memory, reinforcement=False, rounds=6) == ["wrong"] * 6


async def test_reinforcement_scenario(memory: Any) -> None:
    """(continued) The same rounds with reinforcement on."""
    shown = await _deploy_rounds(memory, reinforcement=True, rounds=8)
    assert shown == ["wrong"] * 2 + ["right"] * 6


async def test_reinforcement_reports_its_factor_and_stays_bounded(memory: Any) -> None:
    """Hit.boosts["utility"] is 1 + 0.25 * value: within [0.75, 1.25]."""
    view = bind(memory, policy=Policy(reinforcement=True))
    liked = await view.remember("Sam likes green tea")
    await view.feedback(liked.id, 1.0)
    (hit,) = await view.recall("green tea")
    assert hit.boosts == {"utility": 1.25}
    await view.feedback(liked.id, -1.0)
    (hit,) = await view.recall("green tea")
    assert hit.boosts == {"utility": 0.75}


async def test_reinforcement_never_admits_what_recall_would_not(memory: Any) -> None:
    """A much-liked memory of another scope, one that fails the filter, or one without
    evidence of relevance is never returned."""
    kim = bind(memory, KIM, policy=Policy(reinforcement=True))
    sam = bind(memory, policy=Policy(reinforcement=True))
    elsewhere = await kim.remember("green tea is the best drink")
    await kim.feedback(elsewhere.id, 1.0)
    filtered = await sam.remember("green tea from the shop", metadata={"src": "ads"})
    unrelated = await sam.remember("Sam plays the cello")
    for record in (filtered, unrelated):
        await sam.feedback(record.id, 1.0)
    await sam.remember("green tea in the morning")
    hits = await sam.recall("green tea", top_k=10, filter={"metadata": {"src": {"$ne": "ads"}}})
    assert await texts(hits) == ["green tea in the morning"]


# -- forgetting ----------------------------------------------------------------------------


async def test_an_unused_memory_fades_but_get_still_returns_it(
    memory: Any, clock: ManualClock
) -> None:
    """Retention halves every half_life (importance 0.5); below suppress_below a memory
    leaves recall and stays readable by id."""
    view = bind(memory, policy=Policy(forgetting=Forgetting(half_life=DAY)))
    record = await view.remember("Sam's parking spot is B12")
    clock.advance(days=1)
    (hit,) = await view.recall("parking spot")
    assert hit.retention == 0.5
    clock.advance(days=4)  # retention 1/32 < 0.05
    assert len(await view.recall("parking spot")) == 0
    assert (await view.get(record.id)).text == "Sam's parking spot is B12"


async def test_importance_and_utility_lengthen_retention(memory: Any, clock: ManualClock) -> None:
    """half_life * (0.5 + importance), times 2 ** value with reinforcement; a positive
    evaluation restarts the clock."""
    forgetting = Forgetting(half_life=DAY)
    view = bind(memory, policy=Policy(forgetting=forgetting, reinforcement=True))
    important = await view.remember("the vault code changes monthly", importance=1.0)
    liked = await view.remember("the vault opens at nine")
    await view.feedback(liked.id, 1.0)
    clock.advance(days=3)
    found = {hit.memory.id: hit.retention for hit in await view.recall("vault", top_k=5)}
    assert found[important.id] == pytest.approx(0.5 ** (3 / 1.5))
    # The feedback reinforced it at remember time: 2 ** 1 doubles the half-life.
    assert found[liked.id] == pytest.approx(0.5 ** (3 / 2))


# -- expiry --------------------------------------------------------------------------------


async def test_ttl_and_purge_expired(memory: Any, clock: ManualClock) -> None:
    """ttl= (on a bound view and on Memory.remember) sets expires_at from the clock; an
    expired memory is gone from get and recall, and purge_expired() deletes it for good."""
    view = bind(memory)
    record = await view.remember("the door code is 4411", ttl=60)
    assert record.expires_at == clock.now + timedelta(seconds=60)
    await view.remember("the door is blue", ttl=timedelta(hours=1))
    with pytest.raises(ValidationError, match="not both"):
        await view.remember("x", ttl=5, expires_at=clock.now + DAY)
    with pytest.raises(ValidationError, match="ttl"):
        await view.remember("x", ttl=-5)
    direct = await memory.remember("the gate code is 9", SAM, ttl=timedelta(seconds=30))
    assert direct.expires_at == clock.now + timedelta(seconds=30)
    clock.advance(seconds=61)
    assert await view.get(record.id) is None
    assert await texts(await view.recall("door")) == ["the door is blue"]
    assert await memory.purge_expired() == 2  # the door code and the gate code
    assert await memory.purge_expired() == 0
    assert (await memory.status()).expired == 0


# -- capacity ----------------------------------------------------------------------------


async def test_a_full_scope_drops_its_oldest_in_the_same_write(
    memory: Any, clock: ManualClock
) -> None:
    """With max_items, a write beyond the capacity drops the oldest memories of the
    scope it writes to, atomically, and reports how many; other scopes are untouched."""
    view = bind(memory, session="s1", policy=Policy(max_items=2))
    kim = await memory.remember("Kim's note", KIM)
    notes = []
    for n in range(3):
        notes.append(await view.remember(f"note {n}"))
        clock.advance(seconds=1)
    assert [note.dropped for note in notes] == [0, 0, 1]
    assert await view.get(notes[0].id) is None
    private = await view.remember("a session note", durability="session")
    assert private.dropped == 0  # the session's scope has its own capacity
    assert [r.text for r in await memory.list(SAM)] == ["note 2", "note 1"]
    assert await memory.get(kim.id) is not None
    assert notes[2] == await view.get(notes[2].id)  # a Remembered equals its record


async def test_with_reinforcement_capacity_drops_the_least_useful(
    memory: Any, clock: ManualClock
) -> None:
    """With reinforcement, the least useful memory goes first, whatever its age."""
    view = bind(memory, policy=Policy(max_items=2, reinforcement=True))
    useful = await view.remember("the oldest, and useful")
    clock.advance(seconds=1)
    useless = await view.remember("misleading")
    await view.feedback(useful.id, 1.0)
    await view.feedback(useless.id, -1.0)
    clock.advance(seconds=1)
    assert (await view.remember("the newest")).dropped == 1
    assert await view.get(useless.id) is None
    assert await view.get(useful.id) is not None


# -- labels --------------------------------------------------------------------------------


async def test_labels_are_normalised(memory: Any) -> None:
    """Case and whitespace are folded and duplicates merged."""
    view = bind(memory)
    record = await view.remember("x", labels={" Topic ": ["Deploys", "deploys ", "Ops  Team"]})
    assert record.labels == {"topic": ["deploys", "ops team"]}


async def test_label_rules_refuse_what_they_do_not_allow(memory: Any) -> None:
    """A label outside the allowed names or values, or too many values, is refused with
    a message naming it; nothing is written."""
    rules = LabelRules(allowed={"topic": ["food", "work"], "mood": []}, max_per_key=2)
    view = bind(memory, policy=Policy(label_rules=rules))
    for labels, match in [
        ({"colour": ["red"]}, "'colour' is not allowed"),
        ({"topic": ["sport"]}, "'sport' is not allowed"),
        ({"mood": ["a", "b", "c"]}, "at most 2"),
    ]:
        with pytest.raises(ValidationError, match=match):
            await view.remember("x", labels=labels)
    assert await memory.list_scopes() == []
    assert (await view.remember("x", labels={"Topic": ["Food"]})).labels == {"topic": ["food"]}


async def test_a_labeler_fills_labels_within_the_rules(memory: Any) -> None:
    """The labeler's labels fill names not given, filtered by the rules; given names win."""

    def labeler(text: str) -> dict[str, list[str]]:
        return {"topic": ["Food", "sport"], "colour": ["red"], "mood": ["a", "b", "c"]}

    rules = LabelRules(allowed={"topic": ["food"], "mood": []}, max_per_key=2)
    view = bind(memory, policy=Policy(label_rules=rules, labeler=labeler))
    record = await view.remember("Sam had pasta", labels={"mood": ["happy"]})
    assert record.labels == {"mood": ["happy"], "topic": ["food"]}


@pytest.mark.parametrize("failure", ["raises", "garbage", "slow", "overflowing"])
async def test_a_failing_labeler_never_fails_the_write(memory: Any, failure: str) -> None:
    """A labeler that raises, answers nonsense, (async) times out, or proposes more
    labels than the limits allow adds no labels."""
    import asyncio

    async def slow(text: str) -> dict[str, list[str]]:
        await asyncio.sleep(5)
        return {"topic": ["late"]}

    def raises(text: str) -> dict[str, list[str]]:
        raise RuntimeError("the labeling model is down")

    labelers = {
        "raises": raises,
        "garbage": lambda text: 42,
        "slow": slow,
        "overflowing": lambda text: {f"key{n}": ["a", "b"] for n in range(100)},
    }
    policy = Policy(labeler=labelers[failure], labeler_timeout=0.05)
    record = await bind(memory, policy=policy).remember("Sam had pasta")
    assert record.labels == {}
    assert (await memory.get(record.id)).text == "Sam had pasta"


# -- diversity and recency -----------------------------------------------------------------


async def test_diversity_spreads_the_hits(memory: Any) -> None:
    """With diversity, a near-duplicate of the first hit gives way to a different one."""
    plain, diverse = bind(memory), bind(memory, policy=Policy(diversity=0.3))
    await plain.remember("deploy window Tuesday afternoon for the api")
    await plain.remember("deploy window Tuesday afternoon for the api service")
    await plain.remember("the deploy checklist lives in the wiki")
    top = await texts(await plain.recall("deploy window Tuesday api", top_k=2))
    assert top[1] == "deploy window Tuesday afternoon for the api service"
    spread = await texts(await diverse.recall("deploy window Tuesday api", top_k=2))
    assert spread[1] == "the deploy checklist lives in the wiki"


async def test_recency_boosts_recent_memories_boundedly(memory: Any, clock: ManualClock) -> None:
    """A recency half-life gives recent memories a factor in [1, 1 + recency_weight]."""
    view = bind(memory, policy=Policy(recency_half_life=DAY, recency_weight=0.2))
    await view.remember("standup is at nine")
    clock.advance(days=1)
    (hit,) = await view.recall("standup")
    assert hit.boosts == {"recency": pytest.approx(1.1)}


async def test_policy_needs_a_policy_store_for_complete(make_memory: Any) -> None:
    """complete() and feedback() on a store without supports_policy is a
    ConfigurationError; recall still works and records nothing."""
    from fakes import CountingEmbedder

    from engramdb import InMemoryStore, Memory, StoreCapabilities

    class Plain(InMemoryStore):
        capabilities = StoreCapabilities()

    view = Memory(Plain(), CountingEmbedder()).bind(SAM)
    record = view.remember("Sam prefers tea")
    hits = view.recall("tea")
    with pytest.raises(ConfigurationError, match="supports_policy"):
        view.complete(hits.selection_id, 1.0)
    with pytest.raises(ConfigurationError, match="supports_policy"):
        view.feedback(record.id, 1.0)
    assert view.get(record.id).utility is None
