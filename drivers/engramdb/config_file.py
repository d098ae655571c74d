"""The config file of the faces: the settings of ``engramdb.settings`` in TOML.

Where: ``--config PATH`` (the CLI and both servers), else ``$ENGRAMDB_CONFIG``, else
``$XDG_CONFIG_HOME/engramdb/config.toml``, else ``$HOME/.config/engramdb/config.toml``.
A file named by ``--config`` or ``ENGRAMDB_CONFIG`` must exist; the default one may be
missing (then there is no file). The keys are the settings' names::

    db = "~/memory.sqlite3"       # ~ is your home; a relative path is the file's folder's
    embedder = "openai:text-embedding-3-small"
    scope = "acme/user/sam"
    session = "s1"
    redact = true                  # or "secrets"; false or "off" keeps texts as given
    maintain = true                # or "on"; false or "off"
    reranker = "cohere:rerank-v3.5"
    allow_secrets = false          # true: values may hold a credential (chmod 600 the file)

**No credentials unless you say so.** A value that holds one (a password in a URL, a
query option named like ``key``, ``token``, ``secret`` or ``password``, or a key that
``redact_secrets`` recognises) is refused, naming the key and never the value, unless
the file sets ``allow_secrets = true``; and a file that sets it must be readable by its
owner only. Provider keys come from the environment anyway (``OPENAI_API_KEY``,
``api_key_env=VAR``: docs/providers.md), and a PostgreSQL password from ``PGPASSWORD``
or ``~/.pgpass``.
"""

from __future__ import annotations

import difflib
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from engramdb import ConfigurationError, redact_secrets

__all__ = [
    "KEYS",
    "ConfigFile",
    "find_config",
    "holds_credential",
    "read_config",
    "safe_label",
]

TEXT_KEYS = ("db", "embedder", "scope", "session", "reranker")
SWITCHES = {
    # key: (words meaning on, words meaning off, the default's word)
    "redact": (("secrets", "on"), ("off", "none"), "secrets"),
    "maintain": (("on",), ("off",), "on"),
}
KEYS = (*TEXT_KEYS, *SWITCHES, "allow_secrets")
"""The keys a config file may hold."""

_SECRET_NAMES = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential"}
    | {"credentials", "sslpassword", "access_token", "auth_token", "client_secret"}
)
_FIX = (
    "put the credential in the environment instead (a provider's key variable or "
    "api_key_env=VAR for an embedder or reranker, PGPASSWORD or ~/.pgpass for "
    "PostgreSQL), or set allow_secrets = true in the file and make it readable by you "
    "only (chmod 600)"
)


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """The file that was read (``path`` None: none) and its checked values: strings for
    the text keys, booleans for ``redact`` and ``maintain``."""

    path: Path | None = None
    values: Mapping[str, str | bool] = field(default_factory=dict)


def _secret_name(name: str) -> bool:
    name = name.lower()
    if name.endswith("_env"):  # api_key_env=VAR names a variable, it holds no key
        return False
    return name in _SECRET_NAMES or name.endswith(("_key", "_token", "_secret", "_password"))


def holds_credential(value: str) -> bool:
    """Whether ``value`` (a setting) holds what looks like a credential: a URL's
    password, a query option named like a credential, or a key ``redact_secrets``
    recognises."""
    if redact_secrets(value) != value:
        return True
    try:
        parts = urlsplit(value)
        if parts.password is not None:
            return True
        return any(_secret_name(name) for name, _ in parse_qsl(parts.query))
    except ValueError:  # not a URL that parses (e.g. a bad port): no credential in it
        return False


def safe_label(value: str) -> str:
    """``value`` for output: a URL's password and credential-named query values replaced
    by ``***``, then any key ``redact_secrets`` recognises by its placeholder."""
    if "://" not in value and "?" not in value:  # a path, or a string with no options
        return redact_secrets(value)
    try:
        parts = urlsplit(value)
        password = parts.password is not None
    except ValueError:  # not a URL that parses: only the keys redact_secrets knows go
        return redact_secrets(value)
    user = ""
    if password:
        user, host = parts.netloc.rsplit("@", 1)
        user = user.split(":", 1)[0]
        parts = parts._replace(netloc=f"{user}@{host}")
    query = "&".join(
        f"{pair.partition('=')[0]}=***" if _secret_name(unquote(pair.partition("=")[0])) else pair
        for pair in parts.query.split("&")
    )
    text = redact_secrets(urlunsplit(parts._replace(query=query)))
    return text.replace(f"//{user}@", f"//{user}:***@", 1) if password else text


