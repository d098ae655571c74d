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

**No credentials unless you say so.** A value that holds one (a password in a URL, an
option named like a credential in a query string or a libpq ``key=value`` string: see
:func:`credential_name`, or a key that ``redact_secrets`` recognises) is refused, naming
the key and never the value, unless
the file sets ``allow_secrets = true``; and a file that sets it must be readable by its
owner only. Provider keys come from the environment anyway (``OPENAI_API_KEY``,
``api_key_env=VAR``: docs/providers.md), and a PostgreSQL password from ``PGPASSWORD``
or ``~/.pgpass``.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from engramdb import ConfigurationError, redact_secrets

__all__ = [
    "KEYS",
    "ConfigFile",
    "credential_name",
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

_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "passphrase"}
    | {"credential", "credentials", "sslpassword"}
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


def credential_name(name: str) -> bool:
    """Whether an option named ``name`` holds a credential. The rule: split camelCase,
    read ``-`` and ``.`` as ``_``, lower-case; then the name is a credential when its
    last ``_`` word is one of key, apikey, token, secret, password, passwd, pwd,
    passphrase, credential(s) or sslpassword: ``key``, ``api_key``, ``x-api-key``,
    ``access-token``, ``accessToken``, ``client_secret``, ``password``. A name ending in
    ``_env`` names a variable (``api_key_env=VAR``) and holds none; nor do ``token_limit``,
    ``max_tokens``, ``keyboard``, ``sslkey`` or ``key_id`` (their last word is another)."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", unquote(name)).lower()
    last = re.split(r"[-._]", words)[-1]
    return last in _SECRET_WORDS


# A URL's password: scheme://user:PASSWORD@host (the last @ before the path ends it).
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:)([^\s/?#]+)(@)")
# An option: NAME=VALUE at the start, or after a space (a libpq key=value string, where
# spaces may surround the =), ?, & or ; (a query string); the value quoted as libpq
# quotes it ('it''s' is 'it\'s'), else up to the next space or &.
_OPTION = re.compile(
    r"(?:^|(?<=[\s?&;]))([A-Za-z0-9_.%-]+)(\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:[^\s&\\]|\\.)+)"
)


def safe_label(value: str) -> str:
    """``value`` for output (``engramdb config``, messages, store labels): a URL's
    password and the value of every option :func:`credential_name` names (in a query
    string or a libpq ``host=... password=...`` string, quoted or not) replaced by
    ``***``, and any other key ``redact_secrets`` recognises by its placeholder. The rest
    is left exactly as written."""
    # The option forms first: they know libpq's quoting (an escaped quote inside a
    # quoted password), which a general secret pattern cannot tell from the value's end.
    text = _OPTION.sub(lambda m: f"{m[1]}{m[2]}***" if credential_name(m[1]) else m[0], value)
    return _URL_PASSWORD.sub(r"\1***\3", redact_secrets(text))


def holds_credential(value: str) -> bool:
    """Whether ``value`` (a setting) holds what looks like a credential: whatever
    :func:`safe_label` hides."""
    return safe_label(value) != value


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


MAX_BYTES = 64 * 1024
"""The largest config file read (one holds a few short lines); a larger one is refused
before it is parsed, so ``--config /dev/zero`` ends at once."""


def read_config(explicit: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> ConfigFile:
    """The config file ``explicit`` (``--config``) or ``environ`` names, checked: one
    ``ConfigurationError`` naming the file, the key and the fix, never a value; whatever
    the file holds (not UTF-8, not TOML, nested 5,000 deep, a 5,000-digit number, a
    directory, unreadable), never another exception."""
    path, named_by = find_config(explicit, environ)
    if path is None or (named_by == "default" and not os.path.exists(path)):
        return ConfigFile()
    where = f"the config file {str(path)!r}"
    text = _read_text(path, f"{where} (from {named_by})")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(
            f'{where} is not TOML ({exc}); write lines such as scope = "acme/user/sam"'
        ) from None
    except ValueError:  # an integer past int()'s 4,300 digits
        raise ConfigurationError(
            f"{where} holds a number too long to read; its values are short strings and "
            "true or false"
        ) from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigurationError(
            f"{where} nests arrays or tables too deeply to read; its values are short "
            "strings and true or false"
        ) from None
    return ConfigFile(path, _checked(path, data))


def _read_text(path: Path, where: str) -> str:
    """The file's text, at most ``MAX_BYTES`` of UTF-8 (a FIFO such as ``<(...)`` too)."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigurationError(
            f"{where} does not exist; check the path, or create it (docs/cli.md, 'Config file')"
        ) from None
    except OSError as exc:  # a directory, no permission, a path too long
        raise ConfigurationError(
            f"cannot read {where} ({exc.strerror or exc}); give the path of a TOML file"
        ) from None
    except ValueError:  # a NUL in the path
        raise ConfigurationError(f"{where} is not a path (it holds a NUL)") from None
    if len(data) > MAX_BYTES:
        raise ConfigurationError(
            f"{where} is larger than {MAX_BYTES // 1024} KiB; a config file holds a few "
            'lines such as scope = "acme/user/sam"'
        )
    try:
        return data.decode("utf-8-sig")  # a BOM (editors on Windows write one) is dropped
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"{where} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None


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
