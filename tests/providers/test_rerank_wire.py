"""The rerankers' wire formats, as each service documents them (the URLs are in
``engramdb/providers/_rerankers.py``): the request (URL, headers, body), the answer read
back into input order, batching beyond ``max_batch``, retries and errors. The paid
services through ``httpx.MockTransport``; the self-hosted TEI server is in
``test_rerank_loopback.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from provider_fakes import FAKE_KEY, Script, Sleeps, json_response, texts_of

from engramdb import ConfigurationError, ProviderError, ProviderHTTPError, Reranker
from engramdb.driver import RetryPolicy
from engramdb.providers import (
    CohereReranker,
    InfinityReranker,
    JinaReranker,
    TEIReranker,
    VoyageReranker,
    reranker_from_url,
)

DOCS = ["alpha", "beta", "gamma"]


def sent(request: httpx.Request) -> tuple[str, str, dict[str, str], Any]:
    headers = {
        name: value
        for name, value in request.headers.items()
        if name in ("authorization", "content-type", "accept")
    }
    return request.method, str(request.url), headers, json.loads(request.content)


JSON = {"accept": "application/json", "content-type": "application/json"}
BEARER = {**JSON, "authorization": f"Bearer {FAKE_KEY}"}


def cohere_answer(scores: dict[int, float]) -> httpx.Response:
    """Cohere's answer: results best first (so not in input order)."""
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    return json_response(
        {
            "id": "07734bd2-2473-4f07-94e1-0d9f0e6843cf",
            "results": [{"index": i, "relevance_score": s} for i, s in ranked],
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
        }
    )


# -- Cohere ---------------------------------------------------------------------------


def test_cohere_request() -> None:
    reranker = CohereReranker(api_key=FAKE_KEY)
    assert sent(reranker.build_request("q", DOCS)) == (
        "POST",
        "https://api.cohere.com/v2/rerank",
        BEARER,
        {"model": "rerank-v3.5", "query": "q", "documents": DOCS, "top_n": 3},
    )
    assert reranker.id == "cohere/rerank-v3.5" and reranker.max_batch == 1000
    assert isinstance(reranker, Reranker)


def test_cohere_answer_comes_back_in_input_order() -> None:
    script = Script(cohere_answer({0: 0.1, 1: 0.9, 2: 0.5}))
    reranker = CohereReranker(api_key=FAKE_KEY, transport=httpx.MockTransport(script))
    assert reranker.rerank("q", DOCS) == [0.1, 0.9, 0.5]


def test_cohere_async_answer() -> None:
    script = Script(cohere_answer({0: 0.1, 1: 0.9, 2: 0.5}))
    reranker = CohereReranker(api_key=FAKE_KEY, transport=httpx.MockTransport(script))
    assert asyncio.run(reranker.arerank("q", DOCS)) == [0.1, 0.9, 0.5]
    assert len(script.requests) == 1


def test_cohere_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COHERE_API_KEY", raising=False)
    monkeypatch.setenv("CO_API_KEY", FAKE_KEY)
    request = CohereReranker().build_request("q", DOCS)
    assert request.headers["authorization"] == f"Bearer {FAKE_KEY}"
    assert FAKE_KEY not in str(request.url) and FAKE_KEY not in request.content.decode()
    monkeypatch.delenv("CO_API_KEY")
    with pytest.raises(ConfigurationError, match="COHERE_API_KEY"):
        CohereReranker()


def test_batches_beyond_max_batch_go_in_several_requests_and_scores_join_in_order() -> None:
    texts = [f"doc {i}" for i in range(5)]

    def answer(request: httpx.Request) -> httpx.Response:
        documents = json.loads(request.content)["documents"]
        return cohere_answer({i: float(doc.split()[1]) for i, doc in enumerate(documents)})

    script = Script(answer, answer, answer)
    reranker = CohereReranker(api_key=FAKE_KEY, max_batch=2, transport=httpx.MockTransport(script))
    assert reranker.rerank("q", texts) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [body["documents"] for body in script.bodies()] == [texts[0:2], texts[2:4], texts[4:]]
    assert [body["top_n"] for body in script.bodies()] == [2, 2, 1]


def test_no_texts_send_nothing() -> None:
    reranker = CohereReranker(api_key=FAKE_KEY, transport=httpx.MockTransport(Script()))
    assert reranker.rerank("q", []) == []


