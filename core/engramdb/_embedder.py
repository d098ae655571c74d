"""The embedder protocol: what Memory needs from an embedding model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ._types import EmbeddingSpace, EmbedKind

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one :class:`EmbeddingSpace`.

    ``embed`` and ``aembed`` return one vector per input text, in input order.
    ``kind`` is ``"document"`` for texts to remember and ``"query"`` for recall queries;
    models with task types or prefixes (Gemini, E5, nomic) embed them differently.
    ``max_batch`` is the most texts one call accepts; callers split larger inputs.
    An embedder whose dimensions are learned from the first response may change its
    ``space`` once, after that response; it says so with ``dimensions_learned = True``,
    and ``Memory`` then refuses (``ProviderError``) to store vectors of a learned space
    when the store holds the same model and variant with other dimensions, and calls its
    ``forget_dimensions()`` (if it has one) so that the next valid answer teaches the
    size again.

    An embedder may declare ``semantic = False`` when its vectors carry no meaning
    beyond the words (``HashEmbedder``); recall's hybrid mode then weighs its vector leg
    0 by default (see ``docs/lexical.md``). Without the attribute it counts as semantic.
    """

    @property
    def space(self) -> EmbeddingSpace: ...

    @property
    def max_batch(self) -> int: ...

    def embed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]: ...

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]: ...
