"""The numpy vector kernel against the pure-Python reference.

``NumpyVectorIndex`` must answer every exact search as ``VectorIndex.search(...,
exact=True)`` does: the same (id, similarity) pairs in the same order, bit for bit, on
random and clustered vectors, duplicates and near-ties, after replaces and removes, with
and without an ``allowed`` set; answer an approximate one (where the reference searches
approximately) exactly among the vectors whose sign codes are nearest the query's, with
no less recall than the reference; skip the same corrupt rows with the same messages;
and ``SqliteStore`` must pick it (or not) as ``ENGRAMDB_VECTOR_KERNEL`` says.
"""

from __future__ import annotations

import math
import random
import sqlite3
import struct
import sys
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path

import pytest

from engramdb import ConfigurationError, HashEmbedder, Memory, ValidationError
from engramdb._vectors.index import VectorIndex, unit_f32
from engramdb._vectors.index_data import index_data_many
from engramdb.driver import use_exact_vector_scan, vector_candidates_for
from engramdb.sqlite import SqliteStore

np = pytest.importorskip("numpy")

import engramdb._numpy_kernel as kernel_module  # noqa: E402
from engramdb._numpy_kernel import NumpyVectorIndex  # noqa: E402

SCOPE = ("acme", "user", "sam")


def _random_unit(rng: random.Random, d: int) -> list[float]:
    return [rng.gauss(0.0, 1.0) for _ in range(d)]


def _clustered(rng: random.Random, n: int, d: int) -> list[bytes]:
    centres = [_random_unit(rng, d) for _ in range(8)]
    return [unit_f32([c + rng.gauss(0.0, 0.7) for c in centres[i % 8]]) for i in range(n)]


