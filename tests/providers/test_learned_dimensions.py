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
    once answers have 3 dimensions again, remember works: the wrong size was not pinned."""
    store = InMemoryStore()
    first = Memory(store, embedder(Script(openai_answer(vectors_for(1))), sleeps))
    first.remember("Sam is vegetarian", scope=SCOPE)

    script = Script(
        openai_answer(vectors_for(1, dimensions=5)),  # wrong: refused by the store check
        openai_answer(vectors_for(1)),  # disagrees with the learned 5: forgotten
        openai_answer(vectors_for(1)),  # teaches 3 again
    )
    memory = Memory(store, embedder(script, sleeps))
    with pytest.raises(ProviderError, match="holds openai-compatible/custom-model@3"):
        memory.remember("Sam plays the cello", scope=SCOPE)
    with pytest.raises(ProviderError, match="expected 5; the size learned"):
        memory.remember("Sam plays the cello", scope=SCOPE)
    memory.remember("Sam plays the cello", scope=SCOPE)
    status = memory.status()
    assert status.spaces == ("openai-compatible/custom-model@3",)
    assert (status.items, status.vectors, status.pending) == (2, 2, 0)
