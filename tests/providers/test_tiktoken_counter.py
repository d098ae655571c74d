"""``engramdb.providers.tiktoken_counter``: an exact token count for
``format_context(budget_tokens=...)`` through tiktoken. No test downloads a BPE file: the
encodings here are built from ranks made on the spot."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from engramdb import HashEmbedder, InMemoryStore, Memory, ProviderError, ValidationError
from engramdb.agents import estimate_tokens, format_context
from engramdb.providers import tiktoken_counter

# GPT-2's split: words with their leading space, numbers, punctuation runs, spaces
PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
MERGES = [b"th", b"the", b" the", b"me", b"se", b"sea", b"seat", b"seats", b" seats"]


@pytest.fixture
def tiktoken() -> Any:
    return pytest.importorskip("tiktoken")


@pytest.fixture
def encoding(tiktoken: Any) -> Any:
    """A byte-level BPE: every byte, then a few merges, and one special token."""
    ranks = {bytes([b]): b for b in range(256)}
    for piece in MERGES:
        ranks[piece] = len(ranks)
    return tiktoken.Encoding(
        name="tiny-bpe",
        pat_str=PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": len(ranks)},
    )


def test_the_counter_counts_the_encodings_tokens_and_refuses_no_text(encoding: Any) -> None:
    """``the theme`` is the, " the", me; a memory that reads ``<|endoftext|>`` is 13
    bytes of text, not the special token, and not an error."""
    count = tiktoken_counter(encoding)
    assert count("the theme") == 3 == len(encoding.encode_ordinary("the theme"))
    assert count(" seats") == 1 and count("") == 0
    assert count("<|endoftext|>") == 13
    with pytest.raises(ValueError, match="disallowed special token"):
        encoding.encode("<|endoftext|>")  # what a plain encode would have done


def test_a_block_budgeted_by_the_counter_fits_its_exact_count(encoding: Any) -> None:
    """The block's exact count is within the budget, and the estimate is not what cut it
    (here, byte-level tokens are more than twice the WordPiece estimate)."""
    count = tiktoken_counter(encoding)
    memory = Memory(InMemoryStore(), HashEmbedder())
    view = memory.bind(("acme", "user", "sam"))
    view.remember("Sam prefers aisle seats on long flights <|endoftext|>")
    view.remember("Sam's passport expires in March, renew it before the Oslo trip")
    hits = view.recall("Sam aisle seats")
    for budget in (20, 60, 90, 150, 400):
        block = format_context(hits, budget_tokens=budget, count_tokens=count)
        assert block == "" or count(block) <= budget
    assert format_context(hits, budget_tokens=90, count_tokens=count).endswith("…")
    block = format_context(hits, budget_tokens=120, count_tokens=count)
    assert len(block.splitlines()) == 2 and count(block) <= 120
    assert estimate_tokens(block) < count(block) / 2
    assert len(format_context(hits, budget_tokens=120).splitlines()) == 3  # the estimate's


def test_without_tiktoken_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken raises ImportError
    with pytest.raises(ImportError, match=r"needs tiktoken.*\npip install tiktoken$"):
        tiktoken_counter()


@pytest.mark.parametrize("wrong", [42, b"cl100k_base", None])
def test_an_encoding_that_is_neither_a_name_nor_an_encoding_is_one_error(
    tiktoken: Any, wrong: object
) -> None:
    with pytest.raises(ValidationError, match=rf"^encoding={wrong!r} must be a tiktoken"):
        tiktoken_counter(wrong)


def test_an_unknown_encoding_name_lists_the_known_ones(tiktoken: Any) -> None:
    """Refused before tiktoken would look for a file to download."""
    with pytest.raises(ValidationError, match=r"encoding='cl100k' is not one of .*'cl100k_base'"):
        tiktoken_counter("cl100k")


def test_a_failed_download_is_a_provider_error_that_shows_no_proxy_credentials(
    tiktoken: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tiktoken downloads a named encoding's BPE file on first use; through a proxy that
    refuses the connection (a closed port on 127.0.0.1), the error says what to do and
    carries neither the proxy's address nor its password."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    proxy = f"http://sam:s3cret@127.0.0.1:{port}"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache
    for name in ("HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ProviderError, match="could not load the encoding 'cl100k_base'") as error:
        tiktoken_counter("cl100k_base")
    assert "TIKTOKEN_CACHE_DIR" in str(error.value)
    assert "s3cret" not in str(error.value) and str(port) not in str(error.value)
