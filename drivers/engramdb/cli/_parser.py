"""The ``engramdb`` argument parser: global options, commands and their options.

The global options are accepted before or after the command name: the main parser
defines them with a ``None`` default, and every command parser again with
``argparse.SUPPRESS``, so a value given after the command wins and an absent one does not
overwrite a value given before it.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

__all__ = ["COMMANDS", "CliError", "UsageError", "build_parser", "parse"]


class UsageError(Exception):
    """Bad command-line input (exit status 2); the message names the value and the fix."""


class CliError(Exception):
    """A failure outside engramdb's own errors (a missing file, a bad line; exit status
    1); the message names the value and the fix."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _global_options(parser: argparse.ArgumentParser, default: Any) -> None:
    group = parser.add_argument_group("global options (before or after the command)")
    group.add_argument(
        "--db",
        metavar="PATH",
        default=default,
        help="the SQLite file or postgresql:// URL (else ENGRAMDB_DB, else ./engramdb.sqlite3)",
    )
    group.add_argument(
        "--embedder",
        metavar="URL",
        default=default,
        help="embedder URL such as static: or openai:text-embedding-3-small "
        "(else ENGRAMDB_EMBEDDER, else static:, the token table shipped with engramdb)",
    )
    group.add_argument(
        "--scope",
        metavar="A/B/C",
        default=default,
        help="the scope to bind: writes and recalls go there (else ENGRAMDB_SCOPE, else default)",
    )
    group.add_argument(
        "--session",
        metavar="ID",
        default=default,
        help="the session to bind (else ENGRAMDB_SESSION, else none)",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=default if default is argparse.SUPPRESS else False,
        help="print JSON (JSON Lines for list, search and export)",
    )
    group.add_argument(
        "--debug",
        action="store_true",
        default=default if default is argparse.SUPPRESS else False,
        help="show the traceback of an error",
    )


# (name, one-line help): the order of `engramdb --help` and of docs/cli.md.
COMMANDS: list[tuple[str, str]] = [
    ("add", "remember a text in the bound scope"),
    ("search", "recall memories of the bound scope by meaning and by words"),
    ("list", "list the memories of the bound scope, newest first"),
    ("scopes", "list every scope that holds memories, with counts"),
    ("get", "show one memory of the bound scope"),
    ("history", "show the earlier revisions of a memory of the bound scope"),
    ("forget", "delete one memory, or with --confirm every memory of the bound scope"),
    ("import", "remember every memory of a JSON Lines, CSV or text file, resumably"),
    ("export", "write the memories of the bound scope as JSON Lines"),
    ("copy", "copy every scope's memories and vectors into another database, resumably"),
    ("reindex", "embed every pending memory (--full: re-embed everything)"),
    ("maintain", "run a maintenance pass (--watch: on a schedule until stopped)"),
    ("status", "counts, pending embeddings, spaces and schema version"),
    ("doctor", "check the database: integrity, vectors, pending, schema"),
    ("migrate", "bring the database to the current schema"),
    ("clear", "delete every vector (--all: every memory too); needs --confirm"),
    ("demo", "remember a few facts in two scopes and recall them"),
    ("mcp", "run the MCP server (engramdb.mcp_server); other arguments go to it"),
    ("serve", "run the HTTP server (engramdb.server); other arguments go to it"),
]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; pass e.g. 100") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


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


def _add_command_options(name: str, sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    if name == "add":
        add("text", help="the text to remember")
        add("--metadata", metavar="JSON", help='a JSON object, e.g. \'{"src": "chat"}\'')
        add(
            "--label",
            metavar="K=V",
            action="append",
            default=[],
            help="a label (repeatable: --label topic=food --label topic=prefs)",
        )
        add("--importance", type=float, metavar="X", help="importance in [0, 1] (default 0.5)")
        expiry = sub.add_mutually_exclusive_group()
        expiry.add_argument(
            "--ttl", type=_seconds, metavar="SECONDS", help="expire after this many seconds"
        )
        expiry.add_argument(
            "--expires", metavar="ISO8601", help="expire at this time, e.g. 2027-01-31T12:00Z"
        )
    elif name == "search":
        add("query", help="what to look for")
        add("--top-k", type=_positive_int, default=5, metavar="N", help="hits (default 5)")
        add(
            "--mode",
            choices=["hybrid", "vector", "lexical"],
            default="hybrid",
            help="which legs rank (default hybrid)",
        )
        add("--filter", metavar="JSON", help='e.g. \'{"labels": {"topic": "food"}}\'')
        add(
            "--explain",
            action="store_true",
            help="show each hit's ranks, similarity, bm25, boosts and evidence",
        )
    elif name == "list":
        add("--limit", type=_positive_int, default=50, metavar="N", help="at most N (default 50)")
    elif name in ("get", "history"):
        add("id", help="the memory id")
    elif name == "forget":
        add("id", nargs="?", help="the memory id; without it, forget the whole bound scope")
        add("--confirm", action="store_true", help="needed to forget the whole bound scope")
    elif name == "import":
        add("file", help="the file to import ('-': standard input)")
        add(
            "--format",
            choices=["auto", "jsonl", "csv", "text"],
            default="auto",
            help=(
                "auto (default) goes by the extension: .jsonl, .ndjson or .json, .csv, else "
                "text; for - (standard input), JSON Lines if the first line is an object, "
                "else text"
            ),
        )
        add(
            "--batch-size",
            type=_positive_int,
            default=256,
            metavar="N",
            help="memories per atomic batch (default 256)",
        )
    elif name == "export":
        add("--output", "-o", metavar="FILE", help="write to FILE instead of standard output")
        add(
            "--with-vectors",
            action="store_true",
            help="add each memory's vector (base64 of little-endian float32) and space",
        )
    elif name == "copy":
        add("target", metavar="TARGET", help="a postgresql:// URL or a SQLite file")
        add("--prefix", metavar="SCOPE", help="only the scopes under SCOPE (e.g. acme/user)")
    elif name == "reindex":
        add("--full", action="store_true", help="drop the active space's vectors first")
    elif name == "maintain":
        add("--watch", action="store_true", help="run passes on a schedule until stopped")
        add(
            "--max-items",
            type=_positive_int,
            default=1000,
            metavar="N",
            help="work per pass (default 1000)",
        )
        add(
            "--interval",
            type=_seconds,
            default=300.0,
            metavar="SECONDS",
            help="between passes with --watch (default 300)",
        )
    elif name == "doctor":
        add(
            "--probe",
            action="store_true",
            help="embed one fixed phrase: print the space, dimensions, finiteness and norm",
        )
    elif name == "clear":
        add("--confirm", action="store_true", help="needed: nothing is deleted without it")
        add("--all", action="store_true", help="delete every memory too, not only vectors")


PASS_THROUGH = ("mcp", "serve")  # their unknown arguments go to the server


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The arguments; those ``mcp`` and ``serve`` do not know are kept in ``args.args``."""
    args, rest = parser.parse_known_args(argv)
    if rest and args.command not in PASS_THROUGH:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.args = rest
    return args


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="engramdb",
        description="Durable semantic memory for AI agents, from the command line.",
        epilog="Exit status: 0 ok, 1 error, 2 bad usage, 130 interrupted.",
    )
    _global_options(parser, None)
    from engramdb import __version__

    parser.add_argument("--version", action="version", version=f"engramdb {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, summary in COMMANDS:
        sub = commands.add_parser(name, help=summary, description=summary)
        _add_command_options(name, sub)
        _global_options(sub, argparse.SUPPRESS)
    return parser
