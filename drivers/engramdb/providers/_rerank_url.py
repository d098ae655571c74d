"""``reranker_from_url``: build a reranker from one string.

Forms (``SCHEME:MODEL?option=value&...``)::

    cohere:rerank-v3.5
    voyage:rerank-2
    jina:jina-reranker-v2-base-multilingual
    tei:http://localhost:8080[?model=BAAI/bge-reranker-base][&api_key_env=VAR]
    infinity:mixedbread-ai/mxbai-rerank-xsmall-v1?base_url=http://localhost:7997
    sentence-transformers:cross-encoder/ms-marco-MiniLM-L-6-v2

Checked as ``embedder_from_url`` checks its strings: an unknown scheme or option, a bad
value or a missing key is a ``ConfigurationError`` before any network call, and a
credential never goes in the string.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from engramdb import ConfigurationError, Reranker

from ._modules import load
from ._url import _split, _typed

__all__ = ["RERANKER_ENV_VAR", "RERANK_SCHEMES", "reranker_from_url"]

RERANKER_ENV_VAR = "ENGRAMDB_RERANKER"

_HTTP = frozenset({"timeout", "max_batch", "max_concurrency", "max_retries"})
RERANK_SCHEMES: dict[str, frozenset[str]] = {
    "cohere": _HTTP | {"base_url"},
    "voyage": _HTTP | {"base_url"},
    "jina": _HTTP | {"base_url"},
    "tei": _HTTP | {"model", "api_key_env"},
    "infinity": _HTTP | {"base_url", "api_key_env"},
    "sentence-transformers": frozenset({"device", "batch_size", "max_batch", "model_id"}),
}


def reranker_from_url(url: str | None = None, **overrides: Any) -> Reranker:
    """Build a reranker from ``url`` (or ``$ENGRAMDB_RERANKER`` when ``url`` is None).

    ``overrides`` go to the reranker's constructor as they are (``transport=``,
    ``sleep=`` in tests, ``api_key=`` from a secret store).
    """
    if url is None:
        url = os.environ.get(RERANKER_ENV_VAR)
        if not url:
            raise ConfigurationError(
                "no reranker given: pass a string such as 'cohere:rerank-v3.5' or set "
                f"{RERANKER_ENV_VAR}"
            )
    scheme, model, options = _split(url, RERANK_SCHEMES, "reranker", "cohere:rerank-v3.5")
    typed = {**_typed(options), **overrides}
    if scheme == "tei":
        typed["base_url"] = model
        model = typed.pop("model", "reranker")
    elif scheme == "infinity" and "base_url" not in typed:
        raise ConfigurationError(
            "infinity needs base_url, e.g. 'infinity:MODEL?base_url=http://localhost:7997'"
        )
    module, name = _CLASSES[scheme]
    cls: Callable[..., Reranker] = getattr(load(module, f"the {scheme}: reranker"), name)
    return cls(model, **typed)


_CLASSES = {
    "cohere": ("._rerankers", "CohereReranker"),
    "voyage": ("._rerankers", "VoyageReranker"),
    "jina": ("._rerankers", "JinaReranker"),
    "tei": ("._rerankers", "TEIReranker"),
    "infinity": ("._rerankers", "InfinityReranker"),
    "sentence-transformers": ("._cross_encoder", "CrossEncoderReranker"),
}
