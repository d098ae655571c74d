"""Rankings on LoCoMo's development split do not depend on the store or on top_k.

Runs when the split is there (``ENGRAMDB_LOCOMO``, or ``../shared/data/locomo/
locomo_dev.json`` beside the repository, as ``eval.smoke`` finds it); skipped otherwise.
Two of its seven conversations (the first two in the file: 302 questions with evidence)
with the shipped static embedder, every mode, top 50.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from engramdb import InMemoryStore, Memory
from engramdb.sqlite import SqliteStore
from eval.embedders import make_embedder
from eval.locomo import MODES, evaluate, load

ROOT = Path(__file__).resolve().parents[2]
DEV = Path(os.environ.get("ENGRAMDB_LOCOMO", ROOT.parent / "shared/data/locomo/locomo_dev.json"))

pytestmark = pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo's development split is absent")


@pytest.fixture(scope="module")
def conversations() -> list:  # type: ignore[type-arg]
    return load(DEV)


def test_every_store_ranks_the_development_split_alike(conversations: list, tmp_path: Path) -> None:  # type: ignore[type-arg]
    """InMemoryStore and SqliteStore with its pure-Python kernel return the same 50 turns
    in the same order for every question in every mode (SQLite's BM25 adds its terms in
    another order and its last bits differ: the grid of ``quantised`` absorbs that). So
    does SqliteStore's numpy kernel where both search vectors exactly (``exact=True``):
    by default it scans exactly up to 16,000 vectors a leg, where the pure-Python index
    scores a scope of these sizes (a few hundred turns) by its 4-bit copies first."""
    embedder = make_embedder("static")
    numpy = importlib.util.find_spec("numpy") is not None
    cases = [("python", {}, SqliteStore(tmp_path / "python.db", vector_kernel="python"))]
    if numpy:
        numpy_store = SqliteStore(tmp_path / "numpy.db", vector_kernel="numpy")
        cases.append(("numpy", {"exact": True}, numpy_store))
    for kernel, options, store in cases:
        runs = []
        for each in (InMemoryStore(), store):
            with Memory(each, embedder) as memory:
                runs.append(
                    evaluate(
                        conversations,
                        lambda _n, m=memory: m,
                        MODES,
                        date_in_text=True,
                        recall_options=options,
                    )
                )
        questions = len(runs[0].relevant)
        assert questions == 1033 + 312
        for mode in MODES:
            differ = [
                n for n in range(questions) if runs[0].ranked[mode][n] != runs[1].ranked[mode][n]
            ]
            assert not differ, (
                f"{kernel} kernel {options}, {mode}: {len(differ)} of {questions} rankings "
                f"differ, e.g. #{differ[0]}"
            )


def test_the_first_hits_of_the_development_split_do_not_depend_on_top_k(
    conversations: list,  # type: ignore[type-arg]
) -> None:
    """For every question, hybrid's first k hits of a larger ``top_k`` are those of
    ``top_k=k``, for k = 10 and 100 and ``top_k`` up to 1000 (before the fixed depth,
    491 of 503 questions of a held-out split changed their first 10; before the date
    stage left candidates past the depth alone, 2 of the split's 1,347)."""
    ranked: dict[int, list[list[str]]] = {}
    with Memory(InMemoryStore(), make_embedder("static")) as memory:
        evaluate(conversations, lambda _n: memory, (), date_in_text=True)  # remembers only
        asked = [(("locomo", c.sample_id), q.text) for c in conversations for q in c.questions]
        assert len(asked) == 1347
        for top_k in (10, 100, 1000):
            ranked[top_k] = [
                [hit.memory.id for hit in memory.recall(text, [scope], top_k=top_k)]
                for scope, text in asked
            ]
    for k, deeper in ((10, 100), (10, 1000), (100, 1000)):
        differ = sum(a[:k] != b[:k] for a, b in zip(ranked[k], ranked[deeper], strict=True))
        assert differ == 0, (
            f"{differ} of {len(asked)} questions changed their first {k} at {deeper}"
        )
