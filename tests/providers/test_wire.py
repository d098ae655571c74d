"""Each provider's exact wire format: request building and response parsing are pure."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from provider_fakes import (
    FAKE_KEY,
    Script,
    Sleeps,
    b64,
    json_response,
    openai_answer,
    vectors_for,
)

from engramdb import ProviderError, ProviderHTTPError
from engramdb.providers import (
    AzureOpenAIEmbedder,
    CloudflareEmbedder,
    CohereEmbedder,
    GeminiEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    VoyageEmbedder,
)


def sent(request: httpx.Request) -> tuple[str, str, dict[str, str], Any]:
    """Method, URL, the interesting headers and the JSON body of ``request``."""
    headers = {
        name: value
        for name, value in request.headers.items()
        if name in ("authorization", "x-goog-api-key", "api-key", "content-type", "accept")
    }
    return request.method, str(request.url), headers, json.loads(request.content)


JSON = {"accept": "application/json", "content-type": "application/json"}


# -- OpenAI and compatible ----------------------------------------------------------


def test_openai_request() -> None:
    embedder = OpenAIEmbedder("text-embedding-3-small", api_key=FAKE_KEY, dimensions=512)
    assert sent(embedder.build_request(["a", "b"], "query")) == (
        "POST",
        "https://api.openai.com/v1/embeddings",
        {**JSON, "authorization": f"Bearer {FAKE_KEY}"},
        {
            "model": "text-embedding-3-small",
            "input": ["a", "b"],
            "dimensions": 512,
            "encoding_format": "base64",
        },
    )
    assert embedder.space.id == "openai/text-embedding-3-small@512"


def test_openai_takes_the_key_from_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    request = OpenAIEmbedder().build_request(["a"], "document")
    assert request.headers["authorization"] == f"Bearer {FAKE_KEY}"


def test_openai_compatible_never_sends_the_openai_key_to_another_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    embedder = OpenAIEmbedder("bge-m3", base_url="http://localhost:8080/v1", encoding="float")
    _method, url, headers, body = sent(embedder.build_request(["a"], "document"))
    assert url == "http://localhost:8080/v1/embeddings"
    assert "authorization" not in headers
    assert body == {"model": "bge-m3", "input": ["a"]}


def test_openai_response_in_base64_or_floats_is_reordered_by_index() -> None:
    embedder = OpenAIEmbedder(api_key=FAKE_KEY)
    payload = {
        "data": [
            {"index": 1, "embedding": b64([3.0, 4.0])},
            {"index": 0, "embedding": [1.0, 2.0]},
        ]
    }
    assert [list(v) for v in embedder.parse_response(payload)] == [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"data": [{"index": 0}]}, "no field 'data\\[0\\].embedding'"),
        ({"data": [{"index": 0, "embedding": "@@@"}]}, "not valid base64"),
        ({"data": [{"index": "0", "embedding": [1.0]}]}, "'data\\[0\\].index'"),
        ({"data": [{"index": 1, "embedding": [1.0]}]}, "not 0..0 exactly once"),
        ({"data": {"0": [1.0]}}, "'data' is a dict, not a list"),
    ],
)
def test_openai_response_errors_name_the_field(payload: Any, message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        OpenAIEmbedder(api_key=FAKE_KEY).parse_response(payload)


def test_openai_compatible_server_without_base64_is_asked_again_with_floats(
    sleeps: Sleeps,
) -> None:
    """A server that rejects encoding_format is asked once more with float lists, and
    the embedder remembers it."""
    script = Script(
        json_response({"detail": "encoding_format 'base64' is not supported"}, 422),
        lambda r: json_response({"data": [{"index": 0, "embedding": [1.0, 2.0]}]}),
        lambda r: json_response({"data": [{"index": 0, "embedding": [1.0, 2.0]}]}),
    )
    embedder = OpenAIEmbedder(
        "m", base_url="http://tei:80/v1", transport=httpx.MockTransport(script), sleep=sleeps.sleep
    )
    embedder.embed(["a"])
    embedder.embed(["b"])
    bodies = script.bodies()
    assert [body.get("encoding_format") for body in bodies] == ["base64", None, None]
    assert sleeps.waits == []


def test_openai_other_422_errors_are_not_retried_with_floats(sleeps: Sleeps) -> None:
    script = Script(json_response({"detail": "input too long"}, 422))
    embedder = OpenAIEmbedder(
        "m", base_url="http://tei:80/v1", transport=httpx.MockTransport(script), sleep=sleeps.sleep
    )
    with pytest.raises(ProviderHTTPError) as info:
        embedder.embed(["a"])
    assert info.value.status == 422 and len(script.requests) == 1


def test_azure_openai_request_uses_the_api_key_header_and_api_version() -> None:
    embedder = AzureOpenAIEmbedder(
        "my-embeddings", endpoint="https://res.openai.azure.com/", api_key=FAKE_KEY
    )
    assert sent(embedder.build_request(["a"], "document")) == (
        "POST",
        "https://res.openai.azure.com/openai/deployments/my-embeddings/embeddings"
        "?api-version=2024-10-21",
        {**JSON, "api-key": FAKE_KEY},
        {"model": "my-embeddings", "input": ["a"], "encoding_format": "base64"},
    )


def test_openai_round_trip_through_mock_transport(sleeps: Sleeps) -> None:
    script = Script(openai_answer(vectors_for(3)))
    embedder = OpenAIEmbedder(
        "my-embedder", api_key=FAKE_KEY, transport=httpx.MockTransport(script), sleep=sleeps.sleep
    )
    vectors = embedder.embed(["a", "b", "c"])
    assert [v[0] for v in vectors] == [1.0, 2.0, 3.0]
    assert embedder.space.id == "openai/my-embedder@3"  # learned: no table knows the model


# -- Gemini ---------------------------------------------------------------------------


def test_gemini_request_maps_kind_to_task_type() -> None:
    embedder = GeminiEmbedder("gemini-embedding-001", api_key=FAKE_KEY, dimensions=768)
    method, url, headers, body = sent(embedder.build_request(["a", "b"], "document"))
    assert (method, url) == (
        "POST",
        "https://generativelanguage.googleapis.com/v1beta/models/"
        "gemini-embedding-001:batchEmbedContents",
    )
    assert headers == {**JSON, "x-goog-api-key": FAKE_KEY}
    assert body == {
        "requests": [
            {
                "model": "models/gemini-embedding-001",
                "content": {"parts": [{"text": text}]},
                "taskType": "RETRIEVAL_DOCUMENT",
                "outputDimensionality": 768,
            }
            for text in ("a", "b")
        ]
    }
    query = json.loads(embedder.build_request(["q"], "query").content)
    assert query["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
    assert embedder.space.id == "gemini/gemini-embedding-001@768"


def test_gemini_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", FAKE_KEY)
    request = GeminiEmbedder().build_request(["a"], "query")
    assert request.headers["x-goog-api-key"] == FAKE_KEY
    assert "key=" not in str(request.url)


def test_gemini_without_task_types_has_its_own_space() -> None:
    embedder = GeminiEmbedder(api_key=FAKE_KEY, query_task=None, document_task=None, dimensions=768)
    body = json.loads(embedder.build_request(["a"], "query").content)
    assert "taskType" not in body["requests"][0]
    assert embedder.space.id == "gemini/gemini-embedding-001@768#tasks-none-none"


def test_gemini_response() -> None:
    payload = {"embeddings": [{"values": [0.5, 0.25]}, {"values": [1.0, 2.0]}]}
    vectors = GeminiEmbedder(api_key=FAKE_KEY).parse_response(payload)
    assert [list(v) for v in vectors] == [[0.5, 0.25], [1.0, 2.0]]
    with pytest.raises(ProviderError, match=r"'embeddings\[0\]\.values'"):
        GeminiEmbedder(api_key=FAKE_KEY).parse_response({"embeddings": [{"value": []}]})


# -- Ollama ---------------------------------------------------------------------------


def test_ollama_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    embedder = OllamaEmbedder("mxbai-embed-large", dimensions=512)
    assert sent(embedder.build_request(["a"], "document")) == (
        "POST",
        "http://localhost:11434/api/embed",
        JSON,
        {"model": "mxbai-embed-large", "input": ["a"], "truncate": True, "dimensions": 512},
    )


def test_ollama_host_from_environment_and_truncate_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5:11434")
    embedder = OllamaEmbedder("all-minilm", truncate="error")
    _method, url, _headers, body = sent(embedder.build_request(["a"], "query"))
    assert url == "http://10.0.0.5:11434/api/embed"
    assert body["truncate"] is False


def test_ollama_nomic_gets_its_task_prefixes_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    embedder = OllamaEmbedder("nomic-embed-text:latest", host="http://ollama:11434")
    assert embedder.prepare(["sam"], "query") == ["search_query: sam"]
    assert embedder.prepare(["sam"], "document") == ["search_document: sam"]
    assert embedder.space.id.startswith("ollama/nomic-embed-text@768#prefix-")


def test_ollama_response() -> None:
    payload = {"model": "all-minilm", "embeddings": [[0.1, 0.2], [0.3, 0.4]]}
    vectors = OllamaEmbedder("all-minilm", host="http://o:1").parse_response(payload)
    assert len(vectors) == 2 and len(vectors[1]) == 2


# -- Cloudflare Workers AI -------------------------------------------------------------


def test_cloudflare_request() -> None:
    embedder = CloudflareEmbedder(
        "@cf/baai/bge-base-en-v1.5", account_id="acc123", api_token=FAKE_KEY
    )
    assert sent(embedder.build_request(["a", "b"], "query")) == (
        "POST",
        "https://api.cloudflare.com/client/v4/accounts/acc123/ai/run/@cf/baai/bge-base-en-v1.5",
        {**JSON, "authorization": f"Bearer {FAKE_KEY}"},
        {"text": ["a", "b"]},
    )
    assert embedder.space.id == "cloudflare/cf/baai/bge-base-en-v1.5@768"
    assert embedder.max_batch == 100


def test_cloudflare_credentials_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUDFLARE_ACCOUNT_ID", "acc9")
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", FAKE_KEY)
    request = CloudflareEmbedder(pooling="cls").build_request(["a"], "document")
    assert "/accounts/acc9/" in str(request.url)
    assert json.loads(request.content) == {"text": ["a"], "pooling": "cls"}


def test_cloudflare_response_and_failure() -> None:
    embedder = CloudflareEmbedder(account_id="a", api_token=FAKE_KEY)
    payload = {"result": {"shape": [1, 2], "data": [[0.5, 0.5]]}, "success": True}
    assert [list(v) for v in embedder.parse_response(payload)] == [[0.5, 0.5]]
    with pytest.raises(ProviderError, match="success=false"):
        embedder.parse_response({"result": None, "success": False, "errors": [{"code": 5007}]})
    with pytest.raises(ProviderError, match=r"'result\.data'"):
        embedder.parse_response({"result": {"shape": [0]}, "success": True})


# -- Cohere ---------------------------------------------------------------------------


def test_cohere_request_maps_kind_to_input_type() -> None:
    embedder = CohereEmbedder("embed-v4.0", api_key=FAKE_KEY, dimensions=1024)
    assert sent(embedder.build_request(["a"], "query")) == (
        "POST",
        "https://api.cohere.com/v2/embed",
        {**JSON, "authorization": f"Bearer {FAKE_KEY}"},
        {
            "model": "embed-v4.0",
            "texts": ["a"],
            "input_type": "search_query",
            "embedding_types": ["float"],
            "truncate": "END",
            "output_dimension": 1024,
        },
    )
    document = json.loads(embedder.build_request(["a"], "document").content)
    assert document["input_type"] == "search_document"
    assert embedder.max_batch == 96


def test_cohere_response() -> None:
    payload = {"id": "x", "embeddings": {"float": [[0.1, 0.2]]}, "texts": ["a"]}
    assert len(CohereEmbedder(api_key=FAKE_KEY).parse_response(payload)) == 1
    with pytest.raises(ProviderError, match=r"'embeddings\.float'"):
        CohereEmbedder(api_key=FAKE_KEY).parse_response({"embeddings": {"int8": [[1]]}})


# -- Voyage ---------------------------------------------------------------------------


def test_voyage_request_maps_kind_to_input_type() -> None:
    embedder = VoyageEmbedder("voyage-3.5", api_key=FAKE_KEY, dimensions=512)
    assert sent(embedder.build_request(["a"], "document")) == (
        "POST",
        "https://api.voyageai.com/v1/embeddings",
        {**JSON, "authorization": f"Bearer {FAKE_KEY}"},
        {
            "model": "voyage-3.5",
            "input": ["a"],
            "input_type": "document",
            "truncation": True,
            "output_dimension": 512,
        },
    )
    query = json.loads(embedder.build_request(["a"], "query").content)
    assert query["input_type"] == "query"


def test_voyage_response_is_reordered_by_index() -> None:
    payload = {"data": [{"embedding": [2.0], "index": 1}, {"embedding": [1.0], "index": 0}]}
    vectors = VoyageEmbedder(api_key=FAKE_KEY).parse_response(payload)
    assert [list(v) for v in vectors] == [[1.0], [2.0]]
