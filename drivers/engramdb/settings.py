"""Where a face (the CLI, the MCP server, ``engramdb serve``) finds its memory.

Every face resolves the same settings, in the same order: the explicit option, then
the environment, then the config file (``--config PATH``, else ``ENGRAMDB_CONFIG``,
else ``$XDG_CONFIG_HOME/engramdb/config.toml``, else
``~/.config/engramdb/config.toml``: TOML whose keys are the settings' names, ``db``,
``embedder``, ``scope``, ``session``, ``redact``, ``maintain``, ``reranker``; see
``engramdb.config_file``), then the default.

==============  ====================  ===============================================
setting         environment           default
==============  ====================  ===============================================
database        ``ENGRAMDB_DB``       ``./engramdb.sqlite3`` (a SQLite file, or a
                                      ``postgresql://`` URL: extra ``postgres``)
embedder        ``ENGRAMDB_EMBEDDER`` ``static:``, the static token table that ships
                                      with engramdb (recall by meaning with no model
                                      runtime and no service; docs/providers.md)
scope           ``ENGRAMDB_SCOPE``    ``default`` (written ``a/b/c`` for
                                      ``("a", "b", "c")``)
session         ``ENGRAMDB_SESSION``  none
redaction       ``ENGRAMDB_REDACT``   ``secrets``: credentials in texts, metadata and
                                      queries become ``[REDACTED:<kind>]`` before
                                      anything is embedded or stored; ``off`` keeps
                                      texts exactly as given
maintenance     ``ENGRAMDB_MAINTAIN`` ``on``: the long-running faces (``engramdb serve``,
                                      the MCP server) run the memory's own
                                      ``Maintainer``; ``off`` leaves maintenance to you
                                      (``engramdb maintain``). One-shot commands never
                                      run one.
reranker        ``ENGRAMDB_RERANKER`` none; a ``reranker_from_url`` string (e.g.
                                      ``cohere:rerank-v3.5``) gives every recall a
                                      rerank stage (docs/quality.md, "Rerank stage")
==============  ====================  ===============================================

The scope is the operator's choice (an option, the environment of the process or the
config file), never a model's or a request's: faces bind their memory to it (``memory.bind(...)``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from engramdb import (
    AsyncMemory,
    ConfigurationError,
    Memory,
    Scope,
    redact_secrets,
    redact_setting,
)
from engramdb.config_file import ConfigFile, find_config, read_config, safe_label
from engramdb.stores import is_postgres, open_store, store_kind
from engramdb.validate import validate_scope

T = TypeVar("T")
M = TypeVar("M", bound=AsyncMemory | Memory)

__all__ = [
    "DEFAULT_DB",
    "DEFAULT_EMBEDDER",
    "ENVIRONMENT",
    "Settings",
    "db_label",
    "find_config",
    "format_scope",
    "is_postgres",
    "maintain_setting",
    "on_store",
    "open_store",
    "parse_scope",
    "resolve",
    "safe_label",
]

DEFAULT_DB = "engramdb.sqlite3"
DEFAULT_SCOPE = "default"
DEFAULT_EMBEDDER = "static:"

ENVIRONMENT = {
    "db": "ENGRAMDB_DB",
    "embedder": "ENGRAMDB_EMBEDDER",
    "scope": "ENGRAMDB_SCOPE",
    "session": "ENGRAMDB_SESSION",
    "redact": "ENGRAMDB_REDACT",
    "maintain": "ENGRAMDB_MAINTAIN",
    "reranker": "ENGRAMDB_RERANKER",
}
"""Each setting's environment variable (the setting's name is its key in the config
file)."""


def parse_scope(text: str) -> Scope:
    """``"acme/user/sam"`` → ``("acme", "user", "sam")`` (a part may not be empty)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(f"scope {text!r} is empty; write it like acme/user/sam")
    parts = tuple(part.strip() for part in text.strip().strip("/").split("/"))
    if any(not part for part in parts):
        raise ConfigurationError(f"scope {text!r} has an empty part; write it like acme/user/sam")
    try:
        return validate_scope(parts)
    except ValueError as exc:
        raise ConfigurationError(f"scope {text!r}: {exc}") from None


def format_scope(scope: Scope) -> str:
    return "/".join(scope)


def db_label(db: str) -> str:
    """``db`` for messages: a URL's password and credential options (``password=``,
    ``sslpassword=``, also in a ``host=... password=...`` string) replaced by ``***``."""
    return safe_label(db)


def maintain_setting(environ: Mapping[str, str], name: str = "ENGRAMDB_MAINTAIN") -> bool:
    """``ENGRAMDB_MAINTAIN``: ``on`` (or empty, the default) or ``off``."""
    value = environ.get(name, "")
    word = value.strip().lower()
    if word in ("", "on", "true", "1"):
        return True
    if word in ("off", "false", "0"):
        return False
    raise ConfigurationError(
        f"{name}={value[:40]!r} is not understood; use on (the default) or off"
    )


