"""Recall ranks identically on InMemoryStore and SqliteStore: the same hits, in the same
order, ties included, with the same scores (to the last bits a sum's order can change)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from engramdb import HashEmbedder, InMemoryStore, Memory
from engramdb.sqlite import SqliteStore

_WORDS = [
    "Sam",
    "Kim",
    "tea",
    "coffee",
    "cello",
    "garden",
    "the",
    "what",
    "did",
    "painted",
    "paint",
    "sunrise",
    "lake",
    "May",
    "2023",
]


class _SemanticHash(HashEmbedder):
    """HashEmbedder counted as semantic, so that hybrid weighs both legs."""

    semantic = True


def _corpus(rng: random.Random) -> list[dict[str, object]]:
    texts = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 8))) for _ in range(300)]
    texts += texts[:40]  # exact duplicates: exactly equal scores in both legs
    return [
        {"text": text, "scope": ("p", str(n % 3)), "id": f"m{n:04d}"}
        for n, text in enumerate(texts)
    ]


@pytest.mark.parametrize("seed", range(3))
def test_both_stores_answer_every_recall_alike(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    items = _corpus(rng)
    memories = [
        Memory(InMemoryStore(), _SemanticHash(dimensions=32)),
        Memory(SqliteStore(tmp_path / "parity.db"), _SemanticHash(dimensions=32)),
    ]
    for memory in memories:
        memory.remember_many(items)
    scopes = [("p", "0"), ("p", "1")]
    for _ in range(40):
        query = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))
        for mode in ("hybrid", "vector", "lexical"):
            for fusion in ("convex", "rrf"):
                answers = [
                    memory.recall(query, scopes, mode=mode, fusion=fusion, top_k=60)
                    for memory in memories
                ]
                mine, theirs = ([h.memory.id for h in hits] for hits in answers)
                assert mine == theirs, (query, mode, fusion)
                # BM25 summed by SQLite and by Python differ in the last bits at most.
                for a, b in zip(*answers, strict=True):
                    assert a.score == pytest.approx(b.score, rel=1e-9, abs=1e-9)
    for memory in memories:
        memory.close()
