"""Local embeddings with sentence-transformers (extra ``local``), no network.

``sentence_transformers`` (and torch) are imported when the embedder is created, not
when ``engramdb.providers`` is imported. Vectors are L2-normalised. ``aembed`` runs the
model inline on the event loop (there are no threads in engramdb); keep batches small
in servers that must stay responsive.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Sequence
from typing import Any

from engramdb import ConfigurationError, EmbeddingSpace, EmbedKind

from ._local import check_input, f32_rows

__all__ = ["SentenceTransformerEmbedder"]


class SentenceTransformerEmbedder:
    """Embeddings from a sentence-transformers model, by name or local path.

    ``query_prompt`` / ``document_prompt`` name prompts stored with the model
    (``prompt_name``); ``query_prefix`` / ``document_prefix`` are literal text put
    before each input (E5: ``"query: "`` / ``"passage: "``). ``threads`` sets torch's
    intra-op thread count (one is best when other work shares the machine). The space's
    model is ``model_id``: by default the name given; a model given as a local folder
    needs ``model_id=`` (the model's own name, such as ``"all-MiniLM-L6-v2"``), because
    nothing cheap in the folder tells two models apart and a shared space would mix
    incomparable vectors.
    """

    provider = "sentence-transformers"

    def __init__(
        self,
        model: str | os.PathLike[str] = "all-MiniLM-L6-v2",
        *,
        device: str | None = None,
        threads: int | None = None,
        batch_size: int = 32,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        model_id: str | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        model = os.fspath(model)
        model_id = _model_id(model, model_id)
        try:
            sentence_transformers = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise ImportError(
                "SentenceTransformerEmbedder needs sentence-transformers; install it with:\n"
                "pip install 'engramdb[local]'"
            ) from exc
        if threads is not None:
            if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                raise ConfigurationError(f"threads={threads!r} must be a positive int")
            importlib.import_module("torch").set_num_threads(threads)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size={batch_size!r} must be a positive int")
        self.model_name = model
        self._model: Any = sentence_transformers.SentenceTransformer(
            model, device=device, trust_remote_code=trust_remote_code
        )
        get_dimensions = getattr(self._model, "get_embedding_dimension", None)
        if get_dimensions is None:  # the name before sentence-transformers 6
            get_dimensions = self._model.get_sentence_embedding_dimension
        dimensions = get_dimensions()
        if not isinstance(dimensions, int):
            raise ConfigurationError(f"model {model!r} does not declare its dimensions")
        self._batch_size = batch_size
        self.query_prompt = query_prompt
        self.document_prompt = document_prompt
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        variant = None
        if query_prompt or document_prompt or query_prefix or document_prefix:
            digest = hashlib.sha256(
                "\x00".join(
                    [query_prompt or "", document_prompt or "", query_prefix, document_prefix]
                ).encode()
            ).hexdigest()
            variant = f"prompt-{digest[:8]}"
        self._space = EmbeddingSpace(self.provider, model_id, dimensions, variant)

    @property
    def space(self) -> EmbeddingSpace:
        return self._space

    @property
    def max_batch(self) -> int:
        return self._batch_size

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        check_input(texts, kind)
        if not texts:
            return []
        prefix = self.query_prefix if kind == "query" else self.document_prefix
        prompt = self.query_prompt if kind == "query" else self.document_prompt
        matrix = self._model.encode(
            [prefix + text for text in texts],
            prompt_name=prompt,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return f32_rows(matrix)

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        return self.embed(texts, kind)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model={self.model_name!r}, space={self._space.id!r})"


def _model_id(model: str, model_id: str | None) -> str:
    """The space's model: ``model_id``, else the model's name; a folder needs a
    ``model_id`` (checked before sentence-transformers is imported)."""
    if model_id is None:
        if os.path.isdir(model):
            raise ConfigurationError(
                f"model {model!r} is a local folder: name the model it holds with "
                "model_id=, e.g. model_id='all-MiniLM-L6-v2' (in a string: "
                "st:/path/to/model?model_id=all-MiniLM-L6-v2); a folder's name cannot tell "
                "two models apart, and their vectors must not share a space"
            )
        model_id = model
    if not isinstance(model_id, str) or not model_id.strip() or any(c in model_id for c in "@#\n"):
        raise ConfigurationError(
            f"model_id={model_id!r} must be a non-empty name without '@', '#' or newlines"
        )
    return model_id
