"""The embedder protocol: what Memory needs from an embedding model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from engramdb._base.errors import ValidationError
from engramdb._base.types import EmbeddingSpace, EmbedKind

__all__ = ["Embedder", "InProcessEmbedder"]


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
    size again. When the store holds no space of that model and variant yet, ``Memory``
    first confirms the learned size with one more ``embed`` call of a fixed short text,
    and refuses the same way if its answer has another size.

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


class InProcessEmbedder:
    """What the embedders that compute vectors in this process (``HashEmbedder``,
    ``StaticEmbedder``) share: ``space``, ``dimensions``, ``max_batch``, and ``embed``
    / ``aembed`` over the subclass's ``embed_one``, with their arguments checked (a bare
    string, a non-string item, more than ``max_batch`` texts or an unknown ``kind`` is a
    ``ValidationError``). No I/O: ``aembed`` returns what ``embed`` does."""

    __slots__ = ("_max_batch", "_space")

    def __init__(self, space: EmbeddingSpace, max_batch: object) -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValidationError(
                f"{type(self).__name__} max_batch={max_batch!r} must be an int >= 1, e.g. 256"
            )
        self._space = space
        self._max_batch = max_batch

    @property
    def space(self) -> EmbeddingSpace:
        """The embedding space of every vector this embedder makes."""
        return self._space

    @property
    def dimensions(self) -> int:
        """Number of vector components."""
        return self._space.dimensions

    @property
    def max_batch(self) -> int:
        """The most texts one ``embed`` call accepts."""
        return self._max_batch

    def embed_one(self, text: str) -> list[float]:
        """The unit vector of one text."""
        raise NotImplementedError

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        """Embed ``texts`` (at most ``max_batch``), one unit vector each, in order."""
        name = type(self).__name__
        if isinstance(texts, str):
            raise ValidationError(f"{name}.embed takes a sequence of texts, not a str; pass [text]")
        if len(texts) > self._max_batch:
            raise ValidationError(
                f"{name}.embed got {len(texts)} texts but max_batch is {self._max_batch}; "
                "split the input into batches"
            )
        if kind not in ("document", "query"):
            raise ValidationError(f"kind={kind!r} must be 'document' or 'query'")
        vectors: list[Sequence[float]] = []
        for text in texts:
            if not isinstance(text, str):
                raise ValidationError(
                    f"{name}.embed got a {type(text).__name__} item; pass strings only"
                )
            vectors.append(self.embed_one(text))
        return vectors

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        """Async form of :meth:`embed`; it does no I/O and returns the same vectors."""
        return self.embed(texts, kind)
