"""``WorkersAIEmbedder``: embeddings from the Workers AI binding (``env.AI``).

``await env.AI.run(model, {"text": [...]})`` answers ``{"shape": [n, d], "data": [[...]]}``;
a call takes at most 100 texts. The embedding space is the one of the REST embedder
``engramdb.providers.CloudflareEmbedder`` (``cloudflare/cf/baai/bge-base-en-v1.5@768``:
provider ``cloudflare``, the model without its leading ``@``), and texts are cut to the
same character budget (both read the core's one model table), so a database filled from
a Worker and one filled over REST share vectors. A failed call is retried with the same
``RetryPolicy`` as the HTTP providers. Async only: a Worker can only await.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from engramdb import ConfigurationError, EmbeddingSpace, EmbedKind, ProviderError, ValidationError
from engramdb.driver import WORKERS_AI_DEFAULT_MAX_CHARS as DEFAULT_MAX_CHARS
from engramdb.driver import WORKERS_AI_DEFAULT_MODEL as DEFAULT_MODEL
from engramdb.driver import WORKERS_AI_MAX_BATCH as MAX_BATCH
from engramdb.driver import WORKERS_AI_MODELS as MODELS
from engramdb.driver import RetryPolicy

try:  # Pyodide
    from pyodide.ffi import JsException, JsProxy, to_js
except ImportError:  # pragma: no cover - CPython
    JsException = None  # type: ignore[assignment,misc]
    JsProxy = None  # type: ignore[assignment,misc]
    to_js = None  # type: ignore[assignment]

__all__ = ["DEFAULT_MODEL", "WorkersAIEmbedder", "bind", "binding_status", "run_binding"]

logger = logging.getLogger("engramdb.providers")

# Workers AI's error codes and the HTTP status each stands for
# (developers.cloudflare.com/workers-ai/platform/errors); the binding throws
# "AiError: 3040: Capacity temporarily exceeded, please try again." and the like.
_CODE_STATUS: Mapping[int, int] = {
    3003: 400,  # incomplete request
    3006: 413,  # request too large
    3007: 408,  # timeout
    3008: 408,  # aborted
    3023: 403,  # account blocked
    3036: 429,  # the daily free allocation is used up
    3039: 400,  # fine-tune missing files
    3040: 429,  # out of capacity: try again
    3041: 403,  # private model
    3042: 404,  # invalid model id
    5004: 400,  # invalid data
    5005: 405,  # LoRA unsupported
    5007: 400,  # no such model
    5016: 403,  # model agreement
    5018: 403,  # private model
    5019: 405,  # deprecated SDK
}
# Used up for the day: no wait a retry policy allows would help.
_QUOTA_CODES = frozenset({3036, 4006})
_CODE = re.compile(r"^(?:\w+: )*?(\d{4}):")  # the code leads, after "AiError: " prefixes


def binding_status(message: str) -> int | None:
    """The HTTP status a binding error message stands for: a documented code's status;
    400 for another 5xxx code (the input or the model); ``None`` (do not retry) for a
    used-up daily allocation; 500 when the message has no known code (an internal
    failure, a timeout without a code)."""
    found = _CODE.match(message)
    if found is None:
        return 500
    code = int(found.group(1))
    if code in _QUOTA_CODES:
        return None
    return _CODE_STATUS.get(code, 400 if code >= 5000 else 500)


class WorkersAIEmbedder:
    """Text embeddings through a Workers AI binding, e.g. ``WorkersAIEmbedder(self.env.AI)``.

    ``dimensions`` defaults to the known size of ``model`` (768 for bge-base); give it for
    other models. ``pooling`` (``"mean"`` or ``"cls"``) is sent when set and becomes part
    of the space id (the two give incomparable vectors). Texts longer than the model's
    character budget are cut at the end (``truncate="end"``) or refused
    (``truncate="error"``). A call that fails with a retryable status
    (:func:`binding_status` in ``retry.retry_statuses``: capacity, timeouts, internal
    errors) is retried as ``retry`` says (default ``RetryPolicy()``, as the HTTP
    providers); ``asleep`` and ``random`` replace the wait and the jitter in tests.
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
        retry: RetryPolicy | None = None,
        asleep: Callable[[float], Awaitable[object]] | None = None,
        random: Callable[[], float] | None = None,
    ) -> None:
        bind(self, ai, model, DEFAULT_MODEL, retry, asleep, random)
        known = MODELS.get(model)
        dims = dimensions if dimensions is not None else known and known.dimensions
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
        self.pooling = pooling
        self.truncate = truncate
        self.max_chars = max_chars or (known.max_chars if known else DEFAULT_MAX_CHARS)
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
        """One binding call with retries (the HTTP providers' policy), then the parse."""
        inputs: dict[str, Any] = {"text": texts}
        if self.pooling:
            inputs["pooling"] = self.pooling
        answer = await run_binding(self, inputs)
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
            if not _finite_numbers(values):
                raise ProviderError(
                    f"Workers AI {self.model} answered a vector at data[{index}] that is not a "
                    "list of finite numbers",
                    provider=self.provider,
                )
            vectors.append(list(map(float, values)))
        return vectors


