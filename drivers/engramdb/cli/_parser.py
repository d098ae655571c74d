"""The ``engramdb`` argument parser, built from the command records (``@command``).

The global options are accepted before or after the command name: the main parser
defines them with a ``None`` default, and every command parser again with
``argparse.SUPPRESS``, so a value given after the command wins and an absent one does not
overwrite a value given before it.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar, cast

__all__ = [
    "BINDING",
    "COMMANDS",
    "CliError",
    "Command",
    "RevisionConflict",
    "UsageError",
    "build_parser",
    "command",
    "server_options",
]


class UsageError(Exception):
    """Bad command-line input (exit status 2); the message names the value and the fix."""


class CliError(Exception):
    """A failure outside engramdb's own errors (a missing file, a bad line; exit status
    1); the message names the value and the fix."""


class RevisionConflict(Exception):
    """``update --expected-revision N`` found the memory at another revision and changed
    nothing (exit status 3); the message names both revisions and the fix."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


_SETTINGS = {  # the global options that take a value: its metavar, the help
    "db": (
        "PATH",
        "the SQLite file or postgresql:// URL (else ENGRAMDB_DB, else ./engramdb.sqlite3)",
    ),
    "embedder": (
        "URL",
        "embedder URL such as static: or openai:text-embedding-3-small "
        "(else ENGRAMDB_EMBEDDER, else static:, the token table shipped with engramdb)",
    ),
    "scope": (
        "A/B/C",
        "the scope to bind: writes and recalls go there (else ENGRAMDB_SCOPE, else default)",
    ),
    "session": ("ID", "the session to bind (else ENGRAMDB_SESSION, else none)"),
    "config": (
        "FILE",
        "the config file (else ENGRAMDB_CONFIG, else ~/.config/engramdb/config.toml if it exists)",
    ),
}
_SWITCHES = {  # the global options that take none: the help
    "json": "print JSON (JSON Lines for list, recall, similar and export)",
    "raw": "print stored text as it is, control characters and all (else they show "
    "escaped: ESC as \\u001b)",
    "read-only": "open the SQLite file read-only: nothing is written, and a recall makes no "
    "receipt (a file or folder you may not write opens so by itself)",
    "debug": "show the traceback of an error",
}


def _global_options(
    parser: argparse.ArgumentParser, default: Any, ignores: frozenset[str] = frozenset()
) -> None:
    """The global options, each with ``default``, but those named in ``ignores`` (the
    options a command has no use for: ``"scope"`` for ``--scope`` ...)."""
    group = parser.add_argument_group("global options (before or after the command)")
    for name, (metavar, help) in _SETTINGS.items():
        if name not in ignores:
            group.add_argument(f"--{name}", metavar=metavar, default=default, help=help)
    switch = default if default is argparse.SUPPRESS else False
    for name, help in _SWITCHES.items():
        if name not in ignores:
            group.add_argument(f"--{name}", action="store_true", default=switch, help=help)


def _positive_int(text: str, low: int = 1) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; pass e.g. 100") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{text!r} must be {low} or more")
    return value


def _count(text: str) -> int:
    """A whole number from 0 (``--rerank 0``: off)."""
    return _positive_int(text, 0)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds; pass e.g. 60"
        ) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 seconds")
    return value


@dataclass(frozen=True, slots=True)
class Command:
    """One ``engramdb`` command, declared where its body is (``@command``): its name, its
    one-line help (of ``engramdb --help`` and docs/cli.md), the options it adds to its
    parser, its body, whether it may create the database file (``creates``), the module
    of the server it runs (``server``: that module's ``argument_parser()`` is the parent
    of the command's parser, so its options are shown and checked here, defined there),
    the other names it answers to (``aliases``: the same command, shown beside its name
    in the help), and the global options it has no use for (``ignores``, by name:
    ``"scope"`` for ``--scope``: its parser leaves them out, so its help does not show
    them and they are refused after the command; before it, where every command takes
    the global options, they are ignored), and whether ``--read-only`` applies to it
    (``read_only``: it opens the database through ``Context.memory``; a command that
    opens it otherwise refuses the flag, before the command too, rather than ignore it)."""

    name: str
    summary: str
    run: Callable[[Any], int]
    options: Callable[[argparse.ArgumentParser], None] | None = None
    creates: bool = False
    server: str | None = None
    aliases: tuple[str, ...] = ()
    ignores: frozenset[str] = frozenset()
    read_only: bool = True


BINDING = frozenset({"scope", "session"})
"""The global options that bind a view: a command of the whole database (every scope) has
no use for them (``ignores=BINDING``)."""

COMMANDS: dict[str, Command] = {}
"""Every command, in the order of ``engramdb --help`` and docs/cli.md: the order in
which the command modules declare them."""

F = TypeVar("F", bound=Callable[[Any], int])


def command(
    name: str,
    summary: str,
    *,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
    creates: bool = False,
    server: str | None = None,
    aliases: tuple[str, ...] = (),
    ignores: frozenset[str] = frozenset(),
    read_only: bool = True,
) -> Callable[[F], F]:
    """Declare the decorated function as the body of the command ``name`` (also run as
    each of ``aliases``)."""

    def declare(run: F) -> F:
        taken = {n for c in COMMANDS.values() for n in (c.name, *c.aliases)}
        if taken & {name, *aliases}:
            raise RuntimeError(f"the command {name!r} or one of its aliases is declared twice")
        COMMANDS[name] = Command(
            name, summary, run, options, creates, server, aliases, ignores, read_only
        )
        return run

    return declare


def server_options(module_name: str) -> argparse.ArgumentParser | None:
    """The options of the server ``module_name`` (its ``argument_parser``, without
    ``--help``), or None when the module cannot be imported (running it says why)."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        return None
    parser: argparse.ArgumentParser = module.argument_parser(add_help=False)
    return parser


def build_parser(*, servers: bool = True) -> argparse.ArgumentParser:
    """The parser of every command; ``servers=False`` leaves the servers' options out (and
    their modules unimported): ``main`` asks for them only when a server command is named."""
    parser = _Parser(
        prog="engramdb",
        description="Durable semantic memory for AI agents, from the command line.",
        epilog="Exit status: 0 ok, 1 error, 2 bad usage, 3 conflict (update "
        "--expected-revision), 130 interrupted.",
    )
    _global_options(parser, None)
    from engramdb import __version__

    parser.add_argument("--version", action="version", version=f"engramdb {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for entry in COMMANDS.values():
        parent = server_options(entry.server) if entry.server and servers else None
        # typeshed wants parents of the subparsers' class (_Parser); argparse takes any
        parents = cast("list[_Parser]", [] if parent is None else [parent])
        sub = commands.add_parser(
            entry.name,
            aliases=list(entry.aliases),
            help=entry.summary,
            description=entry.summary,
            parents=parents,
            conflict_handler="error" if parent is None else "resolve",  # our --db wins
        )
        sub.set_defaults(command=entry.name)  # an alias runs its command under its own name
        if entry.options is not None:
            entry.options(sub)
        unused = entry.ignores if entry.read_only else entry.ignores | {"read-only"}
        _global_options(sub, argparse.SUPPRESS, unused)
    return parser
