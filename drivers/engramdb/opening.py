"""One call to start: ``engramdb.open()``, ``engramdb.open_async()``, ``engramdb.connect()``.

::

    import engramdb

    with engramdb.open() as memory:               # ./engramdb.sqlite3, the static table
        memory.remember("Sam is vegetarian", scope=("acme", "user", "sam"))

    with engramdb.open("notes.db", scope=("acme", "user", "sam")) as sam:
        hits = sam.recall("a dinner without meat")

The database and the embedder are found as the CLI finds them (``engramdb.settings``):
the argument, else ``ENGRAMDB_DB`` / ``ENGRAMDB_EMBEDDER``, else the config file, else
``./engramdb.sqlite3`` and ``static:`` (the token table that ships with engramdb). So a
script and ``engramdb recall`` in the same folder see the same memories. A database is
a SQLite file's path or a ``postgresql://`` URL (``engramdb.stores``); an embedder is a
provider string (``openai:text-embedding-3-small``, ``engramdb.providers``) or an
:class:`~engramdb.Embedder`. The embedder is built before the database is opened, so a
provider that cannot be built leaves no file behind.

``connect(url, token)`` is the same start for a remote engramdb (``engramdb serve`` or
the Worker): a :class:`~engramdb.client.RemoteMemory`, bound to the token's scope.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from engramdb import (
    AsyncBoundMemory,
    AsyncMemory,
    BoundMemory,
    Embedder,
    Memory,
    Scope,
    ValidationError,
)
from engramdb.settings import resolve
from engramdb.validate import validate_scope

if TYPE_CHECKING:
    from engramdb.client import AsyncRemoteMemory, RemoteMemory

__all__ = ["connect", "connect_async", "open", "open_async"]

M = TypeVar("M", Memory, AsyncMemory)


def _build(
    face: Callable[..., M],
    path: str | os.PathLike[str] | None,
    embedder: str | Embedder | None,
    scope: Scope | None,
    session: str | None,
    read_only: bool,
    options: dict[str, Any],
) -> M:
    """The memory of ``face`` over the database ``path``, arguments checked first (a bad
    one opens nothing)."""
    if scope is not None:
        checked: Scope = validate_scope(scope)
        if session is not None:  # the session's scope is a scope too
            validate_scope((*checked, "session", session))
    elif session is not None:
        raise ValidationError(
            f"session={session!r} is a part of a bound scope: pass scope= as well, e.g. "
            f"engramdb.open(scope=('acme', 'user', 'sam'), session={session!r})"
        )
    if embedder is not None and not isinstance(embedder, str | Embedder):
        raise ValidationError(
            f"embedder={type(embedder).__name__} must be a provider string such as "
            "'openai:text-embedding-3-small' or 'static:', or an engramdb.Embedder"
        )
    if not isinstance(read_only, bool):
        raise ValidationError(f"read_only={read_only!r} must be True or False")
    settings = resolve(db=path, embedder=embedder if isinstance(embedder, str) else None)
    chosen = settings.make_embedder() if isinstance(embedder, str) else embedder
    return settings.build(face, chosen, read_only=read_only, **options)


@overload
def open(
    path: str | os.PathLike[str] | None = None,
    *,
    embedder: str | Embedder | None = None,
    scope: None = None,
    session: None = None,
    read_only: bool = False,
    **options: Any,
) -> Memory: ...
@overload
def open(
    path: str | os.PathLike[str] | None = None,
    *,
    embedder: str | Embedder | None = None,
    scope: Scope,
    session: str | None = None,
    read_only: bool = False,
    **options: Any,
) -> BoundMemory: ...
def open(
    path: str | os.PathLike[str] | None = None,
    *,
    embedder: str | Embedder | None = None,
    scope: Scope | None = None,
    session: str | None = None,
    read_only: bool = False,
    **options: Any,
) -> Memory | BoundMemory:
    """A :class:`~engramdb.Memory` over ``path`` (a SQLite file or a ``postgresql://``
    URL; default: the CLI's database) with ``embedder`` (default: the CLI's, the static
    table), or with ``scope=`` its view bound to ``scope`` (and ``session``), which closes
    the memory when it closes. ``read_only=True`` opens the file read-only (a copy, a
    snapshot: recall works and writes no receipt). ``space=EmbeddingSpace(...)`` with
    no ``embedder`` is a memory of your own vectors (``remember(..., vector=...)``).
    Other ``options`` go to ``Memory`` (``policy`` aside: bind yourself for a
    policy)."""
    memory = _build(Memory, path, embedder, scope, session, read_only, options)
    if scope is None:
        return memory
    return memory.bind(scope, session=session, closes_memory=True)


@overload
def open_async(
    path: str | os.PathLike[str] | None = None,
    *,
    embedder: str | Embedder | None = None,
    scope: None = None,
    session: None = None,
    read_only: bool = False,
    **options: Any,
) -> AsyncMemory: ...
@overload
def open_async(
    path: str | os.PathLike[str] | None = None,
    *,
    embedder: str | Embedder | None = None,
    scope: Scope,
    session: str | None = None,
    read_only: bool = False,
    **options: Any,
) -> AsyncBoundMemory: ...
def open_async(
    path: str | os.PathLike[str] | None = None,
    *,
    embedder: str | Embedder | None = None,
    scope: Scope | None = None,
    session: str | None = None,
    read_only: bool = False,
    **options: Any,
) -> AsyncMemory | AsyncBoundMemory:
    """:func:`open` for ``async`` code: an :class:`~engramdb.AsyncMemory`, or its bound
    view (``async with engramdb.open_async(...) as memory:``)."""
    memory = _build(AsyncMemory, path, embedder, scope, session, read_only, options)
    if scope is None:
        return memory
    return memory.bind(scope, session=session, closes_memory=True)


def connect(url: str, token: str, **options: Any) -> RemoteMemory:
    """A remote engramdb at ``url`` (``engramdb serve`` or the Worker), bound to the scope
    the server grants ``token``: ``engramdb.client.RemoteMemory(url, token, **options)``
    (needs ``pip install 'engramdb[client]'``)."""
    from engramdb.client import RemoteMemory

    return RemoteMemory(url, token, **options)


def connect_async(url: str, token: str, **options: Any) -> AsyncRemoteMemory:
    """:func:`connect` for ``async`` code: an ``AsyncRemoteMemory``."""
    from engramdb.client import AsyncRemoteMemory

    return AsyncRemoteMemory(url, token, **options)
