"""embedder_from_url: every string form, and every mistake caught before the network."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from provider_fakes import FAKE_KEY, no_network

from engramdb import ConfigurationError, HashEmbedder
from engramdb.providers import (
    AzureOpenAIEmbedder,
    CloudflareEmbedder,
    CohereEmbedder,
    GeminiEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    VoyageEmbedder,
    embedder_from_url,
)
from engramdb.providers._static import shipped_table

OFFLINE = {"transport": httpx.MockTransport(no_network)}


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "COHERE_API_KEY",
        "VOYAGE_API_KEY",
        "CLOUDFLARE_API_TOKEN",
        "OPENROUTER_API_KEY",
        "AZURE_OPENAI_API_KEY",
    ):
        monkeypatch.setenv(name, FAKE_KEY)
    monkeypatch.setenv("CLOUDFLARE_ACCOUNT_ID", "acc123")
    for name in ("GOOGLE_API_KEY", "OLLAMA_HOST", "OLLAMA_API_KEY", "ENGRAMDB_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("url", "cls", "space_id"),
    [
        (
            "openai:text-embedding-3-small?dimensions=512",
            OpenAIEmbedder,
            "openai/text-embedding-3-small@512",
        ),
        (
            "openai-compatible:bge-m3?base_url=http://localhost:8000/v1&dimensions=1024",
            OpenAIEmbedder,
            "openai-compatible/bge-m3@1024",
        ),
        (
            "openai-compatible:BAAI/bge-m3?base_url=http://tei/v1&provider=tei&dimensions=1024",
            OpenAIEmbedder,
            "tei/BAAI/bge-m3@1024",
        ),
        (
            "openrouter:openai/text-embedding-3-small?dimensions=256",
            OpenAIEmbedder,
            "openrouter/openai/text-embedding-3-small@256",
        ),
        (
            "azure:emb?endpoint=https://r.openai.azure.com&dimensions=1536",
            AzureOpenAIEmbedder,
            "azure-openai/emb@1536",
        ),
        (
            "gemini:gemini-embedding-001?dimensions=768",
            GeminiEmbedder,
            "gemini/gemini-embedding-001@768",
        ),
        (
            "ollama:mxbai-embed-large?host=http://gpu:11434",
            OllamaEmbedder,
            "ollama/mxbai-embed-large@1024",
        ),
        (
            "cloudflare:@cf/baai/bge-base-en-v1.5",
            CloudflareEmbedder,
            "cloudflare/cf/baai/bge-base-en-v1.5@768",
        ),
        ("cohere:embed-english-v3.0", CohereEmbedder, "cohere/embed-english-v3.0@1024"),
        ("voyage:voyage-3.5?dimensions=512", VoyageEmbedder, "voyage/voyage-3.5@512"),
        ("hash:256", HashEmbedder, "hash/bow@256"),
    ],
)
def test_each_string_form_builds_its_embedder(url: str, cls: type, space_id: str) -> None:
    overrides = {} if cls is HashEmbedder else OFFLINE
    embedder = embedder_from_url(url, **overrides)
    assert type(embedder) is cls
    assert embedder.space.id == space_id


def test_options_reach_the_embedder() -> None:
    embedder = embedder_from_url(
        "ollama:all-minilm?host=http://h:1&timeout=5&max_batch=8&max_retries=2&truncate=error"
        "&max_concurrency=3&max_chars=99&query_prefix=q%3A%20",
        **OFFLINE,
    )
    assert isinstance(embedder, OllamaEmbedder)
    assert (embedder.timeout, embedder.max_batch, embedder.retry.max_retries) == (5.0, 8, 2)
    assert (embedder.truncate, embedder.max_concurrency, embedder.max_chars) == ("error", 3, 99)
    assert embedder.query_prefix == "q: "


def test_the_string_is_read_from_engramdb_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAMDB_EMBEDDER", "hash:64")
    assert embedder_from_url().space.id == "hash/bow@64"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("nope:model", "unknown embedder scheme 'nope'"),
        ("text-embedding-3-small", "must look like 'SCHEME:MODEL"),
        ("openai:", "names no model"),
        ("openai:m?colour=blue", "unknown option 'colour' for scheme 'openai'"),
        ("openai:m?dimensions=big", "dimensions='big' must be an integer"),
        ("openai:m?dimensions=0", "dimensions=0 must be a positive int"),
        ("openai:m?dimensions=1&dimensions=2", "given twice"),
        ("openai:m?api_key=sk-123", "never put a credential"),
        ("openai:m?truncate=middle", "truncate='middle'"),
        ("openai-compatible:m", "needs base_url"),
        ("openai-compatible:m?base_url=ftp://x", "must start with http"),
        ("openai-compatible:m?base_url=http://x&api_key_env=MISSING_VAR_X", "MISSING_VAR_X"),
        ("hash:wide", "must give the dimensions"),
        ("cloudflare:@cf/baai/bge-base-en-v1.5?max_batch=500", "above Workers AI's 100"),
        ("st:model?device=cpu&colour=1", "unknown option 'colour'"),
    ],
)
def test_mistakes_are_configuration_errors_before_any_request(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        embedder_from_url(url, **({} if url.startswith(("hash", "st")) else OFFLINE))


@pytest.mark.parametrize(
    ("url", "variable"),
    [
        ("openai:text-embedding-3-small", "OPENAI_API_KEY"),
        ("gemini:gemini-embedding-001", "GEMINI_API_KEY"),
        ("cohere:embed-v4.0", "COHERE_API_KEY"),
        ("voyage:voyage-3.5", "VOYAGE_API_KEY"),
        ("cloudflare:@cf/baai/bge-base-en-v1.5", "CLOUDFLARE_API_TOKEN"),
    ],
)
def test_a_missing_credential_names_its_environment_variable(
    url: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(variable)
    with pytest.raises(ConfigurationError, match=variable):
        embedder_from_url(url, **OFFLINE)


def test_no_string_and_no_variable_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="ENGRAMDB_EMBEDDER"):
        embedder_from_url()


def test_static_is_the_table_shipped_in_the_package(tmp_path: Path) -> None:
    """``static:`` and ``static:default`` are the shipped table; ``static:PATH`` another
    table file, named after it; a missing file or an unknown option is refused."""
    from engramdb import StaticEmbedder

    shipped = embedder_from_url("static:")
    assert isinstance(shipped, StaticEmbedder) and shipped.semantic
    assert shipped.space.id.startswith("static/minilm-l6-256@256#")
    assert embedder_from_url("static:default?max_batch=64").max_batch == 64
    copy = tmp_path / "my-table.bin"
    copy.write_bytes(shipped_table())
    mine = embedder_from_url(f"static:{copy}")
    assert mine.space.id == shipped.space.id.replace("minilm-l6-256", "my-table")
    with pytest.raises(ConfigurationError, match="cannot read the static table"):
        embedder_from_url(f"static:{tmp_path / 'missing.bin'}")
    with pytest.raises(ConfigurationError, match="dimensions"):
        embedder_from_url("static:?dimensions=64")
    copy.write_bytes(shipped_table()[:-1])
    with pytest.raises(ConfigurationError, match="truncated or padded"):
        embedder_from_url(f"static:{copy}")
