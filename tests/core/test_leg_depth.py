"""How many candidates a recall asks each leg for: a hybrid recall fuses each leg's best
100 (``DEPTH``, or ``top_k`` when larger); a recall in one mode asks its one leg for
``top_k``, and a bound view that re-ranks every candidate still asks for the depth."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from engramdb import HashEmbedder, InMemoryStore, Memory, Policy
from engramdb.store import Op, SearchLexical, SearchVectors

SAM = ("acme", "user", "sam")


class Recording(InMemoryStore):
    """An InMemoryStore that records the search ops it gets."""

    def __init__(self) -> None:
        super().__init__()
        self.legs: list[tuple[str, int]] = []

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        self.legs += [
            ("vector" if isinstance(op, SearchVectors) else "lexical", op.k)
            for op in ops
            if isinstance(op, (SearchVectors, SearchLexical))
        ]
        return super().batch(ops)


@pytest.fixture
def store() -> Recording:
    store = Recording()
    Memory(store, HashEmbedder()).remember_many(
        {"text": f"Sam drinks tea number {n}", "scope": SAM} for n in range(30)
    )
    return store


@pytest.mark.parametrize(
    ("mode", "top_k", "legs"),
    [
        ("hybrid", 5, [("vector", 100), ("lexical", 100)]),
        ("hybrid", 150, [("vector", 150), ("lexical", 150)]),
        ("vector", 5, [("vector", 5)]),
        ("lexical", 7, [("lexical", 7)]),
        ("vector", 150, [("vector", 150)]),
    ],
)
def test_each_leg_is_asked_for_what_its_ranking_uses(
    store: Recording, mode: str, top_k: int, legs: list[tuple[str, int]]
) -> None:
    memory = Memory(store, HashEmbedder())
    hits = memory.recall("tea", scopes=[SAM], mode=mode, top_k=top_k)
    assert len(hits) == min(top_k, 30)
    assert store.legs == legs


def test_a_policy_that_reranks_asks_one_leg_for_every_candidate(store: Recording) -> None:
    """The policy orders every candidate before the first ``top_k`` are kept, so even a
    recall in one mode asks its leg for the depth."""
    recency = Policy(recency_half_life=timedelta(days=7))
    view = Memory(store, HashEmbedder()).bind(SAM, policy=recency)
    view.recall("tea", top_k=3, mode="vector")
    assert store.legs == [("vector", 100)]
    store.legs.clear()
    Memory(store, HashEmbedder()).bind(SAM).recall("tea", top_k=3, mode="vector")
    assert store.legs == [("vector", 3)]  # a view without such a policy asks for top_k