def _near_ties(rng: random.Random, n: int, d: int) -> list[bytes]:
    """Blocks of identical vectors, and vectors one float32 ulp from another in one
    component: similarities that tie on the 2**-30 grid or straddle a grid line."""
    base = [unit_f32(_random_unit(rng, d)) for _ in range(n // 40)]
    blobs = []
    for i in range(n):
        blob = bytearray(base[i % len(base)])
        if i % 3 == 1:  # nudge one component by one ulp
            at = 4 * rng.randrange(d)
            (word,) = struct.unpack_from("<I", blob, at)
            struct.pack_into("<I", blob, at, word ^ 1)
        blobs.append(bytes(blob))
    return blobs


def _both(blobs: list[bytes], d: int) -> tuple[VectorIndex, NumpyVectorIndex]:
    keys = [f"m{i:06d}" for i in range(len(blobs))]
    rows = list(zip(keys, blobs, index_data_many(blobs, d), strict=True))
    reference, kernel = VectorIndex(d), NumpyVectorIndex(d)
    assert reference.load(rows) == {}
    page = 997  # loaded page by page, as a cache entry is
    for start in range(0, len(rows), page):
        assert kernel.load(rows[start : start + page]) == {}
    return reference, kernel


def _queries(rng: random.Random, blobs: list[bytes], d: int) -> Iterator[list[float]]:
    for i in range(12):
        if i % 2:  # a stored vector itself: its duplicates tie at the top
            yield list(struct.unpack(f"<{d}f", blobs[rng.randrange(len(blobs))]))
        else:
            yield _random_unit(rng, d)


def _newer(key: str) -> tuple[int, str]:
    return (int(key[1:]) % 7, key)  # created_at that disagrees with the id order


def _sign_code(blob: bytes) -> int:
    """Bit j set where component j of the float32 blob is above 0."""
    values = struct.unpack(f"<{len(blob) // 4}f", blob)
    return sum(1 << j for j, value in enumerate(values) if value > 0)


def _check_approximate(
    reference: VectorIndex,
    kernel: NumpyVectorIndex,
    codes: dict[str, int],
    query: list[float],
    k: int,
    *,
    allowed: set[str] | None = None,
    newer: Callable[[str], object] | None = None,
) -> None:
    """A search without ``exact=True`` (``codes``: every key's ``_sign_code``): where
    the reference would scan every eligible vector, given the kernel's ``C`` (``_WIDER``
    times ``vector_candidates_for``), or ``C`` is more than ``_SHARE`` of them, the
    exact answer; otherwise the exact answer
    among the ``C`` eligible vectors whose sign codes differ from the query's in the
    fewest bits: only vectors within the ``C``-th distance, and every nearer one ranked
    in."""
    found = kernel.search(query, k, allowed=allowed, newer=newer)
    eligible = [key for key in codes if allowed is None or key in allowed]
    c = min(len(eligible), kernel_module._WIDER * vector_candidates_for(len(eligible), k))
    if c > kernel_module._SHARE * len(eligible) or use_exact_vector_scan(len(eligible), c, k):
        assert found == reference.search(query, k, exact=True, allowed=allowed, newer=newer)
        return
    wanted = _sign_code(struct.pack(f"<{len(query)}f", *query))
    distance = {key: (codes[key] ^ wanted).bit_count() for key in eligible}
    cut = sorted(distance.values())[c - 1]
    assert len(found) == k and all(distance[key] <= cut for key, _ in found)
    nearer = {key for key in eligible if distance[key] < cut}
    among = nearer | {key for key, _ in found}
    assert found == reference.search(query, k, exact=True, allowed=among, newer=newer)


@pytest.mark.parametrize("data", ["random", "clustered", "near-ties"])
@pytest.mark.parametrize("d", [8, 96, 384])
def test_every_search_equals_the_exact_reference(data: str, d: int) -> None:
    rng = random.Random(f"{data}-{d}")
    n = 1500 if d == 384 else 4000
    make: Callable[[random.Random, int, int], list[bytes]] = {
        "random": lambda r, n, d: [unit_f32(_random_unit(r, d)) for _ in range(n)],
        "clustered": _clustered,
        "near-ties": _near_ties,
    }[data]
    blobs = make(rng, n, d)
    reference, kernel = _both(blobs, d)
    codes = {f"m{i:06d}": _sign_code(blob) for i, blob in enumerate(blobs)}
    subset = {f"m{i:06d}" for i in rng.sample(range(n), n // 3)}
    few = {f"m{i:06d}" for i in rng.sample(range(n), 40)} | {"absent"}
    for query in _queries(rng, blobs, d):
        for k in (1, 10, 100):
            for allowed in (None, subset, few):
                for newer in (None, _newer):
                    expected = reference.search(query, k, exact=True, allowed=allowed, newer=newer)
                    found = kernel.search(query, k, exact=True, allowed=allowed, newer=newer)
                    assert found == expected
                    _check_approximate(
                        reference, kernel, codes, query, k, allowed=allowed, newer=newer
                    )
                    assert len(expected) == min(
                        k, n if allowed is None else len(allowed & set(reference.keys()))
                    )


def test_approximate_recall_matches_the_references() -> None:
    """Over 20,000 clustered vectors, searched as a store's vector leg searches (``k`` =
    100: 1,000 candidates for the reference, ``_WIDER`` times as many here), the
    approximate path (the nearest sign codes, then exact scores) finds at least 95 % of
    the exact top 10, and no fewer than the reference's own approximate path (sign
    codes, 4-bit copies, then exact scores) less 2 %: with as many candidates, neither
    is always ahead, as each picks among equal Hamming distances at the cut in its own
    way. ``exact=True`` finds them all."""
    rng = random.Random(7)
    d, n = 96, 20_000
    blobs = _clustered(rng, n, d)
    reference, kernel = _both(blobs, d)
    found = {"kernel": 0, "reference": 0}
    queries = [
        [x + rng.gauss(0.0, 0.02) for x in struct.unpack(f"<{d}f", blobs[rng.randrange(n)])]
        for _ in range(30)
    ]
    for query in queries:
        truth = {key for key, _ in reference.search(query, 10, exact=True)}
        assert {key for key, _ in kernel.search(query, 10, exact=True)} == truth
        found["kernel"] += len(truth & {key for key, _ in kernel.search(query, 100)[:10]})
        found["reference"] += len(truth & {key for key, _ in reference.search(query, 100)[:10]})
    assert found["kernel"] >= max(0.98 * found["reference"], 0.95 * 10 * len(queries))


def test_numpy_without_a_popcount_scans_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy 1.x has no ``bitwise_count``: an index built there keeps no sign codes and
    answers every search exactly."""
    monkeypatch.setattr(kernel_module, "_POPCOUNT", None)
    rng = random.Random(3)
    d = 32
    blobs = [unit_f32(_random_unit(rng, d)) for _ in range(3000)]
    reference, kernel = _both(blobs, d)
    for query in _queries(rng, blobs, d):
        for k in (1, 10):
            assert kernel.search(query, k) == reference.search(query, k, exact=True)


def _tied(
    rng: random.Random, d: int, copies: int, others: int
) -> tuple[VectorIndex, NumpyVectorIndex, list[float]]:
    """Both indexes over ``copies`` copies of one vector among ``others`` random ones,
    shuffled, and that vector as a query (every copy ties with it)."""
    top = unit_f32(_random_unit(rng, d))
    blobs = [top] * copies + [unit_f32(_random_unit(rng, d)) for _ in range(others)]
    rng.shuffle(blobs)
    reference, kernel = _both(blobs, d)
    return reference, kernel, list(struct.unpack(f"<{d}f", top))


def test_ties_wider_than_the_candidates_grow_them() -> None:
    """500 copies of one vector tie at the top: the float32 stage's first candidates
    cannot tell them apart, so the kernel widens them until the newest 10 are certain."""
    rng = random.Random(5)
    reference, kernel, query = _tied(rng, 64, 500, 3000)
    for k in (10, 100):
        expected = reference.search(query, k, exact=True, newer=_newer)
        assert len({score for _, score in expected}) == 1
        assert kernel.search(query, k, exact=True, newer=_newer) == expected


def test_rows_widened_block_by_block_answer_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact stage widens its rows to float64 a block at a time (bounded memory when
    a wide tie makes it score every vector): blocks of 97 rows answer what one does."""
    rng = random.Random(37)
    reference, kernel, top = _tied(rng, 64, 300, 1500)
    queries = [top, *(_random_unit(rng, 64) for _ in range(4))]
    expected = [reference.search(q, 100, exact=True, newer=_newer) for q in queries]
    monkeypatch.setattr(kernel_module, "_BLOCK", 97)
    assert [kernel.search(q, 100, exact=True, newer=_newer) for q in queries] == expected


def test_candidates_gathered_block_by_block_answer_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The float32 stage gathers the sign codes' candidates a block of rows at a time
    (``_dot_rows``, so each block is scored while in cache): blocks of 7 rows answer
    what one block does, and both what the approximate path promises."""
    rng = random.Random(41)
    d, n = 96, 4000
    blobs = _clustered(rng, n, d)
    reference, kernel = _both(blobs, d)
    codes = {f"m{i:06d}": _sign_code(blob) for i, blob in enumerate(blobs)}
    queries = list(_queries(rng, blobs, d))
    whole = [kernel.search(q, 10, newer=_newer) for q in queries]
    monkeypatch.setattr(kernel_module, "_GATHER", 7)
    assert [kernel.search(q, 10, newer=_newer) for q in queries] == whole
    for query in queries:
        _check_approximate(reference, kernel, codes, query, 10, newer=_newer)


def test_vectors_off_unit_length_rank_as_the_reference_ranks_them() -> None:
    """Stored norms may be up to 1e-3 off 1 (UNIT_TOLERANCE). Python 3.11's exact scorer
    reads cos = 1 - |q - v|^2 / 2 = q . v + (1 - |v|^2) / 2, up to 1e-3 off the dot
    product that numpy's float32 pass estimates, so the kernel's bound includes that
    shift. Built so that it matters on 3.11: 30 vectors of norm 1.0009 at q . v = 0.9,
    0.8999, ..., and one of norm 0.9991 just below the 26th (the last first candidate for
    k = 10): its dot product ranks it 31st, 3.11's scorer 10th. (On 3.12+ the scorer is
    the dot product, and the test holds the kernel to that.)"""
    rng = random.Random(23)
    d = 64

    def vector(dot: float, norm: float, axis: int) -> bytes:
        c = dot / norm  # the cosine with the query (axis 0)
        values = [0.0] * d
        values[0], values[axis] = c * norm, math.sqrt(1.0 - c * c) * norm
        return struct.pack(f"<{d}f", *values)

    blobs = [vector(0.9 - 0.0001 * i, 1.0009, 1 + i) for i in range(30)]
    blobs.append(vector(0.89735, 0.9991, 31))
    blobs += [
        struct.pack(f"<{d}f", *(x / math.hypot(*v) for x in v))
        for v in (_random_unit(rng, d) for _ in range(300))
    ]
    rows = [(f"m{i:06d}", blob, None) for i, blob in enumerate(blobs)]  # norms checked
    reference, kernel = VectorIndex(d), NumpyVectorIndex(d)
    assert reference.load(rows) == kernel.load(rows) == {}
    query = [1.0] + [0.0] * (d - 1)
    expected = reference.search(query, 10, exact=True)
    if not hasattr(math, "sumprod"):  # the short vector is 10th by 3.11's scorer
        assert "m000030" in [key for key, _ in expected]
    assert kernel.search(query, 10, exact=True) == expected
    for query in _queries(rng, blobs, d):
        for k in (10, 100):
            assert kernel.search(query, k, exact=True) == reference.search(query, k, exact=True)


def test_similarities_on_a_grid_line_are_left_to_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel takes its candidates' similarities from float64 estimates and asks
    the reference scorer only where an estimate cannot decide the 2**-30 grid step: a
    similarity on a grid line (basis vectors: 0.0 and 1.0 exactly, and 1.0 is also the
    clamp) or within the error bound of one. Both kinds come out as the reference's,
    and random vectors almost never need the reference."""
    asked: list[int] = []
    scorer = kernel_module.score_vectors_exactly

    def counted(*args: object) -> list[tuple[str, float]]:
        asked.append(1)
        return scorer(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(kernel_module, "score_vectors_exactly", counted)
    rng = random.Random(29)
    d = 32
    basis = [struct.pack(f"<{d}f", *(1.0 if j == i else 0.0 for j in range(d))) for i in range(d)]
    rows = [unit_f32(_random_unit(rng, d)) for _ in range(2000)]
    reference, kernel = _both(basis + rows, d)
    for axis in (0, 5):
        query = [1.0 if j == axis else 0.0 for j in range(d)]
        for k in (1, 10, 100):
            for newer in (None, _newer):
                expected = reference.search(query, k, exact=True, newer=newer)
                assert kernel.search(query, k, exact=True, newer=newer) == expected
    assert asked  # the grid lines went to the reference
    asked.clear()
    for query in [_random_unit(rng, d) for _ in range(20)]:
        assert kernel.search(query, 100, exact=True) == reference.search(query, 100, exact=True)
    assert len(asked) < 20  # of the 2,000+ similarities these searches re-scored


@pytest.mark.skipif(hasattr(math, "sumprod"), reason="the real math.sumprod is tested")
def test_the_dot_product_scorer_of_python_3_12_is_matched_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On Python 3.12+ the reference scores with ``math.sumprod`` and the kernel's
    estimates follow it (both choose per call): here a stand-in, the correctly rounded
    sum of the float64 products, on near-ties and random vectors."""

    def sumprod(p: object, q: object) -> float:
        return math.fsum(a * b for a, b in zip(p, q, strict=True))  # type: ignore[call-overload]

    monkeypatch.setattr(math, "sumprod", sumprod, raising=False)
    rng = random.Random(31)
    d = 96
    blobs = _near_ties(rng, 1200, d) + [unit_f32(_random_unit(rng, d)) for _ in range(800)]
    reference, kernel = _both(blobs, d)
    for query in _queries(rng, blobs, d):
        for k in (10, 100):
            for newer in (None, _newer):
                expected = reference.search(query, k, exact=True, newer=newer)
                assert kernel.search(query, k, exact=True, newer=newer) == expected


def test_replaces_and_removes_keep_it_equal() -> None:
    rng = random.Random(11)
    d = 48
    blobs = _clustered(rng, 3000, d)
    reference, kernel = _both(blobs, d)
    codes = {f"m{i:06d}": _sign_code(blob) for i, blob in enumerate(blobs)}
    for i in rng.sample(range(3000), 1200):
        assert reference.remove(f"m{i:06d}") and kernel.remove(f"m{i:06d}")
        del codes[f"m{i:06d}"]
    assert not kernel.remove("absent")
    changed = [(f"m{i:06d}", unit_f32(_random_unit(rng, d)), None) for i in range(0, 4000, 9)]
    assert reference.load(changed) == kernel.load(changed) == {}
    for key, blob, _ in changed[:50]:  # one at a time: the growth path
        again = [(key, blob, None), (f"x{key}", blob, None)]
        assert reference.load(again) == kernel.load(again) == {}
        codes[f"x{key}"] = _sign_code(blob)
    codes.update((key, _sign_code(blob)) for key, blob, _ in changed)
    assert sorted(kernel.keys()) == sorted(reference.keys()) == sorted(codes)
    for query in _queries(rng, blobs, d):
        for k in (3, 50):
            assert kernel.search(query, k, exact=True) == reference.search(query, k, exact=True)
            _check_approximate(reference, kernel, codes, query, k)


def test_packed_segments_refuse_a_held_key_and_then_answer_as_the_reference() -> None:
    """Segments loaded with ``load_packed`` in id order, as a cold load reads them: a
    segment that repeats a key already held (its keys ascending or not) or one of its
    own is refused with ``ValueError`` by both indexes and changes nothing; one of new
    keys out of order is taken by both. Then membership, removal, searches over all or
    an ``allowed`` set and ties ordered by ``newer`` answer as the pure-Python index's."""
    rng = random.Random(17)
    d = 32
    blobs = _near_ties(rng, 3000, d)  # identical vectors: ties that ``newer`` orders
    keys = [f"m{i:06d}" for i in range(3000)]
    data = index_data_many(blobs, d)

    def segment(at: list[int]) -> tuple[list[str], bytes, bytes]:
        return [keys[i] for i in at], b"".join(blobs[i] for i in at), b"".join(data[i] for i in at)

    def packed() -> tuple[VectorIndex, NumpyVectorIndex]:
        reference, kernel = VectorIndex(d), NumpyVectorIndex(d)
        for start in range(0, 2400, 800):
            ids, vectors, index_data = segment(list(range(start, start + 800)))
            reference.load_packed(ids, vectors, index_data)
            kernel.load_packed(ids, vectors, None)
        # ids ascending from segment to segment: no map from key to position yet
        assert kernel._positions is None
        return reference, kernel

    query = list(struct.unpack(f"<{d}f", blobs[5]))  # ties with its duplicates
    for bad in ([2399, 2400, 2401], [2500, 10], [2500, 2500], [0, 2500]):
        reference, kernel = packed()
        ids, vectors, index_data = segment(bad)
        with pytest.raises(ValueError, match="repeats a key"):
            reference.load_packed(ids, vectors, index_data)
        with pytest.raises(ValueError, match="repeats a key"):
            kernel.load_packed(ids, vectors, None)
        assert len(kernel) == len(reference) == 2400 and keys[2500] not in kernel
        found = kernel.search(query, 50, exact=True, newer=_newer)
        assert found == reference.search(query, 50, exact=True, newer=_newer)
    reference, kernel = packed()
    assert kernel.search(query, 50, exact=True, newer=_newer) == reference.search(
        query, 50, exact=True, newer=_newer
    )
    assert kernel._positions is None  # a search over every key needs no map either
    for at in ([2999, *range(2500, 2600)], list(range(2600, 2700))):  # new keys, any order
        ids, vectors, index_data = segment(at)
        reference.load_packed(ids, vectors, index_data)
        kernel.load_packed(ids, vectors, None)
    for key in (keys[0], keys[2999], keys[2450], "absent"):
        assert (key in kernel) == (key in reference)
    for i in rng.sample(range(2400), 300):
        assert kernel.remove(keys[i]) and reference.remove(keys[i])
    assert not kernel.remove(keys[2450]) and not reference.remove(keys[2450])
    assert sorted(kernel.keys()) == sorted(reference.keys())
    allowed = set(rng.sample(keys, 1500))
    for q in [query, *_queries(rng, blobs, d)]:
        for only in (None, allowed):
            for newer in (None, _newer):
                expected = reference.search(q, 40, exact=True, allowed=only, newer=newer)
                assert kernel.search(q, 40, exact=True, allowed=only, newer=newer) == expected


def test_rows_after_the_segments_in_id_order_build_no_key_map() -> None:
    """A cold load of a scope packed as written reads its segments, then the rows of the
    partial tail after them, in id order: those rows are taken without the map from key
    to position (6.6 MB at 100k keys), as the segments are. Rows that repeat a held key,
    or come out of order, build it and replace as the pure-Python index does; every
    search answers as the reference's."""
    rng = random.Random(23)
    d = 32
    blobs = _near_ties(rng, 1200, d)
    keys = [f"m{i:06d}" for i in range(1200)]
    reference, kernel = VectorIndex(d), NumpyVectorIndex(d)
    vectors = b"".join(blobs[:1000])
    reference.load_packed(keys[:1000], vectors, b"".join(index_data_many(blobs[:1000], d)))
    kernel.load_packed(keys[:1000], vectors, None)
    tail = [(keys[i], blobs[i], None) for i in range(1000, 1100)]
    assert reference.load(tail) == kernel.load(tail) == {}  # type: ignore[arg-type]
    assert kernel._positions is None and len(kernel) == 1100
    query = list(struct.unpack(f"<{d}f", blobs[7]))
    assert kernel.search(query, 30, exact=True, newer=_newer) == reference.search(
        query, 30, exact=True, newer=_newer
    )
    again = [(keys[i], unit_f32(_random_unit(rng, d)), None) for i in (1099, 1100, 1101)]
    assert reference.load(again) == kernel.load(again) == {}  # type: ignore[arg-type]
    assert kernel._positions is not None and len(kernel) == len(reference) == 1102
    for q in [query, *_queries(rng, blobs, d)]:
        expected = reference.search(q, 30, exact=True, newer=_newer)
        assert kernel.search(q, 30, exact=True, newer=_newer) == expected


@pytest.mark.parametrize(
    ("seed", "hint", "mapped"),
    [
        (0, None, False),
        (1, 0, False),
        (2, 700, False),
        (3, 1916, False),
        (4, 5000, False),
        (5, None, True),
        (6, 1916, True),
    ],
)
def test_segments_and_rows_in_any_order_answer_as_the_reference(
    seed: int, hint: int | None, mapped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Segments and rows loaded in a random order into a matrix reserved for none, too
    few, exactly as many or more vectors than come (``reserve``: the room grows as
    needed), then replaces and removes (the last vector moves into the hole) leave an
    index that answers every search, over all keys or an ``allowed`` set, as the
    pure-Python index does, and the segments' blobs unchanged. Basis vectors put
    similarities on grid lines, which the reference scorer decides from the row.
    ``mapped``: every array of the index, however small, in a mapping of its own (on
    Linux; elsewhere there is none), its rows faulted in before each copy."""
    if mapped:
        monkeypatch.setattr(kernel_module, "_MAPPED_FROM", 1)
    rng = random.Random(100 + seed)
    d = 16
    basis = [struct.pack(f"<{d}f", *(1.0 if j == i else 0.0 for j in range(d))) for i in range(d)]
    blobs = basis + _clustered(rng, 1500, d) + _near_ties(rng, 400, d)
    keys = [f"m{i:06d}" for i in range(len(blobs))]
    reference, kernel = VectorIndex(d), NumpyVectorIndex(d)
    if hint is not None:
        kernel.reserve(hint)
    kernel.load_packed([], b"", None)  # nothing to copy: nothing changes
    assert kernel.load([]) == {} and len(kernel) == 0
    segments: list[tuple[bytes, bytes]] = []  # each blob, and a copy to compare at the end
    start = 0
    while start < len(blobs):
        size = rng.choice([1, 7, 64, 300])
        at = range(start, min(start + size, len(blobs)))
        if rng.random() < 0.5:
            vectors = b"".join(blobs[i] for i in at)
            segments.append((vectors, bytes(bytearray(vectors))))
            data = b"".join(index_data_many([blobs[i] for i in at], d))
            reference.load_packed([keys[i] for i in at], vectors, data)
            kernel.load_packed([keys[i] for i in at], vectors, None)
        else:
            rows = [(keys[i], blobs[i], None) for i in at]
            assert reference.load(rows) == kernel.load(rows) == {}  # type: ignore[arg-type]
        start = at.stop
    held = list(keys)
    codes = {key: _sign_code(blob) for key, blob in zip(keys, blobs, strict=True)}
    for _ in range(400):
        key = rng.choice(held)
        if rng.random() < 0.5:
            assert reference.remove(key) and kernel.remove(key)
            held.remove(key)
            del codes[key]
        else:
            row = [(key, unit_f32(_random_unit(rng, d)), None)]
            assert reference.load(row) == kernel.load(row) == {}  # type: ignore[arg-type]
            codes[key] = _sign_code(row[0][1])
    new = [(f"n{i:04d}", unit_f32(_random_unit(rng, d)), None) for i in range(30)]
    assert reference.load(new) == kernel.load(new) == {}  # type: ignore[arg-type]
    codes.update((key, _sign_code(blob)) for key, blob, _ in new)
    assert sorted(kernel.keys()) == sorted(reference.keys()) == sorted(codes)
    allowed = set(rng.sample(held, 300))
    queries = [[1.0 if j == axis else 0.0 for j in range(d)] for axis in (0, 3)]
    for query in [*queries, *_queries(rng, blobs, d)]:
        for only in (None, allowed):
            for k in (5, 60):
                expected = reference.search(query, k, exact=True, allowed=only, newer=_newer)
                assert kernel.search(query, k, exact=True, allowed=only, newer=_newer) == expected
                _check_approximate(reference, kernel, codes, query, k, allowed=only, newer=_newer)
    assert all(vectors == copy for vectors, copy in segments)


def _vm_flags(address: int) -> list[str]:
    """The ``VmFlags`` of this process's mapping that holds ``address`` (Linux)."""
    flags: list[str] | None = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and not head.endswith(":"):
            low, high = (int(part, 16) for part in head.split("-"))
            inside = low <= address < high
        elif head == "VmFlags:" and inside:
            flags = line.split()[1:]
    assert flags is not None, f"no mapping holds {address:#x}"
    return flags


@pytest.mark.skipif(sys.platform != "linux", reason="numpy advises huge pages on Linux only")
def test_a_reserved_matrix_is_not_advised_huge_pages() -> None:
    """The matrix a cold load reserves (here 30 MB) is not in memory advised for
    transparent huge pages, as numpy's own large arrays are: where the kernel's THP
    ``defrag`` is ``madvise``, faulting such memory in can stall on a compaction (a
    cold load at 100k x 384 took 0.18-0.64 s, and 0.19 s without the advice). Its
    vectors and sign codes land as they do in any matrix."""
    d = 384
    rng = random.Random(7)
    kernel = NumpyVectorIndex(d)
    kernel.reserve(20_000)
    matrix = kernel._matrix
    assert matrix.nbytes >= 20_000 * d * 4 and matrix.flags.writeable
    middle = matrix.__array_interface__["data"][0] + matrix.nbytes // 2  # numpy advises
    assert "hg" not in _vm_flags(middle)  # from the first whole page: a mapping of its own
    blobs = _clustered(rng, 3000, d)
    keys = [f"m{i:05d}" for i in range(len(blobs))]
    kernel.load_packed(keys, b"".join(blobs), None)
    reference = VectorIndex(d)
    assert reference.load([(key, blob, None) for key, blob in zip(keys, blobs, strict=True)]) == {}
    assert kernel._matrix is matrix  # the room held them
    for query in islice(_queries(rng, blobs, d), 5):
        assert kernel.search(query, 10, exact=True) == reference.search(query, 10, exact=True)


def test_a_reservation_the_host_cannot_map_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """``reserve`` is a hint: when the host refuses the memory (``mmap`` failing on
    Linux, ``np.empty`` elsewhere), the index stays as it was and loads as usual."""

    def refuse(*args: object, **kwargs: object) -> object:
        raise MemoryError("no room")

    kernel = NumpyVectorIndex(384)
    with monkeypatch.context() as patch:
        patch.setattr(kernel_module, "_empty", refuse)
        kernel.reserve(50_000)
    assert len(kernel._matrix) == 0
    blob = unit_f32([1.0] + [0.0] * 383)
    assert kernel.load([("a", blob, None)]) == {} and kernel.search([1.0] + [0.0] * 383, 1)


@pytest.mark.skipif(sys.platform != "linux", reason="mappings of its own on Linux only")
def test_a_mapping_the_host_refuses_is_a_memory_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """An anonymous mapping the host refuses (``OSError`` from ``mmap``) is reported as
    ``np.empty`` reports what it cannot allocate: ``MemoryError``, with the size."""

    def refuse(*args: object, **kwargs: object) -> object:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(kernel_module.mmap, "mmap", refuse)
    with pytest.raises(MemoryError, match="cannot map 7680000 bytes"):
        kernel_module._empty((5000, 384), np.float32)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e20])
def test_a_component_not_finite_is_refused_in_a_segment_and_skipped_in_rows(bad: float) -> None:
    """A NaN or an infinity among a packed segment's components (or a finite one whose
    square is past float32's range: no unit vector has one) makes ``load_packed`` refuse
    the segment, changing nothing; in rows, the vector is skipped with the reference's
    message and the others load."""
    rng = random.Random(5)
    d = 8
    good = [unit_f32(_random_unit(rng, d)) for _ in range(3)]
    broken = bytearray(good[2])
    broken[4:8] = struct.pack("<f", bad)
    reference, kernel = VectorIndex(d), NumpyVectorIndex(d)
    for index in (reference, kernel):
        index.load_packed(["a"], good[0], b"".join(index_data_many(good[:1], d)))
    with pytest.raises(ValueError, match="not finite"):
        kernel.load_packed(["b", "c"], good[1] + bytes(broken), None)
    assert len(kernel) == 1 and "b" not in kernel
    rows = [("b", good[1], None), ("c", bytes(broken), None)]
    errors = reference.load(rows)  # type: ignore[arg-type]
    assert list(errors) == ["c"] and kernel.load(rows) == errors  # type: ignore[arg-type]
    for query in _queries(rng, good, d):
        assert kernel.search(query, 3, exact=True) == reference.search(query, 3, exact=True)


def test_corrupt_rows_are_skipped_with_the_same_messages() -> None:
    rng = random.Random(3)
    d = 16
    good = [unit_f32(_random_unit(rng, d)) for _ in range(6)]
    data = index_data_many(good, d)
    flipped = bytearray(good[2])
    flipped[5] ^= 0x01  # still finite and near unit length: only the CRC-32 finds it
    nan = bytearray(good[3])
    nan[0:4] = struct.pack("<f", math.nan)
    rows = [
        ("ok", good[0], data[0]),
        ("short", good[1][:-4], data[1]),
        ("flipped", bytes(flipped), data[2]),
        ("nan", bytes(nan), None),
        ("long", struct.pack(f"<{d}f", *([0.5] * d)), None),  # norm 2, no index data
        ("none", None, None),
        ("ok", good[5], data[5]),  # given twice: the last wins
    ]
    reference, kernel = VectorIndex(d), NumpyVectorIndex(d)
    assert reference.load([]) == kernel.load([]) == {}  # an empty page (a scope without vectors)
    errors = reference.load(rows)  # type: ignore[arg-type]
    assert sorted(errors) == ["flipped", "long", "nan", "none", "short"]
    assert kernel.load(rows) == errors  # type: ignore[arg-type]
    query = list(struct.unpack(f"<{d}f", good[5]))
    assert kernel.search(query, 5, exact=True) == reference.search(query, 5, exact=True)
    assert [key for key, _ in kernel.search(query, 5)] == ["ok"]
    # Pages of the right length, appended in bulk and then taken back: a CRC-32 error
    # (found after the append) and a NaN (found by the numpy pass).
    for page in (
        [
            ("p0", good[0], data[0]),
            ("p-flipped", bytes(flipped), data[2]),
            ("p1", good[1], data[1]),
        ],
        [("q0", good[4], data[4]), ("q-nan", bytes(nan), None)],
    ):
        expected = reference.load(page)
        assert len(expected) == 1 and kernel.load(page) == expected
    assert sorted(kernel.keys()) == sorted(reference.keys()) == ["ok", "p0", "p1", "q0"]
    assert kernel.search(query, 5, exact=True) == reference.search(query, 5, exact=True)


def test_bad_arguments_raise_what_the_reference_raises() -> None:
    kernel, reference = NumpyVectorIndex(4), VectorIndex(4)
    blob = unit_f32([1.0, 2.0, 3.0, 4.0])
    kernel.load([("a", blob, None)])
    reference.load([("a", blob, None)])
    for call in (
        lambda index: index.search([1.0, 0.0], 1),
        lambda index: index.search([1.0, 0.0, 0.0, 0.0], -1),
        lambda index: index.search([0.0, 0.0, 0.0, 0.0], 1),
        lambda index: index.search([1.0, 0.0, 0.0, 0.0], 1, candidates=0),
        lambda index: index.search([1.0, 0.0, 0.0, 0.0], 1, allowed="a"),
        lambda index: index.load([(1, blob, None)]),
    ):
        with pytest.raises(Exception) as expected:
            call(reference)
        with pytest.raises(type(expected.value), match=str(expected.value)[:30]):
            call(kernel)
    with pytest.raises(ValidationError, match="out of range"):
        NumpyVectorIndex(0)


# --- SqliteStore picks the kernel ----------------------------------------------------------


def _kernel_of(store: SqliteStore) -> type:
    with Memory(store, HashEmbedder()) as memory:
        memory.remember("green tea in the morning", SCOPE)
        memory.recall("tea", [SCOPE], mode="vector")
        (entry_key,) = store._cache.cached()
        entry = store._cache.entry(*entry_key)
        assert entry is not None
        return type(entry.index)


@pytest.mark.parametrize(
    ("setting", "kernel", "index"),
    [
        (None, "numpy", NumpyVectorIndex),
        ("auto", "numpy", NumpyVectorIndex),
        ("numpy", "numpy", NumpyVectorIndex),
        ("python", "python", VectorIndex),
        ("codes", "codes", VectorIndex),
    ],
)
def test_the_environment_picks_the_kernel(
    monkeypatch: pytest.MonkeyPatch, setting: str | None, kernel: str, index: type
) -> None:
    if setting is None:
        monkeypatch.delenv("ENGRAMDB_VECTOR_KERNEL", raising=False)
    else:
        monkeypatch.setenv("ENGRAMDB_VECTOR_KERNEL", setting)
    store = SqliteStore()
    assert store.vector_kernel == kernel
    assert _kernel_of(store) is index


def test_the_argument_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAMDB_VECTOR_KERNEL", "numpy")
    assert _kernel_of(SqliteStore(vector_kernel="python")) is VectorIndex
    monkeypatch.setenv("ENGRAMDB_VECTOR_KERNEL", "fast")
    with pytest.raises(ConfigurationError, match=r"ENGRAMDB_VECTOR_KERNEL='fast'.*auto, numpy"):
        SqliteStore()
    with pytest.raises(ConfigurationError, match="vector_kernel='fast'"):
        SqliteStore(vector_kernel="fast")


def test_without_numpy_auto_is_python_and_numpy_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy raises ImportError
    monkeypatch.delitem(sys.modules, "engramdb._numpy_kernel")
    monkeypatch.delenv("ENGRAMDB_VECTOR_KERNEL", raising=False)
    store = SqliteStore()
    assert store.vector_kernel == "python"
    assert _kernel_of(store) is VectorIndex
    with pytest.raises(ConfigurationError, match=r"pip install 'engramdb\[fast\]'"):
        SqliteStore(vector_kernel="numpy")


def test_both_kernels_recall_alike_from_one_file(tmp_path: Path) -> None:
    """Over one SQLite file of 3,000 memories, an exact recall through either kernel
    gives the same hits with the same scores, and the same corrupt row is skipped and
    reported. (The pure-Python default search is approximate above 1,000 vectors: among
    more tied vectors than it keeps, HashEmbedder's many ties, its pick may differ.)"""
    path = tmp_path / "m.db"
    rng = random.Random(9)
    words = [f"w{i}" for i in range(400)]
    texts = [" ".join(rng.choices(words, k=8)) for _ in range(3000)]
    with Memory(SqliteStore(path), HashEmbedder()) as memory:
        memory.remember_many([{"text": t, "scope": SCOPE} for t in texts])
    db = sqlite3.connect(path)
    with db:  # flip one bit of one vector behind engramdb's back
        (rowid, vector) = db.execute("SELECT rowid, vector FROM vectors LIMIT 1").fetchone()
        changed = bytearray(vector)
        changed[9] ^= 0x01
        db.execute("UPDATE vectors SET vector = ? WHERE rowid = ?", (bytes(changed), rowid))
    db.close()
    stores = {kernel: SqliteStore(path, vector_kernel=kernel) for kernel in ("python", "numpy")}
    memories = {kernel: Memory(store, HashEmbedder()) for kernel, store in stores.items()}
    try:
        for query in [" ".join(rng.choices(words, k=4)) for _ in range(15)]:
            for mode in ("vector", "hybrid"):
                answers = [
                    memory.recall(query, [SCOPE], mode=mode, top_k=50, exact=True)
                    for memory in memories.values()
                ]
                seen = [[(h.memory.id, h.score, h.similarity) for h in a] for a in answers]
                assert seen[0] == seen[1] and len(seen[0]) == 50
                assert answers[0].status == answers[1].status == "degraded"
    finally:
        for memory in memories.values():
            memory.close()


def test_a_vector_leg_past_the_exact_scans_keeps_its_first_hits(tmp_path: Path) -> None:
    """Over 17,000 memories in one scope a store's vector leg through the numpy kernel
    is approximate (its 4,000 candidates are under a quarter of the scope). The store
    asks it for at least 100 (``FEWEST``), so the first hits never depend on ``top_k``:
    a recall of ``top_k`` 10 answers the first 10 of ``top_k`` 100, and an exact recall
    answers as the pure-Python kernel's exact one."""
    path = tmp_path / "m.db"
    rng = random.Random(5)
    words = [f"w{i}" for i in range(2000)]
    texts = [" ".join(rng.choices(words, k=10)) for _ in range(17_000)]
    with Memory(SqliteStore(path, vector_kernel="python"), HashEmbedder(64)) as memory:
        memory.remember_many([{"text": t, "scope": SCOPE} for t in texts])
    stores = {kernel: SqliteStore(path, vector_kernel=kernel) for kernel in ("python", "numpy")}
    memories = {kernel: Memory(store, HashEmbedder(64)) for kernel, store in stores.items()}
    try:
        numpy_memory = memories["numpy"]
        for query in [" ".join(rng.choices(words, k=4)) for _ in range(10)]:
            deep = numpy_memory.recall(query, [SCOPE], mode="vector", top_k=100)
            shallow = numpy_memory.recall(query, [SCOPE], mode="vector", top_k=10)
            assert [(h.memory.id, h.score) for h in shallow] == [
                (h.memory.id, h.score) for h in deep[:10]
            ]
            exact = [
                [
                    (h.memory.id, h.score)
                    for h in memory.recall(query, [SCOPE], mode="vector", top_k=10, exact=True)
                ]
                for memory in memories.values()
            ]
            assert exact[0] == exact[1] and len(exact[0]) == 10
    finally:
        for memory in memories.values():
            memory.close()


def test_a_cold_load_allocates_the_matrix_once_for_the_scopes_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store opening a file loads a scope's vectors into a matrix allocated once, for
    the scope's item count (read with its generation) and an eighth more; the writes
    that follow use that room, and only past it does the matrix grow (by half)."""
    path = tmp_path / "m.db"
    texts = [f"note {i} about tea number {i % 7}" for i in range(300)]
    with Memory(SqliteStore(path, vector_kernel="numpy"), HashEmbedder()) as memory:
        memory.remember_many([{"text": t, "scope": SCOPE} for t in texts])
    grown: list[int] = []
    grow = NumpyVectorIndex._grow

    def counted(index: NumpyVectorIndex, rows: int) -> None:
        grown.append(rows)
        grow(index, rows)

    monkeypatch.setattr(NumpyVectorIndex, "_grow", counted)
    with Memory(SqliteStore(path, vector_kernel="numpy"), HashEmbedder()) as memory:
        hits = memory.recall("tea number 3", [SCOPE], mode="vector", top_k=3)
        assert len(hits) == 3 and grown == [300 + 300 // 8]
        memory.remember_many([{"text": f"more tea {i}", "scope": SCOPE} for i in range(37)])
        memory.recall("tea number 3", [SCOPE], mode="vector", top_k=3)
        assert grown == [337]  # the room held them
        memory.remember("one past the room", SCOPE)
        assert memory.recall("one past the room", [SCOPE], mode="vector", top_k=1)
        assert grown == [337, 337 * 3 // 2]
