"""The memory contract: every store, sync and async, behaves exactly like this."""

from __future__ import annotations

import hashlib
import random
import sys
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from itertools import pairwise
from typing import Any

import pytest
from fakes import (
    BrokenEmbedder,
    CountingEmbedder,
    ForgettingEmbedder,
    LearningEmbedder,
    ManualClock,
    SpreadEmbedder,
)

from engramdb import (
    ConflictError,
    HashEmbedder,
    IngestError,
    NotFoundError,
    ProviderError,
    ScopePrefix,
    StoreError,
    ValidationError,
)
from engramdb.store import quantised

SAM = ("acme", "user", "sam")
KIM = ("acme", "user", "kim")
ALEX = ("acme", "user", "alex")

FACTS = [
    "Sam is vegetarian and never eats meat",
    "Sam's favourite colour is green",
    "The office wifi password rotates every Monday",
    "Sam plays the cello in a local orchestra",
]


async def remember_facts(memory: Any, scope: tuple[str, ...] = SAM) -> list[Any]:
    return [await memory.remember(text, scope=scope) for text in FACTS]


async def snapshot(memory: Any, *scopes: tuple[str, ...]) -> list[Any]:
    """Everything observable about ``scopes`` (to prove a failed call changed nothing)."""
    status = await memory.status()
    listed = [await memory.list(scope, limit=100) for scope in scopes]
    return [status.items, status.vectors, status.pending, listed]


async def test_remember_then_recall_round_trip(memory: Any) -> None:
    """A remembered text comes back from recall with its record intact."""
    record = await memory.remember(
        "Sam is vegetarian", scope=SAM, metadata={"src": "chat"}, labels={"topic": ["food"]}
    )
    hits = await memory.recall("vegetarian", scopes=[SAM], top_k=5)
    assert [hit.memory.id for hit in hits] == [record.id]
    assert hits[0].memory == record
    assert hits.status == "used"
    assert record.metadata == {"src": "chat"}
    assert record.labels == {"topic": ["food"]}
    assert record.revision == 1
    assert record.content_sha256 == hashlib.sha256(b"Sam is vegetarian").hexdigest()


async def test_related_item_ranks_first(memory: Any) -> None:
    """The memory sharing the query's words ranks first in every mode."""
    records = await remember_facts(memory)
    for mode in ("hybrid", "vector", "lexical"):
        hits = await memory.recall("what does Sam eat? is he vegetarian", scopes=[SAM], mode=mode)
        assert hits[0].memory.id == records[0].id, mode


async def test_the_first_hits_do_not_depend_on_top_k(memory: Any) -> None:
    """A hybrid recall fuses each leg's best 100 candidates whatever ``top_k``, and a
    recall in one mode asks its leg for ``top_k`` from a search that does the work of
    100: the first k hits of a recall are the first k of a larger one (up to 100), in
    every mode."""
    await memory.remember_many(
        {"text": f"note {n}: Sam {'likes' if n % 3 else 'dislikes'} tea number {n % 7}",
         "scope": SAM}
        for n in range(150)
    )  # fmt: skip
    for mode in ("hybrid", "vector", "lexical"):
        for fusion in ("convex", "rrf"):
            wide = await memory.recall(
                "does Sam like tea 3", scopes=[SAM], mode=mode, fusion=fusion, top_k=100
            )
            for k in (1, 10, 50):
                narrow = await memory.recall(
                    "does Sam like tea 3", scopes=[SAM], mode=mode, fusion=fusion, top_k=k
                )
                assert [h.memory.id for h in narrow] == [h.memory.id for h in wide][:k]
                assert [h.score for h in narrow] == [h.score for h in wide][:k]


async def test_equal_scores_come_newest_first_within_one_batch(memory: Any) -> None:
    """Identical texts (stored as copies: dedupe=False) score exactly alike; they come
    back newest first, as list() shows them: the reverse of the order remember_many was
    given them (ids of one batch ascend in that order), every time."""
    texts = ["Sam plays the cello"] * 3 + ["cello lessons at school on Tuesdays"]
    records = await memory.remember_many(({"text": t, "scope": SAM} for t in texts), dedupe=False)
    newest_first = [r.id for r in reversed(records[:3])]
    for mode in ("hybrid", "vector", "lexical"):
        hits = await memory.recall("Sam cello", scopes=[SAM], mode=mode)
        assert [h.memory.id for h in hits[:3]] == newest_first, mode


async def test_writes_within_one_millisecond_come_back_newest_first_every_time(
    memory: Any,
) -> None:
    """Regression (issue 26, seed 000_49be2a30366cbb0b): on a fixed clock, identical
    texts remembered one call after another (dedupe=False) within one millisecond score
    exactly alike and come back newest first, the last written first, in all three
    modes: 20 runs out of 20 (before, ties came oldest first and only 4-7 of 20 runs
    kept the order of writes within a millisecond)."""
    newest_first_runs = 0
    for run in range(20):
        scope = (*SAM, f"run{run}")
        written = [
            (await memory.remember("Kim bakes sourdough bread", scope, dedupe=False)).id
            for _ in range(4)
        ]
        answers = [
            [h.memory.id for h in await memory.recall("sourdough bread", [scope], mode=mode)]
            for mode in ("hybrid", "vector", "lexical")
        ]
        newest_first_runs += all(answer == written[::-1] for answer in answers)
    assert newest_first_runs == 20


async def test_stop_words_of_a_query_do_not_rank(memory: Any) -> None:
    """The lexical leg leaves a query's English stop words out: a memory full of "what",
    "did", "the" does not outrank one with the query's content words. A query of only
    stop words still searches for them."""
    about = await memory.remember("Sam ate lentil soup for lunch", scope=SAM)
    noise = await memory.remember("what did the one over there do to the other", scope=SAM)
    hits = await memory.recall("What did Sam eat for the lunch?", scopes=[SAM], mode="lexical")
    assert [h.memory.id for h in hits] == [about.id]
    only = await memory.recall("what did the", scopes=[SAM], mode="lexical")
    assert [h.memory.id for h in only] == [noise.id]


async def test_hybrid_with_an_embedder_that_is_not_semantic_ranks_by_words(
    make_memory: Any,
) -> None:
    """With ``HashEmbedder`` (``semantic = False``) the vector leg weighs 0 by default:
    hybrid answers the lexical order, then the memories sharing no word with the query
    in the vector leg's order (for a query that names nobody: a name written with a
    capital letter adds its gain to the lexical hits that hold it, in hybrid mode
    only). Weights given explicitly still apply."""
    memory = make_memory(HashEmbedder(dimensions=64))
    texts = ["Sam is vegetarian", "vegetarian food", "Sam likes green tea", "tofu", "rice"]
    texts += ["bread", "soup", "pasta"]
    await memory.remember_many({"text": text, "scope": SAM} for text in texts)
    lexical = await memory.recall("sam vegetarian", scopes=[SAM], mode="lexical")
    hybrid = await memory.recall("sam vegetarian", scopes=[SAM])
    words = [h.memory.id for h in lexical]
    assert [h.memory.id for h in hybrid][: len(words)] == words
    assert all(h.vector_rank is not None for h in hybrid)  # the leg ran and is shown
    named = await memory.recall("Sam vegetarian", scopes=[SAM])
    assert [h.memory.text for h in named][:2] == ["Sam is vegetarian", "Sam likes green tea"]
    assert [h.memory.text for h in lexical][:2] == ["Sam is vegetarian", "vegetarian food"]
    weighted = await memory.recall(
        "Sam vegetarian", scopes=[SAM], weights={"vector": 1.0, "lexical": 0.0}
    )
    vector = await memory.recall("Sam vegetarian", scopes=[SAM], mode="vector")
    assert [h.memory.id for h in weighted] == [h.memory.id for h in vector]


