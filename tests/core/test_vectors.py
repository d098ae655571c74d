"""Vector maths and the compact VectorIndex (exact and approximate paths)."""

from __future__ import annotations

import binascii
import math
import operator
import random
import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import itemgetter

import pytest

from engramdb._base.errors import CorruptDataError, DimensionMismatchError, ValidationError
from engramdb._vectors import codes as _vector_codes
from engramdb._vectors import index as _vectors
from engramdb._vectors import rules as _vector_rules
from engramdb._vectors.codec import decode_f32, encode_f32, sign_code
from engramdb._vectors.codes import four_bits, nearest_codes, nibble_planes
from engramdb._vectors.index import VectorIndex, normalize, unit_f32
from engramdb._vectors.index_data import (
    INDEX_DATA_VERSION,
    index_data,
    index_data_many,
    quantiser,
    scrub,
    unit_index_data,
)
from engramdb._vectors.rules import candidates_for, rerank_for, search_with_head, use_exact
from engramdb.ranking._ties import quantised


def _unit(rng: random.Random, d: int) -> list[float]:
    return normalize([rng.gauss(0.0, 1.0) for _ in range(d)])


def _blob(vector: Sequence[float]) -> bytes:
    return encode_f32(normalize(vector))


def _approximate(
    index: VectorIndex, q: list[float], positions: list[int] | None, k: int, c: int
) -> list[tuple[str, float]]:
    """The approximate path with ``c`` candidates, forced, scored as a search scores it."""
    return index._score(q, index._approximate(q, positions, k, c), k)


def _brute_force(query: Sequence[float], vectors: dict[str, Sequence[float]], k: int) -> list[str]:
    """Exact top-k by cosine, ties by key descending, on float32-rounded stored vectors."""
    q = normalize(query)
    scored = [
        (math.fsum(a * b for a, b in zip(q, v, strict=True)), key) for key, v in vectors.items()
    ]
    return [key for _, key in sorted(scored, reverse=True)[:k]]


# --- normalize ---------------------------------------------------------------------------


def test_normalize_gives_unit_length() -> None:
    assert normalize([3.0, 4.0]) == [0.6, 0.8]
    assert math.isclose(math.hypot(*normalize([1e-30, 2e-30, -5e-30])), 1.0)


def test_normalize_accepts_ints_and_iterables() -> None:
    assert normalize(iter([0, 2])) == [0.0, 1.0]


