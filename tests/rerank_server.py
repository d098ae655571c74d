"""A TEI-shaped reranker server on 127.0.0.1 for the tests (providers, CLI).

``tei()`` starts it on a free port in a thread and yields a :class:`Server`. It answers
``POST /rerank`` ``{"query", "texts"}`` with ``[{"index", "score"}]`` sorted best first,
as text-embeddings-inference does; its score of a text is how many of the query's words
it holds (:func:`score`). Each entry of ``faults`` serves one request: a status
(``"503"``) is answered with that status, ``"short"`` with one score too few, ``"hang"``
with nothing at all (the request is read and never answered, until the server stops).
``always`` serves every request once ``faults`` is empty.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Server", "score", "tei"]


@dataclass
class Server:
    url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    always: str = ""
    released: threading.Event = field(default_factory=threading.Event)


def score(query: str, text: str) -> float:
    words = set(text.lower().split())
    return float(sum(1 for word in query.lower().split() if word in words))


@contextmanager
def tei() -> Iterator[Server]:
    state = Server("")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            state.bodies.append(body)
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            fault = state.faults.pop(0) if state.faults else state.always
            if fault == "hang":
                state.released.wait()  # never answered; the server's end lets it go
            elif self.path != "/rerank":
                self._answer(404, {"error": "not found"})
            elif fault.isdigit():
                self._answer(int(fault), {"error": "overloaded", "error_type": "Overloaded"})
            else:
                rows = [
                    {"index": i, "score": score(body["query"], text)}
                    for i, text in enumerate(body["texts"])
                ]
                rows.sort(key=lambda row: -row["score"])
                self._answer(200, rows[:-1] if fault == "short" else rows)

        def _answer(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        state.url = f"http://{host}:{port}"
        yield state
    finally:
        state.released.set()
        server.shutdown()
        server.server_close()
        thread.join()
