"""The driver kit: what a driver executes, in one public module.

engramdb writes every behaviour that needs I/O once, as a generator that yields requests
and receives their results; a driver only performs the requests. This module holds what
the drivers (``engramdb.sqlite``, ``engramdb.postgres``, ``engramdb.providers``, the
Worker's D1 and Durable Object stores) execute, and what yours would:

* the runners: :func:`run` drives a generator with plain calls of ``perform``,
  :func:`arun` awaits them; an exception ``perform`` raises is thrown into the
  generator at its ``yield``.
* the SQLite dialect, for a driver of a SQLite-like database (``sqlite3``, D1, Durable
  Objects): :func:`run_batch` (a batch of ``engramdb.store`` ops as a plan that yields
  lists of :class:`Statement`, each list run atomically, and receives per statement its
  :data:`Rows`; :data:`OPS` is the op table it handles, a store's ``OPS``),
  :class:`Transaction` (a migration step, committed at once),
  :class:`SqliteVectorCache` (the in-process vector cache a driver keeps per store
  object; its ``index`` factory may build a driver's own :class:`CacheIndex`, which
  answers as the pure-Python index does through :func:`check_vector_query`,
  :func:`eligible_vector_positions`, :func:`score_vectors_exactly` and
  :func:`vector_row_errors`, and searches approximately where it does:
  :func:`vector_candidates_for` and :func:`use_exact_vector_scan`; it may hold its keys
  in a :class:`CompactKeys`, 26 bytes per id), :data:`MAX_PARAMS`,
  and the migrations: :data:`MIGRATIONS`, :data:`HEAD_VERSION`, :class:`VersionSource`,
  :func:`read_version`, :func:`migration_statements` (one migration's statements, as a
  driver runs them), :func:`pending_migrations`, :func:`migrate` (the one algorithm
  that runs them), :func:`schema_gate` (the gate every SQLite-dialect store runs before
  a batch on a database not known to be at head) and :func:`check_schema` (its verdict,
  which PostgreSQL's gate gives too); :func:`index_data` (a stored vector's index data,
  ``docs/storage-format.md``).
  The item row every SQL store shares is in :mod:`engramdb.store.rows`.
* the head rule of an approximate vector leg, for a store that searches in steps of a
  flow (PostgreSQL's HNSW search): :func:`vector_searches_for` (how many hits each
  search asks for, whatever ``k``) and :func:`extend_vector_head` (the head extended
  to ``k`` by a deeper search), so that a larger ``k`` only appends.
* time as stored: :func:`to_ms` and :func:`from_ms` (integer milliseconds since the
  epoch, aware UTC datetimes) and :func:`system_clock`.
* the retry policy of provider calls: :class:`RetryPolicy` and :data:`RETRY_STATUSES`.
* the Workers AI model table shared by the REST and the binding embedders:
  :data:`WORKERS_AI_MODELS` (``WorkersAIModel`` per model name),
  :data:`WORKERS_AI_DEFAULT_MODEL`, :data:`WORKERS_AI_MAX_BATCH`,
  :data:`WORKERS_AI_DEFAULT_MAX_CHARS`.

These names are public and stable (``docs/stores.md``, "The driver kit"); the modules
they come from are private and may move. Standard library only, no I/O.
"""

from engramdb._base.clock import from_ms, system_clock, to_ms
from engramdb._embedders.retry_policy import RETRY_STATUSES, RetryPolicy
from engramdb._embedders.workers_ai_models import DEFAULT_MAX_CHARS as WORKERS_AI_DEFAULT_MAX_CHARS
from engramdb._embedders.workers_ai_models import DEFAULT_MODEL as WORKERS_AI_DEFAULT_MODEL
from engramdb._embedders.workers_ai_models import MAX_BATCH as WORKERS_AI_MAX_BATCH
from engramdb._embedders.workers_ai_models import MODELS as WORKERS_AI_MODELS
from engramdb._embedders.workers_ai_models import WorkersAIModel
from engramdb._vectors.exact import check_query as check_vector_query
from engramdb._vectors.exact import eligible_positions as eligible_vector_positions
from engramdb._vectors.exact import score_exactly as score_vectors_exactly
from engramdb._vectors.index_data import check_dimensions as check_vector_dimensions
from engramdb._vectors.index_data import index_data
from engramdb._vectors.index_data import row_errors as vector_row_errors
from engramdb._vectors.keys import CompactKeys
from engramdb._vectors.rules import candidates_for as vector_candidates_for
from engramdb._vectors.rules import extend_head as extend_vector_head
from engramdb._vectors.rules import searches_for as vector_searches_for
from engramdb._vectors.rules import use_exact as use_exact_vector_scan
from engramdb.flows._trampoline import arun, run
from engramdb.store._sqlite import (
    MAX_PARAMS,
    OPS,
    CacheIndex,
    Plan,
    Rows,
    SqliteVectorCache,
    Statement,
    Transaction,
    run_batch,
)
from engramdb.store._sqlite.schema import (
    HEAD_VERSION,
    MIGRATIONS,
    Migration,
    VersionSource,
    check_schema,
    migrate,
    migration_statements,
    pending_migrations,
    read_version,
    schema_gate,
)

__all__ = [
    "HEAD_VERSION",
    "MAX_PARAMS",
    "MIGRATIONS",
    "OPS",
    "RETRY_STATUSES",
    "WORKERS_AI_DEFAULT_MAX_CHARS",
    "WORKERS_AI_DEFAULT_MODEL",
    "WORKERS_AI_MAX_BATCH",
    "WORKERS_AI_MODELS",
    "CacheIndex",
    "CompactKeys",
    "Migration",
    "Plan",
    "RetryPolicy",
    "Rows",
    "SqliteVectorCache",
    "Statement",
    "Transaction",
    "VersionSource",
    "WorkersAIModel",
    "arun",
    "check_schema",
    "check_vector_dimensions",
    "check_vector_query",
    "eligible_vector_positions",
    "extend_vector_head",
    "from_ms",
    "index_data",
    "migrate",
    "migration_statements",
    "pending_migrations",
    "read_version",
    "run",
    "run_batch",
    "schema_gate",
    "score_vectors_exactly",
    "system_clock",
    "to_ms",
    "use_exact_vector_scan",
    "vector_candidates_for",
    "vector_row_errors",
    "vector_searches_for",
]
