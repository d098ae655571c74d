"""Secrets: a configured API key shows up on no surface engramdb produces.

With a fake key configured (in code, and through an environment variable the CLI's
embedder string names), every kind of surface runs against a closed port and a
127.0.0.1 server that answers 401/503 bodies echoing the key in each encoding
``echoes()`` knows, and against the same server answering properly: exceptions with
their chains, reprs, DEBUG logs of ``engramdb``, ``httpx`` and ``httpcore``, HTTP API
replies and printed output, MCP tool replies, the real CLI's stdout and stderr (with and
without ``--debug``), ``engramdb export`` files and the database file itself. The key (in
every encoding) must appear in none of them. tests/providers/test_secrets.py checks
each provider class; this checks the surfaces built on top of them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from secret_scan import Scan, suite_helper

import engramdb
from engramdb import AsyncMemory, EngramError, Memory
from engramdb.http_api import handle, parse_tokens
from engramdb.mcp_server import MemoryServer, ToolFailure
from engramdb.providers import OpenAIEmbedder, RetryPolicy
from engramdb.sqlite import SqliteStore

texts_of = suite_helper("providers", "provider_fakes").texts_of  # loopback_server needs it
loopback = suite_helper("providers", "loopback_server")
free_port = suite_helper("server", "server_helpers").free_port

KEY = loopback.ENCODABLE_KEY  # has / + = " & so that its encodings differ
LOGGERS = ("engramdb", "httpx", "httpcore")
SCOPE = ("acme", "user", "sam")
GRANTS = parse_tokens(json.dumps({"tok": list(SCOPE)}))


async def no_wait(seconds: float) -> None:
    pass


def embedder(base_url: str) -> OpenAIEmbedder:
    """One retry (logged by engramdb at DEBUG), without waiting."""
    return OpenAIEmbedder(
        "hash-bow",
        base_url=base_url,
        api_key=KEY,
        retry=RetryPolicy(max_retries=1),
        sleep=lambda seconds: None,
        asleep=no_wait,
    )


def exercise_memory(scan: Scan, name: str, memory: Memory, turns: int) -> None:
    """remember and recall ``turns`` times; every error's chain and every repr scanned."""
    for turn in range(turns):
        calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = [
            (memory.remember, (f"Sam is vegetarian {turn}", SCOPE), {}),
            (memory.recall, ("vegetarian", [SCOPE]), {"mode": "vector"}),
            (memory.recall, ("vegetarian", [SCOPE]), {}),
        ]
        for call, args, kwargs in calls:
            try:
                scan.add(f"{name}: results", repr(call(*args, **kwargs)))
            except EngramError as exc:
                scan.add(f"{name}: exceptions", *texts_of(exc))
    scan.add(f"{name}: reprs", repr(memory), repr(memory.embedder), str(memory.embedder))
    scan.add(f"{name}: reprs", repr(vars(memory.embedder)), repr(memory.status()))


async def exercise_async(scan: Scan, name: str, memory: AsyncMemory, turns: int) -> None:
    for turn in range(turns):
        try:
            scan.add(f"{name}: results", repr(await memory.remember(f"Sam {turn}", SCOPE)))
            scan.add(f"{name}: results", repr(await memory.recall("Sam", [SCOPE])))
        except EngramError as exc:
            scan.add(f"{name}: exceptions", *texts_of(exc))


async def exercise_http(scan: Scan, memory: AsyncMemory, turns: int) -> None:
    async def send(method: str, url: str, body: Any) -> None:
        async def read_body() -> str:
            return json.dumps(body)

        reply = await handle(
            method,
            "http://127.0.0.1" + url,
            {"authorization": "Bearer tok"},
            read_body,
            grants=lambda: GRANTS,
            memory=lambda grant: memory,
        )
        scan.add("http api: replies", str(reply.status), json.dumps(reply.body), repr(reply))

    for turn in range(turns):
        await send("POST", "/v1/memories", {"text": f"Sam likes tea {turn}"})
        await send("POST", "/v1/recall", {"query": "tea"})
    await send("GET", "/v1/status", None)


def exercise_mcp(scan: Scan, memory: Memory, turns: int) -> None:
    tools = MemoryServer(memory, SCOPE)
    for turn in range(turns):
        for name, arguments in (
            ("remember", {"text": f"Sam flies on Fridays {turn}"}),
            ("recall", {"query": "flies"}),
        ):
            try:
                scan.add("mcp: replies", json.dumps(tools.call(name, arguments)))
            except ToolFailure as exc:
                scan.add("mcp: replies", str(exc))
    scan.add("mcp: replies", json.dumps(tools.call("status", {})), json.dumps(tools.status()))


