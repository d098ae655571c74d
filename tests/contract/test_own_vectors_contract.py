"""Your own vectors (issue 49): ``remember(..., vector=[...])`` and ``recall(...,
vector=[...])`` on every store, sync and async, in the two spaces a vector may be in: a
memory's embedder's, or the space a memory without an embedder declares.

The tests of this file are collected by the other stores' suites too (PostgreSQL, D1,
Durable Objects), as those of test_memory_contract.py are.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import pytest
from fakes import CountingEmbedder

from engramdb import EmbeddingSpace, InMemoryStore, ValidationError

OWN = EmbeddingSpace("mine", "pipeline-v1", 4)
SAM = ("acme", "user", "sam")
KIM = ("acme", "user", "kim")

VEGETARIAN = [0.9, 0.1, 0.0, 0.0]
CELLO = [0.0, 0.0, 1.0, 0.2]
FOOD_QUERY = [1.0, 0.0, 0.0, 0.0]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.hypot(*a) / math.hypot(*b)


async def snapshot(memory: Any, *scopes: tuple[str, ...]) -> list[Any]:
    """Everything observable about ``scopes`` (to prove a refused call changed nothing)."""
    status = await memory.status()
    listed = [await memory.list(scope, limit=100) for scope in scopes]
    return [status.items, status.vectors, status.spaces, listed]


@pytest.fixture
def own(make_memory: Callable[..., Any]) -> Any:
    """A memory without an embedder, in the declared space ``OWN``."""
    return make_memory(None, space=OWN)


async def test_own_vectors_are_stored_and_searched_in_the_declared_space(own: Any) -> None:
    """With no embedder, the vectors you pass are the ones a recall scores: the
    similarity is the cosine of your query vector to your memory's, and the evidence
    names the declared space."""
    sam = await own.remember("Sam is vegetarian", scope=SAM, vector=VEGETARIAN)
    await own.remember("Sam plays the cello", scope=SAM, vector=CELLO)

    hits = await own.recall("what does Sam eat?", [SAM], vector=FOOD_QUERY, mode="vector")

    assert hits[0].memory.id == sam.id
    assert hits[0].similarity == pytest.approx(cosine(VEGETARIAN, FOOD_QUERY), abs=1e-6)
    assert hits[0].evidence["space_id"] == OWN.id == "mine/pipeline-v1@4"
    assert hits.status == "used"
    status = await own.status()
    assert (status.active_space, status.pending, status.embedded) == (OWN.id, 0, {OWN.id: 2})


async def test_a_recall_with_a_vector_still_reads_the_query_for_the_lexical_leg(
    own: Any,
) -> None:
    """Hybrid recall with your vector fuses both legs: a memory the query's words name
    is found by the lexical leg even when your vector points elsewhere."""
    await own.remember("Sam is vegetarian", scope=SAM, vector=VEGETARIAN)
    cello = await own.remember("Sam plays the cello", scope=SAM, vector=CELLO)

    hits = await own.recall("cello", [SAM], vector=FOOD_QUERY)

    by_id = {h.memory.id: h for h in hits}
    assert by_id[cello.id].lexical_rank == 1
    assert hits.status == "used"


async def test_without_an_embedder_a_recall_without_a_vector_is_lexical_only(own: Any) -> None:
    """A memory with no embedder answers a query given without a vector from its words
    alone (``status="lexical_only"``); ``mode="vector"`` without one is refused."""
    cello = await own.remember("Sam plays the cello", scope=SAM, vector=CELLO)

    hits = await own.recall("cello", [SAM])

    assert ([h.memory.id for h in hits], hits.status) == ([cello.id], "lexical_only")
    with pytest.raises(ValidationError, match=r"mode='vector' needs a query vector"):
        await own.recall("cello", [SAM], mode="vector")
    with pytest.raises(ValidationError, match=r"mode='lexical'"):
        await own.recall("cello", [SAM], vector=CELLO, mode="lexical")


async def test_without_an_embedder_a_remember_without_a_vector_stores_nothing(own: Any) -> None:
    """No embedder, no vector: one error that names the fix, and nothing is written."""
    await own.remember("Sam plays the cello", scope=SAM, vector=CELLO)
    before = await snapshot(own, SAM)

    with pytest.raises(ValidationError, match=r"no embedder .*mine/pipeline-v1@4.*vector="):
        await own.remember("Sam is vegetarian", scope=SAM)
    with pytest.raises(ValidationError, match=r"no embedder"):  # nor pending, for none comes
        await own.remember("Sam is vegetarian", scope=SAM, defer_embedding=True)
    with pytest.raises(ValidationError, match=r"no embedder"):
        await own.remember_many([{"text": "Kim is vegan", "scope": KIM}], defer_embedding=True)

    assert await snapshot(own, SAM) == before


@pytest.mark.parametrize(
    "bad, error, says",
    [
        ([0.1, 0.2, 0.3], ValidationError, r"3 dimensions .*mine/pipeline-v1@4 has 4"),
        ([0.1, float("nan"), 0.3, 0.4], ValidationError, r"vector=\[0\.1, nan, .*finite"),
        ([0.1, float("inf"), 0.3, 0.4], ValidationError, r"finite numbers"),
        ("0.1,0.2,0.3,0.4", ValidationError, r"vector='0\.1,0\.2,0\.3,0\.4' must be a list"),
        ([0.1, "0.2", 0.3, 0.4], ValidationError, r"must be a list of 4 finite numbers"),
        ([True, False, False, False], ValidationError, r"must be a list of 4 finite numbers"),
        ([0.0, 0.0, 0.0, 0.0], ValidationError, r"all zeros"),
        ([], ValidationError, r"must be a list of 4"),
    ],
)
async def test_a_bad_vector_is_one_clear_error_and_changes_nothing(
    own: Any, bad: Any, error: type[Exception], says: str
) -> None:
    """The checks an embedder's answer gets (size, finite, a direction), on your vector:
    the error names the value and the space, in remember and in recall, and nothing is
    written."""
    await own.remember("Sam plays the cello", scope=SAM, vector=CELLO)
    before = await snapshot(own, SAM, KIM)

    with pytest.raises(error, match=says):
        await own.remember("Sam is vegetarian", scope=SAM, vector=bad)
    with pytest.raises(error, match=says):
        await own.recall("food", [SAM], vector=bad)
    with pytest.raises(ValidationError, match=r"item 1: "):
        await own.remember_many(
            [
                {"text": "Kim is vegan", "scope": KIM, "vector": VEGETARIAN},
                {"text": "Sam is vegetarian", "scope": SAM, "vector": bad},
            ]
        )

    assert await snapshot(own, SAM, KIM) == before


async def test_with_an_embedder_your_vector_is_stored_instead_of_embedding(
    make_memory: Callable[..., Any],
) -> None:
    """A memory with an embedder takes your vector in its space: the text is not sent
    to the embedder, nor is a query given with a vector; a vector of another size is
    refused, naming the embedder's space."""
    embedder = CountingEmbedder(dimensions=8)
    memory = make_memory(embedder)
    mine = [0.0] * 7 + [1.0]
    record = await memory.remember("Sam is vegetarian", scope=SAM, vector=mine)

    hits = await memory.recall("what does Sam eat?", [SAM], vector=mine, mode="vector")

    assert embedder.embedded == []
    assert hits[0].memory.id == record.id
    assert hits[0].similarity == pytest.approx(1.0)
    assert hits[0].evidence["space_id"] == embedder.space.id
    before = await snapshot(memory, SAM)
    with pytest.raises(ValidationError, match=r"4 dimensions .*hash/.*@8 has 8"):
        await memory.remember("Sam plays the cello", scope=SAM, vector=CELLO)
    assert await snapshot(memory, SAM) == before
    assert embedder.embedded == []