async def test_scope_isolation_with_identical_text(memory: Any) -> None:
    """A recall in one scope never returns another scope's item, even a perfect match."""
    mine = await memory.remember("cello lessons on Tuesday", scope=SAM)
    theirs = await memory.remember("Sam is vegetarian", scope=ALEX)
    await memory.remember("Sam is vegetarian", scope=("acme", "user"))  # a prefix scope
    await memory.remember("Sam is vegetarian", scope=(*SAM, "child"))  # a longer scope
    for mode in ("hybrid", "vector", "lexical"):
        hits = await memory.recall("Sam is vegetarian", scopes=[SAM], mode=mode)
        assert {hit.memory.id for hit in hits} <= {mine.id}, mode
        assert all(hit.memory.scope == SAM for hit in hits)
    both = await memory.recall("Sam is vegetarian", scopes=[SAM, ALEX], mode="lexical")
    assert {hit.memory.id for hit in both} == {theirs.id}


async def test_recall_over_several_scopes_merges_them(memory: Any) -> None:
    """Naming two scopes searches exactly those two."""
    a = await memory.remember("green tea in the morning", scope=SAM)
    b = await memory.remember("green tea at night", scope=ALEX)
    hits = await memory.recall("green tea", scopes=[SAM, ALEX], mode="vector")
    assert {hit.memory.id for hit in hits} == {a.id, b.id}


async def test_update_makes_old_text_unfindable_and_bumps_revision(
    memory: Any, clock: ManualClock
) -> None:
    """After update, recall finds the new text only; revision and updated_at move on."""
    record = await memory.remember("Sam likes pizza", scope=SAM)
    clock.advance(seconds=5)
    updated = await memory.update(record.id, text="Sam likes sushi")
    assert updated.revision == 2
    assert updated.created_at == record.created_at
    assert updated.updated_at == record.updated_at + timedelta(seconds=5)
    assert await memory.get(record.id) == updated
    for mode in ("hybrid", "vector", "lexical"):
        hits = await memory.recall("pizza", scopes=[SAM], mode=mode, min_similarity=0.3)
        assert [h.memory.text for h in hits if "pizza" in h.memory.text] == [], mode
    hits = await memory.recall("sushi", scopes=[SAM])
    assert hits[0].memory.text == "Sam likes sushi"


async def test_stale_vector_is_never_used_after_update(memory: Any) -> None:
    """A hit's similarity is that of its current text, and its evidence names the new hash."""
    record = await memory.remember("the cat sleeps on the red sofa", scope=SAM)
    await memory.update(record.id, text="quarterly revenue grew by ten percent")
    hits = await memory.recall(
        "the cat sleeps on the red sofa", scopes=[SAM], mode="vector", min_similarity=-1.0
    )
    expected = hashlib.sha256(b"quarterly revenue grew by ten percent").hexdigest()
    assert len(hits) == 1
    assert hits[0].evidence["content_sha256"] == expected
    assert hits[0].similarity is not None and hits[0].similarity < 0.5
    assert hits[0].evidence["revision"] == 2


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
async def test_recall_returns_nothing_without_evidence_of_relevance(memory: Any, mode: str) -> None:
    """The relevance floor: a memory that shares no term with the query and whose cosine
    is below ``min_similarity`` (0.01 by default) never fills a slot, whatever ``top_k``;
    ``min_similarity=-1.0`` lifts the floor of the vector leg."""
    await memory.remember("The team's deploy window is Tuesday afternoon", scope=SAM)
    await memory.remember("Sam's daughter Mia starts school in September", scope=SAM)
    hits = await memory.recall("deploy window", scopes=[SAM], top_k=5, mode=mode)
    assert [hit.memory.text for hit in hits] == ["The team's deploy window is Tuesday afternoon"]
    unfloored = await memory.recall(
        "deploy window", scopes=[SAM], top_k=5, mode="vector", min_similarity=-1.0
    )
    assert len(unfloored) == 2


async def test_update_of_metadata_keeps_text_and_vector(memory: Any, embedder: Any) -> None:
    """Changing only metadata embeds nothing and keeps the record findable."""
    record = await memory.remember("Sam plays chess", scope=SAM, metadata={"v": 1})
    before = len(embedder.embedded)
    updated = await memory.update(record.id, metadata={"v": 2})
    assert len(embedder.embedded) == before
    assert updated.metadata == {"v": 2} and updated.text == record.text
    hits = await memory.recall("chess", scopes=[SAM], mode="vector")
    assert hits[0].memory.metadata == {"v": 2}


async def test_update_unknown_id_raises_not_found(memory: Any) -> None:
    """update() of an id that does not exist raises NotFoundError (a KeyError)."""
    with pytest.raises(NotFoundError, match="no memory"):
        await memory.update("nope", text="x")
    with pytest.raises(KeyError):
        await memory.update("nope", text="x")


async def test_forget_and_forget_scope(memory: Any) -> None:
    """Forgotten memories never come back, in any mode; other scopes keep theirs."""
    records = await remember_facts(memory)
    kept = await memory.remember("Sam is vegetarian and never eats meat", scope=ALEX)
    assert await memory.forget(records[0].id) is True
    assert await memory.forget(records[0].id) is False
    assert await memory.get(records[0].id) is None
    for mode in ("hybrid", "vector", "lexical"):
        hits = await memory.recall("vegetarian meat", scopes=[SAM], mode=mode)
        assert records[0].id not in {h.memory.id for h in hits}
    assert await memory.forget_scope(SAM) == 3
    for mode in ("hybrid", "vector", "lexical"):
        assert list(await memory.recall("Sam", scopes=[SAM], mode=mode)) == []
    assert await memory.list(SAM) == []
    hits = await memory.recall("vegetarian", scopes=[ALEX])
    assert [h.memory.id for h in hits] == [kept.id]