def on_store(db: str, build: Callable[[Any], T], *, read_only: bool = False) -> T:
    """``build(store)`` on the store of ``db`` (opened read-only with ``read_only``),
    closing the store if ``build`` fails (a face that cannot build its memory leaves no
    connection open)."""
    store = open_store(db, read_only=read_only)
    try:
        return build(store)
    except BaseException:
        store.close()
        raise


@dataclass(frozen=True, slots=True)
class Settings:
    """A face's resolved settings; :meth:`open` builds the memory."""

    db: str
    embedder: str | None  # None: the default (see the module docstring)
    scope: Scope
    session: str | None = None
    redact: bool = True  # redact_secrets on texts, metadata and queries (ENGRAMDB_REDACT)
    maintain: bool = True  # long-running faces run their own maintainer (ENGRAMDB_MAINTAIN)
    reranker: str | None = None  # a reranker_from_url string (ENGRAMDB_RERANKER), or none
    # where each setting came from: "option", "environment", "file" or "default"
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    config_file: str | None = None  # the config file read, if any

    def make_embedder(self) -> Any:
        """The embedder: the configured one, else the shipped static table."""
        from engramdb.providers import embedder_from_url

        return embedder_from_url(self.embedder or DEFAULT_EMBEDDER)

    @property
    def db_label(self) -> str:
        """The database for messages (no password)."""
        return db_label(self.db)

    def make_reranker(self) -> Any:
        """The configured reranker, or None."""
        if not self.reranker:
            return None
        from engramdb.providers import reranker_from_url

        return reranker_from_url(self.reranker)

    def open(self, *, read_only: bool = False, **options: Any) -> Memory:
        """The ``Memory`` over the database (with the configured reranker, if any),
        its store opened read-only with ``read_only`` (a SQLite file)."""
        return self.build(Memory, read_only=read_only, **options)

    def build(
        self,
        face: Callable[..., M],
        embedder: Any = None,
        *,
        read_only: bool = False,
        **options: Any,
    ) -> M:
        """``face(store, embedder, **options)`` (``Memory`` or ``AsyncMemory``) over the
        database, with ``embedder`` or the configured one (built first: one that cannot
        be built opens no database), none with ``space=`` and no ``embedder`` (a memory
        of your own vectors), and the configured redaction and reranker; the store
        opened read-only with ``read_only`` (a SQLite file)."""
        options.setdefault("redact", redact_secrets if self.redact else None)
        if "reranker" not in options:
            options["reranker"] = self.make_reranker()
        own_vectors = embedder is None and options.get("space") is not None
        chosen = embedder if embedder is not None or own_vectors else self.make_embedder()

        def build(store: Any) -> M:
            return face(store, chosen, **options)

        return on_store(self.db, build, read_only=read_only)


def resolve(
    *,
    db: str | os.PathLike[str] | None = None,
    embedder: str | None = None,
    scope: str | None = None,
    session: str | None = None,
    redact: bool | None = None,
    maintain: bool | None = None,
    reranker: str | None = None,
    config: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """The settings from explicit values, then ``environ`` (default ``os.environ``), then
    the config file (``config``, else the one ``environ`` names), then the defaults."""
    env = os.environ if environ is None else environ
    file = read_config(config, env)
    given: dict[str, object] = {
        "db": None if db is None else str(db),
        "embedder": embedder or None,
        "scope": scope or None,
        "session": session or None,
        "redact": redact,
        "maintain": maintain,
        "reranker": reranker or None,
    }
    sources: dict[str, str] = {}
    for name, value in given.items():
        if value is not None:
            sources[name] = "option"
        elif env.get(ENVIRONMENT[name], "").strip():
            sources[name] = "environment"
        elif name in file.values:
            sources[name] = "file"
        else:
            sources[name] = "default"

    def text(name: str) -> str | None:
        source = sources[name]
        if source == "option":
            return str(given[name])
        if source == "environment":
            return env[ENVIRONMENT[name]]
        return str(file.values[name]) if source == "file" else None

    path = text("db") or DEFAULT_DB
    return Settings(
        db=store_kind(path).setting(path),
        embedder=text("embedder"),
        scope=parse_scope(text("scope") or DEFAULT_SCOPE),
        session=text("session"),
        redact=_switch("redact", redact, env, file),
        maintain=_switch("maintain", maintain, env, file),
        reranker=text("reranker"),
        sources=sources,
        config_file=None if file.path is None else str(file.path),
    )


def _switch(name: str, given: bool | None, env: Mapping[str, str], file: ConfigFile) -> bool:
    """``redact`` or ``maintain``: the option, the environment's word, the file's value,
    else on."""
    if given is not None:
        return given
    if env.get(ENVIRONMENT[name], "").strip():
        if name == "redact":
            return redact_setting(env[ENVIRONMENT[name]]) is not None
        return maintain_setting(env)
    return bool(file.values.get(name, True))
