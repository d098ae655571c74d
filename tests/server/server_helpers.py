"""Helpers of the server tests: a real ``python -m engramdb.server`` on a free loopback
port, with grants of two tenants (acme: Sam, Alex; globex: Bob)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

SAM_TOKEN = "sam-secret-token"
ALEX_TOKEN = "alex-secret-token"
BOB_TOKEN = "bob-secret-token"
SAM = ["acme", "user", "sam"]
ALEX = ["acme", "user", "alex"]
BOB = ["globex", "user", "bob"]
# Sam's token is configured by its SHA-256 (the recommended form), the others verbatim.
TOKENS = {
    "sha256:" + hashlib.sha256(SAM_TOKEN.encode()).hexdigest(): SAM,
    ALEX_TOKEN: {"scope": ALEX, "read": [["acme", "shared"]]},
    BOB_TOKEN: BOB,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str
    db: Path
    process: subprocess.Popen[str]
    output: Path  # what the server prints (a file: an unread pipe would stall it)

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)

    def stop(self) -> str:
        """Stop the server; answer what it printed."""
        self.process.terminate()
        self.process.wait(timeout=10)
        return self.output.read_text(encoding="utf-8", errors="replace")


def start(tmp: Path, *args: str, tokens: object = TOKENS) -> Server:
    port = free_port()
    db = tmp / "memory.sqlite3"
    output = tmp / f"server-{port}.log"
    env = {
        **os.environ,
        "ENGRAMDB_TOKENS": json.dumps(tokens),
        "ENGRAMDB_EMBEDDER": "hash:64",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    with output.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "engramdb.server", "--db", str(db), "--port", str(port), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    server = Server(f"http://127.0.0.1:{port}", db, process, output)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server stopped: {server.stop()}")
        try:
            httpx.get(server.url + "/v1/status", timeout=1)
            return server
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"the server did not start: {server.stop()}")