async def test_embedder_switch_leaves_items_pending_until_reindex(
    make_memory: Any, memory: Any
) -> None:
    """After a model switch items are listed and lexically found but not vector-scored."""
    records = await remember_facts(memory)
    await memory.remember(FACTS[0], scope=ALEX)  # same text: one vector serves both
    switched = make_memory(CountingEmbedder(dimensions=128))
    status = await switched.status()
    assert (status.pending, status.semantic) == (5, "pending")
    assert status.active_space == "hash/bow@128"
    assert len(await switched.list(SAM)) == 4
    lexical = await switched.recall("vegetarian", scopes=[SAM], mode="lexical")
    assert lexical[0].memory.id == records[0].id
    vector = await switched.recall("vegetarian", scopes=[SAM], mode="vector")
    assert list(vector) == []
    hybrid = await switched.recall("vegetarian", scopes=[SAM])
    assert hybrid[0].similarity is None and hybrid[0].evidence["space_id"] is None

    progress: list[int] = []
    assert await switched.reindex(batch_size=3, progress=progress.append) == 4
    assert progress == [3, 4]
    assert await switched.reindex() == 0  # idempotent
    status = await switched.status()
    assert (status.pending, status.semantic) == (0, "ready")
    assert set(status.spaces) >= {"hash/bow@128", "hash/bow@64"}
    vector = await switched.recall("vegetarian", scopes=[SAM], mode="vector")
    assert vector[0].memory.id == records[0].id
    assert vector[0].evidence["space_id"] == "hash/bow@128"


async def test_writes_within_one_millisecond_list_newest_first(memory: Any) -> None:
    """The clock does not move: every write falls in one millisecond, and the list still
    shows them newest first, in the reverse of the order they were written."""
    written = [(await memory.remember(f"note number {i}", scope=SAM)).id for i in range(20)]
    listed = [record.id for record in await memory.list(SAM, limit=20)]
    assert listed == written[::-1]


async def test_evidence_never_dates_another_scopes_copy_of_a_text(
    memory: Any, clock: ManualClock
) -> None:
    """The vector of a text is shared by every scope that holds it; a hit's
    ``embedded_at`` is never earlier than the reader's own memory, so it cannot tell when
    another scope stored the same text."""
    await memory.remember("the vault PIN is 4921", scope=KIM)
    clock.advance(days=3)
    mine = await memory.remember("the vault PIN is 4921", scope=SAM)
    (hit,) = await memory.recall("vault PIN", scopes=[SAM])
    assert hit.memory.id == mine.id
    assert hit.evidence["embedded_at"] == mine.created_at


async def test_provenance_of_a_hit(memory: Any, clock: ManualClock) -> None:
    """Every hit carries the evidence of where it came from."""
    record = await memory.remember("Sam is vegetarian", scope=SAM)
    hits = await memory.recall("vegetarian", scopes=[SAM])
    hit = hits[0]
    shares = {key: hit.evidence.get(key) for key in ("vector_share", "lexical_share")}
    assert hit.evidence == {
        "id": record.id,
        "scope": SAM,
        "revision": 1,
        "content_sha256": record.content_sha256,
        "space_id": "hash/bow@64",
        "embedded_at": clock.now,
        **shares,
        "rerank_score": None,  # no rerank stage ran
    }
    assert hit.vector_rank == 1 and hit.lexical_rank == 1
    doc, query = HashEmbedder(dimensions=64).embed(["Sam is vegetarian", "vegetarian"])
    assert hit.similarity == pytest.approx(
        sum(a * b for a, b in zip(doc, query, strict=True)), abs=1e-6
    )
    assert hit.bm25 is not None and hit.bm25 > 0
    # The fused score is each leg's share on its own scale, never stretched to 1: the
    # cosine above the leg's noise floor (one candidate of 100: a hundredth of its own
    # cosine) weighted 0.35, BM25 over the query's ceiling weighted 0.65.
    floor = hit.similarity / 100
    expected = 0.35 * (hit.similarity - floor) / (1 - floor)
    assert shares["vector_share"] == pytest.approx(expected, abs=1e-9)
    assert shares["lexical_share"] is not None and 0 < shares["lexical_share"] <= 0.65
    assert hit.score == pytest.approx(shares["vector_share"] + shares["lexical_share"], abs=2e-9)
    assert hits.selection_id and hits.mode == "hybrid"
    (by_rank,) = await memory.recall("vegetarian", scopes=[SAM], fusion="rrf")
    assert by_rank.score == pytest.approx(2 / 61)


async def test_degraded_recall_when_the_query_cannot_be_embedded(make_memory: Any) -> None:
    """A failing query embedding answers lexically, marked degraded with the error class."""
    embedder = CountingEmbedder(fail_queries=True)
    memory = make_memory(embedder)
    record = await memory.remember("Sam is vegetarian", scope=SAM)
    hits = await memory.recall("vegetarian", scopes=[SAM])
    assert (hits.status, hits.error) == ("degraded", "ProviderError")
    assert [h.memory.id for h in hits] == [record.id]
    assert hits[0].similarity is None
    strict = make_memory(embedder, on_embed_error="raise")
    with pytest.raises(ProviderError):
        await strict.recall("vegetarian", scopes=[SAM])


class _BuggyEmbedder(CountingEmbedder):
    """An embedder with a bug: its query path raises a plain RuntimeError."""

    def embed(self, texts: Any, kind: Any = "document") -> Any:
        if kind == "query":
            raise RuntimeError("a bug in a custom embedder")
        return super().embed(texts, kind)


async def test_only_provider_errors_degrade_a_recall(make_memory: Any) -> None:
    """A recall degrades to the lexical leg when the provider fails (ProviderError), but
    a bug in an embedder (any other exception) propagates: it is never hidden."""
    memory = make_memory(_BuggyEmbedder())
    await memory.remember("Sam is vegetarian", scope=SAM)
    with pytest.raises(RuntimeError, match="a bug in a custom embedder"):
        await memory.recall("vegetarian", scopes=[SAM])
    lexical = await memory.recall("vegetarian", scopes=[SAM], mode="lexical")
    assert lexical.status == "lexical_only" and len(lexical) == 1


async def test_lexical_mode_reports_lexical_only(memory: Any, embedder: Any) -> None:
    """mode='lexical' never embeds the query and says so in status."""
    await memory.remember("Sam is vegetarian", scope=SAM)
    before = len(embedder.embedded)
    hits = await memory.recall("vegetarian", scopes=[SAM], mode="lexical")
    assert hits.status == "lexical_only" and len(hits) == 1
    assert len(embedder.embedded) == before


async def test_expired_items_are_hidden(memory: Any, clock: ManualClock) -> None:
    """An item past expires_at is invisible to get, list and every recall mode."""
    soon = clock.now + timedelta(minutes=5)
    record = await memory.remember("temporary door code 4711", scope=SAM, expires_at=soon)
    other = await memory.remember("permanent door code policy", scope=SAM)
    assert await memory.get(record.id) == record
    clock.advance(minutes=5)
    assert await memory.get(record.id) is None
    assert [r.id for r in await memory.list(SAM)] == [other.id]
    for mode in ("hybrid", "vector", "lexical"):
        hits = await memory.recall("temporary door code", scopes=[SAM], mode=mode)
        assert [h.memory.id for h in hits] == [other.id], mode
    status = await memory.status()
    assert (status.items, status.expired) == (1, 1)
    with pytest.raises(NotFoundError):
        await memory.update(record.id, text="revived")