async def test_with_an_embedder_your_vector_never_scores_another_scopes_memory(
    make_memory: Callable[..., Any],
) -> None:
    """Sam's vector of a text is not the embedder's; when Kim remembers the same text
    without a vector, Kim's memory is scored by the embedder's vector of it, never by
    Sam's: the embedder's vector replaces one that is not its own (and Sam's memory,
    which shares the text's vector, is then scored by it too)."""
    embedder = CountingEmbedder(dimensions=8)
    memory = make_memory(embedder)
    text = "The team meets on Thursdays"
    sams = [0.0] * 7 + [1.0]
    (models,) = embedder.inner.embed([text], "document")
    assert cosine(sams, list(models)) < 0.9  # Sam's vector is not the model's
    await memory.remember(text, scope=SAM, vector=sams)

    kim = await memory.remember(text, scope=KIM)

    hits = await memory.recall("x", [KIM], vector=list(models), mode="vector")
    assert hits[0].memory.id == kim.id
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-5)
    by_sams = await memory.recall("x", [KIM], vector=sams, mode="vector", min_similarity=-1)
    assert by_sams[0].similarity == pytest.approx(cosine(sams, list(models)), abs=1e-5)


async def test_remember_many_takes_each_items_own_vector(own: Any) -> None:
    """Items of ``remember_many`` may carry their ``vector``; two copies of one text in
    one call must carry the same one."""
    records = await own.remember_many(
        [
            {"text": "Sam is vegetarian", "scope": SAM, "vector": VEGETARIAN},
            {"text": "Sam plays the cello", "scope": SAM, "vector": CELLO},
        ]
    )
    hits = await own.recall("x", [SAM], vector=CELLO, mode="vector")
    assert hits[0].memory.id == records[1].id
    assert hits[0].similarity == pytest.approx(1.0)
    before = await snapshot(own, SAM, KIM)
    with pytest.raises(ValidationError, match=r"item 1: vector= differs from an earlier item"):
        await own.remember_many(
            [
                {"text": "Kim is vegan", "scope": KIM, "vector": VEGETARIAN},
                {"text": "Kim is vegan", "scope": KIM, "vector": CELLO},
            ]
        )
    assert await snapshot(own, SAM, KIM) == before


