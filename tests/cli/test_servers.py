"""``engramdb serve`` and ``engramdb mcp``: their advice and their options.

The CLI runs in process (the ``cli`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from engramdb import mcp_server, server
from engramdb.cli import reference
from engramdb.cli._parser import build_parser

Cli = Callable[..., tuple[int, str, str]]

WORKERS_SRC = Path(__file__).resolve().parents[2] / "workers" / "src"


@pytest.fixture
def worker_access() -> Iterator[ModuleType]:
    """``engramdb_workers.access`` imported on CPython (it needs only the core there)."""
    sys.path.insert(0, str(WORKERS_SRC))
    try:
        from engramdb_workers import access

        access.reset()
        yield access
        access.reset()
    finally:
        sys.path.remove(str(WORKERS_SRC))


def test_serve_without_tokens_says_how_to_give_serve_its_tokens(cli: Cli) -> None:
    """serve with neither --tokens-file nor ENGRAMDB_TOKENS exits 2 with one line naming
    both; it gives no Cloudflare advice (wrangler is the Worker's)."""
    status, out, err = cli("serve")
    assert (status, out) == (2, "")
    assert err.startswith("engramdb serve: ENGRAMDB_TOKENS is not set; pass --tokens-file FILE")
    assert "set the environment variable ENGRAMDB_TOKENS" in err and "wrangler" not in err
    assert err.count("\n") == 1


def test_the_worker_without_tokens_keeps_its_wrangler_advice(worker_access: ModuleType) -> None:
    """The Worker's configuration error (its logs) still says to run wrangler."""
    from engramdb import ConfigurationError

    with pytest.raises(ConfigurationError) as raised:
        worker_access.grants({})
    assert str(raised.value).startswith(
        "ENGRAMDB_TOKENS is not set; run `wrangler secret put ENGRAMDB_TOKENS` with a JSON"
    )
    assert "--tokens-file" not in str(raised.value)


@pytest.mark.parametrize(("command", "module"), [("serve", server), ("mcp", mcp_server)])
def test_a_server_commands_help_shows_the_servers_own_options(
    command: str, module: ModuleType
) -> None:
    """engramdb serve --help and engramdb mcp --help (and docs/cli.md) show every option
    of the server's own parser, with its help: they are defined there, once."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    shown = subparsers.choices[command].format_help()
    documented = reference().split(f"### `engramdb {command}`", 1)[1].split("###", 1)[0]
    own = [a for a in module.argument_parser(add_help=False)._actions if a.option_strings]
    assert len(own) >= 5
    for action in own:
        flag = max(action.option_strings, key=len)
        assert flag in shown, flag
        if action.dest not in {"db", "embedder", "scope", "session", "config"}:  # global options
            assert flag in documented, flag
            assert " ".join(str(action.help).split()) in " ".join(shown.split()), flag
    if command == "serve":
        assert all(flag in shown for flag in ("--host", "--port", "--tokens-file"))


def test_only_a_command_line_naming_a_server_imports_the_servers(tmp_path: Path) -> None:
    """Another command builds its parser without the servers' options: their modules
    stay unimported (and cost it no start-up time); serve --help imports them."""
    code = (
        "import sys; from engramdb.cli import main; status = main(sys.argv[1:]); "
        "print(status, sorted(m for m in sys.modules if m.endswith(('.server', 'mcp_server'))))"
    )
    db = str(tmp_path / "cli.db")
    env = {**os.environ, "ENGRAMDB_EMBEDDER": "hash:64"}
    done = subprocess.run(
        [sys.executable, "-c", code, "--db", db, "remember", "a fact"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert done.stdout.splitlines()[-1] == "0 []"