async def test_list_is_newest_first_with_a_cursor(memory: Any, clock: ManualClock) -> None:
    """list() pages newest first; before= continues after the given id."""
    ids = []
    for n in range(5):
        ids.append((await memory.remember(f"note number {n}", scope=SAM)).id)
        clock.advance(seconds=1)
    page = await memory.list(SAM, limit=2)
    assert [r.id for r in page] == ids[::-1][:2]
    page = await memory.list(SAM, limit=10, before=page[-1].id)
    assert [r.id for r in page] == ids[::-1][2:]


async def test_filters_on_metadata_and_labels(memory: Any) -> None:
    """Filters apply before ranking in both legs."""
    a = await memory.remember(
        "green tea", scope=SAM, metadata={"src": "chat", "n": 1}, labels={"t": ["drink"]}
    )
    b = await memory.remember("green tea leaves", scope=SAM, metadata={"src": "email", "n": 2})
    c = await memory.remember("green tea ok", scope=SAM, metadata={"ok": True, "n": 1.0})
    for mode in ("hybrid", "vector", "lexical"):

        def ids(hits: Any) -> set[str]:
            return {h.memory.id for h in hits}

        hits = await memory.recall(
            "green tea", scopes=[SAM], mode=mode, filter={"metadata": {"src": "chat"}}
        )
        assert ids(hits) == {a.id}, mode
        hits = await memory.recall(
            "green tea", scopes=[SAM], mode=mode, filter={"labels": {"t": "drink"}}
        )
        assert ids(hits) == {a.id}, mode
        hits = await memory.recall(
            "green tea", scopes=[SAM], mode=mode, filter={"metadata": {"src": {"$eq": "email"}}}
        )
        assert ids(hits) == {b.id}, mode
        hits = await memory.recall(
            "green tea", scopes=[SAM], mode=mode, filter={"metadata": {"ok": True}}
        )
        assert ids(hits) == {c.id}, mode
        hits = await memory.recall(
            "green tea", scopes=[SAM], mode=mode, filter={"metadata": {"n": 1}}
        )
        assert ids(hits) == {a.id, c.id}, mode


async def test_remember_many_embeds_each_distinct_text_once_per_scope(
    memory: Any, embedder: Any
) -> None:
    """remember_many embeds each distinct text once; copies (dedupe=False) share it; a
    text another scope holds is embedded again (a scope's embedding calls never tell it
    what another scope holds); a text its own scope holds is not."""
    items = [{"text": f"fact {n % 10}", "scope": SAM} for n in range(30)]
    records = await memory.remember_many(items, dedupe=False)
    assert len(records) == 30 and len({r.id for r in records}) == 30
    assert sorted(embedder.embedded) == sorted({f"fact {n}" for n in range(10)})
    again = await memory.remember_many([{"text": "fact 3", "scope": ALEX}])
    assert embedder.embedded[10:] == ["fact 3"] and again[0].scope == ALEX
    await memory.remember_many([{"text": "fact 3", "scope": ALEX}], dedupe=False)
    await memory.remember("fact 4", scope=SAM, dedupe=False)
    assert len(embedder.embedded) == 11
    assert (await memory.status()).items == 33


async def test_maintain_can_prune_the_spaces_nothing_embeds_in_any_more(
    make_memory: Any,
) -> None:
    """After a model switch, maintain() embeds the texts in the new space; with
    prune_spaces=True (and nothing pending) it drops the old space's vectors, not before."""
    old = make_memory(HashEmbedder(dimensions=32))
    await old.remember_many({"text": t, "scope": SAM} for t in ("Sam likes tea", "Sam naps"))
    new = make_memory(HashEmbedder(dimensions=16))
    kept = await new.maintain(max_items=1, prune_spaces=True)  # one of two: not yet
    assert (kept.embedded, kept.pending, kept.pruned) == (1, 1, 0)
    done = await new.maintain(prune_spaces=True)
    assert (done.embedded, done.pending, done.pruned) == (1, 0, 2)
    status = await new.status()
    assert status.spaces == ("hash/bow@16",) and status.embedded == {"hash/bow@16": 2}


async def test_identical_text_in_a_scope_is_stored_once(memory: Any, embedder: Any) -> None:
    """By default a text its scope already holds (or an earlier item of the same call
    holds) answers the existing record and writes nothing; an explicit id, another scope
    or dedupe=False store it again. The other scope embeds it itself; the scope that holds
    it reuses its vector."""
    first = await memory.remember("Sam likes tea", scope=SAM, metadata={"v": 1})
    assert await memory.remember("Sam likes tea", scope=SAM, metadata={"v": 2}) == first
    items = [{"text": t, "scope": SAM} for t in ("a fact", "Sam likes tea", "a fact", "new")]
    records = await memory.remember_many(items)
    assert records[1] == first and records[0] == records[2] and records[3] != records[0]
    assert (await memory.status()).items == 3
    assert (await memory.remember("Sam likes tea", scope=ALEX)).scope == ALEX
    assert (await memory.remember("Sam likes tea", scope=SAM, dedupe=False)) != first
    assert (await memory.remember("Sam likes tea", scope=SAM, id="pinned")).id == "pinned"
    assert (await memory.status()).items == 6
    assert embedder.embedded.count("Sam likes tea") == 2


async def test_a_bulk_import_keeps_its_batches_and_reruns_without_duplicates(
    memory: Any, make_memory: Any
) -> None:
    """remember_many commits batch by batch with progress; when the provider fails, the
    batches stored stay (IngestError.committed, .index), and the same import run again
    completes without storing anything twice."""
    items = [{"text": f"imported fact number {n}", "scope": SAM} for n in range(50)]

    class FailsAtBatch5(CountingEmbedder):
        def embed(self, texts: list[str], kind: str = "document") -> Any:
            if any(item["text"] in texts for item in items[40:]):
                raise ProviderError("the provider is down", provider="fake")
            return super().embed(texts, kind)

    flaky = make_memory(FailsAtBatch5())
    seen: list[tuple[int, int]] = []
    with pytest.raises(IngestError) as caught:
        await flaky.remember_many(items, batch_size=10, progress=lambda *a: seen.append(a))
    assert caught.value.index == 40 and len(caught.value.committed) == 40
    assert seen == [(10, 50), (20, 50), (30, 50), (40, 50)]
    assert isinstance(caught.value.__cause__, ProviderError)
    assert (await memory.status()).items == 40
    done = await memory.remember_many(items, batch_size=10)
    assert [r.id for r in done[:40]] == [r.id for r in caught.value.committed]
    assert (await memory.status()).items == 50


