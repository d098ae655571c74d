"""``WorkersAIEmbedder``: embeddings from the Workers AI binding (``env.AI``).

``await env.AI.run(model, {"text": [...]})`` answers ``{"shape": [n, d], "data": [[...]]}``;
a call takes at most 100 texts. The embedding space is the one of the REST embedder
``engramdb.providers.CloudflareEmbedder`` (``cloudflare/cf/baai/bge-base-en-v1.5@768``:
provider ``cloudflare``, the model without its leading ``@``), and texts are cut to the
same character budget, so a database filled from a Worker and one filled over REST
share vectors. Async only: a Worker can only await.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from engramdb._errors import ConfigurationError, ProviderError, ValidationError
from engramdb._types import EmbeddingSpace, EmbedKind

try:  # Pyodide
    from pyodide.ffi import JsException, JsProxy, to_js
except ImportError:  # pragma: no cover - CPython
    JsException = None  # type: ignore[assignment,misc]
    JsProxy = None  # type: ignore[assignment,misc]
    to_js = None  # type: ignore[assignment]

__all__ = ["DEFAULT_MODEL", "KNOWN_DIMENSIONS", "WorkersAIEmbedder"]

DEFAULT_MODEL = "@cf/baai/bge-base-en-v1.5"
MAX_BATCH = 100  # Workers AI text-embedding models take at most 100 texts per call

KNOWN_DIMENSIONS: Mapping[str, int] = {
    "@cf/baai/bge-small-en-v1.5": 384,
    "@cf/baai/bge-base-en-v1.5": 768,
    "@cf/baai/bge-large-en-v1.5": 1024,
    "@cf/baai/bge-m3": 1024,
}
# The same budgets as engramdb.providers.CloudflareEmbedder (bge: 512 tokens, ~3 chars
# each); equal inputs give equal vectors, which is what lets the two share a space.
_CHAR_BUDGETS: Mapping[str, int] = {"@cf/baai/bge-m3": 24_000}
_DEFAULT_CHAR_BUDGET = 1_500


class WorkersAIEmbedder:
    """Text embeddings through a Workers AI binding, e.g. ``WorkersAIEmbedder(self.env.AI)``.

    ``dimensions`` defaults to the known size of ``model`` (768 for bge-base); give it for
    other models. ``pooling`` (``"mean"`` or ``"cls"``) is sent when set and becomes part
    of the space id (the two give incomparable vectors). Texts longer than the model's
    character budget are cut at the end (``truncate="end"``) or refused
    (``truncate="error"``).
    """

    provider = "cloudflare"

    def __init__(
        self,
        ai: Any,
        model: str = DEFAULT_MODEL,
        dimensions: int | None = None,
        *,
        max_batch: int = MAX_BATCH,
        pooling: str | None = None,
        truncate: str = "end",
        max_chars: int | None = None,
    ) -> None:
        if ai is None:
            raise ConfigurationError(
                'WorkersAIEmbedder got no AI binding; add "ai": {"binding": "AI"} to '
                "wrangler.jsonc and pass self.env.AI"
            )
        if not isinstance(model, str) or not model.startswith("@"):
            raise ConfigurationError(
                f"model={model!r} must be a Workers AI model name such as {DEFAULT_MODEL!r}"
            )
        dims = dimensions if dimensions is not None else KNOWN_DIMENSIONS.get(model)
        if dims is None:
            raise ConfigurationError(
                f"the dimensions of {model!r} are not known here; pass dimensions=..."
            )
        if (
            isinstance(max_batch, bool)
            or not isinstance(max_batch, int)
            or not (1 <= max_batch <= MAX_BATCH)
        ):
            raise ConfigurationError(f"max_batch={max_batch!r} must be an int in 1..{MAX_BATCH}")
        if pooling not in (None, "mean", "cls"):
            raise ConfigurationError(f"pooling={pooling!r} must be 'mean' or 'cls'")
        if truncate not in ("end", "error"):
            raise ConfigurationError(f"truncate={truncate!r} must be 'end' or 'error'")
        self._ai = ai
        self._raw = JsProxy is not None and isinstance(ai, JsProxy)
        self.model = model
        self.pooling = pooling
        self.truncate = truncate
        self.max_chars = max_chars or _CHAR_BUDGETS.get(model, _DEFAULT_CHAR_BUDGET)
        self._max_batch = max_batch
        variant = f"pooling-{pooling}" if pooling else None
        self._space = EmbeddingSpace(self.provider, model.removeprefix("@"), int(dims), variant)

    def __repr__(self) -> str:
        return f"WorkersAIEmbedder({self.model!r}, dimensions={self._space.dimensions})"

    @property
    def space(self) -> EmbeddingSpace:
        return self._space

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        raise ConfigurationError(
            "WorkersAIEmbedder is async only (the AI binding can only be awaited); use AsyncMemory"
        )

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        """One vector per text, in order; ``kind`` does not change bge embeddings."""
        if isinstance(texts, str):
            raise ValidationError("texts must be a list of strings, not one string; wrap it")
        prepared = [self._prepare(index, text) for index, text in enumerate(texts)]
        vectors: list[Sequence[float]] = []
        for start in range(0, len(prepared), self._max_batch):
            chunk = prepared[start : start + self._max_batch]
            vectors.extend(await self._run(chunk))
        return vectors

    def _prepare(self, index: int, text: object) -> str:
        if not isinstance(text, str):
            raise ValidationError(
                f"texts[{index}] is a {type(text).__name__}; every text must be a str"
            )
        if len(text) > self.max_chars:
            if self.truncate == "error":
                raise ValidationError(
                    f"texts[{index}] has {len(text)} characters; {self.model} takes at most "
                    f"{self.max_chars} here; shorten it or use truncate='end'"
                )
            return text[: self.max_chars]
        return text

    async def _run(self, texts: list[str]) -> list[list[float]]:
        inputs: dict[str, Any] = {"text": texts}
        if self.pooling:
            inputs["pooling"] = self.pooling
        try:
            if self._raw:
                from js import Object

                answer = await self._ai.run(
                    self.model, to_js(inputs, dict_converter=Object.fromEntries)
                )
                answer = answer.to_py() if isinstance(answer, JsProxy) else answer
            else:
                answer = await self._ai.run(self.model, inputs)
        except Exception as exc:
            if JsException is not None and isinstance(exc, JsException):
                message = str(exc).removeprefix("Error: ")[:300]
                raise ProviderError(
                    f"Workers AI {self.model} failed ({message}); check the model name and "
                    "the account's Workers AI limits",
                    provider=self.provider,
                ) from exc
            raise
        return self._parse(answer, len(texts))

    def _parse(self, answer: Any, count: int) -> list[list[float]]:
        data = answer.get("data") if isinstance(answer, Mapping) else None
        if not isinstance(data, list):
            raise ProviderError(
                f"Workers AI {self.model} answered without a 'data' list; is it a text "
                "embedding model?",
                provider=self.provider,
            )
        if len(data) != count:
            raise ProviderError(
                f"Workers AI {self.model} answered {len(data)} vectors for {count} texts",
                provider=self.provider,
            )
        vectors = []
        for index, values in enumerate(data):
            if not isinstance(values, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                for v in values
            ):
                raise ProviderError(
                    f"Workers AI {self.model} answered a vector at data[{index}] that is not a "
                    "list of finite numbers",
                    provider=self.provider,
                )
            vectors.append([float(v) for v in values])
        return vectors