def find_config(
    explicit: str | os.PathLike[str] | None, environ: Mapping[str, str]
) -> tuple[Path | None, str]:
    """The path of the config file and what named it (``--config``,
    ``ENGRAMDB_CONFIG`` or ``default``); None when no default place is known."""
    if explicit is not None and str(explicit):
        return Path(explicit).expanduser(), "--config"
    if environ.get("ENGRAMDB_CONFIG"):
        return Path(environ["ENGRAMDB_CONFIG"]).expanduser(), "ENGRAMDB_CONFIG"
    if environ.get("XDG_CONFIG_HOME"):
        return Path(environ["XDG_CONFIG_HOME"]) / "engramdb" / "config.toml", "default"
    if environ.get("HOME"):
        return Path(environ["HOME"]) / ".config" / "engramdb" / "config.toml", "default"
    return None, "default"


def read_config(explicit: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> ConfigFile:
    """The config file ``explicit`` (``--config``) or ``environ`` names, checked: one
    ``ConfigurationError`` naming the file, the key and the fix, never a value."""
    path, named_by = find_config(explicit, environ)
    if path is None or (named_by == "default" and not path.exists()):
        return ConfigFile()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(
            f"the config file {str(path)!r} (from {named_by}) does not exist; check the "
            "path, or create it (docs/cli.md, 'Config file')"
        ) from None
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the config file {str(path)!r} ({exc.strerror})"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            f"the config file {str(path)!r} is not TOML ({exc}); write lines such as "
            'scope = "acme/user/sam"'
        ) from None
    return ConfigFile(path, _checked(path, data))


def _checked(path: Path, data: dict[str, object]) -> dict[str, str | bool]:
    where = f"the config file {str(path)!r}"
    for key in data:
        if key not in KEYS:
            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigurationError(
                f"{where} has an unknown key {key!r}; {hint}the keys are {', '.join(KEYS)}"
            )
    allow = data.get("allow_secrets", False)
    if not isinstance(allow, bool):
        raise ConfigurationError(f"{where}: allow_secrets must be true or false")
    if allow and os.name == "posix" and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigurationError(
            f"{where} sets allow_secrets = true, so it may hold credentials, but other "
            f"users can read it; run chmod 600 {str(path)!r}"
        )
    values: dict[str, str | bool] = {}
    for key in TEXT_KEYS:
        if key not in data:
            continue
        value = data[key]
        if not isinstance(value, str) or not value.strip():
            raise ConfigurationError(
                f'{where}: {key} must be a non-empty string, e.g. {key} = "{_EXAMPLES[key]}"'
            )
        if not allow and holds_credential(value):
            raise ConfigurationError(f"{where}: {key} holds a credential; {_FIX}")
        values[key] = _database_path(path, value) if key == "db" else value
    for key, (on, off, default) in SWITCHES.items():
        if key not in data:
            continue
        value = data[key]
        word = value.strip().lower() if isinstance(value, str) else ""
        if isinstance(value, bool):
            values[key] = value
        elif word in on or word in off:
            values[key] = word in on
        else:
            raise ConfigurationError(
                f'{where}: {key} must be true (or "{default}", the default) or false (or "off")'
            )
    return values


_EXAMPLES = {
    "db": "~/memory.sqlite3",
    "embedder": "static:",
    "scope": "acme/user/sam",
    "session": "s1",
    "reranker": "cohere:rerank-v3.5",
}


def _database_path(config: Path, db: str) -> str:
    """``db`` as the file means it: a URL or ``:memory:`` as written, ``~`` expanded, a
    relative path from the file's folder."""
    if db == ":memory:" or "://" in db:
        return db
    path = Path(db).expanduser()
    return str(path if path.is_absolute() else config.parent / path)