async def test_deferred_memories_are_found_by_words_then_embedded_by_maintain(
    make_memory: Any, embedder: Any, clock: ManualClock
) -> None:
    """defer_embedding stores at once without calling the embedder: the lexical leg finds
    the memory, status() reports it pending; maintain() embeds it in bounded passes and
    purges expired memories."""
    memory = make_memory(embedder, defer_embedding=True)
    texts = [f"deferred note {n} about deploys" for n in range(5)]
    await memory.remember_many({"text": t, "scope": SAM} for t in texts)
    assert embedder.embedded == []
    await memory.remember("a note that expires", scope=SAM, ttl=60, defer_embedding=False)
    assert embedder.embedded == ["a note that expires"]
    assert (await memory.status()).pending == 5
    hits = await memory.recall("deploys", scopes=[SAM], top_k=10)
    assert len(hits) == 5  # found by words
    assert (hits.status, hits.coverage) == ("partial", 1 / 6)  # only one has a vector
    clock.advance(seconds=61)
    first = await memory.maintain(max_items=3, repair_after="7f")
    assert (first.embedded, first.purged, first.pending) == (3, 1, 2)
    # Its whole budget went to embedding: no repair scan, which goes on from "7f" later.
    assert first.repair_after == "7f"
    second = await memory.maintain(max_items=3)
    assert (second.embedded, second.pending) == (2, 0)
    assert second.repair_after != ""  # this pass scanned: 3 of the 6 vectors
    assert (await memory.status()).pending == 0
    hits = await memory.recall("deploys", scopes=[SAM], top_k=10)
    assert (hits.status, hits.coverage) == ("used", 1.0)
    assert (await memory.status()).embedded == {embedder.space.id: 5}
    documents = [text for text in embedder.embedded if text != "deploys"]  # not the query
    assert sorted(documents) == sorted([*texts, "a note that expires"])


async def test_remember_with_an_existing_id_replaces_it(memory: Any) -> None:
    """remember(id=...) of an existing id is an update: revision + 1, same created_at."""
    first = await memory.remember("v1", scope=SAM, id="pref-1")
    second = await memory.remember("v2", scope=SAM, id="pref-1")
    assert (second.revision, second.created_at) == (2, first.created_at)
    assert [r.text for r in await memory.list(SAM)] == ["v2"]
    with pytest.raises(ValidationError, match="already belongs"):
        await memory.remember("v3", scope=ALEX, id="pref-1")


async def test_identical_text_shares_one_vector(memory: Any, embedder: Any) -> None:
    """Vectors are content-addressed: the same text is stored as one vector per space.
    Each scope embeds it the first time it holds it (its embedding calls never depend
    on another scope's texts); after that, the scope reuses it."""
    await memory.remember("Sam is vegetarian", scope=SAM)
    await memory.remember("Sam is vegetarian", scope=ALEX)
    await memory.remember("Sam is vegetarian", scope=ALEX, dedupe=False)
    assert embedder.embedded == ["Sam is vegetarian"] * 2
    assert (await memory.status()).vectors == 1


async def test_a_forget_while_embedding_leaves_no_memory_without_its_vector(
    make_memory: Any,
) -> None:
    """remember_many reuses the vector of a text its scope already holds. If another
    writer forgets the last memory holding that text while the new texts are embedded,
    the vector is collected; remember_many notices and puts it again, so every memory it
    stored has its vector (none is left pending until a reindex)."""
    first = make_memory(CountingEmbedder())
    old = await first.remember("Sam is vegetarian", scope=SAM)
    forgetting = ForgettingEmbedder(first.store, old.id)
    racing = make_memory(forgetting)
    stored = await racing.remember_many(
        [
            {"text": "Sam is vegetarian", "scope": SAM},
            {"text": "Sam plays the cello", "scope": SAM},
        ],
        dedupe=False,
    )
    assert await first.get(old.id) is None  # the forget did happen in between
    assert forgetting.embedded == ["Sam plays the cello", "Sam is vegetarian"]  # put again
    assert (await first.status()).pending == 0
    hits = await racing.recall("Sam is vegetarian", scopes=[SAM], mode="vector", top_k=1)
    assert [hit.memory.id for hit in hits] == [stored[0].id]


@pytest.mark.skipif(sys.platform == "emscripten", reason="deep recursion overflows Pyodide's stack")
async def test_metadata_deeper_than_the_interpreter_can_encode_is_a_validation_error(
    memory: Any,
) -> None:
    """Metadata nested far deeper than the limit (where ``json.dumps`` itself gives up
    with RecursionError) is refused with the same ValidationError as any too-deep value."""
    nested: dict[str, Any] = {}
    cursor = nested
    for _ in range(5000):
        cursor["a"] = {}
        cursor = cursor["a"]
    with pytest.raises(ValidationError, match="nested deeper than 32"):
        await memory.remember("x", scope=SAM, metadata=nested)


BAD_REMEMBER = [
    ({"text": ""}, "empty"),
    ({"text": "   \n"}, "empty"),
    ({"text": "x" * (32 * 1024 + 1)}, "over the limit"),
    ({"text": 42}, "must be a string"),
    ({"text": "a\x00b"}, "NUL character \\(U\\+0000\\) at position 1"),
    ({"scope": ()}, "1 to 16 parts"),
    ({"scope": "acme"}, "tuple of strings"),
    ({"scope": ("acme", "")}, "non-empty string"),
    ({"scope": ("acme", 7)}, "non-empty string"),
    ({"scope": ("acme", "a\x00b")}, "control character"),
    ({"scope": ScopePrefix(("acme",))}, "tuple of strings"),
    ({"metadata": {"k\x00": 1}}, "NUL character"),
    ({"metadata": {"k": ["a", "b\x00"]}}, "NUL character"),
    (
        {"metadata": {"deep": __import__("functools").reduce(lambda v, _: [v], range(40), 1)}},
        "nested deeper than 32",
    ),
    ({"metadata": {"big": 2**63}}, "must fit 64 bits"),
    ({"metadata": {"huge": 10**5000}}, "store it as a string"),
    ({"labels": {"t": ["a\x00"]}}, "NUL character"),
    ({"metadata": ["not", "an", "object"]}, "JSON object"),
    ({"metadata": {"x": object()}}, "JSON-serialisable"),
    ({"metadata": {"x": "y" * 20_000}}, "over the limit"),
    ({"metadata": {"x": float("nan")}}, "JSON-serialisable"),
    ({"labels": {"t": [1]}}, "list of non-empty strings"),
    ({"importance": 1.5}, "0.0 to 1.0"),
    ({"expires_at": datetime(2030, 1, 1)}, "no timezone"),
    ({"expires_at": "tomorrow"}, "timezone-aware"),
    ({"id": ""}, "non-empty string"),
    # lone surrogates (json.loads accepts "\\ud800") cannot be stored as UTF-8
    ({"text": "half \ud800 a pair"}, "lone surrogate"),
    ({"scope": ("acme", "\udc80")}, "lone surrogate"),
    ({"metadata": {"k": "\ud800"}}, "lone surrogate"),
    ({"labels": {"t": ["\ud800"]}}, "lone surrogate"),
    ({"id": "x\ud800"}, "lone surrogate"),
]


@pytest.mark.parametrize(("change", "message"), BAD_REMEMBER)
async def test_bad_remember_input_changes_nothing(
    memory: Any, change: dict[str, Any], message: str
) -> None:
    """Each bad argument raises one clear ValidationError and stores nothing."""
    await memory.remember("an existing memory", scope=SAM)
    before = await snapshot(memory, SAM)
    arguments: dict[str, Any] = {"text": "valid text", "scope": SAM, **change}
    with pytest.raises(ValidationError, match=message):
        await memory.remember(arguments.pop("text"), **arguments)
    assert await snapshot(memory, SAM) == before


