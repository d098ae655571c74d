"""A real embeddings server on 127.0.0.1 for the provider tests, in two wire formats.

``serve()`` starts it on a free port in a thread and yields a :class:`Loopback`. It
answers ``POST /v1/embeddings`` (OpenAI-compatible, also Voyage's wire) with HashEmbedder
vectors (base64 or float lists, out of order as real servers may) and ``POST /api/embed``
(Ollama's wire: ``{"embeddings": [[...], ...]}``), after checking the bearer key. A
wrong key is answered with a 401 that echoes the key it got in every encoding of
:func:`echoes`, as a careless server or proxy might.

``Loopback.faults`` is a list the handler takes one entry from per request (a
thread-safe ``pop``); an empty list, or an entry ``""``, means a healthy answer. The
entries are the names in :data:`FAULTS`; every request records the fault it got in
``Loopback.seen``.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import socket
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, quote_plus

from provider_fakes import FAKE_KEY, b64

from engramdb import HashEmbedder

# A key whose URL, JSON and base64 forms all differ from it (it holds / + = " & and an
# F, which one JSON form escapes), and each run of 8 of whose characters (the checks
# look for any) holds a " or a &: no file path, module, logger or host name in a log
# record can hold one, whatever the checkout's folder is called.
ENCODABLE_KEY = 'FAKE"k3/y&Zq+7"Xw=2&'


def echoes(key: str) -> list[str]:
    """``key`` as a server may echo it: as is, URL-encoded (upper and lower hex, and
    twice), JSON-escaped (with and without ``\\/``, and twice), base64 (both alphabets,
    padded or not) and inside a ``Basic`` credential (base64 of ``user:key``)."""
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
        json.dumps(json_escaped)[1:-1],  # escaped twice: an echo inside a JSON string
        quote(quote(key, safe=""), safe=""),  # URL-encoded twice
        std,
        std.rstrip("="),
        base64.urlsafe_b64encode(raw).decode(),
        base64.b64encode(b"user:" + raw).decode(),
    ]
    return list(dict.fromkeys(forms))


LONG_RETRY_AFTER = 3600  # seconds the "429-retry-after-long" fault asks to wait
FAULTS = {
    # retried by the providers' RetryPolicy
    "500": "HTTP 500 with a JSON error",
    "429": "HTTP 429 without Retry-After",
    "429-retry-after": "HTTP 429 with Retry-After: 1",
    "503": "HTTP 503 with a JSON error",
    "echo-503": "HTTP 503 whose body echoes the key in every encoding",
    "echo-masked-503": "HTTP 503 whose body echoes the key masked: all but its last 4 as ****",
    "reset": "the connection reset (RST) after the request is read",
    "timeout": "no answer for HANG seconds, then the connection closed",
    "truncated": "a 200 whose body stops before its Content-Length",
    "bad-gzip": "a 200 claiming Content-Encoding: gzip over a plain body",
    "huge": "a 200 holding the number 1e400",
    # not retried: the answer is unusable
    "400": "HTTP 400 with a JSON error",
    "429-retry-after-long": f"HTTP 429 with Retry-After: {LONG_RETRY_AFTER} (above a policy's max)",
    "not-json": "a 200 whose body is not JSON",
    "no-field": "a 200 JSON object without the field holding the vectors",
    "count": "a 200 with one vector fewer than texts",
    "dimensions": "a 200 whose vectors have one dimension more",
    "nan": "a 200 holding a NaN literal",
    "zero": "a 200 whose vectors are all zeros",
    # a success all the same
    "echo-header": "a 200 whose X-Echo-Key response header holds the key",
}
HANG = 0.6  # seconds a "timeout" fault keeps the client waiting (give it a shorter timeout)


@dataclass
class Loopback:
    base_url: str
    seen: list[dict[str, Any]]
    faults: list[str] = field(default_factory=list)


class LoopbackHandler(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]]
    faults: list[str]
    key: str
    dimensions: int
    echo_turn: Iterator[int]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        auth = self.headers.get("authorization") or ""
        try:
            fault = self.faults.pop(0)
        except IndexError:
            fault = ""
        self.seen.append({"path": self.path, "auth": auth, "fault": fault, **body})
        if auth != f"Bearer {self.key}":
            self._echo(401, auth.removeprefix("Bearer "))
            return
        if self.path not in _WIRES:
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        if fault in _BROKEN:
            _BROKEN[fault](self)
            return
        if fault == "echo-503":
            self._echo(503, self.key)
            return
        if fault == "echo-masked-503":
            masked = self.key[:-4] + "****"
            self._send(503, None, raw=f"Overloaded; your key {masked} is fine".encode())
            return
        if fault in _STATUSES:
            status, retry_after = _STATUSES[fault]
            headers = {"retry-after": retry_after} if retry_after else {}
            self._send(status, {"error": {"message": fault}}, headers)
            return
        if fault == "not-json":
            self._send(200, None, raw=b"<html><body>502 Bad Gateway</body></html>")
            return
        answer = _WIRES[self.path](self._vectors(body, fault), body)
        echo = {"x-echo-key": self.key} if fault == "echo-header" else {}
        self._send(200, {"model": body["model"]} if fault == "no-field" else answer, echo)

    def _vectors(self, body: dict[str, Any], fault: str) -> list[list[float]]:
        """The embeddings of ``body["input"]``, spoilt as ``fault`` says."""
        dimensions = int(body.get("dimensions", self.dimensions)) + (fault == "dimensions")
        vectors = [list(v) for v in HashEmbedder(dimensions=dimensions).embed(body["input"])]
        if fault == "count":
            vectors.pop()
        elif fault == "zero":
            vectors = [[0.0] * dimensions for _ in vectors]
        elif fault in ("nan", "huge"):
            vectors[0][0] = math.nan if fault == "nan" else _HUGE
        return vectors

    def _echo(self, status: int, key: str) -> None:
        forms = echoes(key)
        form = forms[next(self.echo_turn) % len(forms)]
        message = "Incorrect API key provided" if status == 401 else "Overloaded"
        self._send(status, None, raw=f"{message}; you sent {form} as your key".encode())

    def _send(
        self,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> None:
        if raw is None:
            raw = json.dumps(payload).encode().replace(b"1e+300", b"1e400")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


_HUGE = 1e300  # written as 1e400 on the wire (json.dumps cannot write that)
_STATUSES = {  # fault -> status, Retry-After
    "500": (500, ""),
    "503": (503, ""),
    "429": (429, ""),
    "429-retry-after": (429, "1"),
    "429-retry-after-long": (429, str(LONG_RETRY_AFTER)),
    "400": (400, ""),
}


def _openai(vectors: list[list[float]], body: dict[str, Any]) -> Any:
    # NaN and 1e400 are literals only float lists can hold (NaN fails every comparison)
    storable = all(-3e38 < x < 3e38 for vector in vectors for x in vector)
    as_base64 = body.get("encoding_format") == "base64" and storable
    data = [
        {"object": "embedding", "index": i, "embedding": b64(v) if as_base64 else v}
        for i, v in enumerate(vectors)
    ]
    data.reverse()  # servers may answer out of order; clients sort by index
    return {"object": "list", "data": data, "model": body["model"]}


def _ollama(vectors: list[list[float]], body: dict[str, Any]) -> Any:
    return {"model": body["model"], "embeddings": vectors, "total_duration": 1200}


_WIRES = {"/v1/embeddings": _openai, "/api/embed": _ollama}


def _reset(handler: LoopbackHandler) -> None:
    """Close with a TCP RST (SO_LINGER 0) instead of answering."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()


