"""engramdb: durable semantic memory for AI agents.

``import engramdb`` loads only the standard-library core. Drivers live in submodules
that come from the same namespace: ``engramdb.sqlite``, ``engramdb.providers`` ...
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from ._embedders.embedder import Embedder
from ._embedders.hash_embedder import HashEmbedder
from ._embedders.static_embedder import StaticEmbedder, build_static_table
from ._errors import (
    ConfigurationError,
    ConflictError,
    CorruptDataError,
    DimensionMismatchError,
    EngramError,
    IngestError,
    MigrationError,
    NotFoundError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
    SchemaTooNewError,
    StoreError,
    ValidationError,
)
from ._flows.agents import MemoryTools, Retriever, format_context, memory_tools, retriever
from ._flows.bound import AsyncBoundMemory, BoundMemory, BoundStatus
from ._flows.labels import LabelRules
from ._flows.maintainer import Maintainer, Maintenance, MaintenanceSnapshot
from ._flows.maintenance import MaintenanceReport
from ._flows.memory import AsyncMemory, Memory
from ._flows.operations import MemoryStatus
from ._flows.policy import Forgetting, Policy
from ._flows.validate import Limits
from ._ranking.rerank_guard import RerankGuard
from ._ranking.reranker import Reranker
from ._redact import redact_secrets, redact_setting
from ._store.inmemory import InMemoryStore
from ._types import (
    ContextUtility,
    EmbeddingSpace,
    EmbedKind,
    Evidence,
    Hit,
    Hits,
    MemoryRecord,
    Remembered,
    Scope,
    ScopePrefix,
    Utility,
)
from .store import AsyncStore, ScopeCount, StoreCapabilities, SyncStore

__version__ = "0.2.0"

__all__ = [
    "AsyncBoundMemory",
    "AsyncMemory",
    "AsyncStore",
    "BoundMemory",
    "BoundStatus",
    "ConfigurationError",
    "ConflictError",
    "ContextUtility",
    "CorruptDataError",
    "DimensionMismatchError",
    "EmbedKind",
    "Embedder",
    "EmbeddingSpace",
    "EngramError",
    "Evidence",
    "Forgetting",
    "HashEmbedder",
    "Hit",
    "Hits",
    "InMemoryStore",
    "IngestError",
    "LabelRules",
    "Limits",
    "Maintainer",
    "Maintenance",
    "MaintenanceReport",
    "MaintenanceSnapshot",
    "Memory",
    "MemoryRecord",
    "MemoryStatus",
    "MemoryTools",
    "MigrationError",
    "NotFoundError",
    "Policy",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderTimeoutError",
    "Remembered",
    "RerankGuard",
    "Reranker",
    "Retriever",
    "SchemaTooNewError",
    "Scope",
    "ScopeCount",
    "ScopePrefix",
    "StaticEmbedder",
    "StoreCapabilities",
    "StoreError",
    "SyncStore",
    "Utility",
    "ValidationError",
    "__version__",
    "build_static_table",
    "format_context",
    "memory_tools",
    "redact_secrets",
    "redact_setting",
    "retriever",
]
