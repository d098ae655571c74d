"""The Workers AI text-embedding models engramdb knows, in one table.

Two embedders reach these models: ``engramdb.providers.CloudflareEmbedder`` over REST
and ``engramdb_workers.WorkersAIEmbedder`` through a Worker's AI binding (in Pyodide,
where only the core is importable, hence this table lives here). Both name the same
space (``cloudflare/cf/baai/bge-base-en-v1.5@768``) and cut over-long texts at the same
character budget, so equal inputs give equal vectors and a database filled one way is
searchable the other way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["DEFAULT_MAX_CHARS", "DEFAULT_MODEL", "MAX_BATCH", "MODELS", "WorkersAIModel"]


@dataclass(frozen=True, slots=True)
class WorkersAIModel:
    """What engramdb needs to know of one model: its output size and its character
    budget (the model's input tokens times about 3 characters)."""

    dimensions: int
    max_chars: int


DEFAULT_MODEL = "@cf/baai/bge-base-en-v1.5"
MAX_BATCH = 100  # Workers AI text-embedding models take at most 100 texts per call
DEFAULT_MAX_CHARS = 1_500  # bge models read 512 tokens

MODELS: Mapping[str, WorkersAIModel] = MappingProxyType(
    {
        "@cf/baai/bge-small-en-v1.5": WorkersAIModel(384, DEFAULT_MAX_CHARS),
        "@cf/baai/bge-base-en-v1.5": WorkersAIModel(768, DEFAULT_MAX_CHARS),
        "@cf/baai/bge-large-en-v1.5": WorkersAIModel(1024, DEFAULT_MAX_CHARS),
        "@cf/baai/bge-m3": WorkersAIModel(1024, 24_000),  # 8,192 tokens
    }
)
