"""The public surface of engramdb.providers, and its import-time promises."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import engramdb.providers


def test_every_public_name_resolves() -> None:
    """Each name of ``__all__`` (pinned in tests/core/public_api.txt) loads on first use."""
    assert {"HTTPEmbedder", "embedder_from_url", "float_vector"} <= set(engramdb.providers.__all__)
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


def test_without_httpx_hash_and_st_work_and_http_embedders_say_what_to_install() -> None:
    """With httpx missing (as after ``pip install 'engramdb[local]'`` alone), importing
    engramdb.providers works, ``hash:`` embeds, ``st:`` reaches sentence-transformers
    (missing too here: its own hint, not httpx's), and an HTTP embedder asked for by
    name or by string raises ImportError with the install line."""
    result = run(
        """
        import sys

        class NoSuchModule:  # what a package that is not installed looks like
            def find_spec(self, name, path=None, target=None):
                top = name.partition(".")[0]
                if top in ("httpx", "httpcore", "sentence_transformers", "torch"):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, NoSuchModule())
        from engramdb.providers import RetryPolicy, embedder_from_url

        embedder = embedder_from_url("hash:64")
        print("hash", embedder.space.id, len(embedder.embed(["Sam is vegetarian"])[0]))
        print("retry", RetryPolicy(max_retries=1).max_retries)
        for attempt in (
            lambda: embedder_from_url("st:all-MiniLM-L6-v2"),
            lambda: embedder_from_url("openai:text-embedding-3-small"),
            lambda: embedder_from_url("cloudflare:@cf/baai/bge-base-en-v1.5"),
            lambda: __import__("engramdb.providers", fromlist=["OpenAIEmbedder"]).OpenAIEmbedder,
        ):
            try:
                attempt()
            except ImportError as exc:
                print("error", " | ".join(str(exc).splitlines()))
        print("loaded", sorted(m for m in ("httpx", "sentence_transformers") if m in sys.modules))
        """
    )
    assert result.stdout.splitlines() == [
        "hash hash/bow@64 64",
        "retry 1",
        "error SentenceTransformerEmbedder needs sentence-transformers; install it with:"
        " | pip install 'engramdb[local]'",
        "error the openai: embedder needs httpx, which is not installed; install it with:"
        " | pip install 'engramdb[http]'",
        "error the cloudflare: embedder needs httpx, which is not installed; install it with:"
        " | pip install 'engramdb[http]'",
        "error engramdb.providers.OpenAIEmbedder needs httpx, which is not installed; "
        "install it with: | pip install 'engramdb[http]'",
        "loaded []",
    ], result.stderr


def test_importing_providers_does_not_import_sentence_transformers_or_torch() -> None:
    result = run(
        """
        import sys
        import engramdb.providers
        print(sorted(m for m in ("sentence_transformers", "torch") if m in sys.modules))
        """
    )
    assert result.stdout.strip() == "[]", result.stderr
