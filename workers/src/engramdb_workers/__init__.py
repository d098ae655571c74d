"""engramdb on Cloudflare Python Workers: ``D1Store``, ``WorkersAIEmbedder``,
``WorkersAIReranker`` and the memory Worker's HTTP API (see docs/workers.md).

Importing this package does no I/O and reads no randomness (Workers snapshot the
imported modules at deploy time)."""

from .ai import WorkersAIEmbedder
from .ai_rerank import WorkersAIReranker
from .d1 import D1Store

__all__ = ["D1Store", "WorkersAIEmbedder", "WorkersAIReranker"]