def test_a_rate_limit_is_retried_with_back_off() -> None:
    sleeps = Sleeps()
    script = Script(
        json_response({"message": "slow down"}, 429, **{"retry-after": "2"}),
        cohere_answer({0: 0.3, 1: 0.2, 2: 0.1}),
    )
    reranker = CohereReranker(
        api_key=FAKE_KEY, transport=httpx.MockTransport(script), sleep=sleeps.sleep
    )
    assert reranker.rerank("q", DOCS) == [0.3, 0.2, 0.1]
    assert sleeps.waits == [2.0] and len(script.requests) == 2


def test_an_error_status_is_a_provider_http_error_without_the_key() -> None:
    script = Script(json_response({"message": f"invalid api token {FAKE_KEY}"}, 401))
    reranker = CohereReranker(api_key=FAKE_KEY, transport=httpx.MockTransport(script))
    with pytest.raises(ProviderHTTPError) as caught:
        reranker.rerank("q", DOCS)
    assert caught.value.status == 401 and caught.value.provider == "cohere"
    assert not any(FAKE_KEY in text for text in texts_of(caught.value))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"results": [{"index": 0, "relevance_score": 0.5}]}, "scored 1 of 3"),
        (
            {"results": [{"index": i % 2, "relevance_score": 0.5} for i in range(3)]},
            "repeats an index",
        ),
        ({"results": [{"index": 7, "relevance_score": 0.5}]}, "index 7"),
        ({"results": [{"index": True, "relevance_score": 0.5}]}, "index True"),
        ({"results": [{"index": 0, "relevance_score": "high"}]}, "str score"),
        ({"results": [{"index": 0}]}, "results\\[0\\].relevance_score"),
        ({"data": []}, "no field 'results'"),
        ({"results": {"index": 0}}, "not a list"),
    ],
)
def test_a_wrong_answer_is_a_provider_error(payload: Any, message: str) -> None:
    script = Script(json_response(payload))
    reranker = CohereReranker(api_key=FAKE_KEY, transport=httpx.MockTransport(script))
    with pytest.raises(ProviderError, match=message):
        reranker.rerank("q", DOCS)


def test_a_nan_literal_is_a_provider_error() -> None:
    body = b'{"results": [{"index": 0, "relevance_score": NaN}]}'
    script = Script(httpx.Response(200, content=body))
    reranker = CohereReranker(api_key=FAKE_KEY, transport=httpx.MockTransport(script))
    with pytest.raises(ProviderError, match="NaN"):
        reranker.rerank("q", ["a"])


def test_a_timeout_after_retries_is_a_provider_error() -> None:
    timeouts = [httpx.ReadTimeout("slow") for _ in range(2)]
    script = Script(*timeouts)
    reranker = CohereReranker(
        api_key=FAKE_KEY,
        transport=httpx.MockTransport(script),
        retry=RetryPolicy(max_retries=1),
        sleep=Sleeps().sleep,
    )
    with pytest.raises(ProviderError, match="did not answer in time"):
        reranker.rerank("q", DOCS)


# -- Voyage, Jina, infinity -----------------------------------------------------------


def test_voyage_request_and_answer() -> None:
    reranker = VoyageReranker(api_key=FAKE_KEY)
    assert sent(reranker.build_request("q", DOCS)) == (
        "POST",
        "https://api.voyageai.com/v1/rerank",
        BEARER,
        {"model": "rerank-2", "query": "q", "documents": DOCS, "top_k": 3, "truncation": True},
    )
    answer = {
        "object": "list",
        "data": [
            {"relevance_score": 0.8, "index": 2},
            {"relevance_score": 0.4, "index": 0},
            {"relevance_score": 0.1, "index": 1},
        ],
        "model": "rerank-2",
        "usage": {"total_tokens": 26},
    }
    assert reranker.parse_response(answer, 3) == [0.4, 0.1, 0.8]
    assert reranker.id == "voyage/rerank-2"


def test_voyage_key_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="VOYAGE_API_KEY"):
        VoyageReranker()


