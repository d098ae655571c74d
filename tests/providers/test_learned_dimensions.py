"""An HTTP embedder without ``dimensions=`` learns its size from answers; through
``Memory`` a learned size never opens a second space beside the stored one of its model."""

from __future__ import annotations

import httpx
import pytest
from provider_fakes import Script, Sleeps, openai_answer, vectors_for

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
    first = Memory(store, embedder(Script(openai_answer(vectors_for(1))), sleeps))
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
    first = Memory(store, embedder(Script(openai_answer(vectors_for(1))), sleeps))
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
