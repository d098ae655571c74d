"""The Worker's configuration: ``wrangler.jsonc`` vars and secrets, read from ``env``.

``EMBEDDING_MODEL``       Workers AI model (default ``@cf/baai/bge-base-en-v1.5`` when the
                          ``AI`` binding exists, else ``static``), ``static`` for the
                          token table shipped with engramdb (recall by meaning in the
                          Worker's own CPU, no AI binding, nothing billed per call), or
                          ``hash`` for the offline, non-semantic ``HashEmbedder``
``EMBEDDING_DIMENSIONS``  needed only for models whose size is not known
``EMBEDDING_MAX_RETRIES`` retries of a failed Workers AI call (default 4, as over HTTP)
``RERANK_MODEL``          a Workers AI reranker (e.g. ``@cf/baai/bge-reranker-base``) that
                          re-scores the first hits of every recall (``rerank`` of
                          ``POST /v1/recall``, default 30); unset or ``off``: none
``TENANT_PARTS``          how many leading scope parts name a tenant (default 1): each
                          tenant's memories live in their own Durable Object
``SHARDS``                with ``MEMORY``: how many Durable Objects hold each tenant
                          (default 1; a power of two up to 64): a memory lives in the
                          object its id names, a recall asks every one and merges
                          (``engramdb.shards``); fixed once a tenant holds memories
``MAINTAIN``              ``on`` (default): each tenant's object maintains itself on its
                          alarm and the cron maintains a D1 database (pending texts
                          embedded, expired memories purged), their state in
                          ``/v1/status``; ``off``: no maintenance runs
``VECTOR_FLOATS_UP_TO``   how many vectors a scope's index in a tenant's object keeps as
                          float32 (default 4096); past it only their codes stay in memory
                          and a recall reads the rows it scores exactly (``none``: always
                          keep the floats)
``VECTOR_CACHE_MB``       what the vector indexes of all scopes in a tenant's object (or
                          in an isolate over D1) may hold together, in MiB (default 24);
                          past it they drop their caches, least recently used first,
                          then whole indexes (``none``: no bound)
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import engramdb
from engramdb import (
    ConfigurationError,
    HashEmbedder,
    Maintainer,
    Maintenance,
    StaticEmbedder,
    redact_setting,
)
from engramdb.driver import RetryPolicy
from engramdb.shards import MAX_SHARDS

from .ai import DEFAULT_MODEL, WorkersAIEmbedder
from .ai_rerank import WorkersAIReranker
from .durable import CACHE_BYTES, FLOATS_UP_TO

STATIC = "static"

MAINTAIN_ITEMS = 500
"""Texts embedded (and memories purged) per maintenance pass (a cron run or an object's
alarm): well inside a request's CPU budget."""

try:
    from pyodide.ffi import jsnull as _jsnull
except ImportError:  # pragma: no cover - CPython or older Pyodide
    _jsnull = None

__all__ = [
    "MAINTAIN_ITEMS",
    "STATIC",
    "cache_bytes",
    "check",
    "check_object",
    "embedder",
    "floats_up_to",
    "int_var",
    "is_null",
    "maintenance",
    "model_name",
    "reranker",
    "shards",
    "static_embedder",
    "tenant_parts",
    "var",
]


def is_null(value: Any) -> bool:
    """Whether ``value`` is Python's None or JavaScript's null."""
    return value is None or (_jsnull is not None and value is _jsnull)


def var(env: Any, name: str) -> Any:
    """``env.<name>``, or None when the binding or var is absent."""
    try:
        value = getattr(env, name, None)
    except Exception:  # a JS env without that key
        return None
    return None if is_null(value) else value


def int_var(env: Any, name: str, example: str) -> int | None:
    text = var(env, name)
    if text in (None, ""):
        return None
    try:
        return int(str(text))
    except ValueError:
        raise ConfigurationError(f"{name}={text!r} must be an integer such as {example}") from None


def model_name(env: Any) -> str:
    """``EMBEDDING_MODEL``; unset, Workers AI's default model when the ``AI`` binding
    exists, else ``static``."""
    named = str(var(env, "EMBEDDING_MODEL") or "").strip()
    if named:
        return named
    return DEFAULT_MODEL if var(env, "AI") is not None else STATIC


def embedder(env: Any) -> Any:
    """The embedder the vars name: Workers AI through ``env.AI``, ``static`` or ``hash``."""
    model = model_name(env)
    dimensions = int_var(env, "EMBEDDING_DIMENSIONS", "768")
    if model == "hash":
        return HashEmbedder(dimensions=dimensions or 256)
    if model == STATIC:
        return static_embedder()
    retries = int_var(env, "EMBEDDING_MAX_RETRIES", "4")
    retry = RetryPolicy(max_retries=retries) if retries is not None else None
    return WorkersAIEmbedder(var(env, "AI"), model=model, dimensions=dimensions, retry=retry)


def reranker(env: Any) -> WorkersAIReranker | None:
    """The reranker ``RERANK_MODEL`` names through ``env.AI``, or None (unset, ``off``)."""
    model = str(var(env, "RERANK_MODEL") or "").strip()
    if model in ("", "off"):
        return None
    retries = int_var(env, "EMBEDDING_MAX_RETRIES", "4")
    retry = RetryPolicy(max_retries=retries) if retries is not None else None
    return WorkersAIReranker(var(env, "AI"), model, retry=retry)


