"""engramdb: durable semantic memory for AI agents.

``import engramdb`` loads only the standard-library core. Drivers live in submodules
that come from the same namespace: ``engramdb.sqlite``, ``engramdb.providers`` ...
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from ._embedder import Embedder
from ._errors import (
    ConfigurationError,
    ConflictError,
    CorruptDataError,
    DimensionMismatchError,
    EngramError,
    MigrationError,
    NotFoundError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
    SchemaTooNewError,
    StoreError,
    ValidationError,
)
from ._flows import MemoryStatus
from ._hash_embedder import HashEmbedder
from ._inmemory import InMemoryStore
from ._memory import AsyncMemory, Memory
from ._store import AsyncStore, ScopeCount, StoreCapabilities, SyncStore
from ._types import EmbeddingSpace, Evidence, Hit, Hits, MemoryRecord, ScopePrefix
from ._validate import Limits

__version__ = "0.1.0"

__all__ = [
    "AsyncMemory",
    "AsyncStore",
    "ConfigurationError",
    "ConflictError",
    "CorruptDataError",
    "DimensionMismatchError",
    "Embedder",
    "EmbeddingSpace",
    "EngramError",
    "Evidence",
    "HashEmbedder",
    "Hit",
    "Hits",
    "InMemoryStore",
    "Limits",
    "Memory",
    "MemoryRecord",
    "MemoryStatus",
    "MigrationError",
    "NotFoundError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderTimeoutError",
    "SchemaTooNewError",
    "ScopeCount",
    "ScopePrefix",
    "StoreCapabilities",
    "StoreError",
    "SyncStore",
    "ValidationError",
    "__version__",
]
