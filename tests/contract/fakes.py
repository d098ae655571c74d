"""Deterministic embedders and a clock for the conformance suite."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from engramdb import HashEmbedder, ProviderError
from engramdb._base.types import EmbeddingSpace, EmbedKind
from engramdb.store import DeleteItem


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class CountingEmbedder:
    """A HashEmbedder that counts the texts it embeds and can be made to fail."""

    def __init__(self, dimensions: int = 64, *, fail_queries: bool = False) -> None:
        self.inner = HashEmbedder(dimensions=dimensions)
        self.fail_queries = fail_queries
        self.embedded: list[str] = []

    @property
    def space(self) -> EmbeddingSpace:
        return self.inner.space

    @property
    def max_batch(self) -> int:
        return 8

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        if kind == "query" and self.fail_queries:
            raise ProviderError("the embedding service is down (test)", provider="hash")
        if len(texts) > self.max_batch:
            raise AssertionError(f"batch of {len(texts)} exceeds max_batch")
        self.embedded.extend(texts)
        return self.inner.embed(texts, kind)

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        return self.embed(texts, kind)


class ForgettingEmbedder(CountingEmbedder):
    """Another writer at work while texts are embedded: before its first document
    embedding, it deletes ``victim`` straight from ``store``."""

    def __init__(self, store: Any, victim: str) -> None:
        super().__init__()
        self.store = store
        self.victim = victim

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        if self.victim and kind == "document":
            self.store.batch([DeleteItem(self.victim)])
            self.victim = ""
        return super().embed(texts, kind)

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        if self.victim and kind == "document":
            await self.store.abatch([DeleteItem(self.victim)])
            self.victim = ""
        return super().embed(texts, kind)


class BrokenEmbedder(CountingEmbedder):
    """Returns vectors that violate the contract in one chosen way."""

    def __init__(self, fault: str) -> None:
        super().__init__()
        self.fault = fault

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        vectors = [list(v) for v in super().embed(texts, kind)]
        if self.fault == "dimensions":
            return [v[:-1] for v in vectors]
        if self.fault == "nan":
            return [[math.nan, *v[1:]] for v in vectors]
        if self.fault == "count":
            return vectors[:-1]
        if self.fault == "zero":
            return [[0.0] * len(v) for v in vectors]
        raise AssertionError(self.fault)


class LearningEmbedder(CountingEmbedder):
    """Like a provider without configured dimensions: ``space`` is known after one call
    and has the size of the last answer (set ``inner`` to answer another size)."""

    def __init__(self) -> None:
        super().__init__()
        self.learned: int | None = None

    @property
    def space(self) -> EmbeddingSpace:
        if self.learned is None:
            from engramdb import ConfigurationError

            raise ConfigurationError("dimensions are unknown until the first embedding")
        return EmbeddingSpace("hash", "bow", self.learned)

    @property
    def dimensions_learned(self) -> bool:
        return self.learned is not None

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        self.learned = self.inner.dimensions
        return super().embed(texts, kind)


class SpreadEmbedder:
    """A HashEmbedder's vector plus a fixed jitter per text (a ``random.Random`` seeded
    by the text): similarities follow the shared words but rarely tie, as a model's do
    (a HashEmbedder's are ratios of word counts, tied by the dozen)."""

    semantic = True

    def __init__(self, dimensions: int = 64) -> None:
        self.inner = HashEmbedder(dimensions=dimensions)

    @property
    def space(self) -> EmbeddingSpace:
        return EmbeddingSpace("test", "spread", self.inner.space.dimensions)

    @property
    def max_batch(self) -> int:
        return 64

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        vectors = []
        for text, vector in zip(texts, self.inner.embed(texts, kind), strict=True):
            rng = random.Random(text)
            vectors.append([x + 0.3 * rng.gauss(0.0, 1.0) for x in vector])
        return vectors

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        return self.embed(texts, kind)