async def test_a_text_holds_one_vector_per_space_and_yours_never_replaces_it(own: Any) -> None:
    """A store keeps one vector per text and space. Your vector never replaces a stored
    one, so no other memory is ever scored by it: the same text again in its scope
    (deduplicated) or in another scope with ANOTHER vector is refused and changes
    nothing; with the same vector it is stored (or answered) as usual."""
    sam = await own.remember("Sam is vegetarian", scope=SAM, vector=VEGETARIAN)
    before = await snapshot(own, SAM, KIM)

    for scope in (SAM, KIM):
        with pytest.raises(ValidationError, match=r"differs from the vector this store"):
            await own.remember("Sam is vegetarian", scope=scope, vector=CELLO)
    assert await snapshot(own, SAM, KIM) == before

    scaled = [2 * x for x in VEGETARIAN]  # the same direction: the same stored vector
    assert (await own.remember("Sam is vegetarian", scope=SAM, vector=scaled)).id == sam.id
    kim = await own.remember("Sam is vegetarian", scope=KIM, vector=VEGETARIAN)
    hits = await own.recall("x", [KIM], vector=VEGETARIAN, mode="vector")
    assert [h.memory.id for h in hits] == [kim.id]
    assert hits[0].similarity == pytest.approx(1.0)


async def test_a_deferred_memory_gets_its_own_vector_at_once(own: Any) -> None:
    """``defer_embedding`` defers embedding; a vector you pass needs none and is stored
    with the memory."""
    await own.remember("Sam plays the cello", scope=SAM, vector=CELLO, defer_embedding=True)

    status = await own.status()
    assert (status.pending, status.embedded) == (0, {OWN.id: 1})


async def _maybe(result: Any) -> Any:
    """``result``, awaited when it is awaitable (a sync face's view answers plainly)."""
    return await result if inspect.isawaitable(result) else result


async def test_a_bound_view_takes_your_vectors(own: Any) -> None:
    """``BoundMemory``/``AsyncBoundMemory``'s ``remember`` and ``recall`` take
    ``vector`` as ``Memory``'s do, and a bad one is refused before anything is stored."""
    view = await _maybe(own.bind(SAM))
    record = await _maybe(view.remember("Sam plays the cello", vector=CELLO))
    hits = await _maybe(view.recall("music", vector=CELLO, mode="vector"))
    assert hits[0].memory.id == record.id
    assert hits[0].similarity == pytest.approx(1.0)
    with pytest.raises(ValidationError, match=r"finite numbers"):
        await _maybe(view.remember("Sam is vegetarian", vector=[float("nan")] * 4))
    assert [r.id for r in await own.list(SAM)] == [record.id]


def test_agent_tools_do_not_offer_vectors() -> None:
    """A model is never offered ``vector``: the remember and recall tools list their own
    fields, without it (a model writes words, not a pipeline's numbers)."""
    from engramdb import Memory, memory_tools

    memory = Memory(InMemoryStore(), None, space=OWN)
    specs = {s["function"]["name"]: s["function"] for s in memory_tools(memory.bind(SAM)).specs}
    for name in ("remember", "recall"):
        assert "vector" not in specs[name]["parameters"]["properties"]


@pytest.mark.parametrize(
    "embedder, space, says",
    [
        (None, None, r"space=None must be an EmbeddingSpace"),
        (None, "mine/pipeline-v1@4", r"must be an EmbeddingSpace"),
        ("hash", OWN, r"space=.* is for a memory without an embedder"),
    ],
)
def test_a_memory_declares_its_space_one_way(embedder: Any, space: Any, says: str) -> None:
    """``embedder=None`` needs ``space=``; an embedder brings its own, so ``space=`` with
    one is refused rather than ignored."""
    from engramdb import ConfigurationError, HashEmbedder, Memory

    with pytest.raises(ConfigurationError, match=says):
        Memory(InMemoryStore(), HashEmbedder() if embedder else None, space=space)
