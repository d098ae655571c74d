"""StaticEmbedder: a text's vector is the weighted mean of its tokens' table rows.

Every table here is built in the test from bytes (no files, no numpy), so these tests also
run in Pyodide. The real table's quality is measured in ``docs/quality.md``.
"""

from __future__ import annotations

import asyncio
import hashlib
import math

import pytest

from engramdb import ConfigurationError, Embedder, StaticEmbedder, ValidationError
from engramdb._embedders.static_embedder import build_static_table
from engramdb._embedders.wordpiece import MAX_WORD_CHARS, WordPieceTokenizer, basic_tokenize
from engramdb._vectors.codec import encode_f32

VOCAB = ["[PAD]", "[UNK]", "the", "cat", "dog", "##s", "ca", "##fe", "北", "?"]
WEIGHTS = [0.0, 0.0, 0.0, 3.0, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0]
ROWS = [
    [0.0, 0.0, 0.0],
    [5.0, 5.0, 5.0],
    [1.0, 1.0, 1.0],
    [1.0, 0.0, 0.0],
    [0.0, 1.0, 0.0],
    [0.0, 0.0, 1.0],
    [0.0, 0.0, 2.0],
    [0.0, 2.0, 0.0],
    [0.0, -1.0, 0.0],
    [0.0, 0.0, -1.0],
]


def table(weights: list[float] = WEIGHTS) -> bytes:
    return build_static_table(VOCAB, weights, ROWS)


@pytest.fixture
def embedder() -> StaticEmbedder:
    return StaticEmbedder.from_bytes(table(), name="tiny")


def unit(*xs: float) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in xs))
    return [x / norm for x in xs]


def close(a: list[float] | object, b: list[float]) -> bool:
    assert isinstance(a, list)
    return all(math.isclose(x, y, abs_tol=1e-6) for x, y in zip(a, b, strict=True))


def test_it_is_an_embedder_of_a_semantic_space_named_by_the_table_hash(
    embedder: StaticEmbedder,
) -> None:
    """The space is static/<name>@<dims>#<first 12 hex of the table's SHA-256>."""
    data = table()
    sha = hashlib.sha256(data[:-32]).hexdigest()
    assert isinstance(embedder, Embedder)
    assert embedder.semantic is True
    assert embedder.sha256 == sha
    assert embedder.space.id == f"static/tiny@3#{sha[:12]}"
    assert embedder.dimensions == 3


def test_two_tables_never_share_a_space() -> None:
    """Changing one weight changes the hash, so the space."""
    other = StaticEmbedder.from_bytes(table([*WEIGHTS[:-1], 2.0]), name="tiny")
    assert other.space != StaticEmbedder.from_bytes(table(), name="tiny").space


def test_the_table_bytes_are_pinned() -> None:
    """Golden bytes: the format of version 1 (module docstring) does not drift."""
    data = table()
    assert data[:12] == b"EGSTATIC\x01\x00\x01\x00"
    assert len(data) == 24 + len("\n".join(VOCAB).encode()) + 8 * 10 + 3 * 10 + 32
    assert hashlib.sha256(data).hexdigest()[:16] == GOLDEN_SHA256_PREFIX


GOLDEN_SHA256_PREFIX = "60253de6c1845421"


def test_a_vector_is_the_weighted_mean_of_the_token_rows(embedder: StaticEmbedder) -> None:
    """cat (weight 3, row x) and dog (weight 1, row y) give (3, 1, 0) normalised."""
    assert close(embedder.embed_one("cat dog"), unit(3.0, 1.0, 0.0))
    assert close(embedder.embed_one("dog dog cat"), unit(3.0, 2.0, 0.0))


def test_tokens_of_weight_zero_and_unknown_words_add_nothing(embedder: StaticEmbedder) -> None:
    """ "the" weighs 0 and "zebra" is [UNK] (weight 0): "the cat zebra" is "cat"."""
    assert embedder.embed_one("the cat zebra") == embedder.embed_one("cat")
    assert close(embedder.embed_one("cat"), [1.0, 0.0, 0.0])


def test_wordpiece_pieces_each_add_their_row(embedder: StaticEmbedder) -> None:
    """ "cats" is cat + ##s; "Café" is lower-cased and stripped to ca + ##fe."""
    assert embedder.token_ids("cats Café") == [3, 5, 6, 7]
    assert close(embedder.embed_one("cats"), unit(3.0, 0.0, 0.5))
    assert close(embedder.embed_one("Café"), unit(0.0, 2.0, 2.0))


