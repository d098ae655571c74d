"""A self-hosted reranker over real HTTP: a TEI-shaped server on 127.0.0.1
(``tests/rerank_server.py``). Through it: the reranker's requests, batching, retries,
the async face, and a ``Memory`` whose recall is re-ordered by it, or degraded when it
fails.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from provider_fakes import FAKE_KEY, Sleeps

from engramdb import HashEmbedder, InMemoryStore, Memory, ProviderHTTPError
from engramdb.driver import RetryPolicy
from engramdb.providers import TEIReranker, reranker_from_url
from rerank_server import Server, score, tei


@pytest.fixture
def server() -> Iterator[Server]:
    with tei() as running:
        yield running


TEXTS = ["the cat sat", "a dog and a cat", "nothing here", "cat dog bird"]


def test_scores_come_back_in_input_order_over_real_http(server: Server) -> None:
    reranker = reranker_from_url(f"tei:{server.url}?model=BAAI/bge-reranker-base")
    assert reranker.rerank("cat dog", TEXTS) == [1.0, 2.0, 0.0, 2.0]
    assert server.bodies == [{"query": "cat dog", "texts": TEXTS}]
    assert server.headers[0]["content-type"] == "application/json"
    assert "authorization" not in server.headers[0]
    assert reranker.id == "tei/BAAI/bge-reranker-base"


def test_batches_retries_and_the_async_face(server: Server) -> None:
    sleeps = Sleeps()
    reranker = TEIReranker(
        base_url=server.url, max_batch=3, sleep=sleeps.sleep, asleep=sleeps.asleep
    )
    server.faults.append("503")
    assert reranker.rerank("cat", TEXTS) == [1.0, 1.0, 0.0, 1.0]
    assert [body["texts"] for body in server.bodies] == [TEXTS[:3], TEXTS[:3], TEXTS[3:]]
    assert len(sleeps.waits) == 1  # the 503 was retried once
    assert asyncio.run(reranker.arerank("bird", TEXTS)) == [0.0, 0.0, 0.0, 1.0]


def test_a_key_named_by_api_key_env_goes_only_in_the_header(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_TEI_KEY", FAKE_KEY)
    reranker_from_url(f"tei:{server.url}?api_key_env=MY_TEI_KEY").rerank("cat", ["cat"])
    assert server.headers[0]["authorization"] == f"Bearer {FAKE_KEY}"
    assert FAKE_KEY not in json.dumps(server.bodies)


def test_an_error_status_is_a_provider_http_error(server: Server) -> None:
    server.faults.append("413")
    with pytest.raises(ProviderHTTPError, match="HTTP 413"):
        TEIReranker(base_url=server.url).rerank("cat", TEXTS)


SCOPE = ("acme", "pets")


def memory(reranker: TEIReranker) -> Memory:
    mem = Memory(InMemoryStore(), HashEmbedder(dimensions=64), reranker=reranker)
    mem.remember_many({"text": text, "scope": SCOPE} for text in TEXTS)
    return mem


def test_a_memory_recall_is_re_ordered_by_the_server(server: Server) -> None:
    reranker = TEIReranker(base_url=server.url)
    mem = memory(reranker)
    fused = [hit.memory.text for hit in mem.recall("cat dog", [SCOPE], rerank=0)]
    hits = mem.recall("cat dog", [SCOPE], top_k=2)
    assert hits.status == "used"
    want = sorted(fused, key=lambda text: -score("cat dog", text))[:2]  # stable: fused ties
    assert [hit.memory.text for hit in hits] == want
    assert [hit.evidence["rerank_score"] for hit in hits] == [2.0, 2.0]
    assert server.bodies[-1] == {"query": "cat dog", "texts": fused}


@pytest.mark.parametrize("fault", ["500", "short"])
def test_a_failing_server_degrades_the_recall_to_the_fused_order(
    server: Server, fault: str
) -> None:
    reranker = TEIReranker(base_url=server.url, retry=RetryPolicy(max_retries=0))
    mem = memory(reranker)
    fused = [hit.memory.text for hit in mem.recall("cat dog", [SCOPE], rerank=0)]
    server.faults.append(fault)
    hits = mem.recall("cat dog", [SCOPE])
    assert [hit.memory.text for hit in hits] == fused
    assert hits.status == "degraded"
    name = "ProviderHTTPError" if fault == "500" else "ProviderError"
    assert hits.error == f"rerank: {name}"
