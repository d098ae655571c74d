"""The static table ships in the package and is the one ``eval/distill_static.md``
measured: its space id pins its bytes, so changing it is a deliberate act."""

from __future__ import annotations

import math
from pathlib import Path

import engramdb
from engramdb import StaticEmbedder

SPACE = "static/minilm-l6-256@256#670d78f475aa"


def shipped_table() -> bytes:
    return (Path(engramdb.__file__).parent / StaticEmbedder.SHIPPED_FILE).read_bytes()


def cosine(embedder: StaticEmbedder, a: str, b: str) -> float:
    pairs = zip(embedder.embed_one(a), embedder.embed_one(b), strict=True)
    return math.fsum(x * y for x, y in pairs)


def test_the_shipped_table_loads_into_its_pinned_space() -> None:
    embedder = StaticEmbedder.from_bytes(shipped_table(), name=StaticEmbedder.SHIPPED_NAME)
    assert embedder.space.id == SPACE
    assert embedder.semantic is True


def test_the_shipped_table_finds_meaning_beyond_shared_words() -> None:
    """No word is shared, yet food is closer to food than to a late train."""
    embedder = StaticEmbedder.from_bytes(shipped_table(), name=StaticEmbedder.SHIPPED_NAME)
    food = cosine(embedder, "I love pizza", "my favourite food is pasta")
    train = cosine(embedder, "I love pizza", "the train was late")
    assert food > train + 0.2


def test_the_shipped_table_answers_the_demo_by_meaning() -> None:
    """The demo's vector-leg question ranks the food fact first (a lone-token table did
    not: the name "sam" outweighed the meaning; see eval/distill_static.md)."""
    embedder = StaticEmbedder.from_bytes(shipped_table(), name=StaticEmbedder.SHIPPED_NAME)
    question = "what does Sam like to eat?"
    food = cosine(embedder, question, "Sam is vegetarian and loves mushroom risotto")
    others = [
        cosine(embedder, question, "Sam's daughter Mia starts school in September"),
        cosine(embedder, question, "Sam prefers meetings after 10am"),
    ]
    assert food > max(others) + 0.05