def test_a_text_without_weighted_tokens_gets_a_fixed_unit_vector(
    embedder: StaticEmbedder,
) -> None:
    """Empty, only weight-0 tokens, only unknown words, or a sum of 0: [1, 0, 0]."""
    for text in ["", "   ", "the", "zebra", "北 dog"]:
        assert embedder.embed_one(text) == [1.0, 0.0, 0.0], text


def test_the_same_text_gives_the_same_vector_whatever_the_kind(
    embedder: StaticEmbedder,
) -> None:
    texts = ["the cat", "dogs?", "北 cat"]
    first = embedder.embed(texts, "document")
    assert embedder.embed(texts, "query") == first
    assert asyncio.run(embedder.aembed(texts)) == first
    for vector in first:
        assert math.isclose(math.fsum(x * x for x in vector), 1.0)


def test_rows_are_int8_with_a_row_scale() -> None:
    """A row is stored as round(x / scale) with scale = max|x| / 127."""
    rows = [[0.0, 0.0], [1.0, -0.5]]
    embedder = StaticEmbedder.from_bytes(build_static_table(["[UNK]", "a"], [0.0, 1.0], rows))
    vector = embedder.embed_one("a")
    assert math.isclose(vector[1] / vector[0], -64 / 127)


def test_embed_validates_its_arguments(embedder: StaticEmbedder) -> None:
    with pytest.raises(ValidationError, match="not a str"):
        embedder.embed("cat")
    with pytest.raises(ValidationError, match="strings only"):
        embedder.embed([1])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="kind"):
        embedder.embed(["cat"], "passage")  # type: ignore[arg-type]
    small = StaticEmbedder.from_bytes(table(), max_batch=1)
    with pytest.raises(ValidationError, match="max_batch is 1"):
        small.embed(["cat", "dog"])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too short"),
        (b"NOTATABLE" + bytes(100), "not an engramdb static table"),
        (table()[:-1], "truncated"),
        (table() + b"\x00", "truncated"),
        (table()[:30] + bytes([table()[30] ^ 1]) + table()[31:], "corrupt"),
        (table()[:8] + b"\x02" + table()[9:], "format version 2"),
    ],
)
def test_damaged_bytes_are_a_configuration_error_that_names_the_fix(
    data: bytes, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        StaticEmbedder.from_bytes(data)
    assert "rebuild the table" in str(caught.value)


def test_a_vocabulary_without_unk_is_refused() -> None:
    data = build_static_table(["a", "b"], [1.0, 1.0], [[1.0], [2.0]])
    with pytest.raises(ConfigurationError, match=r"\[UNK\]"):
        StaticEmbedder.from_bytes(data)


def test_basic_tokenize_lowercases_strips_accents_and_splits_punctuation_and_cjk() -> None:
    assert basic_tokenize("Hello, World!") == ["hello", ",", "world", "!"]
    assert basic_tokenize("Ångström naïve") == ["angstrom", "naive"]
    assert basic_tokenize("北京 rocks") == ["北", "京", "rocks"]
    assert basic_tokenize("a\x00b\tc\u00a0d 10am-11") == ["ab", "c", "d", "10am", "-", "11"]
    assert basic_tokenize("") == []


def test_wordpiece_is_greedy_longest_match_first() -> None:
    tokenizer = WordPieceTokenizer(["[UNK]", "un", "##aff", "##able", "una", "##ffable"])
    assert tokenizer.tokens("unaffable") == ["una", "##ffable"]
    assert tokenizer.tokens("unxyz") == ["[UNK]"]
    assert tokenizer.tokens("un" * (MAX_WORD_CHARS // 2 + 1)) == ["[UNK]"]


def test_the_vector_bytes_are_pinned(embedder: StaticEmbedder) -> None:
    """Golden float32 bytes: the sum is exact integer arithmetic, so every platform
    (CPython, Pyodide) gives these."""
    vector = embedder.embed_one("Two cats, a dog and café? 北")
    assert encode_f32(vector).hex() == GOLDEN_VECTOR


GOLDEN_VECTOR = "26aa443f1a1c033f28aac43e"


def test_any_text_gives_a_unit_vector() -> None:
    """Arbitrary Unicode never fails: a unit vector of the table's dimensions."""
    hypothesis = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")
    embedder = StaticEmbedder.from_bytes(table())

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(st.text(max_size=200))
    def check(text: str) -> None:
        vector = embedder.embed_one(text)
        assert len(vector) == 3
        assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-9)

    check()
