"""The embedder of a memory that embeds nothing: ``Memory(store, embedder=None,
space=EmbeddingSpace(...))`` stores and searches the vectors its caller passes
(``remember(..., vector=[...])``, ``recall(..., vector=[...])``) in the declared space.
"""

from __future__ import annotations

from collections.abc import Sequence

from engramdb._base.errors import ConfigurationError, ValidationError, shown
from engramdb._base.types import EmbeddingSpace, EmbedKind

__all__ = ["OwnVectors"]


class OwnVectors:
    """Stands where an embedder would: its ``space`` is the declared one, and asking it
    to embed is the caller's mistake (a ``ValidationError`` that names the fix), so a
    write without a vector stores nothing. ``embeds = False`` tells recall to answer a
    query given without a vector from the lexical leg alone."""

    __slots__ = ("_space",)
    embeds = False
    max_batch = 1

    def __init__(self, space: object) -> None:
        if not isinstance(space, EmbeddingSpace):
            raise ConfigurationError(
                f"space={shown(space)} must be an EmbeddingSpace(provider, model, dimensions): "
                "the space of the vectors you pass, e.g. EmbeddingSpace('mine', 'e5-small', 384)"
            )
        self._space = space

    @property
    def space(self) -> EmbeddingSpace:
        """The declared space of every vector this memory stores."""
        return self._space

    def __repr__(self) -> str:
        return f"OwnVectors({self._space.id})"

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        raise ValidationError(
            f"this memory has no embedder (embedder=None, space {self._space.id}): it "
            f"stores only the vectors you pass; pass vector=[...] ({self._space.dimensions} "
            "numbers) to remember(), or give the memory an embedder"
        )

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        return self.embed(texts, kind)
