"""LangGraph's ``index`` configuration as an engramdb embedder.

``index["embed"]`` may be any engramdb :class:`~engramdb.Embedder` (used as it is), a
``"provider:model"`` string (built by :func:`engramdb.providers.embedder_from_url`), or
what LangGraph accepts besides: a LangChain ``Embeddings`` or a function from a list of
texts to vectors (sync or async), wrapped by LangGraph's ``ensure_embeddings``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engramdb import ConfigurationError, Embedder, EmbeddingSpace, EmbedKind
from langgraph.store.base import Embeddings, ensure_embeddings

__all__ = ["Index", "LangChainEmbedder", "index_of"]


class LangChainEmbedder:
    """An engramdb embedder over a LangChain ``Embeddings``: documents through
    ``embed_documents``/``aembed_documents``, queries through ``embed_query``/
    ``aembed_query``. Its space is ``langchain/<model>@<dims>``, where the model is the
    object's ``model`` (or ``model_name``) attribute, else its class name."""

    semantic = True

    def __init__(self, embeddings: Embeddings, dimensions: int, max_batch: int = 256) -> None:
        self.embeddings = embeddings
        name = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
        if not isinstance(name, str) or not name:
            name = type(embeddings).__name__
        self._space = EmbeddingSpace("langchain", re.sub(r"[@#\s]", "_", name), dimensions)
        self._max_batch = max_batch

    def __repr__(self) -> str:
        return f"LangChainEmbedder({self.embeddings!r}, {self._space.dimensions})"

    @property
    def space(self) -> EmbeddingSpace:
        return self._space

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        if kind == "query":
            return [self.embeddings.embed_query(text) for text in texts]
        return list(self.embeddings.embed_documents(list(texts)))

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        if kind == "query":
            return [await self.embeddings.aembed_query(text) for text in texts]
        return list(await self.embeddings.aembed_documents(list(texts)))


@dataclass(frozen=True, slots=True)
class Index:
    """A checked ``index`` configuration."""

    config: dict[str, Any]  # as given (LangGraph's stores expose it as index_config)
    embedder: Embedder
    embeddings: Any  # the LangChain Embeddings, when one was given
    fields: tuple[str, ...]


def index_of(index: Mapping[str, Any] | None) -> Index | None:
    """Check LangGraph's ``index`` argument: ``{"dims", "embed", "fields"}`` (the SQLite
    store's ``"text_fields"`` is read as ``"fields"``)."""
    if index is None:
        return None
    if not isinstance(index, Mapping) or "embed" not in index:
        raise ValueError(
            f"index={index!r} must be a dict with 'embed' (an embedder, a LangChain "
            "Embeddings, a function or a 'provider:model' string) and 'dims'"
        )
    config = dict(index)
    embed = config["embed"]
    dims = config.get("dims")
    fields = config.get("fields") or config.get("text_fields") or ["$"]
    if isinstance(fields, str):
        fields = [fields]
    if not isinstance(fields, list | tuple) or not all(isinstance(f, str) for f in fields):
        raise ValueError(f"index fields={fields!r} must be a list of field paths, e.g. ['text']")
    embeddings: Any = None
    if isinstance(embed, str):
        from engramdb.providers import embedder_from_url

        embedder = embedder_from_url(embed)
    elif isinstance(embed, Embedder):
        embedder = embed
    else:
        if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
            raise ValueError(
                f"index dims={dims!r} must be the embedding size as a positive int, "
                "e.g. {'dims': 1536, 'embed': ...}"
            )
        embeddings = ensure_embeddings(embed)
        embedder = LangChainEmbedder(embeddings, dims)
    if embeddings is None and dims is not None:
        try:
            known = embedder.space.dimensions
        except ConfigurationError:  # learned from the first answer: checked then
            known = dims
        if dims != known:
            raise ValueError(
                f"index dims={dims!r} differs from the embedder's {known}; leave dims out "
                "or make them agree (a provider URL takes ?dimensions=N)"
            )
    return Index(config, embedder, embeddings, tuple(fields))
