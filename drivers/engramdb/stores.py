"""Which store a database setting names: one registry for every face.

A face (the CLI, the MCP server, ``engramdb serve``) is given a database as text: a SQLite
file's path, ``:memory:``, a ``postgresql://`` URL or a libpq ``host=... dbname=...``
string. :func:`store_kind` says which :class:`StoreKind` it is, and the kind answers
everything a face asks of it: how to open it, whether it is a file on this machine (its
it may not exist yet), and where each tenant of ``engramdb serve`` keeps
its memories (tenants never share storage: a SQLite file each, beside the setting; a
PostgreSQL database holds one tenant, so several need a server each).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engramdb import ConfigurationError
from engramdb.config_file import safe_label

__all__ = ["STORES", "StoreKind", "is_postgres", "open_store", "store_kind", "unwritable"]

# A libpq keyword/value connection string: ``host=db.example port=5432 dbname=notes``,
# every word a ``keyword=value`` and one of them naming the database or its server.
_VALUE = r"(?:'(?:[^'\\]|\\.)*'|[^\s']+)"  # a bare word or a quoted one: 'a b\'c'
_CONNINFO = re.compile(rf"\s*[a-z_]+\s*=\s*{_VALUE}(?:\s+[a-z_]+\s*=\s*{_VALUE})*\s*")
_CONNINFO_KEYS = re.compile(r"(^|\s)(host|hostaddr|dbname|service|port|user)\s*=")


def is_postgres(db: str) -> bool:
    """Whether ``db`` names a PostgreSQL database (a ``postgresql://`` URL or a libpq
    ``host=... dbname=...`` string) rather than a SQLite file."""
    if db.startswith(("postgresql://", "postgres://")):
        return True
    return bool(_CONNINFO.fullmatch(db) and _CONNINFO_KEYS.search(db))


def _open_sqlite(db: str, **options: Any) -> Any:
    from engramdb.sqlite import SqliteStore

    return SqliteStore(db, **options)


def _open_postgres(db: str, **options: Any) -> Any:
    try:
        from engramdb.postgres import PostgresStore
    except ImportError as exc:
        raise ConfigurationError(
            f"the database {safe_label(db)!r} is PostgreSQL, which needs the extra: "
            "pip install 'engramdb[postgres]'"
        ) from exc
    return PostgresStore(db, **options)


@dataclass(frozen=True, slots=True)
class StoreKind:
    """A kind of database setting.

    ``name``: a word for messages. ``matches(db)``: whether ``db`` is of this kind.
    ``open(db, **options)``: its store (``options`` go to the store, e.g.
    ``migrate=False``). ``is_file``: a file on this machine (it may not exist yet;
    ``engramdb doctor`` checks it). ``tenants``:
    whether several tenants can live under one setting (a SQLite file each, beside it);
    where not, ``engramdb serve`` refuses grants for more than one tenant.
    ``read_only``: its store opens read-only (``open(db, read_only=True)``; SQLite
    files only, so far: a PostgreSQL role without write grants is the way there).
    """

    name: str
    matches: Callable[[str], bool]
    open: Callable[..., Any]
    is_file: bool
    tenants: bool
    read_only: bool = False

    def setting(self, db: str) -> str:
        """``db`` as a face keeps it (a file's path normalised, anything else as given)."""
        return str(Path(db)) if self.is_file else db

    def exists(self, db: str) -> bool:
        """Whether there is something to open: a server's database or an in-memory one
        always is; a file only once written."""
        return not self.is_file or os.path.exists(db)

    def tenant_db(self, db: str, tenant: str) -> str:
        """Where ``tenant`` keeps its memories when the setting serves several: a file
        named by the tenant's SHA-256 in the folder ``<db>.d`` (no tenant name, which may
        be anything, becomes a path), or ``db`` itself for a kind that opens a new
        database each time (``:memory:``)."""
        if not self.tenants:
            raise ConfigurationError(
                f"the database {safe_label(db)!r} ({self.name}) holds one tenant; tenants "
                "get separate storage, so run a server per tenant, each with its own "
                "database (or use SQLite files: a file each)"
            )
        if not self.is_file:
            return db
        digest = hashlib.sha256(tenant.encode("utf-8")).hexdigest()
        return str(Path(db + ".d") / f"{digest}.sqlite3")


STORES: tuple[StoreKind, ...] = (
    StoreKind("SQLite in memory", lambda db: db == ":memory:", _open_sqlite, False, True),
    StoreKind("PostgreSQL", is_postgres, _open_postgres, False, False),
    StoreKind("SQLite", lambda db: True, _open_sqlite, True, True, read_only=True),
)
"""Every kind, asked in order; the last (a SQLite file) takes whatever the others do not."""


def store_kind(db: str) -> StoreKind:
    """The kind of the database setting ``db``."""
    return next(kind for kind in STORES if kind.matches(db))


def open_store(db: str, **options: Any) -> Any:
    """The store of ``db``: a ``PostgresStore`` for a ``postgresql://`` URL or a libpq
    ``host=... dbname=...`` string, else a ``SqliteStore`` on the file (``options`` go
    to the store, e.g. ``migrate=False``; ``read_only=True`` where the kind opens
    read-only, else a ``ConfigurationError``)."""
    kind = store_kind(db)
    if options.get("read_only") and not kind.read_only:
        raise ConfigurationError(
            f"the database {safe_label(db)!r} ({kind.name}) cannot be opened read-only; "
            "read-only opening (--read-only) is for SQLite files: drop it"
            + (" and connect as a role without write grants" if kind.name == "PostgreSQL" else "")
        )
    options = {name: value for name, value in options.items() if name != "read_only" or value}
    return kind.open(db, **options)


def unwritable(path: str) -> str | None:
    """Why this process cannot write the SQLite file ``path`` (an existing file), or None
    when it can: the file itself, or its folder (where SQLite writes its journal, or a WAL
    database's ``-wal`` and ``-shm`` files), refuses writing. A face opens such a file
    read-only rather than fail at its first write. (The superuser may write anything but
    a read-only file system, so for root only that answers.)"""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(path, os.W_OK):
        return f"you may not write {path!r}"
    if not os.access(folder, os.W_OK):
        return f"you may not write its folder {folder!r}"
    return None
