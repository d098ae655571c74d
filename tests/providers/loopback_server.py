"""A real OpenAI-compatible embeddings server on 127.0.0.1 for the provider tests.

``serve()`` starts it on a free port in a thread and yields a :class:`Loopback`. It
answers ``POST /v1/embeddings`` with HashEmbedder vectors (base64 or float lists, out
of order as real servers may), after checking the bearer key. ``faults`` is a list the
handler takes one entry from per request (thread-safe ``pop``); an empty list, or an
entry ``""``, means a healthy answer. A wrong key is answered with a 401 that echoes the
key it got in every encoding of :func:`echoes`, as a careless server or proxy might.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, quote_plus

from provider_fakes import FAKE_KEY, b64

from engramdb import HashEmbedder

# A key whose URL, JSON and base64 forms all differ from it.
ENCODABLE_KEY = 'engramdb/FAKE+KEY="7f3a&9c1e=5b2d'


def echoes(key: str) -> list[str]:
    """``key`` as a server may echo it: as is, URL-encoded (upper and lower hex),
    JSON-escaped (with and without ``\\/``), base64 (both alphabets, padded or not) and
    inside a ``Basic`` credential (base64 of ``user:key``)."""
    raw = key.encode()
    std = base64.b64encode(raw).decode()
    json_escaped = json.dumps(key)[1:-1]
    forms = [
        key,
        quote(key, safe=""),
        quote(key, safe="").replace("%2F", "%2f").replace("%3D", "%3d"),
        quote_plus(key),
        json_escaped,
        json_escaped.replace("/", "\\/"),
        json.dumps(key, ensure_ascii=True).replace("F", "\\u0046")[1:-1],
        std,
        std.rstrip("="),
        base64.urlsafe_b64encode(raw).decode(),
        base64.b64encode(b"user:" + raw).decode(),
    ]
    return list(dict.fromkeys(forms))


@dataclass
class Loopback:
    base_url: str
    seen: list[dict[str, Any]]
    faults: list[str] = field(default_factory=list)


class LoopbackHandler(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]]
    faults: list[str]
    key: str

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        auth = self.headers.get("authorization") or ""
        self.seen.append({"path": self.path, "auth": auth, **body})
        try:
            fault = self.faults.pop(0)
        except IndexError:
            fault = ""
        if auth != f"Bearer {self.key}":
            sent = auth.removeprefix("Bearer ")
            self._send(
                401, {"error": {"message": "Incorrect API key provided", "echo": echoes(sent)}}
            )
            return
        if self.path != "/v1/embeddings":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        if fault == "echo-503":
            self._send(503, {"error": {"message": "overloaded", "echo": echoes(self.key)}})
            return
        assert not fault, f"unknown fault {fault!r}"
        embedder = HashEmbedder(dimensions=int(body.get("dimensions", 256)))
        vectors = embedder.embed(body["input"])
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {"object": "embedding", "index": i, "embedding": b64(list(v)) if as_base64 else list(v)}
            for i, v in enumerate(vectors)
        ]
        data.reverse()  # servers may answer out of order; clients sort by index
        self._send(200, {"object": "list", "data": data, "model": body["model"]})

    def _send(self, status: int, payload: Any) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


@contextmanager
def serve(key: str = FAKE_KEY, faults: Sequence[str] = ()) -> Iterator[Loopback]:
    """The server on a free port of 127.0.0.1, until the ``with`` block ends."""
    seen: list[dict[str, Any]] = []
    queue = list(faults)
    handler = type("Handler", (LoopbackHandler,), {"seen": seen, "faults": queue, "key": key})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield Loopback(f"http://{host}:{port}/v1", seen, queue)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
