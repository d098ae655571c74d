"""``engramdb serve`` with ``ENGRAMDB_RERANKER`` and a rerank service that fails (a
TEI-shaped server on 127.0.0.1, ``tests/rerank_server.py``): a ``/v1/recall`` waits no
longer than the rerank stage's budget, and the breaker, shared by every tenant of the
server, stops sending requests to the service after 3 failures in a row."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from server_helpers import BOB_TOKEN, SAM_TOKEN, start

from rerank_server import tei

BUDGET = 5.0  # RerankGuard's default: serve sets no other
MARGIN = 4.0  # generous: a loaded 2-core machine may be slow to run a timer


def test_a_dead_rerank_service_holds_no_recall_past_the_budget_and_trips_for_every_tenant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service reads a request and never answers: Sam's recall answers 200 within
    the 5 s budget (+ margin), its fused order, ``"status": "degraded"``. Two more fail
    (503); then Bob's recall, another tenant with its own file, sends the service
    nothing and says the stage was skipped."""
    with tei() as rerank:
        rerank.always = "hang"
        monkeypatch.setenv("ENGRAMDB_RERANKER", f"tei:{rerank.url}?max_retries=0")
        served = start(tmp_path)
        try:
            with served.client(SAM_TOKEN) as sam, served.client(BOB_TOKEN) as bob:
                assert sam.post("/v1/memories", json={"text": "Sam keeps bees"}).is_success
                assert bob.post("/v1/memories", json={"text": "Bob keeps goats"}).is_success
                started = time.monotonic()
                answer = sam.post("/v1/recall", json={"query": "bees"})
                assert time.monotonic() - started < BUDGET + MARGIN
                assert answer.status_code == 200
                body = answer.json()
                assert body["status"] == "degraded"
                assert body["error"].startswith("rerank: ")
                assert [hit["memory"]["text"] for hit in body["hits"]] == ["Sam keeps bees"]
                rerank.always = "503"
                for _ in range(2):
                    assert sam.post("/v1/recall", json={"query": "bees"}).json()["error"] == (
                        "rerank: ProviderHTTPError"
                    )
                assert len(rerank.bodies) == 3
                skipped = bob.post("/v1/recall", json={"query": "goats"}).json()
                assert len(rerank.bodies) == 3  # Bob's recall sent the service nothing
                assert skipped["status"] == "degraded"
                assert skipped["error"].startswith("rerank: skipped, the reranker failed 3 ")
                assert [hit["memory"]["text"] for hit in skipped["hits"]] == ["Bob keeps goats"]
        finally:
            served.stop()
