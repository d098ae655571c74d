"""LoCoMo's development split ranks the same on PostgreSQL as in an ``InMemoryStore``.

All seven conversations of the split (1,345 questions with evidence; the async face the
first two, 302), the shipped static table, every mode, the first 50 hits, with
``exact=True`` (with the HNSW index an approximate search is the one documented
exception, docs/concepts.md "Ranking and ties"). tests/eval/test_locomo_stores.py holds
SQLite, workers/tests/test_locomo_stores.py D1 and a Durable Object, to the same
``InMemoryStore``. Runs when the split is there (``ENGRAMDB_LOCOMO``, or
``../shared/data/locomo/locomo_dev.json`` beside the repository); skipped otherwise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from engramdb import AsyncMemory, InMemoryStore, Memory

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # eval/ lives at the repository root, not in the wheel

from eval.embedders import make_embedder  # noqa: E402
from eval.locomo import MODES, Run, evaluate, evaluate_async, load  # noqa: E402

DEV = Path(os.environ.get("ENGRAMDB_LOCOMO", ROOT.parent / "shared/data/locomo/locomo_dev.json"))
EXACT = {"exact": True}

pytestmark = pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo's development split is absent")


def run_on(memory: Memory) -> Run:
    conversations = load(DEV)
    return evaluate(
        conversations, lambda _n: memory, MODES, date_in_text=True, recall_options=EXACT
    )


@pytest.fixture(scope="module")
def reference() -> Run:
    with Memory(InMemoryStore(), make_embedder("static")) as memory:
        return run_on(memory)


def assert_ranked_alike(reference: Run, run: Run, questions: int = 1033 + 312) -> None:
    """``run`` ranks its ``questions`` (with evidence, from the first) as ``reference``."""
    assert len(run.relevant) == questions
    for mode in MODES:
        assert sum(map(len, run.ranked[mode])) > 10 * questions, f"{mode}: hardly any hits"
        differ = [n for n in range(questions) if reference.ranked[mode][n] != run.ranked[mode][n]]
        assert not differ, (
            f"{mode}: {len(differ)} of {questions} rankings differ, e.g. #{differ[0]}"
        )


def test_postgres_ranks_the_development_split_as_the_in_memory_store(
    pg_dsn: str, reference: Run
) -> None:
    """PostgreSQL (its own BM25 in SQL, the cosine recomputed in float8, the scores on
    the 2**-30 grid) returns the same 50 turns in the same order for every question and
    mode, through the sync face."""
    from engramdb.postgres import PostgresStore

    with Memory(PostgresStore(pg_dsn), make_embedder("static")) as memory:
        assert_ranked_alike(reference, run_on(memory))


async def test_the_async_face_ranks_the_development_split_alike(
    pg_dsn: str, reference: Run
) -> None:
    """The async face (psycopg's AsyncConnection) ranks alike too, on the first two
    conversations (302 questions with evidence; the whole split takes two minutes
    more)."""
    from engramdb.postgres import PostgresStore

    store = PostgresStore(pg_dsn)
    memory = AsyncMemory(store, make_embedder("static"))
    run = await evaluate_async(
        load(DEV)[:2], lambda _n: memory, MODES, date_in_text=True, recall_options=EXACT
    )
    await memory.aclose()
    assert_ranked_alike(reference, run, questions=302)
