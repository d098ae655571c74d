"""No scope oracle over HTTP: what one token's scope sees from `engramdb serve` — its
embedding calls, hits, scores and evidence — is the same whether or not another token's
scope of the same database wrote the same texts first.

Each run starts a real ``engramdb serve`` on 127.0.0.1 over a fresh SQLite file, with an
OpenAI-compatible embeddings server on 127.0.0.1 that counts the texts it embeds. Sam
(another scope of the same file) writes either Alex's exact texts or unrelated ones;
then Alex runs the same sequence of writes, an update and recalls; the two runs must
agree on everything Alex saw.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from server_helpers import ALEX_TOKEN, SAM_TOKEN, free_port, start

from engramdb import HashEmbedder

SECRETS = ["the vault PIN is 4921", "Alex sees Dr Ito on Friday", "the spare key is under the mat"]
OTHERS = ["Sam plays the cello", "Sam is vegetarian", "Sam lives in Lisbon"]


@dataclass
class Counter:
    texts: list[str] = field(default_factory=list)


@contextmanager
def counting_embeddings() -> Iterator[tuple[str, Counter]]:
    """An OpenAI-compatible ``POST /v1/embeddings`` on 127.0.0.1 answering HashEmbedder
    vectors; every text it is sent is appended to the counter."""
    counter = Counter()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            counter.texts.extend(texts)
            vectors = HashEmbedder(dimensions=64).embed(texts)
            data = [{"object": "embedding", "index": i, "embedding": list(v)} for i, v in
                    enumerate(vectors)]  # fmt: skip
            raw = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", counter
    finally:
        httpd.shutdown()
        httpd.server_close()


def alex_session(tmp: Path, sam_texts: list[str]) -> tuple[int, list[Any]]:
    """Sam writes ``sam_texts``; then Alex's sequence. Answers how many texts Alex's
    requests sent to the embedder and everything Alex's requests answered."""
    with counting_embeddings() as (base_url, counter):
        embedder = f"openai-compatible:hash-bow?base_url={base_url}&max_retries=0"
        tmp.mkdir()
        server = start(tmp, "--embedder", embedder)
        try:
            with server.client(SAM_TOKEN) as sam, server.client(ALEX_TOKEN) as alex:
                for text in sam_texts:
                    assert sam.post("/v1/memories", json={"text": text}).status_code == 201
                before = len(counter.texts)
                seen: list[Any] = []

                def call(method: str, path: str, body: object = None) -> Any:
                    response = alex.request(method, path, json=body)
                    seen.append((method, path, response.status_code, response.json()))
                    return response.json()

                first = call("POST", "/v1/memories", {"text": SECRETS[0]})["memory"]
                call("POST", "/v1/memories/batch", {"memories": [{"text": SECRETS[1]},
                     {"text": "Alex likes green tea"}]})  # fmt: skip
                call("PATCH", f"/v1/memories/{first['id']}", {"text": SECRETS[2]})
                call("POST", "/v1/memories", {"text": SECRETS[0]})
                for query in [*SECRETS, "green tea", "an unrelated query"]:
                    for mode in ("hybrid", "vector", "lexical"):
                        call("POST", "/v1/recall", {"query": query, "mode": mode})
                call("GET", "/v1/status")
                return len(counter.texts) - before, seen
        finally:
            server.stop()


ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


# The background maintainer's clock in /v1/status: when its passes ran is the host's
# scheduling, not anything a scope stored (a pass that ends in the millisecond it began
# would otherwise share a time's name in one run and not in the other).
MAINTAINER_CLOCK = ("last_started_at", "last_finished_at", "last_success_at", "next_at")


def normalized(seen: list[Any]) -> str:
    """Alex's answers with ids and times named by their first appearance (a time is
    named after the memory it was created with: an ``embedded_at`` from Sam's earlier
    write would be a name of its own), the selection ids dropped, and the maintainer's
    clock (``MAINTAINER_CLOCK``) left out."""
    seen = json.loads(json.dumps(seen))
    for _method, _path, _status, answer in seen:
        maintenance = answer.get("maintenance") if isinstance(answer, dict) else None
        if isinstance(maintenance, dict):
            for name in MAINTAINER_CLOCK:
                if maintenance.get(name) is not None:
                    maintenance[name] = "clock"
    text = json.dumps(seen, sort_keys=True)
    text = re.sub(r'"selection_id": "[^"]*"', '"selection_id": ""', text)
    names: dict[str, str] = {}
    for pattern, prefix in ((ID, "id"), (TIME, "t")):
        for found in pattern.findall(text):
            names.setdefault(found, f"{prefix}{len(names)}")
    return re.sub(f"{ID.pattern}|{TIME.pattern}", lambda m: names[m[0]], text)


def test_what_a_scope_sees_over_http_does_not_depend_on_another_scope_holding_its_texts(
    tmp_path: Path,
) -> None:
    calls_same, seen_same = alex_session(tmp_path / "same", SECRETS)
    calls_other, seen_other = alex_session(tmp_path / "other", OTHERS)
    assert calls_same == calls_other
    assert normalized(seen_same) == normalized(seen_other)
    # and it is a real comparison: Alex's requests embedded its texts and found them
    assert calls_same >= len(SECRETS) + 1
    hits = [answer for method, path, _, answer in seen_same if path == "/v1/recall"]
    assert hits[1]["hits"][0]["memory"]["text"] == SECRETS[0]
    assert hits[1]["hits"][0]["similarity"] > 0.999
    for answer in hits:
        for hit in answer["hits"]:
            assert hit["evidence"]["embedded_at"] in (None, hit["memory"]["created_at"]) or (
                hit["evidence"]["embedded_at"] >= hit["memory"]["created_at"]
            )
