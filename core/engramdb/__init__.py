"""engramdb: durable semantic memory for AI agents.

``import engramdb`` loads only the standard-library core. Drivers live in submodules
that come from the same namespace: ``engramdb.sqlite``, ``engramdb.providers`` ...

The core by concern (``docs/architecture.md`` has the module map in full); a package's
``__init__`` is its public face, its ``_``-modules are private:

* ``store`` -- the store protocol (ops in, results out), ``store.semantics`` (what every
  op means), ``store.rows`` (a SQL store's item row), ``InMemoryStore``, the SQL dialect;
* ``flows`` -- memory operations as generators of effects, ``flows.context``, and the
  faces that drive them (``Memory``, bound views, maintenance, policy, labels);
* ``ranking`` -- from the legs to a recall's hits: fusion, ties, the date and rerank stages;
* ``agents`` -- tools, retriever, context blocks; ``documents`` -- chunked documents;
* ``http_api`` -- the HTTP API as functions (routes, OpenAPI, errors, wire format);
* ``json_format`` -- the one JSON form of records and hits; ``validate`` -- argument
  checks; ``shards`` -- a tenant over several stores; ``driver`` -- the driver kit;
  ``testing`` -- the conformance suites;
* private: ``_base`` (types, errors, clock), ``_vectors``, ``_lexical``,
  ``_embedders``.
"""

import importlib as _importlib
import importlib.machinery as _import_machinery
import sys as _sys
import types as _types
import typing as _typing

__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from engramdb._base.errors import (
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
from engramdb._base.types import (
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
from engramdb._embedders.embedder import Embedder
from engramdb._embedders.hash_embedder import HashEmbedder
from engramdb._embedders.static_embedder import StaticEmbedder, build_static_table
from engramdb.agents import MemoryTools, Retriever, format_context, memory_tools, retriever
from engramdb.flows._bound import BoundStatus
from engramdb.flows._labels import LabelRules
from engramdb.flows._maintainer import Maintainer, Maintenance, MaintenanceSnapshot
from engramdb.flows._maintenance import MaintenanceReport
from engramdb.flows._memory_faces_async import AsyncMemory
from engramdb.flows._memory_faces_sync import Memory
from engramdb.flows._operations import MemoryStatus
from engramdb.flows._policy import Forgetting, Policy
from engramdb.flows._redact import redact_secrets, redact_setting
from engramdb.flows._view_faces_async import AsyncBoundMemory
from engramdb.flows._view_faces_sync import BoundMemory
from engramdb.ranking._rerank_guard import RerankGuard
from engramdb.ranking._reranker import Reranker
from engramdb.store import AsyncStore, ScopeCount, StoreCapabilities, SyncStore
from engramdb.store._inmemory import InMemoryStore
from engramdb.validate import Limits

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


# Public modules that moved into a package after 0.2.0 keep their old import paths
# (CHANGELOG.md, "Unreleased").
_MOVED = {
    "engramdb.context": "engramdb.flows.context",
    "engramdb.semantics": "engramdb.store.semantics",
    "engramdb.store_rows": "engramdb.store.rows",
}


if _typing.TYPE_CHECKING:  # the ABCs for the type checker only: importlib.abc costs 8 ms
    from importlib.abc import Loader, MetaPathFinder

    class _FinderLoader(MetaPathFinder, Loader): ...
else:
    _FinderLoader = object


class _MovedModules(_FinderLoader):
    """Finds a moved module under its old path: the same module object, not a copy."""

    def find_spec(
        self, name: str, path: object = None, target: object = None
    ) -> _import_machinery.ModuleSpec | None:
        return _import_machinery.ModuleSpec(name, self) if name in _MOVED else None

    def create_module(self, spec: _import_machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: _types.ModuleType) -> None:
        # The import system hands back whatever sys.modules holds under the name once
        # this returns, so the old path resolves to the new module itself.
        _sys.modules[module.__name__] = _importlib.import_module(_MOVED[module.__name__])


_sys.meta_path.append(_MovedModules())


# One call to start (``engramdb.opening``): they open SQLite files and build providers,
# which live in the drivers, so they load on first use and the core imports no driver.
_FROM_DRIVERS = {
    "connect": "engramdb.opening",
    "connect_async": "engramdb.opening",
    "open": "engramdb.opening",
    "open_async": "engramdb.opening",
}

if _typing.TYPE_CHECKING:
    from engramdb.opening import connect as connect
    from engramdb.opening import connect_async as connect_async
    from engramdb.opening import open as open
    from engramdb.opening import open_async as open_async


def __getattr__(name: str) -> object:
    if name not in _FROM_DRIVERS:
        raise AttributeError(f"module 'engramdb' has no attribute {name!r}")
    try:
        module = _importlib.import_module(_FROM_DRIVERS[name])
    except ModuleNotFoundError as missing:  # a core-only install: Pyodide, the Worker
        raise ImportError(
            f"engramdb.{name} needs engramdb's drivers, which this install lacks (a "
            "core-only build, as in a Worker): build Memory(store, embedder) yourself"
        ) from missing
    value = getattr(module, name)
    globals()[name] = value
    return value
