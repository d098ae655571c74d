"""LoCoMo's development split ranks the same on D1, on a Durable Object's SQLite and in
an ``InMemoryStore``, inside Pyodide (tests/eval/test_locomo_stores.py holds SQLite,
tests/postgres/test_locomo_postgres.py PostgreSQL, to the same ``InMemoryStore``).

The first two conversations of the split (302 questions with evidence), the shipped
static table, every mode, the first 50 hits, with ``exact=True``: inside a Worker the
vector index turns approximate above a few hundred vectors, and an approximate search is
the one documented exception (docs/concepts.md, "Ranking and ties"). Runs when
workers/tests/run.mjs finds the split beside the repository (it mounts
``../shared/data/locomo`` at ``/mnt/shared/data/locomo``); skipped otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from eval.locomo import MODES, Conversation, Run, evaluate, evaluate_async, load

import engramdb
from engramdb import AsyncMemory, InMemoryStore, Memory, StaticEmbedder
from engramdb_workers.d1 import D1Store
from engramdb_workers.durable import DurableObjectStore
from objects import new_object_state, storage_of

DEV = Path(os.environ.get("ENGRAMDB_LOCOMO", "/mnt/shared/data/locomo/locomo_dev.json"))
EXACT = {"exact": True}

pytestmark = pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo's development split is absent")


@pytest.fixture(scope="module")
def conversations() -> list[Conversation]:
    return load(DEV)[:2]


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    table = Path(engramdb.__file__).parent / StaticEmbedder.SHIPPED_FILE
    return StaticEmbedder.from_bytes(table.read_bytes(), name=StaticEmbedder.SHIPPED_NAME)


@pytest.fixture(scope="module")
def reference(conversations: list[Conversation], embedder: StaticEmbedder) -> Run:
    with Memory(InMemoryStore(), embedder) as memory:
        return evaluate(
            conversations, lambda _n: memory, MODES, date_in_text=True, recall_options=EXACT
        )


def assert_ranked_alike(reference: Run, run: Run) -> None:
    questions = len(reference.relevant)
    assert questions == 302
    for mode in MODES:
        assert sum(map(len, run.ranked[mode])) > 10 * questions, f"{mode}: hardly any hits"
        differ = [n for n in range(questions) if reference.ranked[mode][n] != run.ranked[mode][n]]
        assert not differ, (
            f"{mode}: {len(differ)} of {questions} rankings differ, e.g. #{differ[0]}"
        )


async def test_d1_ranks_the_development_split_as_the_in_memory_store(
    d1: Any, conversations: list[Conversation], embedder: StaticEmbedder, reference: Run
) -> None:
    """D1 (workerd's SQLite, FTS5's bm25() in SQL, vectors decoded in Pyodide) returns
    the same 50 turns in the same order as InMemoryStore for every question and mode."""
    store = D1Store(d1)
    memory = AsyncMemory(store, embedder)
    run = await evaluate_async(
        conversations, lambda _n: memory, MODES, date_in_text=True, recall_options=EXACT
    )
    store.close()
    assert_ranked_alike(reference, run)


def test_a_durable_object_ranks_the_development_split_as_the_in_memory_store(
    conversations: list[Conversation], embedder: StaticEmbedder, reference: Run
) -> None:
    """A Durable Object's SQLite (one object, as one tenant has) ranks alike too."""
    store = DurableObjectStore(storage_of(new_object_state("locomo")))
    with Memory(store, embedder) as memory:
        run = evaluate(
            conversations, lambda _n: memory, MODES, date_in_text=True, recall_options=EXACT
        )
    assert_ranked_alike(reference, run)