BAD_RECALL = [
    ({"query": ""}, "empty"),
    ({"scopes": []}, "empty"),
    ({"scopes": SAM}, "single scope"),
    ({"scopes": [()]}, "1 to 16 parts"),
    ({"top_k": 0}, "top_k"),
    ({"top_k": 1001}, "top_k"),
    ({"top_k": True}, "top_k"),
    ({"mode": "semantic"}, "mode"),
    ({"min_similarity": 2}, "min_similarity"),
    ({"filter": {"meta": {}}}, "unknown key"),
    ({"filter": {"metadata": {"a": {"$regex": "^x"}}}}, "unknown operator"),
    ({"filter": {"metadata": {"a": [1]}}}, "string, number or boolean"),
    ({"filter": "src=chat"}, "mapping"),
    ({"filter": {"metadata": {"n": 2**64}}}, "2\\*\\*53"),
    ({"filter": {"metadata": {"n": -(2**53)}}}, "2\\*\\*53"),
    ({"rrf_k": 0}, "rrf_k"),
    ({"fusion": "max"}, "fusion='max' is not supported"),
    ({"weights": {"vector": -1.0}}, "finite number >= 0"),
    ({"weights": {"semantic": 1.0}}, "semantic"),
    ({"exact": "yes"}, "exact"),
    ({"query": "tea \ud800"}, "lone surrogate"),
    ({"query": "tea\x00"}, "NUL character"),
    ({"filter": {"metadata": {"src": "\ud800"}}}, "lone surrogate"),
]


@pytest.mark.parametrize(("change", "message"), BAD_RECALL)
async def test_bad_recall_input_raises(
    memory: Any, embedder: Any, change: dict[str, Any], message: str
) -> None:
    """Each bad recall argument raises one clear ValidationError before any embedding."""
    await memory.remember("Sam is vegetarian", scope=SAM)
    arguments: dict[str, Any] = {"query": "vegetarian", "scopes": [SAM], **change}
    with pytest.raises(ValidationError, match=message):
        await memory.recall(arguments.pop("query"), **arguments)
    assert embedder.embedded == ["Sam is vegetarian"]


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("dimensions", ProviderError),
        ("nan", ProviderError),
        ("zero", ProviderError),
        ("count", ProviderError),
    ],
)
async def test_bad_vectors_from_the_embedder_store_nothing(
    make_memory: Any, memory: Any, fault: str, error: type[Exception]
) -> None:
    """An embedder's bad answer is the embedder's failure (ProviderError, not the caller's
    ValidationError), and neither item nor vector is kept."""
    await memory.remember("an existing memory", scope=SAM)
    before = await snapshot(memory, SAM)
    broken = make_memory(BrokenEmbedder(fault))
    with pytest.raises(error):
        await broken.remember_many([{"text": "one", "scope": SAM}, {"text": "two", "scope": SAM}])
    assert await snapshot(memory, SAM) == before


async def test_bad_remember_many_item_stores_none_of_the_batch(memory: Any) -> None:
    """One bad item in remember_many rejects the whole batch, naming its position."""
    with pytest.raises(ValidationError, match="item 1"):
        await memory.remember_many([{"text": "good", "scope": SAM}, {"text": "", "scope": SAM}])
    with pytest.raises(ValidationError, match="unknown keys"):
        await memory.remember_many([{"text": "good", "scope": SAM, "colour": "red"}])
    with pytest.raises(ValidationError, match="same id"):
        await memory.remember_many(
            [{"text": "a", "scope": SAM, "id": "x"}, {"text": "b", "scope": SAM, "id": "x"}]
        )
    assert await memory.list(SAM) == []


async def test_closed_store_raises_store_error(make_memory: Any) -> None:
    """After close, every call raises StoreError."""
    memory = make_memory(HashEmbedder(dimensions=16))
    await memory.remember("x", scope=SAM)
    await memory.aclose()
    with pytest.raises(StoreError, match="closed"):
        await memory.recall("x", scopes=[SAM])
    with pytest.raises(StoreError, match="closed"):
        await memory.remember("y", scope=SAM)


async def test_expires_at_must_be_aware_and_is_kept_to_the_millisecond(memory: Any) -> None:
    """expires_at round-trips as an aware UTC datetime."""
    when = datetime(2030, 5, 17, 8, 30, 15, 123000, tzinfo=UTC)
    record = await memory.remember("renew passport", scope=SAM, expires_at=when)
    assert (await memory.get(record.id)).expires_at == when


async def test_embedder_that_learns_its_dimensions_on_first_use(make_memory: Any) -> None:
    """An embedder whose space is known only after its first call still works."""
    memory = make_memory(LearningEmbedder())
    record = await memory.remember("Sam is vegetarian", scope=SAM)
    hits = await memory.recall("vegetarian", scopes=[SAM], mode="vector")
    assert [h.memory.id for h in hits] == [record.id]
    assert hits[0].evidence["space_id"] == "hash/bow@64"


async def test_a_learned_size_unlike_the_stored_space_of_its_model_stores_nothing(
    make_memory: Any,
) -> None:
    """An embedder that learns its dimensions from answers and answers another size than
    the space the store holds for its model raises ProviderError: no item, no vector, no
    new space (remember and maintain alike). Answers of the stored size work at once."""
    await make_memory(CountingEmbedder()).remember("Sam is vegetarian", scope=SAM)
    learner = LearningEmbedder()
    learner.inner = HashEmbedder(dimensions=8)  # a wrong answer
    memory = make_memory(learner)
    before = await snapshot(memory, SAM)
    with pytest.raises(ProviderError, match="holds hash/bow@64"):
        await memory.remember("Sam plays the cello", scope=SAM)
    await memory.remember("Sam plays the cello", scope=SAM, defer_embedding=True)
    with pytest.raises(ProviderError, match="holds hash/bow@64"):
        await memory.maintain()
    status = await memory.status()
    assert status.spaces == ("hash/bow@64",)
    assert (status.items, status.vectors) == (before[0] + 1, before[1])
    learner.inner = HashEmbedder(dimensions=64)  # the right size again
    assert (await memory.maintain()).pending == 0
    status = await memory.status()
    assert (status.spaces, status.vectors, status.pending) == (("hash/bow@64",), 2, 0)
    record = await memory.remember("Sam likes tofu", scope=SAM)
    hits = await memory.recall("tofu", scopes=[SAM], mode="vector", top_k=1)
    assert [h.memory.id for h in hits] == [record.id]


async def test_an_embedder_whose_space_changes_between_batches_stores_nothing(
    make_memory: Any,
) -> None:
    """Vectors of one call all belong to one space: a space that changes between the
    batches of one call is a ProviderError and nothing of the call is stored."""

    class Shifting(LearningEmbedder):
        def embed(self, texts: Any, kind: Any = "document") -> Any:
            vectors = super().embed(texts, kind)
            self.inner = HashEmbedder(dimensions=32)  # the next batch answers 32
            return vectors

    memory = make_memory(Shifting())
    items = [{"text": f"fact {n}", "scope": SAM} for n in range(12)]  # two batches of <= 8
    with pytest.raises(IngestError) as info:
        await memory.remember_many(items)
    assert "changed from hash/bow@64 to hash/bow@32" in str(info.value.__cause__)
    status = await memory.status()
    assert (status.items, status.vectors, status.spaces) == (0, 0, ())


