"""A wrong-sized first answer on a fresh database never becomes the model's space.

Outside reproduction 6 (issue 26): an embedder without ``dimensions=`` learns its size
from its first answer. On a fresh SQLite database there was no stored space to check
that size against, so one wrong first answer (a proxy glitch, a truncated vector)
registered a bogus space, and every later healthy answer was refused as "the store holds
...@65 for that model": 0 of 5 writes stored.

Through a real HTTP embeddings server on 127.0.0.1 (tests/providers/loopback_server.py)
whose queued faults spoil chosen answers: the write that met the wrong size raises
``ProviderError`` and stores nothing, then 5 healthy writes all store, in the one space
of the right size. A model engramdb does not know is caught by the call that confirms a
new space's size (the first write on a fresh database sends one more request); a model
of the providers' tables is caught by its documented size before any confirmation.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from loopback_server import Loopback, serve
from provider_fakes import FAKE_KEY

from engramdb import AsyncMemory, Memory, ProviderError
from engramdb.providers import HTTPEmbedder, OllamaEmbedder, OpenAIEmbedder, RetryPolicy
from engramdb.sqlite import SqliteStore

SCOPE = ("acme", "user", "sam")
WRITES = 5
NO_RETRY = RetryPolicy(max_retries=0)  # one request per call: the plan is exact


def unknown_model(server: Loopback) -> HTTPEmbedder:
    """A model of no table: only its answers can tell its size."""
    return OpenAIEmbedder("hash-bow", base_url=server.base_url, api_key=FAKE_KEY, retry=NO_RETRY)


def unknown_ollama(server: Loopback) -> HTTPEmbedder:
    host = server.base_url.removesuffix("/v1")
    return OllamaEmbedder("hash-bow", host=host, api_key=FAKE_KEY, retry=NO_RETRY)


def known_model(server: Loopback) -> HTTPEmbedder:
    """A model of OpenAI's table, documented at 1536 dimensions."""
    return OpenAIEmbedder(
        "text-embedding-3-small",
        base_url=server.base_url,
        api_key=FAKE_KEY,
        retry=NO_RETRY,
    )


# (embedder, the server's size, the faults of the first write, its requests)
CASES = {
    # the first answer is one dimension too long; the confirming call disagrees
    "unknown model, wrong first answer": (unknown_model, 64, ["dimensions", ""], 2),
    "unknown model on Ollama's wire": (unknown_ollama, 64, ["dimensions", ""], 2),
    # the first answer is right, the confirming call is wrong: no size can be trusted
    "unknown model, wrong confirming answer": (unknown_model, 64, ["", "dimensions"], 2),
    # the documented size refuses the first answer at once: no confirming call
    "known model, wrong first answer": (known_model, 1536, ["dimensions"], 1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrong_sized_first_answer_on_a_fresh_database_fails_once_then_every_write_stores(
    case: str, tmp_path: Path
) -> None:
    make, size, faults, requests = CASES[case]
    store = SqliteStore(tmp_path / "memory.db")
    with serve(dimensions=size) as server, make(server) as embedder:
        memory = Memory(store, embedder)
        server.faults[:] = faults
        with pytest.raises(ProviderError):
            memory.remember("Sam is vegetarian", SCOPE)
        assert [seen["fault"] for seen in server.seen] == faults  # exactly these requests
        assert len(server.seen) == requests
        status = memory.status()
        assert (status.items, status.vectors, status.spaces) == (0, 0, ())  # nothing stored
        assert not embedder.dimensions_learned  # the wrong size was forgotten

        stored = [memory.remember(f"Sam's fact number {n}", SCOPE) for n in range(WRITES)]
        assert len(stored) == WRITES  # 5 of 5 healthy writes store
        space = f"{embedder.provider}/{embedder.model}@{size}"
        status = memory.status()
        assert status.spaces == (space,) and status.active_space == space
        assert (status.items, status.vectors, status.pending) == (WRITES, WRITES, 0)
        # one request per healthy write, plus the one that confirmed the size
        assert len(server.seen) == requests + WRITES + 1
        hits = memory.recall("Sam's fact number 3", [SCOPE], mode="vector")
        assert hits.status == "used" and hits[0].memory.text == "Sam's fact number 3"
    store.close()


def test_a_wrong_sized_first_answer_to_a_recall_registers_nothing(tmp_path: Path) -> None:
    """The first call on a fresh database is a recall whose answer is one dimension too
    long: it degrades to the lexical leg and registers nothing; the writes after it
    store in the space of the right size."""
    store = SqliteStore(tmp_path / "memory.db")
    with serve(dimensions=64) as server, unknown_model(server) as embedder:
        memory = Memory(store, embedder)
        server.faults[:] = ["dimensions", ""]
        hits = memory.recall("vegetarian", [SCOPE])
        assert (hits.status, hits.error) == ("degraded", "ProviderError")
        assert memory.status().spaces == () and not embedder.dimensions_learned
        for n in range(WRITES):
            memory.remember(f"Sam's fact number {n}", SCOPE)
        status = memory.status()
        assert status.spaces == ("openai-compatible/hash-bow@64",)
        assert (status.items, status.vectors) == (WRITES, WRITES)
    store.close()


def test_the_async_memory_confirms_a_new_space_the_same_way(tmp_path: Path) -> None:
    """``AsyncMemory`` runs the same flow: the wrong first answer fails one write, the
    next 5 store in the space of the right size."""

    async def scenario(server: Loopback) -> None:
        embedder = OpenAIEmbedder(
            "hash-bow", base_url=server.base_url, api_key=FAKE_KEY, retry=NO_RETRY
        )
        memory = AsyncMemory(store, embedder)
        server.faults[:] = ["dimensions", ""]
        with pytest.raises(ProviderError):
            await memory.remember("Sam is vegetarian", SCOPE)
        for n in range(WRITES):
            await memory.remember(f"Sam's fact number {n}", SCOPE)
        status = await memory.status()
        assert status.spaces == ("openai-compatible/hash-bow@64",)
        assert (status.items, status.vectors) == (WRITES, WRITES)
        await embedder.aclose()

    store = SqliteStore(tmp_path / "memory.db")
    with serve(dimensions=64) as server:
        asyncio.run(scenario(server))
    store.close()