def test_jina_request_and_answer() -> None:
    reranker = JinaReranker(api_key=FAKE_KEY)
    assert sent(reranker.build_request("q", DOCS)) == (
        "POST",
        "https://api.jina.ai/v1/rerank",
        BEARER,
        {
            "model": "jina-reranker-v2-base-multilingual",
            "query": "q",
            "documents": DOCS,
            "top_n": 3,
            "return_documents": False,
        },
    )
    answer = {
        "model": "jina-reranker-v2-base-multilingual",
        "usage": {"total_tokens": 815},
        "results": [
            {"index": 1, "document": {"text": "beta"}, "relevance_score": 0.87},
            {"index": 0, "document": {"text": "alpha"}, "relevance_score": 0.76},
            {"index": 2, "document": {"text": "gamma"}, "relevance_score": 0.02},
        ],
    }
    assert reranker.parse_response(answer, 3) == [0.76, 0.87, 0.02]


def test_infinity_speaks_cohere_at_rerank_without_a_key() -> None:
    reranker = InfinityReranker("mixedbread-ai/mxbai-rerank-xsmall-v1", base_url="http://h:7997")
    method, url, headers, body = sent(reranker.build_request("q", DOCS))
    assert (method, url, headers) == ("POST", "http://h:7997/rerank", JSON)
    assert body == {
        "model": "mixedbread-ai/mxbai-rerank-xsmall-v1",
        "query": "q",
        "documents": DOCS,
        "top_n": 3,
    }


def test_tei_request() -> None:
    reranker = TEIReranker(base_url="http://tei:8080/")
    assert sent(reranker.build_request("q", DOCS)) == (
        "POST",
        "http://tei:8080/rerank",
        JSON,
        {"query": "q", "texts": DOCS},
    )
    assert reranker.parse_response([{"index": 1, "score": 2.5}, {"index": 0, "score": -1}], 2) == [
        -1.0,
        2.5,
    ]
    with pytest.raises(ProviderError, match="not a list"):
        reranker.parse_response({"error": "model is not a reranker"}, 2)


def test_a_key_never_goes_in_the_base_url() -> None:
    with pytest.raises(ConfigurationError, match="credentials"):
        TEIReranker(base_url=f"http://user:{FAKE_KEY}@tei:8080")


# -- reranker_from_url ---------------------------------------------------------------


def test_reranker_from_url_builds_each_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COHERE_API_KEY", "VOYAGE_API_KEY", "JINA_API_KEY", "TEI_KEY"):
        monkeypatch.setenv(name, FAKE_KEY)
    cohere = reranker_from_url("cohere:rerank-v3.5?max_batch=50&max_retries=2")
    assert isinstance(cohere, CohereReranker)
    assert (cohere.id, cohere.max_batch, cohere.retry.max_retries) == ("cohere/rerank-v3.5", 50, 2)
    assert reranker_from_url("voyage:rerank-2").id == "voyage/rerank-2"
    jina = reranker_from_url("jina:jina-reranker-v2-base-multilingual")
    assert jina.id == "jina/jina-reranker-v2-base-multilingual"
    tei = reranker_from_url("tei:http://127.0.0.1:8080?model=BAAI/bge-reranker-base")
    assert isinstance(tei, TEIReranker) and tei.base_url == "http://127.0.0.1:8080"
    assert tei.id == "tei/BAAI/bge-reranker-base"
    keyed = reranker_from_url("tei:http://127.0.0.1:8080?api_key_env=TEI_KEY")
    assert keyed.build_request("q", ["a"]).headers["authorization"] == f"Bearer {FAKE_KEY}"
    infinity = reranker_from_url("infinity:mxbai?base_url=http://localhost:7997")
    assert isinstance(infinity, InfinityReranker) and infinity.base_url.endswith(":7997")
    monkeypatch.setenv("ENGRAMDB_RERANKER", "voyage:rerank-2.5")
    assert reranker_from_url().id == "voyage/rerank-2.5"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("bogus:model", "unknown reranker scheme 'bogus'"),
        ("cohere:rerank-v3.5?api_key=x", "never put a credential in the reranker string"),
        ("cohere:rerank-v3.5?dimensions=3", "unknown option 'dimensions'"),
        ("cohere:rerank-v3.5?max_batch=many", "must be an integer"),
        ("infinity:mxbai", "infinity needs base_url"),
        ("tei:ftp://host", "must start with http"),
        ("cohere", "must look like"),
    ],
)
def test_reranker_from_url_refuses_a_bad_string(
    url: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COHERE_API_KEY", FAKE_KEY)
    with pytest.raises(ConfigurationError, match=message):
        reranker_from_url(url)


def test_reranker_from_url_without_a_string_or_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGRAMDB_RERANKER", raising=False)
    with pytest.raises(ConfigurationError, match="ENGRAMDB_RERANKER"):
        reranker_from_url()
