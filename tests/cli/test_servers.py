"""``engramdb serve`` and ``engramdb mcp``: their advice and their options.

The CLI runs in process (the ``cli`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

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