def run_cli(scan: Scan, surface: str, db: Path, embedder_url: str, *args: str) -> None:
    """The real CLI, in a subprocess, with the key in the environment variable the
    embedder string names."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(Path(p).parent) for p in engramdb.__path__),
        "SCAN_KEY": KEY,
    }
    done = subprocess.run(
        [sys.executable, "-m", "engramdb.cli", "--db", str(db), "--embedder", embedder_url, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    scan.add(surface, done.stdout, done.stderr)


def cli_url(base_url: str) -> str:
    return f"openai-compatible:hash-bow?base_url={base_url}&api_key_env=SCAN_KEY&max_retries=0"


def test_no_surface_holds_the_key_in_any_encoding(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    long_factor: int,
) -> None:
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    forms = loopback.echoes(KEY)
    scan = Scan(forms)
    turns = len(forms) * long_factor  # each 401 echoes the next encoding in turn
    closed = f"http://127.0.0.1:{free_port()}/v1"  # free: nothing listens there
    stores: list[SqliteStore] = []

    def memory(base_url: str, file: str) -> Memory:
        stores.append(SqliteStore(tmp_path / file))
        return Memory(stores[-1], embedder(base_url))

    # 1. Memory, MCP and the HTTP API against a closed port, then a server echoing the key
    with (
        loopback.serve(key="some-other-key") as wrong,
        loopback.serve(key=KEY, faults=["echo-503"] * 2 * turns) as overloaded,
    ):
        for label, url in (
            ("closed", closed),
            ("401", wrong.base_url),
            ("503", overloaded.base_url),
        ):
            exercise_memory(scan, f"memory {label}", memory(url, f"{label}.db"), turns)
            overloaded.faults[:] = ["echo-503"] * 2 * turns
            exercise_mcp(scan, memory(url, f"mcp-{label}.db"), turns)
            overloaded.faults[:] = ["echo-503"] * 2 * turns
            async_memory = AsyncMemory(SqliteStore(tmp_path / f"a-{label}.db"), embedder(url))
            asyncio.run(exercise_async(scan, f"async memory {label}", async_memory, turns))
            overloaded.faults[:] = ["echo-503"] * 2 * turns
            asyncio.run(exercise_http(scan, async_memory, turns))
            asyncio.run(async_memory.aclose())
        # 2. the real CLI: failing calls, with and without --debug
        for label, url in (("closed", closed), ("401", wrong.base_url)):
            for debug in ((), ("--debug",)):
                for command in (("add", "Sam is vegetarian"), ("search", "vegetarian")):
                    run_cli(
                        scan, f"cli {label}", tmp_path / "cli.db", cli_url(url), *debug, *command
                    )
        pasted = f"openai-compatible:m?base_url={closed}&api_key={KEY}"
        run_cli(scan, "cli key pasted into the string", tmp_path / "cli.db", pasted, "status")
        assert len(wrong.seen) >= turns and all(KEY in s["auth"] for s in wrong.seen)
    # 3. everything working: results, status, export and the database files
    with loopback.serve(key=KEY) as good:
        exercise_memory(scan, "memory ok", memory(good.base_url, "ok.db"), 2)
        exercise_mcp(scan, memory(good.base_url, "mcp-ok.db"), 2)
        db = tmp_path / "cli-ok.db"
        run_cli(scan, "cli ok", db, cli_url(good.base_url), "add", "Sam is vegetarian")
        run_cli(scan, "cli ok", db, cli_url(good.base_url), "--json", "search", "vegetarian")
        run_cli(scan, "cli ok", db, cli_url(good.base_url), "status")
        exported = tmp_path / "export.jsonl"
        run_cli(
            scan,
            "cli ok",
            db,
            cli_url(good.base_url),
            "export",
            "--with-vectors",
            "-o",
            str(exported),
        )
        assert good.seen and all(KEY in s["auth"] for s in good.seen)
    for store in stores:
        store.close()
    assert exported.stat().st_size > 0, "the export wrote nothing"
    scan.add("export file", exported.read_bytes())
    for file in tmp_path.glob("*.db*"):
        scan.add("database files", file.read_bytes())
    # 4. the logs and whatever was printed
    scan.add("logs", caplog.text, *(r.getMessage() for r in caplog.records))
    scan.add("logs", *(repr(vars(r)) for r in caplog.records))
    out, err = capsys.readouterr()
    scan.add("printed", out, err)

    assert {r.name.split(".")[0] for r in caplog.records} == set(LOGGERS)
    # the servers did echo the key: the messages say so, with the key masked
    assert any("as your key" in t for t in scan.surfaces["memory 401: exceptions"])
    assert any("as your key" in t for t in scan.surfaces["cli 401"])
    assert any("Sam is vegetarian" in t for t in scan.surfaces["export file"])
    assert scan.hits() == []
    with capsys.disabled():
        texts = sum(len(t) for t in scan.surfaces.values())
        print(
            f"\nsecret scan: {len(scan.surfaces)} surfaces, {texts} texts, "
            f"{scan.size()} bytes, {len(forms)} encodings of the key, 0 hits"
        )