async def test_reusing_an_expired_id_in_another_scope_moves_it(
    memory: Any, clock: ManualClock
) -> None:
    """An expired item's id reused in another scope leaves nothing behind in the old scope."""
    await memory.remember("Sam likes tea", scope=SAM)
    await memory.remember(
        "Sam's door code", scope=SAM, id="note-1", expires_at=clock.now + timedelta(seconds=5)
    )
    clock.advance(seconds=10)
    moved = await memory.remember("Alex's door code", scope=ALEX, id="note-1")
    assert moved.scope == ALEX
    hits = await memory.recall("Alex's door code", scopes=[SAM], mode="vector", top_k=10)
    assert all(h.memory.scope == SAM for h in hits)
    assert [r.text for r in await memory.list(SAM)] == ["Sam likes tea"]
    assert await memory.forget_scope(SAM) == 1
    assert (await memory.get("note-1")) == moved


async def test_status_and_reindex_before_a_learning_embedder_has_run(make_memory: Any) -> None:
    """status() and reindex() work before the embedder knows its space; reindex teaches it."""
    await make_memory(CountingEmbedder()).remember("Sam is vegetarian", scope=SAM)
    learner = make_memory(LearningEmbedder())
    status = await learner.status()
    assert (status.active_space, status.pending, status.semantic) == (None, 1, "pending")
    assert await learner.reindex() == 1
    status = await learner.status()
    assert (status.active_space, status.pending, status.semantic) == ("hash/bow@64", 0, "ready")


# -- store protocol v2 through Memory ----------------------------------------------------


async def test_update_is_a_patch_of_the_current_revision(memory: Any) -> None:
    """Two updates of different fields, each without a read of its own, both survive: an
    update patches what is stored when it runs, not what its caller last saw."""
    record = await memory.remember("Sam likes tea", scope=SAM, metadata={"v": 1})
    await memory.update(record.id, labels={"topic": ["drinks"]})
    await memory.update(record.id, importance=0.9)
    got = await memory.get(record.id)
    assert (got.metadata, got.labels, got.importance, got.revision) == (
        {"v": 1},
        {"topic": ["drinks"]},
        0.9,
        3,
    )


async def test_compare_and_set_with_expected_revision(memory: Any) -> None:
    """expected_revision makes update() and remember(id=...) conditional: a stale one
    raises ConflictError (naming both revisions) and changes nothing."""
    record = await memory.remember("counter", scope=SAM, id="c", expected_revision=0)
    with pytest.raises(ConflictError) as caught:
        await memory.remember("again", scope=SAM, id="c", expected_revision=0)
    assert (caught.value.expected, caught.value.actual) == (0, 1)
    first = await memory.update("c", metadata={"n": 1}, expected_revision=1)
    assert first.revision == 2
    with pytest.raises(ConflictError, match="revision 2, not revision 1"):
        await memory.update("c", metadata={"n": 99}, expected_revision=1)
    second = await memory.remember("counter v3", scope=SAM, id="c", expected_revision=2)
    assert (second.revision, second.created_at) == (3, record.created_at)
    assert (await memory.get("c")).text == "counter v3"
    with pytest.raises(ValidationError, match="expected_revision=0"):
        await memory.update("c", importance=0.1, expected_revision=0)


async def test_an_update_of_a_forgotten_memory_writes_nothing(memory: Any) -> None:
    """update() of a forgotten id raises NotFoundError and never writes the item back,
    even with a new text (whose vector is not kept either)."""
    record = await memory.remember("short lived", scope=SAM)
    await memory.forget(record.id)
    before = await snapshot(memory, SAM)
    with pytest.raises(NotFoundError):
        await memory.update(record.id, text="resurrected?")
    assert await memory.get(record.id) is None
    assert await snapshot(memory, SAM) == before


async def test_history_lists_earlier_revisions_newest_first(make_memory: Any) -> None:
    """history() answers earlier revisions, newest first, bounded by keep_revisions;
    forget() removes them with the memory."""
    memory = make_memory(CountingEmbedder(), keep_revisions=2)
    record = await memory.remember("v1", scope=SAM)
    for text in ("v2", "v3", "v4"):
        await memory.update(record.id, text=text)
    history = await memory.history(record.id)
    assert [(r.revision, r.text) for r in history] == [(3, "v3"), (2, "v2")]
    assert [r.revision for r in await memory.history(record.id, limit=1)] == [3]
    await memory.forget(record.id)
    assert await memory.history(record.id) == []


async def test_scopes_can_be_listed_and_selected_by_prefix(memory: Any) -> None:
    """list_scopes() pages the scopes that hold memories in scope order; ScopePrefix
    selects a scope and those under it by whole parts, in recall and list."""
    team = ("acme", "team")
    await memory.remember("Sam likes tea", scope=SAM)
    await memory.remember("Alex likes tea", scope=ALEX)
    await memory.remember("the team likes tea", scope=team)
    await memory.remember("tea at acmecorp", scope=("acmecorp",))
    scopes = await memory.list_scopes()
    assert [(s.scope, s.items) for s in scopes] == [
        (team, 1),
        (ALEX, 1),
        (SAM, 1),
        (("acmecorp",), 1),
    ]
    page = await memory.list_scopes(("acme",), limit=2)
    rest = await memory.list_scopes(("acme",), cursor=page[-1].scope)
    assert [s.scope for s in page + rest] == [team, ALEX, SAM]
    users = ScopePrefix(("acme", "user"))
    hits = await memory.recall("tea", scopes=[users, team], mode="lexical")
    assert {h.memory.scope for h in hits} == {SAM, ALEX, team}
    assert {r.scope for r in await memory.list(users)} == {SAM, ALEX}
    assert await memory.forget_scope(("acme",), descendants=True) == 3
    assert [s.scope for s in await memory.list_scopes()] == [("acmecorp",)]


async def test_forget_where_deletes_the_matching_memories(memory: Any) -> None:
    """forget_where() deletes exactly the memories of the scope its filter matches, and
    needs a filter."""
    keep = await memory.remember("kept", scope=SAM, metadata={"src": "email"})
    await memory.remember("from chat", scope=SAM, metadata={"src": "chat"})
    await memory.remember("chat elsewhere", scope=ALEX, metadata={"src": "chat"})
    assert await memory.forget_where(SAM, {"metadata": {"src": "chat"}}) == 1
    assert [r.id for r in await memory.list(SAM)] == [keep.id]
    assert len(await memory.list(ALEX)) == 1
    with pytest.raises(ValidationError, match="needs a non-empty filter"):
        await memory.forget_where(SAM, {})


