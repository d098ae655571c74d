"""An HTTP embedder without ``dimensions=`` learns its size from answers; through
``Memory`` a learned size never opens a second space beside the stored one of its model."""

from __future__ import annotations

import httpx
import pytest
from provider_fakes import (
    CASES,
    ProviderCase,
    Script,
    Sleeps,
    build,
    openai_answer,
    vectors_for,
)

from engramdb import InMemoryStore, Memory, ProviderError
from engramdb.providers import OpenAIEmbedder

SCOPE = ("acme", "user", "sam")


def embedder(script: Script, sleeps: Sleeps) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        "custom-model",
        base_url="http://embeddings.internal/v1",
        transport=httpx.MockTransport(script),
        sleep=sleeps.sleep,
    )


def test_a_wrong_first_answer_of_a_new_process_opens_no_second_space(sleeps: Sleeps) -> None:
    """The store holds openai-compatible/custom-model@3. A new embedder (a restarted
    process) whose first answer has 5 dimensions stores nothing and opens no @5 space;
    it forgets the refused size, so the very next valid answer of 3 dimensions stores."""
    store = InMemoryStore()
    # the first write on a fresh store: its answer, then the call that confirms the size
    first = Memory(store, embedder(Script(*[openai_answer(vectors_for(1))] * 2), sleeps))
    first.remember("Sam is vegetarian", scope=SCOPE)

    script = Script(
        openai_answer(vectors_for(1, dimensions=5)),  # wrong: refused by the store check
        openai_answer(vectors_for(1)),  # valid: stored, not refused as "expected 5"
    )
    second = embedder(script, sleeps)
    memory = Memory(store, second)
    with pytest.raises(ProviderError, match="holds openai-compatible/custom-model@3"):
        memory.remember("Sam plays the cello", scope=SCOPE)
    assert not second.dimensions_learned
    memory.remember("Sam plays the cello", scope=SCOPE)
    status = memory.status()
    assert status.spaces == ("openai-compatible/custom-model@3",)
    assert (status.items, status.vectors, status.pending) == (2, 2, 0)


def test_a_wrong_first_answer_to_a_query_degrades_the_recall_and_pins_nothing(
    sleeps: Sleeps,
) -> None:
    """The store holds openai-compatible/custom-model@3. A new embedder whose first
    answer, to a recall's query, has 5 dimensions does not search an @5 space that holds
    nothing: the recall degrades to the lexical leg (error ``ProviderError``), and the
    embedder forgets the size, so the next valid answer stores."""
    store = InMemoryStore()
    # the first write on a fresh store: its answer, then the call that confirms the size
    first = Memory(store, embedder(Script(*[openai_answer(vectors_for(1))] * 2), sleeps))
    first.remember("Sam is vegetarian", scope=SCOPE)

    script = Script(openai_answer(vectors_for(1, dimensions=5)), openai_answer(vectors_for(1)))
    second = embedder(script, sleeps)
    memory = Memory(store, second)
    hits = memory.recall("vegetarian", [SCOPE])
    assert (hits.status, hits.error) == ("degraded", "ProviderError")
    assert [hit.memory.text for hit in hits] == ["Sam is vegetarian"]  # the lexical leg
    assert not second.dimensions_learned
    memory.remember("Sam plays the cello", scope=SCOPE)
    assert memory.status().spaces == ("openai-compatible/custom-model@3",)


# -- models of the providers' tables ------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_known_model_without_dimensions_refuses_an_answer_of_another_size(
    case: ProviderCase, sleeps: Sleeps
) -> None:
    """Each provider's default model is in its table of documented sizes. Without
    ``dimensions=``, a first answer of another size is a ``ProviderError`` that teaches
    nothing (the space keeps the documented size); the next answer of that size is
    learned as usual."""
    blank = build(case, Script(), sleeps)
    default = type(blank).known_dimensions[blank._model_key()]
    script = Script(case.answer(vectors_for(1)), case.answer(vectors_for(1, dimensions=default)))
    embedder = build(case, script, sleeps)
    assert embedder.space.dimensions == default  # before any answer: the table
    with pytest.raises(ProviderError, match=f"answers {default} unless told otherwise"):
        embedder.embed(["x"])
    assert not embedder.dimensions_learned and embedder.space.dimensions == default
    assert len(embedder.embed(["x"])[0]) == default
    assert embedder.dimensions_learned and embedder.space.dimensions == default


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_dimensions_overrides_the_table(case: ProviderCase, sleeps: Sleeps) -> None:
    """With ``dimensions=``, the documented size does not apply: the answer must have
    the size asked for."""
    embedder = build(case, Script(case.answer(vectors_for(1))), sleeps, dimensions=3)
    assert len(embedder.embed(["x"])[0]) == 3
    assert embedder.space.dimensions == 3 and not embedder.dimensions_learned


def test_the_tables_hold_positive_sizes_and_each_default_model() -> None:
    for case in CASES:
        embedder = case.make()
        table = type(embedder).known_dimensions
        assert all(isinstance(n, int) and n > 0 for n in table.values()), case.name
        assert embedder._model_key() in table, case.name
