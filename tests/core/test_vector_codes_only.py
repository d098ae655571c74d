"""A ``VectorIndex`` past ``floats_up_to`` keeps only codes: its shortlist and rescore
give what a search of an index that keeps its floats gives, hit for hit."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Sequence

import pytest

from engramdb._base.errors import ValidationError
from engramdb._vectors.codec import encode_f32
from engramdb._vectors.index import VectorIndex, normalize


def _blob(rng: random.Random, d: int, centre: Sequence[float] | None = None) -> bytes:
    v = [rng.gauss(0.0, 1.0) for _ in range(d)]
    if centre is not None:  # clustered, as embeddings are
        v = [c + 0.4 * x for c, x in zip(centre, v, strict=True)]
    return encode_f32(normalize(v))


def _both(d: int, limit: int) -> tuple[VectorIndex, VectorIndex]:
    return VectorIndex(d), VectorIndex(d, floats_up_to=limit)


def _search_codes(
    index: VectorIndex, blobs: dict[str, bytes], query: list[float], k: int, **options: object
) -> list[tuple[str, float]]:
    """A search of a codes-only index as a store runs it: read the shortlist's rows."""
    shortlisted = index.shortlist(query, k, **options)  # type: ignore[arg-type]
    hits, bad = index.rescore(query, k, [(key, blobs[key]) for key in shortlisted])
    assert bad == {}
    return hits


@pytest.mark.parametrize(("d", "n"), [(16, 300), (64, 2500), (384, 1500), (768, 1200)])
def test_a_codes_only_index_answers_as_one_that_keeps_its_floats(d: int, n: int) -> None:
    """Across adds (crossing the limit), replacements and removals, every search (plain,
    exact, filtered, a small k and a large one) finds the same hits with the same
    similarities, bit for bit."""
    rng = random.Random(d * n)
    centres = [[rng.gauss(0.0, 1.0) for _ in range(d)] for _ in range(8)]
    floats, codes = _both(d, limit=n // 3)
    blobs: dict[str, bytes] = {}
    for i in range(n):
        key = f"m{i:05d}"
        blobs[key] = _blob(rng, d, centres[i % 8])
    pairs = list(blobs.items())
    for start in range(0, n, 97):  # in batches: the limit is crossed inside one
        floats.add_many(pairs[start : start + 97])
        codes.add_many(pairs[start : start + 97])
    assert floats.keeps_floats and not codes.keeps_floats
    for i in range(0, n, 7):  # replace some, remove others
        key = f"m{i:05d}"
        if i % 2:
            blobs[key] = _blob(rng, d, centres[(i + 1) % 8])
            floats.add(key, blobs[key])
            codes.add(key, blobs[key])
        else:
            del blobs[key]
            assert floats.remove(key) and codes.remove(key)
    evens = {key for key in blobs if int(key[1:]) % 2 == 0}
    for _ in range(6):
        query = [rng.gauss(0.0, 1.0) for _ in range(d)]
        for k, options in [(10, {}), (100, {}), (10, {"exact": True}), (20, {"allowed": evens})]:
            expected = floats.search(query, k, **options)  # type: ignore[arg-type]
            assert _search_codes(codes, blobs, query, k, **options) == expected


def test_the_floats_are_dropped_once_past_the_limit_and_memory_shrinks() -> None:
    """At d=768 the float32 copies are 3 KiB of the about 4 KiB a vector costs: past the
    limit an index of 2,000 vectors takes under half the memory of one that keeps them."""
    rng = random.Random(5)
    d, n = 768, 2000
    pairs = [(f"m{i:05d}", _blob(rng, d)) for i in range(n)]
    sizes = []
    for limit in (None, 100):
        tracemalloc.start()
        index = VectorIndex(d, floats_up_to=limit)
        index.add_many(pairs[:50])
        assert index.keeps_floats
        index.add_many(pairs[50:])
        assert index.keeps_floats is (limit is None)
        sizes.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
        del index
    assert sizes[1] < 0.5 * sizes[0], sizes


def test_search_on_a_codes_only_index_names_the_way_to_search_it() -> None:
    rng = random.Random(1)
    index = VectorIndex(8, floats_up_to=0)
    index.add("a", _blob(rng, 8))
    with pytest.raises(ValueError, match=r"floats_up_to=0.*shortlist\(\).*rescore\(\)"):
        index.search([1.0] * 8, 1)


def test_rescore_reports_a_blob_that_is_not_the_indexed_vector_and_ignores_unknown_keys() -> None:
    """A row damaged after it was loaded (other bytes, another length) is left out and
    reported; a key the index does not hold is no candidate."""
    rng = random.Random(2)
    d = 16
    for limit in (None, 0):
        index = VectorIndex(d, floats_up_to=limit)
        good, other = _blob(rng, d), _blob(rng, d)
        index.add_many([("a", good), ("b", other), ("c", _blob(rng, d))])
        hits, bad = index.rescore(
            list(range(1, d + 1)),
            3,
            [("a", good), ("b", good), ("c", b"\0" * 8), ("zz", other)],
        )
        assert [key for key, _ in hits] == ["a"]
        assert sorted(bad) == ["b", "c"]
        assert all("reindex()" in why for why in bad.values())


@pytest.mark.parametrize("limit", [-1, 1.5, True, "10"])
def test_floats_up_to_must_be_none_or_a_count(limit: object) -> None:
    with pytest.raises(ValidationError, match=f"floats_up_to={limit!r}"):
        VectorIndex(8, floats_up_to=limit)  # type: ignore[arg-type]
