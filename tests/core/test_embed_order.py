"""Texts are embedded in batches cut in length order, and each vector lands on its own
text whatever the order."""

from __future__ import annotations

from collections.abc import Sequence

from engramdb import EmbeddingSpace, HashEmbedder, InMemoryStore, Memory

SCOPE = ("acme", "notes")


class Batches:
    """A HashEmbedder with max_batch=2 that records the batches it is given."""

    max_batch = 2

    def __init__(self) -> None:
        self.inner = HashEmbedder(dimensions=64)
        self.batches: list[list[str]] = []

    @property
    def space(self) -> EmbeddingSpace:
        return self.inner.space

    def embed(self, texts: Sequence[str], kind: str = "document") -> list[list[float]]:
        self.batches.append(list(texts))
        return [list(v) for v in self.inner.embed(list(texts))]

    async def aembed(self, texts: Sequence[str], kind: str = "document") -> list[list[float]]:
        return self.embed(texts, kind)


def test_batches_are_cut_in_length_order_and_vectors_land_on_their_texts() -> None:
    texts = ["a much longer text about the deploy", "short", "a medium text", "tiny one"]
    embedder = Batches()
    memory = Memory(InMemoryStore(), embedder)
    memory.remember_many({"text": t, "scope": SCOPE} for t in texts)
    assert embedder.batches == [["short", "tiny one"], ["a medium text", texts[0]]]
    for text in texts:
        hit = memory.recall(text, scopes=[SCOPE], mode="vector", top_k=1)[0]
        assert hit.memory.text == text and abs(hit.similarity - 1.0) < 1e-6
