"""Each command's help shows only the global options it uses: ``serve`` binds each
request to its token's scope, so it shows no ``--scope`` and refuses one."""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
from pathlib import Path

import pytest
from test_cli import COMMAND, environment, run

from engramdb.cli._parser import COMMANDS, build_parser

GLOBALS = ("--db", "--embedder", "--scope", "--session", "--config", "--json", "--raw", "--debug")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: action.choices[name] for name in COMMANDS}


def _globals_shown(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings} & set(GLOBALS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_shows_the_global_options_it_takes_and_no_other(name: str) -> None:
    """The global options of a command's parser are all but those it declares it has no
    use for; a server command's are among those its server defines (the ones it passes
    on), and --debug."""
    shown = _globals_shown(_subparsers()[name])
    entry = COMMANDS[name]
    assert shown == set(GLOBALS) - {f"--{n}" for n in entry.ignores}
    if entry.server is not None:
        own = importlib.import_module(entry.server).argument_parser(add_help=False)
        defined = {flag for action in own._actions for flag in action.option_strings}
        assert shown <= defined | {"--debug"}, shown - defined


def test_commands_of_every_scope_show_no_binding_options() -> None:
    """The commands that act on the whole database (or on nothing) show no --scope or
    --session; those of the bound scope show both."""
    parsers = _subparsers()
    unbound = {name for name, p in parsers.items() if "--scope" not in _globals_shown(p)}
    assert unbound == {
        "scopes",
        "copy",
        "backup",
        "restore",
        "reindex",
        "maintain",
        "doctor",
        "migrate",
        "clear",
        "demo",
        "serve",
        "completion",
    }
    for name in ("remember", "recall", "list", "get", "forget", "import", "export", "mcp"):
        assert {"--scope", "--session"} <= _globals_shown(parsers[name]), name


def test_serve_help_shows_no_scope_and_serve_refuses_one(tmp_path: Path) -> None:
    """`engramdb serve --help` lists no --scope or --session; given anyway after the
    command, it is a usage error (exit 2) naming the option, and nothing runs."""
    helped = subprocess.run(
        [*COMMAND, "serve", "--help"],
        capture_output=True,
        text=True,
        env=environment(),
        check=False,
    )
    assert helped.returncode == 0
    assert "--tokens-file" in helped.stdout
    assert not re.search(r"--(scope|session)\b", helped.stdout)
    db = tmp_path / "cli.db"
    done = run(db, "serve", "--scope", "a/b")
    assert done.returncode == 2, done.stderr
    assert "--scope" in done.stderr and done.stderr.startswith("engramdb: error: ")
    assert not db.exists()
