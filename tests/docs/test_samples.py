"""Samples in the docs that are checked against the code that answers them, without a
service (the ones that need a running server are in tests/server and tests/mcp_server)."""

from __future__ import annotations

import re
from pathlib import Path

from engramdb.http_api import openapi_document

ROOT = Path(__file__).resolve().parents[2]
STATUS_ROW = re.compile(r"^\| `GET /v1/status` \|[^|]*\| 200 `(\{[^`]*\})`", re.MULTILINE)


def keys(sample: str) -> list[str]:
    """The keys a sample like ``{"status": "ok", "engramdb", "scope"}`` names (not the
    values: a quoted word after a colon)."""
    return re.findall(r'(?<!: )"(\w+)"', sample)


def test_the_status_rows_name_every_key_of_the_status_answer() -> None:
    """The API tables of docs/http.md and docs/workers.md list the keys of ``GET
    /v1/status``'s answer as the OpenAPI document declares them (both hosts answer it
    from the same route spec), in its order."""
    declared = openapi_document()["components"]["schemas"]["Status"]["required"]
    rows = {
        page: STATUS_ROW.findall((ROOT / "docs" / page).read_text())
        for page in ("http.md", "workers.md")
    }
    assert {page: [keys(row) for row in found] for page, found in rows.items()} == {
        "http.md": [declared],
        "workers.md": [declared],
    }


def test_keys_leave_out_values() -> None:
    assert keys('{"status": "ok", "engramdb", "read"}') == ["status", "engramdb", "read"]