async def test_filters_use_the_operator_language(memory: Any) -> None:
    """recall and list accept the filter operators; both legs apply them before ranking."""
    items = [
        await memory.remember(f"green tea note {n}", scope=SAM, metadata={"n": n}) for n in range(5)
    ]
    spec = {"$or": [{"metadata": {"n": {"$gte": 3}}}, {"metadata": {"n": {"$in": [0]}}}]}
    for mode in ("hybrid", "vector", "lexical"):
        hits = await memory.recall("green tea", scopes=[SAM], mode=mode, filter=spec)
        assert {h.memory.id for h in hits} == {items[0].id, items[3].id, items[4].id}, mode
    listed = await memory.list(SAM, filter={"metadata": {"n": {"$lt": 2}}})
    assert [r.id for r in listed] == sorted([items[0].id, items[1].id], reverse=True)


# -- ranking independent of top_k and of the store ---------------------------------------

_FILLERS = ["garden", "river", "train", "cello", "market", "sunrise", "lemon", "cake"]


def _depth_corpus() -> list[str]:
    """160 texts that all hold "tea" (more lexical candidates than the 100 that score),
    of varied lengths and term counts, some repeated (exact ties)."""
    rng = random.Random(27)
    texts = []
    for n in range(160):
        words = ["tea"] * rng.randint(1, 3) + rng.choices(_FILLERS, k=rng.randint(1, 7))
        rng.shuffle(words)
        texts.append(" ".join(words) if n % 9 else "green tea in the garden")
    return texts


async def test_the_first_k_hits_are_the_same_for_every_larger_top_k(make_memory: Any) -> None:
    """A larger top_k only appends: the first 10 hits of top_k=100 and of top_k=1000 are
    those of top_k=10, and the first 100 of top_k=1000 those of top_k=100, in every mode
    and fusion, with more candidates than the 100 per leg that score; every leg score a
    hit shows is on the ranking's grid of 2**-30."""
    memory = make_memory(HashEmbedder(dimensions=64))
    await memory.remember_many(({"text": t, "scope": SAM} for t in _depth_corpus()), dedupe=False)
    variants: list[dict[str, Any]] = [
        {},
        {"weights": {"vector": 0.4, "lexical": 0.6}},
        {"fusion": "rrf"},
        {"mode": "vector"},
        {"mode": "lexical"},
    ]
    for query in ("green tea", "lemon cake by the river", "tea at sunrise"):
        for options in variants:
            ranked = {}
            for top_k in (10, 100, 1000):
                hits = await memory.recall(query, scopes=[SAM], top_k=top_k, **options)
                ranked[top_k] = [hit.memory.id for hit in hits]
                for hit in hits:
                    for score in (hit.bm25, hit.similarity):
                        assert score is None or score == quantised(score), (hit, score)
            assert len(ranked[100]) > 10, (query, options)
            assert ranked[100][:10] == ranked[10], (query, options)
            assert ranked[1000][:10] == ranked[10], (query, options)
            assert ranked[1000][:100] == ranked[100], (query, options)


async def test_an_approximate_vector_leg_keeps_its_first_hits_whatever_top_k(
    make_memory: Any,
) -> None:
    """Over 400 memories (vectors that rarely tie: ``SpreadEmbedder``) a pure-Python index
    searches approximately (its 4-bit copies, then the best 150 exactly), and a larger
    ``top_k`` still only appends: the first 100 hits of a vector recall of 400 are those
    of 100, the first 10 those of 10, and its similarities never rise; a hybrid recall's
    first hits do not move either (no similarity floor: every memory is a hit).
    (PostgreSQL's HNSW search finds the exact neighbours of 400 vectors; its own test,
    test_a_larger_k_only_appends_through_the_index, makes the index approximate.)"""
    memory = make_memory(SpreadEmbedder())
    rng = random.Random(31)
    words = [f"{stem}{n}" for stem in ("tea", "river", "cello", "lemon") for n in range(5)]
    texts = [" ".join(rng.choices(words, k=rng.randint(3, 8))) for _ in range(400)]
    await memory.remember_many(({"text": t, "scope": SAM} for t in texts), dedupe=False)
    for query in ("tea3 river4", "cello1 lemon2 tea0", "lemon1"):
        for mode in ("vector", "hybrid"):
            ranked = {}
            for top_k in (10, 100, 400):
                hits = await memory.recall(
                    query, scopes=[SAM], top_k=top_k, mode=mode, min_similarity=-1.0
                )
                ranked[top_k] = [hit.memory.id for hit in hits]
                if mode == "vector":
                    similarities = [hit.similarity for hit in hits]
                    assert similarities == sorted(similarities, reverse=True), (query, top_k)
            assert len(ranked[400]) > (100 if mode == "vector" else 10), (query, mode)
            assert ranked[100][:10] == ranked[10], (query, mode)
            assert ranked[400][:100] == ranked[100], (query, mode)


def _near_tie_corpus() -> tuple[list[str], list[tuple[int, int, int, int]]]:
    """Texts holding the terms amber, birch and cedar 1-3 times each (in every
    permutation of counts, so that equal BM25 sums are added in different orders and
    may differ in their last bits) with 0-2 filler words, between 3x as many texts
    without them (so that the three terms' idf is the same and above 0)."""
    rng = random.Random(2027)
    texts: list[str] = []
    shapes: list[tuple[int, int, int, int]] = []
    counts = [(a, b, c) for a in (1, 2, 3) for b in (1, 2, 3) for c in (1, 2, 3)]
    for _ in range(2):
        for a, b, c in rng.sample(counts, len(counts)):
            filler = rng.randint(0, 2)
            words = ["amber"] * a + ["birch"] * b + ["cedar"] * c + ["moss"] * filler
            rng.shuffle(words)
            texts.append(" ".join(words))
            shapes.append((a, b, c, filler))
    others = [f"plain note number {n}" for n in range(3 * len(texts))]
    return texts + others, shapes


async def test_near_ties_rank_the_same_in_every_store(make_memory: Any) -> None:
    """Generated near-ties: BM25 sums that are equal but added in different orders (the
    stores add them in different orders too) tie on the grid and come back newest first;
    the lexical order is BM25's exact order (computed here with fractions), equal scores
    newest first, whatever the store computes in its last bits."""
    memory = make_memory(HashEmbedder(dimensions=64))
    texts, shapes = _near_tie_corpus()
    records = await memory.remember_many(({"text": t, "scope": SAM} for t in texts), dedupe=False)
    lengths = [len(text.split()) for text in texts]
    avgdl = Fraction(sum(lengths), len(lengths))

    def part(tf: int, length: int) -> Fraction:
        return (
            tf
            * Fraction(22, 10)
            / (tf + Fraction(12, 10) * (Fraction(1, 4) + Fraction(3, 4) * length / avgdl))
        )

    exact = {
        records[n].id: sum(part(tf, lengths[n]) for tf in shape[:3])
        for n, shape in enumerate(shapes)
    }
    distinct = sorted(set(exact.values()))
    assert all(b - a > Fraction(1, 10**6) for a, b in pairwise(distinct))
    assert len(distinct) < len(exact)  # some scores tie exactly
    expected = sorted(exact, reverse=True)  # newest first: ids ascend in the order given
    expected.sort(key=exact.__getitem__, reverse=True)
    hits = await memory.recall("amber birch cedar", scopes=[SAM], top_k=100, mode="lexical")
    assert [hit.memory.id for hit in hits] == expected
