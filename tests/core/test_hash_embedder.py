"""HashEmbedder: deterministic, offline word hashing; the same bytes everywhere."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import pytest

from engramdb._base.errors import ValidationError
from engramdb._embedders import hash_embedder as _hash_embedder
from engramdb._embedders.embedder import Embedder
from engramdb._embedders.hash_embedder import HashEmbedder
from engramdb._lexical.bm25 import terms
from engramdb._vectors.codec import encode_f32

GOLDEN_TEXT = "The quick brown fox jumps over the lazy dog; the dog sleeps."
# sha256 of the little-endian float32 bytes of GOLDEN_TEXT's 256-dimension vector.
# Computed once on CPython; Pyodide must give the same bytes (the core suite runs there).
GOLDEN_SHA256 = "590503e128e863bc68e2392ed33a2668d4cb2176d0371ec1d5c16adf7c87e2fa"


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def test_hash_embedder_implements_the_embedder_protocol() -> None:
    """It is an Embedder with space ``hash/bow@256`` and max_batch 256 by default."""
    embedder = HashEmbedder()
    assert isinstance(embedder, Embedder)
    assert embedder.space.id == "hash/bow@256"
    assert embedder.max_batch == 256
    assert embedder.dimensions == 256
    assert repr(embedder) == "HashEmbedder(dimensions=256, max_batch=256)"
    assert HashEmbedder(64, max_batch=8).space.id == "hash/bow@64"


def test_vector_bytes_are_pinned_by_a_golden_hash() -> None:
    """The float32 bytes of a fixed sentence never change (CPython and Pyodide alike)."""
    vector = HashEmbedder().embed([GOLDEN_TEXT])[0]
    assert hashlib.sha256(encode_f32(vector)).hexdigest() == GOLDEN_SHA256


def _spec_vector(text: str, dimensions: int) -> list[float]:
    """The class docstring's recipe, step by step, written plainly."""
    counts: dict[str, int] = {}
    for term in terms(text):
        counts[term] = counts.get(term, 0) + 1
    sparse: dict[int, float] = {}
    for term in sorted(counts):
        h = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")
        weight = 1.0 + math.log(counts[term])
        sparse[h % dimensions] = sparse.get(h % dimensions, 0.0) + (-weight if h >> 63 else weight)
    norm = math.sqrt(math.fsum(x * x for x in sparse.values()))
    vector = [0.0] * dimensions
    if norm == 0.0:
        vector[0] = 1.0
    for slot, value in sparse.items():
        vector[slot] = value / norm if norm else 0.0
    return vector


@pytest.mark.parametrize("dimensions", [4, 256])  # 4: nearly every term collides
def test_vectors_equal_the_documented_recipe_exactly(
    dimensions: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repeated terms, collisions and a feature cache that fills and clears change nothing."""
    monkeypatch.setattr(_hash_embedder, "_MAX_FEATURES", 5)
    embedder = HashEmbedder(dimensions)
    texts = [
        GOLDEN_TEXT,
        "go go go went going gone",
        "a b c d e f g h i j k l m n o p",
        "Ünïcödé ßtraße 42 42 x",
        "!!!",
    ]
    for text in texts * 2:
        assert embedder.embed_one(text) == _spec_vector(text, dimensions)


def test_embedding_is_deterministic_and_independent_of_kind_and_batch() -> None:
    """Same text → same vector, across calls, instances, kinds and batch positions."""
    texts = ["alpha beta", GOLDEN_TEXT, "gamma"]
    first = HashEmbedder().embed(texts)
    again = HashEmbedder().embed(list(reversed(texts)), kind="query")
    assert [encode_f32(v) for v in first] == [encode_f32(v) for v in reversed(again)]


def test_vectors_are_unit_length_and_have_the_space_dimensions() -> None:
    """Every vector has ``dimensions`` components and L2 norm 1."""
    embedder = HashEmbedder(32)
    for vector in embedder.embed(["one", "one one two", GOLDEN_TEXT * 20, "Ünïcödé ßtraße"]):
        assert len(vector) == 32
        assert math.isclose(math.sqrt(_cosine(vector, vector)), 1.0, rel_tol=1e-12)


def test_text_without_terms_gets_the_fixed_unit_vector() -> None:
    """Empty or punctuation-only text embeds to ``[1, 0, 0, ...]`` instead of failing."""
    expected = [1.0] + [0.0] * 255
    assert HashEmbedder().embed(["", "  ?!  ", "—"]) == [expected, expected, expected]


def test_shared_words_are_closer_than_unrelated_words() -> None:
    """It matches words (and their stems), not meaning: it is not a semantic model."""
    query, related, unrelated = HashEmbedder().embed(
        ["vegetarian food", "She eats vegetarian foods", "salad"]
    )
    assert _cosine(query, related) > 0.5
    assert _cosine(query, related) > _cosine(query, unrelated)
    assert abs(_cosine(query, unrelated)) < 0.3


def test_more_occurrences_weigh_more_but_sublinearly() -> None:
    """Weight per term is 1 + ln(tf): repeating a word pulls the vector towards it."""
    embedder = HashEmbedder(1024)
    cat, once, thrice = embedder.embed(["cat", "cat dog", "cat cat cat dog"])
    assert _cosine(cat, thrice) > _cosine(cat, once)
    assert math.isclose(_cosine(cat, thrice), (1 + math.log(3)) / math.hypot(1 + math.log(3), 1))


async def test_aembed_returns_the_same_vectors_as_embed() -> None:
    """``aembed`` is the async face of ``embed``."""
    embedder = HashEmbedder()
    assert await embedder.aembed(["a b c"], kind="query") == embedder.embed(["a b c"])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e: e.embed("a string"), "not a str"),
        (lambda e: e.embed(["x"] * 3), "max_batch is 2"),
        (lambda e: e.embed([b"bytes"]), "pass strings only"),
        (lambda e: e.embed(["x"], kind="passage"), "'document' or 'query'"),
        (lambda e: HashEmbedder(0), "dimensions"),
        (lambda e: HashEmbedder(8, max_batch=0), "max_batch"),
    ],
)
def test_bad_input_raises_validation_error_naming_the_fix(call: object, message: str) -> None:
    """Wrong arguments raise ValidationError with the value and the fix."""
    embedder = HashEmbedder(8, max_batch=2)
    with pytest.raises(ValidationError, match=message):
        call(embedder)  # type: ignore[operator]