@pytest.mark.parametrize(
    ("vector", "message"),
    [
        ([0.0, 0.0, 0.0], "all zeros"),
        ([], "empty"),
        ([1.0, math.nan], "NaN or infinite"),
        ([1.0, math.inf], "NaN or infinite"),
        (["x"], "cannot read"),
    ],
)
def test_normalize_rejects_unusable_vectors(vector: list[float], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        normalize(vector)


@pytest.mark.parametrize("vector", [(1, 2, 2), [0.6, 0.8], b"\x01\x02", [1e-30, -3e-30]])
def test_unit_f32_equals_encode_of_normalize(vector: Sequence[float]) -> None:
    """The write path's one-pass encoder gives the bytes of the two-step one."""
    assert unit_f32(vector) == encode_f32(normalize(vector))
    assert unit_f32(iter(vector)) == unit_f32(vector)


def test_unit_f32_equals_encode_of_normalize_property() -> None:
    hypothesis = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")
    finite = st.floats(-1e30, 1e30, allow_nan=False).filter(lambda x: x == 0 or abs(x) > 1e-30)

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(st.lists(finite, min_size=1, max_size=40).filter(any))
    def check(vector: list[float]) -> None:
        assert unit_f32(vector) == encode_f32(normalize(vector))

    check()


@pytest.mark.parametrize("vector", [[0.0, 0.0], [], [1.0, math.nan], [math.inf], ["x"]])
def test_unit_f32_rejects_what_normalize_rejects(vector: list[float]) -> None:
    with pytest.raises(ValidationError):
        normalize(vector)
    with pytest.raises(ValidationError):
        unit_f32(vector)


# --- VectorIndex: bookkeeping ---------------------------------------------------------


def test_add_contains_len_keys() -> None:
    index = VectorIndex(3)
    index.add("a", _blob([1.0, 0.0, 0.0]))
    index.add("b", _blob([0.0, 1.0, 0.0]))
    assert len(index) == 2
    assert "a" in index
    assert "z" not in index
    assert sorted(index.keys()) == ["a", "b"]
    assert index.dimensions == 3


def test_add_replaces_an_existing_key() -> None:
    index = VectorIndex(2)
    index.add("a", _blob([1.0, 0.0]))
    index.add("b", _blob([0.6, 0.8]))
    index.add("a", _blob([0.0, 1.0]))
    assert len(index) == 2
    assert [key for key, _ in index.search([0.0, 1.0], 2)] == ["a", "b"]
    assert index.search([0.0, 1.0], 1)[0][1] == pytest.approx(1.0)


def test_remove_swaps_last_into_the_hole_and_keeps_every_vector_right() -> None:
    """After many removals each remaining key still scores its own vector."""
    rng = random.Random(3)
    d = 8
    vectors = {f"k{i}": _unit(rng, d) for i in range(50)}
    index = VectorIndex(d)
    for key, v in vectors.items():
        index.add(key, encode_f32(v))
    for key in [f"k{i}" for i in range(0, 50, 3)] + ["k49", "k47"]:
        assert index.remove(key) is True
        del vectors[key]
    assert index.remove("k0") is False
    assert index.remove("never") is False
    assert len(index) == len(vectors)
    for key, v in vectors.items():
        top_key, similarity = index.search(v, 1, exact=True)[0]
        assert top_key == key
        assert similarity == pytest.approx(1.0, abs=1e-6)


def test_remove_everything_then_search_is_empty() -> None:
    index = VectorIndex(2)
    index.add("a", _blob([1.0, 0.0]))
    assert index.remove("a")
    assert len(index) == 0
    assert index.search([1.0, 0.0], 5) == []


def test_add_rejects_bad_blobs_and_changes_nothing() -> None:
    index = VectorIndex(3)
    index.add("a", _blob([1.0, 0.0, 0.0]))
    with pytest.raises(DimensionMismatchError):
        index.add("b", encode_f32([1.0, 0.0]))
    with pytest.raises(CorruptDataError):
        index.add("b", b"\x00" * 5)
    with pytest.raises(CorruptDataError):
        index.add("b", encode_f32([1.0, 0.0]) + b"\x00\x00\xc0\x7f")  # NaN
    with pytest.raises(ValidationError, match="normalize"):
        index.add("a", encode_f32([3.0, 0.0, 0.0]))  # not unit length
    assert len(index) == 1
    assert index.search([1.0, 0.0, 0.0], 1) == [("a", pytest.approx(1.0))]


@pytest.mark.parametrize("dimensions", [0, -1, 65_537, 2.0, True])
def test_bad_dimensions(dimensions: int) -> None:
    with pytest.raises(ValidationError):
        VectorIndex(dimensions)


def test_search_validates_arguments() -> None:
    index = VectorIndex(2)
    index.add("a", _blob([1.0, 0.0]))
    with pytest.raises(DimensionMismatchError):
        index.search([1.0, 0.0, 0.0], 1)
    with pytest.raises(ValidationError):
        index.search([0.0, 0.0], 1)
    with pytest.raises(ValidationError):
        index.search([1.0, 0.0], -1)
    with pytest.raises(ValidationError):
        index.search([1.0, 0.0], 1, candidates=0)
    with pytest.raises(ValidationError):
        index.search([1.0, 0.0], 1, allowed="a")
    assert index.search([1.0, 0.0], 0) == []


# --- VectorIndex: ranking -------------------------------------------------------------


def test_search_returns_cosine_best_first_with_ties_by_key_descending() -> None:
    """Equal similarities come newest first: by key descending (ids are time-ordered),
    before the cut to k."""
    index = VectorIndex(2)
    index.add("c", _blob([1.0, 0.0]))
    index.add("a", _blob([1.0, 0.0]))
    index.add("b", _blob([0.0, 1.0]))
    index.add("d", _blob([-1.0, 0.0]))
    hits = index.search([2.0, 0.0], 4)
    assert [key for key, _ in hits] == ["c", "a", "b", "d"]
    assert [round(s, 6) for _, s in hits] == [1.0, 1.0, 0.0, -1.0]
    assert [key for key, _ in index.search([2.0, 0.0], 1)] == ["c"]


@pytest.mark.parametrize("exact", [True, False])
def test_search_breaks_ties_by_the_newer_key_before_the_cut(exact: bool) -> None:
    """With ``newer``, equal similarities go by its key, greatest first, and the cut to
    k keeps the greatest: a store passes its items' (created_at, id)."""
    index = VectorIndex(2)
    created = {}
    for n, key in enumerate(["k05", "k01", "k09", "k03", "k07"]):
        index.add(key, _blob([1.0, 0.0]))
        created[key] = (100 - n, key)  # added later: created earlier
    index.add("far", _blob([0.0, 1.0]))
    found = index.search([1.0, 0.0], 3, exact=exact, newer=created.__getitem__)
    assert [key for key, _ in found] == ["k05", "k01", "k09"]


def test_newer_is_asked_only_among_equal_similarities() -> None:
    """A store's ``newer`` reads its items' creation times, so a search without equal
    similarities among the ones it orders asks it nothing; with two equal ones it asks
    and orders them by it."""
    index = VectorIndex(2)
    for n in range(40):
        index.add(f"k{n:02d}", _blob([1.0, n / 40]))  # 40 different angles
    asked: list[str] = []

    def newer(key: str) -> tuple[int, str]:
        asked.append(key)
        return (0, key)

    found = index.search([1.0, 0.0], 5, newer=newer)
    assert [key for key, _ in found] == ["k00", "k01", "k02", "k03", "k04"]
    assert asked == []
    index.add("z-copy", _blob([1.0, 1 / 40]))  # the same vector as k01
    found = index.search([1.0, 0.0], 3, newer=newer)
    assert [key for key, _ in found] == ["k00", "z-copy", "k01"]
    assert "z-copy" in asked


def test_exact_search_equals_brute_force() -> None:
    rng = random.Random(11)
    d = 16
    vectors = {f"m{i:03d}": _unit(rng, d) for i in range(300)}
    index = VectorIndex(d)
    for key, v in vectors.items():
        index.add(key, encode_f32(v))
    stored = {
        key: list(map(float, memoryview(encode_f32(v)).cast("f"))) for key, v in vectors.items()
    }
    for _ in range(20):
        query = _unit(rng, d)
        got = index.search(query, 10, exact=True)
        assert [key for key, _ in got] == _brute_force(query, stored, 10)
        for key, similarity in got:
            expected = math.fsum(a * b for a, b in zip(normalize(query), stored[key], strict=True))
            assert similarity == pytest.approx(expected, abs=1e-6)


def test_allowed_restricts_results_on_every_path() -> None:
    """Only allowed keys come back, whether scored exactly or via the prefilter."""
    rng = random.Random(5)
    d = 32
    index = VectorIndex(d)
    for i in range(2000):
        index.add(f"m{i:04d}", encode_f32(_unit(rng, d)))
    even = {f"m{i:04d}" for i in range(0, 2000, 2)}
    small = {"m0003", "m1999", "not-there"}
    query = _unit(rng, d)
    for kwargs in ({}, {"exact": True}, {"candidates": 50}):
        hits = index.search(query, 10, allowed=even, **kwargs)  # type: ignore[arg-type]
        assert len(hits) == 10
        assert {key for key, _ in hits} <= even
        hits = index.search(query, 10, allowed=small, **kwargs)  # type: ignore[arg-type]
        assert sorted(key for key, _ in hits) == ["m0003", "m1999"]
    assert index.search(query, 5, allowed=set()) == []
    exact_even = index.search(query, 10, allowed=even, exact=True)
    assert exact_even == index.search(query, 10, allowed=sorted(even), exact=True)


def test_allowed_may_be_any_container() -> None:
    class Evens:
        def __contains__(self, key: object) -> bool:
            return isinstance(key, str) and int(key[1:]) % 2 == 0

    rng = random.Random(9)
    index = VectorIndex(4)
    for i in range(20):
        index.add(f"m{i}", encode_f32(_unit(rng, 4)))
    hits = index.search(_unit(rng, 4), 20, allowed=Evens())
    assert sorted(key for key, _ in hits) == sorted(f"m{i}" for i in range(0, 20, 2))


def test_approximate_path_with_all_candidates_equals_exact() -> None:
    rng = random.Random(13)
    d = 24
    index = VectorIndex(d)
    for i in range(1000):
        index.add(f"m{i:04d}", encode_f32(_unit(rng, d)))
    query = _unit(rng, d)
    exact = index.search(query, 10, exact=True)
    # With C = n every vector is re-scored, so the prefilter cannot lose anything.
    assert _approximate(index, normalize(query), None, 10, 1000) == exact
    assert _approximate(index, normalize(query), list(range(1000)), 10, 1000) == exact
    # With a small C the result is still k distinct keys, best first.
    approx = index.search(query, 10, candidates=50)
    assert len({key for key, _ in approx}) == 10
    assert [s for _, s in approx] == sorted((s for _, s in approx), reverse=True)


def test_candidate_rule() -> None:
    assert candidates_for(10_000, 10) == 100
    assert candidates_for(100_000, 10) == 1000
    assert candidates_for(1_000, 10) == 1000  # up to 1,000 vectors: every one
    assert candidates_for(1_001, 10) == 100
    assert candidates_for(50, 10) == 50
    assert candidates_for(10_000, 50) == 500
    assert rerank_for(10) == 50
    assert rerank_for(50) == 100
    assert rerank_for(100) == 200  # the recall flows' per-leg depth
    assert rerank_for(100, 10_000) == 200
    assert rerank_for(100, 1_000) == 150  # up to 1,000 eligible vectors: 1.5k
    assert rerank_for(50, 1_000) == 75
    assert rerank_for(10, 1_000) == 50


@pytest.mark.parametrize("cheap_exact", [True, False])
def test_exact_rule(cheap_exact: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """One rule on CPython and in Pyodide: every vector is scored exactly only where the
    approximate path would score every one exactly anyway (``rerank_for``); a scope of
    1,000 vectors is searched by its 4-bit copies (CPython scanned it exactly until
    2026-12-04, at three to six times the cost), whatever the candidates."""
    monkeypatch.setattr(_vector_rules, "CHEAP_EXACT", cheap_exact)
    assert use_exact(50, 50, 10)
    assert not use_exact(51, 51, 10)
    assert use_exact(75, 75, 50)
    assert not use_exact(76, 76, 50)
    assert use_exact(150, 150, 100)  # a store's leg (k = 100) on 150 vectors
    assert not use_exact(151, 151, 100)
    assert use_exact(1_000, 1_000, 1_000)  # 1.5k: every vector
    assert not use_exact(1_000, 100, 10)
    assert not use_exact(1_000, 1_000, 50)
    assert not use_exact(2_000, 2_000, 10)
    assert not use_exact(10_000, 1_000, 100)


def _search_of(
    scores: dict[str, float], missed: set[str]
) -> Callable[[int], list[tuple[str, float]]]:
    """An index's search over ``scores``: exact for more than 100, and for 100 or fewer
    blind to ``missed`` (what an approximate head may miss)."""

    def search(n: int) -> list[tuple[str, float]]:
        seen = [(key, s) for key, s in scores.items() if n > 100 or key not in missed]
        return sorted(seen, key=lambda pair: (-pair[1], pair[0]))[:n]

    return search


def test_a_leg_keeps_its_head_whatever_k() -> None:
    """``search_with_head``: an approximate leg's first 100 hits are the search for 100
    whatever ``k``; past them come the deeper search's other hits that score no higher
    than the head's last, so similarities never rise and what the head missed above it
    stays missed, while vectors tied with it still come; an exact leg is the search for
    ``k``."""
    rng = random.Random(5)
    scores = {f"m{i:03d}": round(rng.random(), 6) for i in range(300)}
    ranked = sorted(scores, key=lambda key: -scores[key])
    missed = {ranked[3], ranked[99], ranked[150]}  # two in the true top 100, one past it
    search = _search_of(scores, missed)
    head = search(100)
    for k in (1, 10, 100):
        assert search_with_head(search, k, False) == head[:k]
    deep = search_with_head(search, 300, False)
    assert deep[:100] == head
    assert [s for _, s in deep] == sorted((s for _, s in deep), reverse=True)
    assert {ranked[3], ranked[99]}.isdisjoint(key for key, _ in deep)  # above the head's last
    assert ranked[150] in {key for key, _ in deep}  # below it: found by the deeper search
    assert len(deep) == 298 and search_with_head(search, 150, False) == deep[:150]
    tied = _search_of(dict.fromkeys(scores, 0.5), set())  # all tied: all come, head first
    assert search_with_head(tied, 300, False) == tied(300)
    assert search_with_head(search, 300, True) == search(300)  # exact: no head
    few = _search_of(dict(list(scores.items())[:40]), set())
    assert search_with_head(few, 300, False) == few(100)  # fewer than a head: all there is


@pytest.mark.parametrize("cheap_exact", [True, False])
def test_approximate_path_with_all_candidates_equals_exact_per_runtime(
    cheap_exact: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both runtimes' exact kernels (Pyodide's scores decoded tuples) give the same order
    and the dot product of the stored float32 values, whichever path scores them (to
    1e-12; to 1e-7 for Python 3.11's math.dist kernel, which takes |v| as 1), rounded
    down to the ranking's grid of 2**-30."""
    rng = random.Random(17)
    d = 48
    index = VectorIndex(d)
    index.add_many((f"m{i:03d}", encode_f32(_unit(rng, d))) for i in range(140))
    query = _unit(rng, d)
    q = normalize(query)
    stored = {key: index._flat[p * d : (p + 1) * d] for key, p in index._positions.items()}
    monkeypatch.setattr(_vector_rules, "CHEAP_EXACT", cheap_exact)
    decoded = not cheap_exact
    tolerance = 1e-12 if decoded or hasattr(math, "sumprod") else 1e-7
    # 140 <= rerank_for(100): the approximate path scores every vector exactly too.
    for got in (
        index.search(query, 100, exact=True),
        _approximate(index, normalize(query), None, 100, 140),
    ):
        for key, s in got:
            exact = math.fsum(map(operator.mul, stored[key], q))
            assert s == quantised(s)
            assert s == pytest.approx(exact - 2**-31, abs=tolerance + 2**-31)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    assert _approximate(index, normalize(query), None, 100, 140) == index.search(
        query, 100, exact=True
    )


def test_decoded_copies_follow_replace_remove_and_growth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pyodide's decoded tuples: built by exact scores, kept right through replace and
    remove (which swaps the last vector in), and dropped past 1,000 vectors."""
    monkeypatch.setattr(_vector_rules, "CHEAP_EXACT", False)
    rng = random.Random(19)
    d = 16
    index = VectorIndex(d)
    index.add_many((f"m{i:04d}", encode_f32(_unit(rng, d))) for i in range(40))
    query = _unit(rng, d)

    def check() -> None:
        got = index.search(query, 10, exact=True)
        monkeypatch.setattr(_vector_rules, "CHEAP_EXACT", True)
        want = index.search(query, 10, exact=True)
        monkeypatch.setattr(_vector_rules, "CHEAP_EXACT", False)
        assert [key for key, _ in got] == [key for key, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-7)
        for p, (t, vv) in index._decoded.items():
            assert t == tuple(index._flat[p * d : (p + 1) * d])
            assert vv == math.fsum(x * x for x in t)

    check()
    assert len(index._decoded) == 40
    index.add("m0003", encode_f32(query))  # replaced: its copy is dropped, then rebuilt
    assert 3 not in index._decoded
    check()
    assert index.search(query, 1, exact=True)[0] == ("m0003", pytest.approx(1.0))
    index.remove("m0005")  # the last vector moves into position 5
    index.remove("m0038")  # now the last one
    check()
    assert len(index._decoded) == len(index) == 38
    index.add_many((f"n{i:04d}", encode_f32(_unit(rng, d))) for i in range(1000))
    check()
    assert index._decoded == {}  # more than 1,000 vectors: no decoded copies


def test_a_4_bit_copy_holds_each_component_in_its_nibble_with_the_sum() -> None:
    """four_bits keeps the top half of each uint8 byte, two components a byte; from it
    nibble_planes puts component j's 4-bit value in nibble d - 1 - j of one integer,
    whatever the byte's low half, and the sum is that of the values; every byte value,
    vectors of 1, 3 and 256 components."""
    every = bytes(range(256))
    ((w, total),) = nibble_planes(four_bits(every, 256), 256)
    assert [(w >> (4 * (255 - j))) & 15 for j in range(256)] == [b >> 4 for b in every]
    assert total == sum(b >> 4 for b in every)
    ones = four_bits(bytes([0x0F, 0xF0, 0x7A]), 1)
    assert ones == bytes([0x00, 0xF0, 0x70])  # an odd d: a zero half ends each copy
    assert nibble_planes(ones, 1) == [(0, 0), (15, 15), (7, 7)]
    threes = bytes([0x1F, 0x2F, 0x3F, 0xA0, 0xB0, 0xC0])
    assert four_bits(threes, 3) == bytes([0x12, 0x30, 0xAB, 0xC0])
    assert nibble_planes(four_bits(threes, 3), 3) == [(0x123, 6), (0xABC, 33)]


@pytest.mark.parametrize("d", [1, 8, 61, 384, 768])
def test_nibble_scores_are_the_4_bit_dot_products(d: int) -> None:
    """15 * sum(u) - 2 * sum(u * v) for the vectors' and the query's 4-bit copies (the
    top half of each uint8 byte), computed from the bytes directly."""
    rng = random.Random(31)
    index = VectorIndex(d)
    index.add_many((f"m{i}", encode_f32(_unit(rng, d))) for i in range(50))
    query = _unit(rng, d)
    v = [b >> 4 for b in quantiser(d).one(query)]
    expected = []
    for p in range(len(index)):
        u = [b >> 4 for b in quantiser(d).one(index._flat[p * d : (p + 1) * d])]
        expected.append(15 * sum(u) - 2 * sum(map(operator.mul, u, v)))
    assert index._nibble_scores(query, None) == expected
    assert index._nibble_scores(query, [3, 1]) == [expected[3], expected[1]]


# --- approximate recall ---------------------------------------------------------------


def _clustered(
    n: int, d: int, queries: int, seed: int
) -> tuple[list[bytes], list[int], list[list[float]], list[int]]:
    """100 unit centres; points = normalize(centre + noise), |noise| ≈ 1 (cos ≈ 0.71);
    queries = normalize(point + 0.5 noise). Noise is uniform with variance 1/d."""
    rng = random.Random(seed)
    half = math.sqrt(3.0 / d)
    noise = tuple(half * (b - 127.5) / 127.5 for b in range(256))
    centres = [_unit(rng, d) for _ in range(100)]
    blobs: list[bytes] = []
    labels: list[int] = []
    qs: list[list[float]] = []
    q_labels: list[int] = []
    for i in range(n):
        c = rng.randrange(100)
        point = list(map(operator.add, centres[c], itemgetter(*rng.randbytes(d))(noise)))
        unit = array("f", map(operator.mul, point, repeat(1.0 / math.hypot(*point))))
        if not _LITTLE:  # pragma: no cover - no big-endian CI host
            unit.byteswap()
        blobs.append(unit.tobytes())
        labels.append(c)
        if i < queries:
            jitter = map(operator.mul, itemgetter(*rng.randbytes(d))(noise), repeat(0.5))
            qs.append(normalize(map(operator.add, point, jitter)))
            q_labels.append(c)
    return blobs, labels, qs, q_labels


_LITTLE = sys.byteorder == "little"


@pytest.mark.slow
def test_approximate_recall_at_10_on_clustered_data() -> None:
    """recall@10 >= 0.99 with the documented C, N=100k (20k in Pyodide), d=384.

    The exact top-10 is computed within the query's own cluster: clusters are far apart
    (centre cosines ≈ 0 against ≈ 0.71 inside a cluster), so no outside point can enter it.
    """
    n = 20_000 if sys.platform == "emscripten" else 100_000
    d = 384
    blobs, labels, qs, q_labels = _clustered(n, d, 30, seed=2024)
    index = VectorIndex(d)
    members: dict[int, set[str]] = {}
    for i, (blob, label) in enumerate(zip(blobs, labels, strict=True)):
        key = f"m{i:06d}"
        index.add(key, blob)
        members.setdefault(label, set()).add(key)
    del blobs
    recalls = []
    for query, label in zip(qs, q_labels, strict=True):
        truth = {key for key, _ in index.search(query, 10, exact=True, allowed=members[label])}
        got = {key for key, _ in index.search(query, 10)}
        recalls.append(len(truth & got) / 10)
    assert sum(recalls) / len(recalls) >= 0.99, recalls


# --- the uint8 rescoring stage ----------------------------------------------------------


def _rebuilt(index: VectorIndex) -> VectorIndex:
    """A fresh index holding the same vectors in the same positions as ``index``."""
    d = index.dimensions
    fresh = VectorIndex(d)
    flat = index._flat
    for position, key in enumerate(index._keys):
        fresh.add(key, encode_f32(flat[position * d : (position + 1) * d]))
    return fresh


@pytest.mark.parametrize("d", [32, 72, 100, 400])  # 72 and 100 keep prefix columns
def test_uint8_copy_stays_consistent_after_add_replace_remove(d: int) -> None:
    """After replaces and many swap-with-last removes, all three stores agree with a
    fresh index, and the approximate path (which reads the uint8 copy) returns the
    same results as that fresh index, and nearly the exact top-k when every vector is a
    candidate (the 4-bit stage keeps the best rerank_for(k) = 50)."""
    rng = random.Random(17)
    index = VectorIndex(d)
    for i in range(3000):
        index.add(f"m{i:04d}", encode_f32(_unit(rng, d)))
    assert index._nibbles == [None] * 3000  # built when a search first scores a vector
    index._nibble_scores(_unit(rng, d), None)  # all built: kept up to date from here on
    assert None not in index._nibbles
    for i in range(0, 3000, 7):  # replace
        index.add(f"m{i:04d}", encode_f32(_unit(rng, d)))
    for i in rng.sample(range(3000), 1800):  # remove, in random order
        assert index.remove(f"m{i:04d}")
    for i in range(5):  # re-add a few removed or new keys
        index.add(f"new{i}", encode_f32(_unit(rng, d)))
    n = len(index)
    assert len(index._four) == n
    assert len(index._flat) == n * d
    assert len(index._codes) == n
    fresh = _rebuilt(index)
    assert bytes(index._four) == bytes(fresh._four)
    assert index._codes == fresh._codes
    assert index._columns == fresh._columns
    assert bool(index._columns) == (64 <= d <= 384)
    for j, column in enumerate(index._columns):  # byte j of each code's leading bytes
        width = len(index._columns)
        assert column == bytes(
            (code >> (d - 8 * width)).to_bytes(width, "big")[j] for code in index._codes
        )
    recalls = []
    for _ in range(10):
        query = _unit(rng, d)
        approx = index.search(query, 10, candidates=40)
        assert approx == fresh.search(query, 10, candidates=40)
        assert len({key for key, _ in approx}) == 10
        every = _approximate(index, normalize(query), None, 10, n)
        exact = index.search(query, 10, exact=True)
        recalls.append(len({key for key, _ in every} & {key for key, _ in exact}) / 10)
    assert sum(recalls) / len(recalls) >= 0.9, recalls
    built = [p for p, planes in enumerate(index._nibbles) if planes is not None]
    assert len(built) > n // 2  # most survived the changes (replaced ones were reset)
    fresh._nibble_scores(_unit(rng, d), None)
    assert [index._nibbles[p] for p in built] == [fresh._nibbles[p] for p in built]


def test_uint8_quantisation_clips_and_rounds() -> None:
    d = 16  # S = 127 * 4 / 4 = 127: components beyond +-1 clip, which unit vectors cannot
    # round(x * S) rounds half up: 0.5 * 127 = 63.5 -> 64, -63.5 -> -63.
    assert quantiser(d).one([0.0, 1.0, -1.0, 0.5, -0.5, 1.0 / 127, -0.004, 1.005]) == bytes(
        [128, 255, 1, 128 + 64, 128 - 63, 129, 127, 255]
    )
    d = 400  # S = 127 * 20 / 4 = 635: clip at |x| = 0.2
    assert quantiser(d).one([0.9, -0.9, 0.2, -0.2, 0.1]) == bytes([255, 1, 255, 1, 128 + 64])


def _spiky(rng: random.Random, d: int) -> list[float]:
    """A sparse-ish vector: one or two large components (far beyond the uint8 clip)."""
    v = [rng.gauss(0.0, 0.02) for _ in range(d)]
    v[rng.randrange(d)] += 1.0
    v[rng.randrange(d)] += rng.choice((0.5, -0.5))
    return normalize(v)


def test_sparse_vectors_rank_correctly() -> None:
    """One-hot-ish vectors exceed the uint8 clip (4 sigma of a random unit vector's
    component = 0.5 at d=64). Exact mode must rank them exactly. With every vector a
    Hamming candidate, the 4-bit stage (clipped scores) plus the exact rerank keeps
    recall high (0.975; the uint8 stage it replaced kept 1.0). The default approximate
    path is reported only: sign bits of mostly-noise components carry little signal on
    such data (see docs/performance-history.md; use exact=True for such data)."""
    rng = random.Random(23)
    d = 64
    vectors = {f"s{i:04d}": _spiky(rng, d) for i in range(2000)}
    index = VectorIndex(d)
    for key, v in vectors.items():
        index.add(key, encode_f32(v))
    stored = {
        key: list(map(float, memoryview(encode_f32(v)).cast("f"))) for key, v in vectors.items()
    }
    uint8_recalls = []
    default_recalls = []
    for _ in range(20):
        query = _spiky(rng, d)
        truth = set(_brute_force(query, stored, 10))
        exact = [key for key, _ in index.search(query, 10, exact=True)]
        assert exact == _brute_force(query, stored, 10)
        # Every vector a Hamming candidate: only the 4-bit stage and the rerank remain.
        uint8_only = _approximate(index, normalize(query), None, 10, len(index))
        uint8_recalls.append(len({key for key, _ in uint8_only} & truth) / 10)
        default_recalls.append(len({key for key, _ in index.search(query, 10)} & truth) / 10)
    uint8_recall = sum(uint8_recalls) / len(uint8_recalls)
    default_recall = sum(default_recalls) / len(default_recalls)
    print(f"spiky vectors: recall@10 uint8+rerank {uint8_recall:.3f}, default {default_recall:.3f}")
    assert uint8_recall >= 0.95, uint8_recalls


# --- VectorIndex.add_many -----------------------------------------------------------------


def _state(index: VectorIndex) -> tuple[object, ...]:
    return (
        index._flat.tobytes(),
        bytes(index._four),
        list(index._codes),
        [bytes(column) for column in index._columns],
        list(index._keys),
        dict(index._positions),
    )


@pytest.mark.parametrize("d", [24, 72])
@pytest.mark.parametrize("bulk_table", [False, True])
def test_add_many_equals_repeated_add(
    bulk_table: bool, d: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engramdb._vectors import index_data as _index_data

    if bulk_table:  # force the lookup-table quantiser even for a small input
        monkeypatch.setattr(_index_data, "_BULK_TABLE_MIN", 0)
        monkeypatch.setattr(_index_data, "_bulk_tables", {})
    rng = random.Random(7)
    first = [(f"k{i}", _blob(_unit(rng, d))) for i in range(50)]
    # replaces k3 and k10, repeats a new key (the last vector wins), adds new keys
    second = [
        ("k3", _blob(_unit(rng, d))),
        ("n1", _blob(_unit(rng, d))),
        ("k10", _blob(_unit(rng, d))),
        ("n1", _blob(_unit(rng, d))),
        ("n2", _blob([1.0] + [0.0] * (d - 1))),
        ("n3", _blob([-0.0] * (d - 1) + [-1.0])),
    ]
    one, bulk = VectorIndex(d), VectorIndex(d)
    for key, blob in first + second:
        one.add(key, blob)
    bulk.add_many(iter(first))
    bulk.add_many(second)
    bulk.add_many([])
    assert _state(bulk) == _state(one)
    query = _unit(rng, d)
    assert bulk.search(query, 5, exact=True) == one.search(query, 5, exact=True)


def test_add_many_bulk_table_matches_exact_quantiser(monkeypatch: pytest.MonkeyPatch) -> None:
    from engramdb._vectors import index_data as _index_data

    monkeypatch.setattr(_index_data, "_BULK_TABLE_MIN", 0)
    monkeypatch.setattr(_index_data, "_bulk_tables", {})
    rng = random.Random(3)
    d = 384
    vectors = [_unit(rng, d) for _ in range(40)]
    index = VectorIndex(d)
    index.add_many((str(i), _blob(v)) for i, v in enumerate(vectors))
    assert bytes(index._four) == four_bits(quantiser(d).one(index._flat), d)


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (b"\x00" * 7, CorruptDataError),
        (encode_f32([1.0, 0.0]), DimensionMismatchError),
        (array("f", [math.nan, 0.0, 0.0, 1.0]).tobytes(), CorruptDataError),
        (array("f", [math.inf, 0.0, 0.0, 1.0]).tobytes(), CorruptDataError),
        (encode_f32([1.0, 1.0, 0.0, 0.0]), ValidationError),  # not unit length
    ],
)
def test_add_many_failure_changes_nothing(bad: bytes, error: type[Exception]) -> None:
    if sys.byteorder == "big":  # pragma: no cover
        pytest.skip("the NaN/inf blobs above are native-endian")
    rng = random.Random(5)
    index = VectorIndex(4)
    index.add_many([("a", _blob(_unit(rng, 4))), ("b", _blob(_unit(rng, 4)))])
    before = _state(index)
    with pytest.raises(error):
        index.add_many([("c", _blob(_unit(rng, 4))), ("a", _blob(_unit(rng, 4))), ("x", bad)])
    assert _state(index) == before
    with pytest.raises(ValidationError):
        index.add_many([("c", _blob(_unit(rng, 4))), (7, _blob(_unit(rng, 4)))])  # type: ignore[list-item]
    assert _state(index) == before


@pytest.mark.parametrize("bits", [8, 64, 255, 256, 384, 1536])
@pytest.mark.parametrize("layout", ["random", "clumped", "ties"])
def test_nearest_codes_are_the_c_smallest_hamming_distances(bits: int, layout: str) -> None:
    """The selection returns C distinct indices whose distances are the C smallest."""
    rng = random.Random(bits)
    n, c = 5000, 120
    if layout == "random":
        codes = [rng.getrandbits(bits) for _ in range(n)]
    elif layout == "clumped":  # a few near the query, the sample sees almost none of them
        codes = [rng.getrandbits(bits) for _ in range(n - 200)] + [0] * 200
    else:  # many equal distances
        codes = [rng.choice((0, (1 << bits) - 1, 1)) for _ in range(n)]
    qcode = rng.getrandbits(bits) if layout == "random" else 0
    picked = nearest_codes(qcode, codes, c)
    distances = sorted((x ^ qcode).bit_count() for x in codes)
    assert len(set(picked)) == c
    assert sorted((codes[i] ^ qcode).bit_count() for i in picked) == distances[:c]


def test_prefix_prefilter_picks_by_full_distance_from_its_pool() -> None:
    """The prefix stage returns C distinct codes, nearest first by full Hamming distance;
    no code it skipped had a prefix as near as a picked one and a nearer full code."""
    rng = random.Random(5)
    d, n, c = 128, 6000, 60
    index = VectorIndex(d)
    index.add_many((f"m{i}", encode_f32(_unit(rng, d))) for i in range(n))
    qcode = sign_code(encode_f32(normalize(_unit(rng, d))))
    picked = index._nearest_by_prefix(qcode, c, None)
    assert picked is not None and len(set(picked)) == c
    full = [(code ^ qcode).bit_count() for code in index._codes]
    assert [full[i] for i in picked] == sorted(full[i] for i in picked)
    shift = d - 8 * len(index._columns)
    prefix = [((code ^ qcode) >> shift).bit_count() for code in index._codes]
    limit = max(prefix[i] for i in picked)
    skipped = set(range(n)) - set(picked)
    assert all(full[i] >= full[picked[-1]] for i in skipped if prefix[i] <= limit)


def test_a_pool_smaller_than_c_falls_back_to_the_full_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the sampled threshold keeps fewer than C codes, every code is scanned."""

    rng = random.Random(9)
    d, n = 96, 5000
    pairs = [(f"m{i}", encode_f32(_unit(rng, d))) for i in range(n)]
    index, plain = VectorIndex(d), VectorIndex(d)
    index.add_many(pairs)
    plain.add_many(pairs)
    plain._columns = []  # no prefix stage: the full scan only
    monkeypatch.setattr(_vectors, "_PREFIX_POOL", 0)  # a pool of a few dozen codes
    query = _unit(rng, d)
    assert index._nearest_by_prefix(sign_code(encode_f32(normalize(query))), 200, None) is None
    assert index.search(query, 10, candidates=200) == plain.search(query, 10, candidates=200)


def test_allowing_every_key_gives_the_same_approximate_answer() -> None:
    """An eligible set that holds every key takes the same prefix pool as no set."""
    rng = random.Random(21)
    d, n = 256, 4000
    index = VectorIndex(d)
    index.add_many((f"m{i}", encode_f32(_unit(rng, d))) for i in range(n))
    every = set(index.keys())
    for _ in range(5):
        query = _unit(rng, d)
        assert index.search(query, 10, allowed=every) == index.search(query, 10)


@pytest.mark.skipif(sys.platform == "emscripten", reason="no threads in Pyodide")
def test_popcount_tables_are_published_whole_across_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Threads racing to build the lazy tables all see the complete, correct 256."""
    import threading

    monkeypatch.setattr(_vector_codes, "_xor_popcounts", ())
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    seen: list[tuple[bytes, ...]] = []
    try:
        threads = [
            threading.Thread(target=lambda: seen.append(_vector_codes.xor_popcount_tables()))
            for _ in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(old)
    expected = tuple(bytes((b ^ v).bit_count() for b in range(256)) for v in range(256))
    assert len(seen) == 8 and all(tables == expected for tables in seen)
    assert _vector_codes.xor_popcount_tables() == expected


# --- derived index data and VectorIndex.load ----------------------------------------------


def _forced_quantiser(monkeypatch: pytest.MonkeyPatch, *, table: bool) -> None:
    """Make every batch use the lookup table (``table``) or none at all."""
    from engramdb._vectors import index_data as _index_data

    monkeypatch.setattr(_index_data, "_bulk_tables", {})
    monkeypatch.setattr(_index_data, "_quantised", {})
    monkeypatch.setattr(_index_data, "_BULK_TABLE_MIN", 0 if table else 1 << 62)


def _edge_vectors(rng: random.Random, d: int) -> list[list[float]]:
    """Random unit vectors plus one-hot, signed-zero and spiky ones (clipped components)."""
    vectors = [_unit(rng, d) for _ in range(20)] + [[1.0] + [0.0] * (d - 1)]
    vectors.append([-0.0] * (d - 1) + [-1.0])
    if d > 1:
        vectors.append(_spiky(rng, d))
    return vectors


def test_index_data_golden_bytes() -> None:
    """The on-disk layout is pinned: version 1, the blob's CRC-32 (little-endian), the
    sign code as ceil(d/8) big-endian bytes (leading pad bits 0), then the uint8 copy
    clamp(floor(x*S + 0.5)) + 128."""
    blob = unit_f32([3.0, -1.0, 0.0, 2.0, -2.0, 1.0, 0.5, -0.5, 4.0, -4.0, 1.0, -0.0])
    data = index_data(blob, 12)
    assert data.hex() == "01e76e464d0495ae71809e628f8878bd438f80"
    assert data[1:5] == binascii.crc32(blob).to_bytes(4, "little")
    assert INDEX_DATA_VERSION == 1
    # The same bytes from the documented formula, component by component:
    values = memoryview(blob).cast("f") if _LITTLE else None
    if values is not None:
        scale = 127 * math.sqrt(12) / 4
        signs = "".join("1" if math.copysign(1.0, x) < 0 else "0" for x in values)
        clipped = (min(127, max(-127, math.floor(x * scale + 0.5))) for x in values)
        assert data == bytes([1]) + data[1:5] + int(signs, 2).to_bytes(2, "big") + bytes(
            c + 128 for c in clipped
        )


@pytest.mark.parametrize("d", [1, 7, 8, 12, 72, 100, 384, 400])
def test_index_data_is_what_the_index_derives_on_add(d: int) -> None:
    """index_data(blob) is the version byte, then the sign code and uint8 copy that
    VectorIndex.add computes and stores for the same blob."""
    rng = random.Random(d)
    for vector in _edge_vectors(rng, d):
        blob = encode_f32(normalize(vector))
        index = VectorIndex(d)
        index.add("k", blob)
        code_bytes = -(-d // 8)
        check = binascii.crc32(blob).to_bytes(4, "little")
        code = index._codes[0].to_bytes(code_bytes, "big")
        expected = bytes([1]) + check + code + quantiser(d).one(index._flat)
        assert index_data(blob, d) == expected
        assert len(expected) == 5 + code_bytes + d


@pytest.mark.parametrize("d", [3, 64, 100, 384])
def test_index_data_many_equals_index_data(d: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bulk form gives index_data's bytes for every blob, whichever quantiser path
    (per component, or the lookup table) each of them takes."""
    rng = random.Random(d)
    blobs = [encode_f32(normalize(v)) for v in _edge_vectors(rng, d)]
    _forced_quantiser(monkeypatch, table=False)
    one_by_one = [index_data(blob, d) for blob in blobs]
    assert index_data_many(blobs, d) == one_by_one
    _forced_quantiser(monkeypatch, table=True)
    assert index_data_many(iter(blobs), d) == one_by_one
    assert index_data_many([], d) == []


@pytest.mark.parametrize("d", [1, 3, 16, 100, 384, 65_536])
def test_quantiser_table_matches_the_arithmetic_for_every_float_below_two(
    d: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lookup table (built from runs by bisection) quantises random float32 bit
    patterns of magnitude below 2, and the floats on both sides of every step of the
    quantiser, exactly as the per-component arithmetic does."""
    rng = random.Random(d)
    table = quantiser(d)
    bits = [b for b in (rng.getrandbits(32) for _ in range(60_000)) if b >> 24 & 0x7F < 0x40]
    for i in range(1, len(table.exact)):  # each step: the float32s nearest to it
        x = (i - table.bias) / table.scale
        if abs(x) < 1.99:
            (near,) = struct.unpack("<I", struct.pack("<f", x))
            bits += range(near - 3, near + 4)
    blob = struct.pack(f"<{len(bits)}I", *bits)
    _forced_quantiser(monkeypatch, table=True)
    values = array("f")
    values.frombytes(blob)
    if not _LITTLE:  # pragma: no cover - no big-endian CI host
        values.byteswap()
    assert table.many(blob) == table.one(values)


def test_unit_index_data_checks_in_bulk_and_raises_the_first_faulty_vectors_error() -> None:
    """unit_index_data (a store's put of vectors) gives index_data of each blob, of mixed
    sizes, in order; a batch with faulty vectors raises what check_unit_vector raises
    for the first of them (not the first found by the bulk checks, which go by size)."""
    rng = random.Random(13)
    blobs = [encode_f32(normalize(_unit(rng, d))) for d in (8, 16, 8, 3)]
    assert unit_index_data(blobs) == [index_data(b, len(b) // 4) for b in blobs]
    assert unit_index_data([]) == []
    faults: list[tuple[object, str]] = [
        (encode_f32([0.5] * 16), "norm 2"),  # a size of its own, found second by size
        (array("f", [math.inf] + [0.0] * 7).tobytes(), "norm inf"),
        (b"", "non-empty float32 bytes"),
        (b"\x00" * 6, "multiple of 4"),
        ("text", "not str"),
    ]
    for fault, message in faults:
        with pytest.raises(ValidationError, match=message):
            unit_index_data([blobs[0], fault, blobs[1], encode_f32([0.5] * 8)])
    with pytest.raises(ValidationError, match=r"norm 1\.41421"):  # the first of two faults
        unit_index_data([blobs[1], encode_f32([0.5] * 8), encode_f32([0.5] * 16)])


def test_scrub_finds_each_unsound_vector_and_each_stale_record() -> None:
    """scrub (the repair scan's bulk check) calls a vector unsound when its blob is not
    a finite unit vector of the dimension count, or when its current index data has
    another CRC-32 or other derived bytes; a sound one without current index data
    (none, or another version's) is stale."""
    d = 16
    rng = random.Random(11)
    blobs = [encode_f32(normalize(_unit(rng, d))) for _ in range(9)]
    records: list[bytes | None] = list(index_data_many(blobs, d))
    records[1] = None  # stale
    records[2] = bytes([2]) + records[2][1:]  # another version: stale
    records[3] = records[3][:1] + bytes([records[3][1] ^ 1]) + records[3][2:]  # CRC-32
    records[4] = records[4][:-1] + bytes([records[4][-1] ^ 0x80])  # the uint8 copy
    blobs[5] = encode_f32([0.5] * d)  # norm 2
    blobs[6] = array("f", [math.nan] + [0.0] * (d - 1)).tobytes()
    blobs[7] = blobs[7][:-4]  # 15 components
    assert scrub(blobs, records, d) == ({3, 4, 5, 6, 7}, [1, 2])
    assert scrub(blobs, records, 0) == (set(range(9)), [])
    assert scrub([], [], d) == (set(), [])


def test_the_table_lookup_in_chunks_covers_every_component(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The table is read in chunks of _GATHER components: inputs of every length around
    the chunk size (a last chunk of one, of a few, none) give the per-component bytes."""
    from engramdb._vectors import index_data as _index_data

    _forced_quantiser(monkeypatch, table=True)
    monkeypatch.setattr(_index_data, "_GATHER", 3)
    q = quantiser(4)
    values = [0.5, -0.25, 0.999, -0.001, 0.0, -0.0, 0.3, -0.7, 0.01, 0.2]
    for n in range(len(values) + 1):
        blob = struct.pack(f"<{n}f", *values[:n])
        assert q.many(blob) == q.one(array("f", values[:n])), n


def test_quantiser_builds_its_table_once_enough_components_went_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Small batches are quantised per component until together they reach
    _BULK_TABLE_MIN components of one dimension count; the lookup table is built then
    (a few distinct 64 KiB blocks, not one per top byte) and gives the same bytes."""
    from engramdb._vectors import index_data as _index_data

    d = 64
    monkeypatch.setattr(_index_data, "_bulk_tables", {})
    monkeypatch.setattr(_index_data, "_quantised", {})
    monkeypatch.setattr(_index_data, "_BULK_TABLE_MIN", 3 * d)
    rng = random.Random(5)
    blobs = [encode_f32(normalize(v)) for v in _edge_vectors(rng, d)]
    q = quantiser(d)
    for blob in blobs[:2]:
        assert q.many(blob) == q.one(decode_f32(blob, d))
        assert d not in _index_data._bulk_tables
    for blob in blobs[2:]:
        assert q.many(blob) == q.one(decode_f32(blob, d))
    blocks, entries = _index_data._bulk_tables[d]
    assert len(blocks) == 256 and len(entries) % 65_536 == 0
    assert len(entries) // 65_536 <= 32


def test_index_data_rejects_what_is_not_a_unit_vector_blob() -> None:
    """Wrong lengths, NaN or infinity, and components of magnitude 2 or more raise, as
    does an impossible dimension count; index_data_many names the first bad blob."""
    good = _blob([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(DimensionMismatchError):
        index_data(encode_f32([1.0, 0.0]), 4)
    with pytest.raises(CorruptDataError):
        index_data(b"\x00" * 15, 4)
    with pytest.raises(CorruptDataError, match="NaN or infinite"):
        index_data(encode_f32([1.0, 0.0, 0.0]) + _f32(math.nan), 4)
    with pytest.raises(CorruptDataError, match="NaN or infinite"):
        index_data(_f32(-math.inf) + encode_f32([0.0, 0.0, 0.0]), 4)
    with pytest.raises(ValidationError, match="component 3 of vector 1 is 2"):
        index_data_many([good, encode_f32([0.0, 0.0, 0.0, 2.0])], 4)
    with pytest.raises(ValidationError):
        index_data(good, 0)
    with pytest.raises(DimensionMismatchError):
        index_data_many([good, good, encode_f32([1.0])], 4)


def _f32(x: float) -> bytes:
    """One little-endian float32, NaN and infinity included."""
    return struct.pack("<f", x)


def _pairs(n: int, d: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    return [(f"m{i:04d}", encode_f32(_unit(rng, d))) for i in range(n)]


@pytest.mark.parametrize("d", [32, 72, 100, 384, 400])  # 72, 100, 384 keep prefix columns
def test_load_with_index_data_equals_add_many(d: int) -> None:
    """An index loaded from blobs with their index data holds exactly what add_many
    computes from the blobs alone, so every search path answers the same: exact and
    approximate, with and without an eligible set."""
    n = 2500  # C = 100 for k = 10: searches above 1,000 eligible vectors are approximate
    pairs = _pairs(n, d, seed=d)
    records = index_data_many([blob for _, blob in pairs], d)
    built, loaded = VectorIndex(d), VectorIndex(d)
    built.add_many(pairs)
    assert loaded.load([(k, b, r) for (k, b), r in zip(pairs, records, strict=True)]) == {}
    assert _state(loaded) == _state(built)
    assert bool(loaded._columns) == (64 <= d <= 384)
    rng = random.Random(-d)
    some = {key for key, _ in pairs[::2]}
    for _ in range(5):
        query = _unit(rng, d)
        for kwargs in ({}, {"exact": True}, {"candidates": 40}, {"allowed": some}):
            hits = loaded.search(query, 10, **kwargs)  # type: ignore[arg-type]
            assert hits == built.search(query, 10, **kwargs)  # type: ignore[arg-type]
            assert len(hits) == 10


def test_load_trusts_current_index_data_without_recomputing_it() -> None:
    """A row with current index data is taken as it is: altered code and uint8 bytes
    (with the right version, length and the blob's CRC-32) go into the index unchanged."""
    d = 64  # 8 prefix columns: the code's 8 bytes
    blob = _blob(list(range(1, d + 1)))  # all signs positive: its real code is 0
    code = bytes(range(0xA0, 0xA8))
    check = binascii.crc32(blob).to_bytes(4, "little")
    altered = bytes([1]) + check + code + bytes(range(100, 100 + d))
    index = VectorIndex(d)
    assert index.load([("k", blob, altered)]) == {}
    assert index._codes == [int.from_bytes(code, "big")]
    assert bytes(index._four) == four_bits(bytes(range(100, 100 + d)), d)
    assert [bytes(column) for column in index._columns] == [bytes([b]) for b in code]
    assert index._flat.tobytes() == _floats_of(blob).tobytes()


def test_load_skips_a_blob_that_no_longer_matches_its_crc() -> None:
    """A blob changed after its index data was written no longer matches the CRC-32
    stored with it: it is skipped and named as corrupt, whether the change left it far
    from unit length or kept it finite and unit length (a flipped sign bit: another
    vector, which would be scored as if it were the stored one). A row without index
    data has no checksum: its blob is checked in full and its data computed."""
    d = 16
    good = _blob([1.0] * d)
    data = index_data(good, d)
    longer = bytearray(good)
    longer[2] ^= 0x40  # a larger first component: the norm is no longer 1
    flipped = _blob([1.0] * (d - 1) + [-1.0])  # same norm, another sign
    index = VectorIndex(d)
    skipped = index.load(
        [("longer", bytes(longer), data), ("flipped", flipped, data), ("ok", good, data)]
    )
    assert list(skipped) == ["longer", "flipped"]
    assert all("CRC-32" in message and "reindex()" in message for message in skipped.values())
    assert list(index.keys()) == ["ok"]
    fresh = VectorIndex(d)
    assert fresh.load([("k", flipped, None)]) == {}
    assert fresh._codes == [1] and index_data(flipped, d) != data


def _floats_of(blob: bytes) -> array[float]:
    values = array("f")
    values.frombytes(blob)
    if not _LITTLE:  # pragma: no cover - no big-endian CI host
        values.byteswap()
    return values


def test_load_recomputes_missing_old_or_misshapen_index_data() -> None:
    """None, another version, or the wrong length: the row's index data is computed
    from its blob, exactly as add_many does, whatever the stale bytes held."""
    d = 24
    pairs = _pairs(6, d, seed=1)
    size = 1 + 3 + d
    stale: list[bytes | None] = [
        None,
        bytes([0]) + bytes(size - 1),  # an older version
        bytes([2]) + b"\xff" * (size - 1),  # a newer one
        bytes([1]) + bytes(size - 2),  # one byte short
        bytes([1]) + bytes(size),  # one byte long
        b"",
    ]
    built, loaded = VectorIndex(d), VectorIndex(d)
    built.add_many(pairs)
    rows = [(key, blob, record) for (key, blob), record in zip(pairs, stale, strict=True)]
    assert loaded.load(rows) == {}
    assert _state(loaded) == _state(built)


def test_load_skips_exactly_the_corrupt_rows_and_names_them() -> None:
    """Every other row is added; each skipped key maps to a one-sentence message. Index
    data written for another blob (its CRC-32 differs) is not trusted: the row is
    skipped as corrupt."""
    if not _LITTLE:  # pragma: no cover
        pytest.skip("the NaN/inf blobs below are little-endian by construction")
    d = 8
    good = _pairs(4, d, seed=2)
    records = index_data_many([blob for _, blob in good], d)
    half = encode_f32([0.5] + [0.0] * (d - 1))  # norm 0.5
    nan = encode_f32([0.0] * (d - 1)) + _f32(math.nan)
    inf = _f32(math.inf) + encode_f32([0.0] * (d - 1))
    huge = _f32(3e38) + encode_f32([0.0] * (d - 1))  # finite, far from unit
    rows: list[tuple[str, bytes, bytes | None]] = [
        ("good0", good[0][1], records[0]),
        ("short", good[1][1][:-4], records[1]),  # 7 dimensions
        ("ragged", good[1][1][:-1], None),  # not a multiple of 4 bytes
        ("good1", good[1][1], None),
        ("nan", nan, records[2]),  # index data present, blob corrupt
        ("inf", inf, None),
        ("half", half, None),  # computed here: not unit length
        ("huge", huge, None),
        ("no-blob", None, records[3]),  # type: ignore[list-item]
        ("good2", good[2][1], records[2]),
        ("borrowed", half, index_data(good[3][1], d)),  # another blob's data: checked
        ("good3", good[3][1], b"\x01"),
    ]
    index = VectorIndex(d)
    errors = index.load(rows)
    assert sorted(errors) == sorted(
        ["short", "ragged", "nan", "inf", "half", "huge", "no-blob", "borrowed"]
    )
    assert "7 dimensions" in errors["short"]
    assert "multiple of 4" in errors["ragged"]
    assert "NaN or infinite" in errors["nan"] and "NaN or infinite" in errors["inf"]
    assert "norm 0.5" in errors["half"] and "norm 3e+38" in errors["huge"]
    assert "NoneType" in errors["no-blob"]
    for message in errors.values():
        assert isinstance(message, str) and message.count(". ") == 0
    assert sorted(index.keys()) == ["good0", "good1", "good2", "good3"]
    expected = VectorIndex(d)
    expected.add_many([("good0", good[0][1]), ("good1", good[1][1])])
    expected.add_many([("good2", good[2][1]), ("good3", good[3][1])])
    query = _unit(random.Random(3), d)
    assert index.search(query, 4, exact=True) == expected.search(query, 4, exact=True)


def test_load_only_raises_for_keys_that_are_not_strings() -> None:
    """A non-str key is the caller's bug, not a bad row: load raises and adds nothing."""
    d = 4
    ((key, blob),) = _pairs(1, d, seed=4)
    index = VectorIndex(d)
    with pytest.raises(ValidationError, match="must be a str"):
        index.load([(key, blob, None), (7, blob, None)])  # type: ignore[list-item]
    assert len(index) == 0
    assert index.load([]) == {}
    assert index.load(iter([(key, blob, None)])) == {}
    assert list(index.keys()) == [key]


@pytest.mark.parametrize("d", [24, 72, 100])
def test_load_replaces_existing_keys_like_repeated_add(d: int) -> None:
    """Loading keys that are present replaces their vectors; a key given twice keeps the
    last good row; a skipped row leaves the key's vector as it was. The index ends up
    as a sequence of add() calls (of the good rows) leaves it."""
    first = _pairs(40, d, seed=5)
    rng = random.Random(6)
    second = [
        ("m0003", encode_f32(_unit(rng, d))),
        ("new1", encode_f32(_unit(rng, d))),
        ("m0010", encode_f32(_unit(rng, d))),
        ("new1", encode_f32(_unit(rng, d))),
        ("m0020", encode_f32([2.0] + [0.0] * (d - 1))),  # skipped: not unit length
    ]
    one, loaded = VectorIndex(d), VectorIndex(d)
    for key, blob in first + second[:4]:
        one.add(key, blob)
    records = index_data_many([blob for _, blob in first], d)
    loaded.load([(k, b, r) for (k, b), r in zip(first, records, strict=True)])
    errors = loaded.load(
        [(k, b, index_data(b, d) if i % 2 else None) for i, (k, b) in enumerate(second[:4])]
        + [(second[4][0], second[4][1], None)]
    )
    assert list(errors) == ["m0020"]
    assert _state(loaded) == _state(one)


@pytest.mark.parametrize(
    "excluded",
    [
        set(),
        {"k3"},
        {"k0", "k9", "k5"},
        {"gone", "k4"},
        {"gone"},
        {f"k{i}" for i in range(0, 10, 2)},
        {f"k{i}" for i in range(40)},  # more than a few: the mask
    ],
)
def test_excluding_a_few_keys_gives_the_positions_of_every_other(excluded: set[str]) -> None:
    """``Excluding`` (a search's expired items) looks up the excluded keys instead of
    testing every key (a few deleted from the list of all positions, more through a
    mask): the positions are those a plain container of the other keys gives, in order;
    None (the whole index) when none of them is in the index."""
    from engramdb._vectors.exact import Excluding, eligible_positions

    keys = [f"k{i}" for i in range(50)]
    random.Random(5).shuffle(keys)  # positions are not key order
    positions = {key: p for p, key in enumerate(keys)}
    found = eligible_positions(Excluding(excluded), keys, positions)
    others = [p for p, key in enumerate(keys) if key not in excluded]
    assert found == (None if len(others) == len(keys) else others)
    index = VectorIndex(2)
    index.add_many((key, encode_f32(normalize([1.0, float(p)]))) for p, key in enumerate(keys))
    hits = index.search([1.0, 9.0], len(keys), exact=True, allowed=Excluding(excluded))
    assert sorted(key for key, _ in hits) == sorted(keys[p] for p in others)


@pytest.mark.parametrize("mode", ["vector", "lexical"])
def test_the_in_memory_legs_leave_out_what_expired_as_expiries_change(mode: str) -> None:
    """The in-memory store keeps, per scope, the ids that carry an expiry, and each leg
    leaves out those expired at its ``now`` (only those: it no longer tests every key).
    Following items through an expiry set, changed and removed by ``update``, and
    through ``forget``: each search answers what the items' expiries say is live."""
    from datetime import UTC, datetime, timedelta

    from engramdb import HashEmbedder, InMemoryStore, Memory

    now = [datetime(2026, 12, 3, tzinfo=UTC)]
    memory = Memory(InMemoryStore(), HashEmbedder(), clock=lambda: now[0])
    scope, other = ("t", "home"), ("t", "away")
    keeps = memory.remember("tea with lemon", scope)
    soon = memory.remember("tea with honey", scope, ttl=60)
    later = memory.remember("tea with milk", scope, ttl=3600)
    elsewhere = memory.remember("tea with sugar", other, ttl=60)

    def found(where: tuple[str, ...] = scope) -> set[str]:
        return {hit.memory.id for hit in memory.recall("tea", [where], mode=mode, top_k=10)}

    assert found() == {keeps.id, soon.id, later.id}
    now[0] += timedelta(minutes=2)  # `soon` (and `elsewhere`) expired, not yet purged
    assert found() == {keeps.id, later.id}
    assert found(other) == set()
    memory.update(keeps.id, expires_at=now[0] + timedelta(minutes=1))  # gains an expiry
    memory.update(later.id, expires_at=None)  # loses its expiry
    now[0] += timedelta(hours=2)
    assert found() == {later.id}
    memory.forget(keeps.id)
    memory.forget(soon.id)
    assert found() == {later.id}
    memory.update(later.id, expires_at=now[0] + timedelta(minutes=1))
    now[0] += timedelta(minutes=2)
    assert found() == set()
    assert {hit.memory.id for hit in memory.recall("tea", [scope], top_k=10)} == set()
    assert elsewhere.id not in {h.memory.id for h in memory.recall("tea", [other], top_k=10)}
