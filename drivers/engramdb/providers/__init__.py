"""Embedding providers over HTTP (extra ``http``) and local models (extra ``local``).

    from engramdb.providers import embedder_from_url
    embedder = embedder_from_url("openai:text-embedding-3-small?dimensions=512")

Every HTTP provider is one :class:`HTTPEmbedder` subclass whose behaviour (batching,
retries, validation) is written once as a flow and driven by ``embed`` (httpx.Client)
or ``aembed`` (httpx.AsyncClient). See ``docs/providers.md``.
"""

try:
    import httpx as _httpx  # noqa: F401  (checked here so the hint comes first)
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "engramdb.providers needs httpx; install it with:\npip install 'engramdb[http]'"
    ) from _exc

from ._cloudflare import CloudflareEmbedder
from ._cohere import CohereEmbedder
from ._flow import Sleep
from ._gemini import GeminiEmbedder
from ._http import HTTPEmbedder
from ._ollama import OllamaEmbedder
from ._openai import AzureOpenAIEmbedder, OpenAIEmbedder
from ._retry import RetryPolicy
from ._sentence_transformers import SentenceTransformerEmbedder
from ._url import embedder_from_url
from ._voyage import VoyageEmbedder

__all__ = [
    "AzureOpenAIEmbedder",
    "CloudflareEmbedder",
    "CohereEmbedder",
    "GeminiEmbedder",
    "HTTPEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "RetryPolicy",
    "SentenceTransformerEmbedder",
    "Sleep",
    "VoyageEmbedder",
    "embedder_from_url",
]