def _hang(handler: LoopbackHandler) -> None:
    time.sleep(HANG)  # the client has given up by now; close without a word


def _truncated(handler: LoopbackHandler) -> None:
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", "4096")
    handler.end_headers()
    handler.wfile.write(b'{"object": "list", "data": [{"index": 0, "embe')


def _bad_gzip(handler: LoopbackHandler) -> None:
    raw = b'{"object": "list", "data": []}'
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-encoding", "gzip")
    handler.send_header("content-length", str(len(raw)))
    handler.end_headers()
    handler.wfile.write(raw)


_BROKEN = {"reset": _reset, "timeout": _hang, "truncated": _truncated, "bad-gzip": _bad_gzip}


@contextmanager
def serve(
    key: str = FAKE_KEY, faults: Sequence[str] = (), dimensions: int = 256
) -> Iterator[Loopback]:
    """The server on a free port of 127.0.0.1, until the ``with`` block ends; vectors
    have ``dimensions`` unless a request asks for others."""
    unknown = set(faults) - set(FAULTS) - {""}
    assert not unknown, f"unknown faults {unknown}"
    seen: list[dict[str, Any]] = []
    queue = list(faults)
    attributes = {
        "seen": seen,
        "faults": queue,
        "key": key,
        "dimensions": dimensions,
        "echo_turn": itertools.count(),
    }
    handler = type("Handler", (LoopbackHandler,), attributes)
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
