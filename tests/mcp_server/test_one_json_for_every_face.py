"""One record, one SQLite file, three faces: the same JSON for the same hit and record.

The record is stored once with the public API; then ``engramdb --json search`` and
``get`` (the console script, a subprocess), ``POST /v1/recall`` and ``GET
/v1/memories/ID`` (``engramdb serve``'s ASGI app, the bytes it sends) and the MCP
server's ``recall`` and ``list_recent`` (the SDK's stdio client, a subprocess) each
answer it. Every answer equals the others and :mod:`engramdb.json_format`'s own shape.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from test_mcp_server import ROOT, SCOPE, _pythonpath, call, connect

from engramdb import AsyncMemory, HashEmbedder, Memory
from engramdb.http_api import parse_tokens
from engramdb.json_format import record_to_json
from engramdb.server import App
from engramdb.sqlite import SqliteStore

QUERY = "aisle seat on long flights"


def remember_one(db: Path) -> dict[str, Any]:
    """The record every face is asked about, with every field set, as JSON."""
    with Memory(SqliteStore(db), HashEmbedder(64)) as memory:
        record = memory.remember(
            "Sam prefers an aisle seat on long flights",
            tuple(SCOPE.split("/")),
            metadata={"source": "chat", "turn": 3, "città": ["Lisboa"]},
            labels={"topic": ["travel"]},
            importance=0.8,
            expires_at=datetime(2099, 1, 31, 12, 0, 0, 250000, tzinfo=UTC),
        )
        memory.update(record.id, metadata={"source": "chat", "turn": 4, "città": ["Lisboa"]})
        stored = memory.get(record.id)
    assert stored is not None and stored.revision == 2
    return record_to_json(stored)


def cli(db: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "engramdb.cli", "--db", str(db), "--scope", SCOPE, "--json", *args],
        capture_output=True,
        text=True,
        env={"ENGRAMDB_EMBEDDER": "hash:64", "PYTHONPATH": _pythonpath()},
        cwd=str(ROOT),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def http(db: Path, method: str, path: str, body: Any = None) -> Any:
    """One request to ``engramdb serve``'s app over the file; the JSON it sends."""
    grants = parse_tokens(json.dumps({"tok": SCOPE.split("/")}))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        data = b"" if body is None else json.dumps(body).encode()
        return {"type": "http.request", "body": data, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    memory = AsyncMemory(SqliteStore(db), HashEmbedder(64))
    try:
        await App(grants, lambda grant: memory)(
            {
                "type": "http",
                "method": method,
                "path": path,
                "raw_path": path.encode(),
                "query_string": b"",
                "headers": [
                    (b"authorization", b"Bearer tok"),
                    (b"content-type", b"application/json"),
                ],
            },
            receive,
            send,
        )
    finally:
        await memory.aclose()
    start, answer = sent
    assert start["status"] == 200, answer["body"]
    return json.loads(answer["body"])


async def test_cli_http_and_mcp_give_the_same_hit_and_record(tmp_path: Path) -> None:
    db = tmp_path / "one.db"
    record = remember_one(db)

    (cli_hit,) = [json.loads(line) for line in cli(db, "search", QUERY).splitlines()]
    cli_record = json.loads(cli(db, "get", record["id"]))
    recalled = await http(db, "POST", "/v1/recall", {"query": QUERY})
    (http_hit,) = recalled["hits"]
    http_record = (await http(db, "GET", f"/v1/memories/{record['id']}"))["memory"]
    async with connect(db) as session:
        found = await call(session, "recall", {"query": QUERY})
        (mcp_hit,) = found["hits"]
        (recent,) = (await call(session, "list_recent", {}))["memories"]
    mcp_record = {key: value for key, value in recent.items() if key != "durability"}

    assert cli_hit == http_hit == mcp_hit
    assert cli_record == http_record == mcp_record == record == cli_hit["memory"]
    assert record["scope"] == ["acme", "user", "sam"]
    assert record["expires_at"] == "2099-01-31T12:00:00.250Z"
    assert cli_hit["evidence"]["scope"] == record["scope"]
    assert cli_hit["evidence"]["embedded_at"].endswith("Z")
    # The recall answer around the hits is one shape too (selection ids differ per recall).
    assert list(found)[:6] == list(recalled) == [
        "status", "coverage", "mode", "selection_id", "error", "hits",
    ]  # fmt: skip
