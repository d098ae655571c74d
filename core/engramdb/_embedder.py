"""The embedder protocol: what Memory needs from an embedding model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from ._errors import ValidationError
from ._types import EmbeddingSpace, EmbedKind

__all__ = ["Embedder", "embed_each"]


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


def embed_each(
    name: str,
    texts: Sequence[str],
    kind: EmbedKind,
    max_batch: int,
    embed_one: Callable[[str], list[float]],
) -> list[Sequence[float]]:
    """``embed`` of an in-process embedder called ``name``: the arguments checked (a
    bare string, a non-string item, more than ``max_batch`` texts or an unknown ``kind``
    is a ``ValidationError``), then ``embed_one`` of each text, in order."""
    if isinstance(texts, str):
        raise ValidationError(f"{name}.embed takes a sequence of texts, not a str; pass [text]")
    if len(texts) > max_batch:
        raise ValidationError(
            f"{name}.embed got {len(texts)} texts but max_batch is {max_batch}; "
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
        vectors.append(embed_one(text))
    return vectors
