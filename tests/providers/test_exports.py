"""The public surface of engramdb.providers, and its import-time promises."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import engramdb.providers


def test_public_names() -> None:
    assert engramdb.providers.__all__ == [
        "AzureOpenAIEmbedder",
        "CloudflareEmbedder",
        "CohereEmbedder",
        "GeminiEmbedder",
        "HTTPEmbedder",
        "OllamaEmbedder",
        "OpenAIEmbedder",
        "RetryPolicy",
        "SentenceTransformerEmbedder",
        "Sleep",
        "VoyageEmbedder",
        "embedder_from_url",
    ]
    for name in engramdb.providers.__all__:
        assert getattr(engramdb.providers, name) is not None


def test_every_http_embedder_satisfies_the_embedder_protocol() -> None:
    from provider_fakes import CASES

    from engramdb import Embedder

    for case in CASES:
        assert isinstance(case.make(dimensions=8), Embedder), case.name


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )


def test_without_httpx_the_import_error_says_what_to_install() -> None:
    result = run(
        """
        import sys
        sys.modules["httpx"] = None  # blocks the import
        try:
            import engramdb.providers
        except ImportError as exc:
            print(exc)
        """
    )
    assert "pip install 'engramdb[http]'" in result.stdout.splitlines(), result.stderr


def test_importing_providers_does_not_import_sentence_transformers_or_torch() -> None:
    result = run(
        """
        import sys
        import engramdb.providers
        print(sorted(m for m in ("sentence_transformers", "torch") if m in sys.modules))
        """
    )
    assert result.stdout.strip() == "[]", result.stderr
