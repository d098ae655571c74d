"""The differential check itself: it must catch a store that breaks the protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from engramdb import InMemoryStore
from engramdb.store import SearchHit, SearchLexical, SearchResult, SearchVectors
from engramdb.testing import CheckFailed, StoreUnderTest, differential_check


class _ReversedTies:
    """InMemoryStore, except that search hits of exactly equal score come oldest first
    (ascending id order): a store that breaks "equal scores newest first"."""

    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.capabilities = self.store.capabilities
        self.reordered = 0

    def batch(self, ops: Sequence[Any]) -> list[Any]:
        out = self.store.batch(ops)
        for position, (op, result) in enumerate(zip(ops, out, strict=True)):
            if isinstance(op, SearchVectors | SearchLexical) and isinstance(result, SearchResult):
                out[position] = replace(result, hits=self._reverse_ties(result.hits))
        return out

    def _reverse_ties(self, hits: tuple[SearchHit, ...]) -> tuple[SearchHit, ...]:
        ranks = {id: rank for rank, id in enumerate(sorted({h.record.id for h in hits}))}
        ordered = tuple(sorted(hits, key=lambda h: (-h.score, ranks[h.record.id])))
        self.reordered += ordered != hits
        return ordered

    def close(self) -> None:
        self.store.close()


async def test_a_store_that_orders_exact_ties_the_wrong_way_fails() -> None:
    """Identical texts give exactly equal scores; a store that orders them oldest first
    (by id ascending) is caught, although the hits tie within the cross-store
    tolerance."""
    failures = reordered = 0
    for seed in range(4):
        target = _ReversedTies()
        try:
            await differential_check(StoreUnderTest(target), seed=seed, batches=150)
        except CheckFailed:
            failures += 1
        reordered += target.reordered
    assert reordered > 0  # the fake store did answer out of order
    assert failures > 0


async def test_the_in_memory_store_passes_its_own_check() -> None:
    """The reference agrees with itself (the check is not failing everything)."""
    for seed in range(4):
        await differential_check(StoreUnderTest(InMemoryStore()), seed=seed)


@pytest.mark.parametrize("seed", range(3))
async def test_a_store_whose_errors_name_another_op_fails(seed: int) -> None:
    """A store that raises the right error class with another message (say, naming an
    op other than the one at fault) is caught: the messages must agree too."""

    class _Vague:
        def __init__(self) -> None:
            self.store = InMemoryStore()
            self.capabilities = self.store.capabilities
            self.raised = 0

        def batch(self, ops: Sequence[Any]) -> list[Any]:
            try:
                return self.store.batch(ops)
            except Exception as exc:
                self.raised += 1
                raise type(exc)("something in this batch failed") from exc

        def close(self) -> None:
            self.store.close()

    target = _Vague()
    with pytest.raises(CheckFailed):
        await differential_check(StoreUnderTest(target), seed=seed, batches=200)
    assert target.raised > 0


class _TiesByIdOnly(_ReversedTies):
    """InMemoryStore, except that search hits of exactly equal score come by id alone,
    descending: a store that ignores ``created_at`` (an imported item created earlier
    than one with a smaller id must still come after it)."""

    def _reverse_ties(self, hits: tuple[SearchHit, ...]) -> tuple[SearchHit, ...]:
        ordered = tuple(sorted(hits, key=lambda h: h.record.id, reverse=True))
        ordered = tuple(sorted(ordered, key=lambda h: -h.score))
        self.reordered += ordered != hits
        return ordered


async def test_a_store_that_breaks_ties_by_id_alone_fails() -> None:
    """Ties go by created_at before id: the check generates items created earlier than
    items with smaller ids, and a store that orders exact ties by id alone is caught."""
    failures = reordered = 0
    for seed in range(6):
        target = _TiesByIdOnly()
        try:
            await differential_check(StoreUnderTest(target), seed=seed, batches=400)
        except CheckFailed:
            failures += 1
        reordered += target.reordered
    assert reordered > 0
    assert failures > 0