_NUMBERS = frozenset({int, float})


def _finite_numbers(values: object) -> bool:
    """Whether ``values`` is a list of ints and floats (a bool is neither), all finite:
    one C-level pass over their types and one sum, each value looked at only when the
    sum is not finite (a value is not, or the sum overflowed): in Pyodide 0.10 ms for
    768 numbers where a check of each in Python took 0.35 (``workers/tests/bench_ai.py``)."""
    if not isinstance(values, list) or not _NUMBERS.issuperset(map(type, values)):
        return False
    try:
        return math.isfinite(sum(values)) or all(map(math.isfinite, values))
    except OverflowError:  # an int beyond float64
        return False


def bind(
    owner: Any,
    ai: Any,
    model: object,
    example: str,
    retry: object,
    asleep: Callable[[float], Awaitable[object]] | None,
    random: Callable[[], float] | None,
) -> None:
    """Check and set what :func:`run_binding` reads of ``owner`` (an embedder or a
    reranker): the binding, the model name, the retry policy and the test hooks."""
    name = type(owner).__name__
    if ai is None:
        raise ConfigurationError(
            f'{name} got no AI binding; add "ai": {{"binding": "AI"}} to '
            "wrangler.jsonc and pass self.env.AI"
        )
    if not isinstance(model, str) or not model.startswith("@"):
        raise ConfigurationError(
            f"model={model!r} must be a Workers AI model name such as {example!r}"
        )
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"retry={retry!r} must be a RetryPolicy")
    owner._ai = _unwrapped(ai)
    owner._raw = JsProxy is not None and isinstance(owner._ai, JsProxy)
    owner.model = model
    owner.retry = retry if retry is not None else RetryPolicy()
    owner._asleep = asleep
    owner._random = random


def _unwrapped(ai: Any) -> Any:
    """The JS binding under the ``workers`` SDK's wrapper (``self.env.AI`` since
    workers-runtime-sdk 1.14), else ``ai`` itself. The wrapper converts an answer to
    Python by walking every number of it in Python (``python_from_rpc``): 0.4-0.5 ms for
    one 768-dimension vector and 23-25 ms for a batch of 100 in Pyodide, where
    :func:`_call`'s ``to_py()`` takes 0.1 and 2 ms (``workers/tests/bench_ai.py``). The
    wrapper keeps the binding as
    ``_binding``, an attribute of the SDK's, not an API: if it goes, the wrapper is
    called as it is, with the same answers."""
    inner = getattr(ai, "_binding", None)
    return inner if JsProxy is not None and isinstance(inner, JsProxy) else ai


async def run_binding(owner: Any, inputs: dict[str, Any]) -> Any:
    """``owner.model`` run on ``owner``'s AI binding with ``inputs``, retried as
    ``owner.retry`` says when the binding fails with a retryable status; a failure is a
    ``ProviderError`` naming the model. ``owner`` has ``_ai``, ``_raw``, ``model``,
    ``provider``, ``retry``, ``_asleep`` and ``_random`` (the embedder and the reranker)."""
    retry = 0
    while True:
        try:
            return await _call(owner, inputs)
        except Exception as exc:
            if JsException is None or not isinstance(exc, JsException):
                raise
            message = str(exc).removeprefix("Error: ")[:300]
            status = binding_status(message)
            if status not in owner.retry.retry_statuses or retry >= owner.retry.max_retries:
                attempts = f" after {retry + 1} attempts" if retry else ""
                raise ProviderError(
                    f"Workers AI {owner.model} failed{attempts} ({message}); check the "
                    "model name and the account's Workers AI limits",
                    provider=owner.provider,
                ) from exc
            delay = owner.retry.backoff(retry, _jitter(owner._random))
            logger.warning(
                "%s at the AI binding: status %s; retry %d of %d in %.2f s",
                owner.provider,
                status,
                retry + 1,
                owner.retry.max_retries,
                delay,
            )
            await _sleep(owner._asleep, delay)
            retry += 1


async def _call(owner: Any, inputs: dict[str, Any]) -> Any:
    if owner._raw:
        from js import Object

        answer = await owner._ai.run(owner.model, to_js(inputs, dict_converter=Object.fromEntries))
        return answer.to_py() if isinstance(answer, JsProxy) else answer
    return await owner._ai.run(owner.model, inputs)


def _jitter(random: Callable[[], float] | None) -> float:
    if random is not None:
        return random()
    import random as _random  # here, not at import: a Worker snapshots imported modules

    return _random.random()


async def _sleep(asleep: Callable[[float], Awaitable[object]] | None, seconds: float) -> None:
    if asleep is not None:
        await asleep(seconds)
        return
    import asyncio  # here, not at import: asyncio loads threading

    await asyncio.sleep(seconds)