@functools.cache
def static_embedder() -> StaticEmbedder:
    """The static embedder of the table shipped in the engramdb wheel, read and parsed
    once per isolate, on first use (not at import: no I/O then)."""
    table = Path(engramdb.__file__).parent / StaticEmbedder.SHIPPED_FILE
    try:
        shipped = table.read_bytes()
    except FileNotFoundError:
        raise ConfigurationError(
            "EMBEDDING_MODEL=static (the default without an AI binding) needs "
            f"engramdb/{StaticEmbedder.SHIPPED_FILE}, which this upload leaves out "
            "(python_modules.exclude in wrangler.jsonc, so that the Worker fits the free "
            "plan); set EMBEDDING_MODEL to a Workers AI model such as "
            f"{DEFAULT_MODEL}, or delete the table's line from python_modules.exclude and "
            "deploy on the paid plan (10 MB)"
        ) from None
    return StaticEmbedder.from_bytes(shipped, name=StaticEmbedder.SHIPPED_NAME)


def redact(env: Any) -> Any:
    """``REDACT``: ``secrets`` (the default) redacts credentials in texts, metadata and
    queries before anything is embedded or stored; ``off`` keeps texts as given."""
    return redact_setting(str(var(env, "REDACT") or ""), "REDACT")


def _count(env: Any, name: str, default: int, least: int) -> int | None:
    """An int var of at least ``least`` (``default`` when unset), or None for ``none``."""
    if str(var(env, name) or "").strip().lower() == "none":
        return None
    value = int_var(env, name, str(default))
    if value is None:
        return default
    if value < least:
        raise ConfigurationError(
            f"{name}={value} must be {least} or more (or none); e.g. {default}"
        )
    return value


def floats_up_to(env: Any) -> int | None:
    """``VECTOR_FLOATS_UP_TO``: the index size past which an object keeps only codes."""
    return _count(env, "VECTOR_FLOATS_UP_TO", FLOATS_UP_TO, 0)


def cache_bytes(env: Any) -> int | None:
    """``VECTOR_CACHE_MB``: what an object's vector indexes may hold together, in bytes."""
    megabytes = _count(env, "VECTOR_CACHE_MB", CACHE_BYTES // 2**20, 1)
    return None if megabytes is None else megabytes * 2**20


def check_object(env: Any) -> None:
    """Parse the vars only a tenant's object reads (``ConfigurationError``)."""
    tenant_parts(env)
    shards(env)
    floats_up_to(env)
    cache_bytes(env)


def tenant_parts(env: Any) -> int:
    """``TENANT_PARTS``: the leading scope parts that name a tenant (1 to 8)."""
    parts = int_var(env, "TENANT_PARTS", "1")
    if parts is None:
        return 1
    if not 1 <= parts <= 8:
        raise ConfigurationError(f"TENANT_PARTS={parts} must be between 1 and 8")
    return parts


def shards(env: Any) -> int:
    """``SHARDS``: the objects of each tenant, a power of two from 1 to 64 (so that a
    tenant grows by doubling, each memory staying in its shard or moving to one new)."""
    count = int_var(env, "SHARDS", "4")
    if count is None:
        return 1
    if count < 1 or count > MAX_SHARDS or count & (count - 1):
        raise ConfigurationError(
            f"SHARDS={count} must be a power of two from 1 to {MAX_SHARDS}, such as 4"
        )
    return count


def _driven_by_the_host(maintainer: Maintainer) -> Any:
    """The Worker's maintenance runner: nothing runs between requests (an isolate has no
    background); the object's alarm or the cron runs ``maintainer.arun_once()``."""
    return lambda: None


def maintenance(env: Any) -> Maintenance | bool:
    """``MAINTAIN``: ``on`` (the default) gives the memory its own ``Maintainer``, run
    by the object's alarm or the cron (``max_items=MAINTAIN_ITEMS``); ``off``: none."""
    text = str(var(env, "MAINTAIN") or "")
    word = text.strip().lower()
    if word in ("", "on", "true", "1"):
        return Maintenance(max_items=MAINTAIN_ITEMS, runner=_driven_by_the_host)
    if word in ("off", "false", "0"):
        return False
    raise ConfigurationError(
        f"MAINTAIN={text[:40]!r} is not understood; use on (the default) or off"
    )


def check(env: Any) -> None:
    """Parse every var the Worker reads, as a request would, without building the
    embedder or touching a binding: ``ConfigurationError`` names the first bad one
    (readiness). The storage binding (``MEMORY`` or ``DB``) must be there."""
    if var(env, "MEMORY") is None and var(env, "DB") is None:
        raise ConfigurationError(
            "neither MEMORY (a Durable Object namespace) nor DB (a D1 database) is bound; "
            "bind one in wrangler.jsonc"
        )
    if var(env, "MEMORY") is not None:
        check_object(env)
    cache_bytes(env)
    maintenance(env)
    redact(env)
    int_var(env, "EMBEDDING_DIMENSIONS", "768")
    int_var(env, "EMBEDDING_MAX_RETRIES", "4")
    int_var(env, "RATE_LIMIT_PERIOD", "60")
