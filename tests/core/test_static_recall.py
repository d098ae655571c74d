"""Recall by meaning with the static table that ships with engramdb, on every host (this
file also runs inside Pyodide): the vector leg alone finds facts that share no word with
the question, and the hybrid recall keeps them first."""

from __future__ import annotations

from pathlib import Path

import pytest

import engramdb
from engramdb import InMemoryStore, Memory, StaticEmbedder

TABLE = Path(engramdb.__file__).parent / StaticEmbedder.SHIPPED_FILE
SAM = ("acme", "user", "sam")
FACTS = [
    "Sam is vegetarian and loves mushroom risotto",
    "The car needs new tyres before winter",
    "Sam's daughter Mia starts school in September",
    "Sam prefers meetings after 10am",
]


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return StaticEmbedder.from_bytes(TABLE.read_bytes(), name=StaticEmbedder.SHIPPED_NAME)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("a dinner without meat", FACTS[0]),
        ("favourite dish", FACTS[0]),
        ("vehicle maintenance", FACTS[1]),
        ("when does the school year begin?", FACTS[2]),
    ],
)
def test_the_shipped_table_recalls_by_meaning(
    embedder: StaticEmbedder, query: str, expected: str
) -> None:
    """No word of the question is in the fact it should find (stop words aside)."""
    memory = Memory(InMemoryStore(), embedder)
    memory.remember_many({"text": text, "scope": SAM} for text in FACTS)
    assert embedder.semantic
    hits = memory.recall(query, scopes=[SAM], mode="vector", top_k=2)
    assert hits.status == "used"
    assert hits[0].memory.text == expected, [(h.memory.text, h.score) for h in hits]
    hybrid = memory.recall(query, scopes=[SAM], top_k=1)
    assert hybrid[0].memory.text == expected


def test_the_shipped_table_is_in_the_package_with_its_space(embedder: StaticEmbedder) -> None:
    assert embedder.space.id.startswith("static/minilm-l6-256@256#")
    assert embedder.space.id.endswith(embedder.sha256[:12])
