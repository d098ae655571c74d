"""One memory budget for the vector indexes of many scopes (``SqliteVectorCache``'s
``budget``, a Durable Object's ``VECTOR_CACHE_MB``): what an index says it holds, what
it can drop without changing an answer, and the order in which a cache drops it."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from engramdb._vectors import rules
from engramdb._vectors.index import VectorIndex, unit_f32
from engramdb.store._sqlite.cache import CacheEntry, SqliteVectorCache


def _rows(d: int, n: int, seed: int = 1) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    return [
        (f"01j{seed:04d}{i:019d}", unit_f32([rng.gauss(0, 1) for _ in range(d)])) for i in range(n)
    ]


def _queries(d: int, n: int = 12) -> list[list[float]]:
    rng = random.Random(7)
    return [[rng.gauss(0, 1) for _ in range(d)] for _ in range(n)]


@pytest.mark.parametrize("d", [384, 768])
@pytest.mark.parametrize("decoded", [False, True], ids=["floats", "decoded"])
def test_held_bytes_is_within_a_tenth_of_what_tracemalloc_counts(
    d: int, decoded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate a budget adds up (counts times this interpreter's object sizes, no
    walk) tracks the bytes the index really allocates, part by part as parts go; with
    ``decoded`` the index keeps Pyodide's decoded copies (forced here on CPython)."""
    monkeypatch.setattr(rules, "CHEAP_EXACT", not decoded)
    rows, queries = _rows(d, 600), _queries(d)
    warm = VectorIndex(d)  # the module's one-time tables, untraced
    warm.add_many(_rows(d, 1500, seed=2))
    warm.search(queries[0], 10)
    tracemalloc.start()
    try:
        index = VectorIndex(d)
        index.add_many((key.encode().decode(), blob) for key, blob in rows)  # keys made here
        for q in queries:
            index.search(q, 10)
        measured = [tracemalloc.get_traced_memory()[0]]
        estimated = [sum(index.held_bytes())]
        for drop in (index.drop_decoded, index.drop_nibbles, index.drop_floats):
            drop()
            measured.append(tracemalloc.get_traced_memory()[0])
            estimated.append(sum(index.held_bytes()))
    finally:
        tracemalloc.stop()
    assert index.held_bytes().floats == 0 and index.held_bytes().nibbles == 0
    for what, seen in zip(estimated, measured, strict=True):
        assert 0.9 * seen <= what <= 1.1 * seen, (estimated, measured)


def test_dropping_an_index_cache_changes_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoded, 4-bit and float32 copies are caches: after each drop the same queries
    give the same (id, similarity) lists; without floats through shortlist and rescore,
    as a store that reads the rows does."""
    monkeypatch.setattr(rules, "CHEAP_EXACT", False)  # keep decoded copies, as Pyodide
    d, rows = 64, _rows(64, 1500)
    blobs = dict(rows)
    index = VectorIndex(d)
    index.add_many(rows)
    queries = _queries(d)
    before = [index.search(q, 10) for q in queries]
    index.drop_decoded()
    assert [index.search(q, 10) for q in queries] == before
    index.drop_nibbles()
    assert [index.search(q, 10) for q in queries] == before
    index.drop_floats()
    assert not index.keeps_floats
    after = [
        index.rescore(q, 10, [(key, blobs[key]) for key in index.shortlist(q, 10)])[0]
        for q in queries
    ]
    assert after == before


def test_held_bytes_follows_removals_and_replacements() -> None:
    """Removing a vector gives back its share (its built 4-bit copy included), replacing
    one keeps the count, so a long-lived index's estimate does not drift."""
    d = 128
    index = VectorIndex(d)
    rows = _rows(d, 1200)
    index.add_many(rows)
    for q in _queries(d, 4):
        index.search(q, 10)
    full = index.held_bytes()
    assert full.nibbles > 0
    for key, _ in rows[:600]:
        index.remove(key)
    index.add_many(rows[:600])  # back, without 4-bit copies
    again = index.held_bytes()
    assert again.codes == full.codes and again.floats == full.floats
    assert again.nibbles <= full.nibbles
    index.add_many(_rows(d, 1200))  # every vector replaced by itself
    assert index.held_bytes().codes == full.codes


def _entry(cache: SqliteVectorCache, d: int, n: int, seed: int) -> CacheEntry:
    entry = cache.new_entry(d, 1)
    entry.add_rows([(key, blob, None, i) for i, (key, blob) in enumerate(_rows(d, n, seed))])
    return entry


def test_a_cache_over_budget_drops_caches_before_indexes_least_recent_first() -> None:
    """Over its budget a cache frees what is cheapest to rebuild first, in every entry,
    least recently used first: floats go before any whole entry does, an entry searched
    last keeps its floats longest, and an entry named in ``keep`` is never dropped."""
    d, n = 128, 400
    probe = _entry(SqliteVectorCache(), d, n, 1)
    one = probe.held()
    probe.index.drop_floats()
    lean = probe.held()  # codes only: the codes and each vector's CRC-32
    budget = 4 * lean.codes + 2 * one.floats + 1000  # every entry's codes, two's floats
    cache = SqliteVectorCache(budget=budget)
    for seed in range(4):
        cache.install(f"s{seed}", "space", _entry(cache, d, n, seed))
    q = _queries(d, 1)[0]
    cache.search("s0", "space", q, 10, exact=False, allowed=None)  # s0: the most recent
    assert cache.held() > budget
    cache.fit()
    assert cache.held() <= budget
    floats = {key: cache.entry(key, "space").index.keeps_floats for key in ("s0", "s1", "s2", "s3")}
    assert floats == {"s0": True, "s1": False, "s2": False, "s3": True}  # s1, s2 least recent
    assert cache.evictions == 0
    small = SqliteVectorCache(budget=2 * lean.codes)  # two entries' codes only
    for seed in range(4):
        small.install(f"s{seed}", "space", _entry(small, d, n, seed))
    small.fit(keep={("s0", "space")})  # s0 the least recent, but in use
    assert [key for key, _ in small.cached()] == ["s0", "s3"]
    assert small.evictions == 2 and small.held() <= 2 * lean.codes


def test_a_cache_takes_down_what_changed_entries_hold_before_it_fits() -> None:
    """A cache adds up what each entry held when it was installed or searched; rows a
    write added to a cached entry count once the write names the entry (``changed``),
    and then push the others out."""
    d = 64
    probe = _entry(SqliteVectorCache(), d, 200, 1)
    cache = SqliteVectorCache(budget=3 * sum(probe.held()))
    for seed in range(3):
        cache.install(f"s{seed}", "space", _entry(cache, d, 200, seed))
    grown = cache.entry("s2", "space")
    assert grown is not None
    grown.add_rows([(key, blob, None, 0) for key, blob in _rows(d, 400, seed=9)])
    cache.fit()
    assert cache.evictions == 0 and all(
        cache.entry(f"s{s}", "space").index.keeps_floats for s in range(3)
    )
    cache.fit(changed=[("s2", "space")])
    assert cache.held() <= 3 * sum(probe.held())
    assert not cache.entry("s0", "space").index.keeps_floats  # the least recent first


def test_an_index_whose_floats_exceed_the_budget_never_keeps_them() -> None:
    """A cache with a budget builds its entries to keep no float32 copies past what the
    budget holds of them (``floats_up_to`` at most budget / 4d), and a load announced
    as larger than that (``reserve``) builds none at all."""
    d = 64
    cache = SqliteVectorCache(budget=4 * d * 100)
    entry = _entry(cache, d, 100, 1)
    assert entry.index.keeps_floats  # 100 vectors' floats: within the budget
    entry.add_rows([(key, blob, None, 0) for key, blob in _rows(d, 1, seed=2)])
    assert not entry.index.keeps_floats
    announced = cache.new_entry(d, 1)
    announced.reserve(101)
    assert not announced.index.keeps_floats and announced.held().floats == 0
    unbounded = SqliteVectorCache(floats_up_to=100).new_entry(d, 1)
    unbounded.reserve(100)
    assert unbounded.index.keeps_floats


def test_a_cache_without_a_budget_keeps_everything() -> None:
    cache = SqliteVectorCache()
    for seed in range(3):
        cache.install(f"s{seed}", "space", _entry(cache, 64, 200, seed))
    cache.fit()
    assert len(cache) == 3 and cache.evictions == 0
    assert all(cache.entry(f"s{s}", "space").index.keeps_floats for s in range(3))


@pytest.mark.parametrize("budget", [-1, -1.5, "48MB", True])
def test_a_budget_must_be_a_number_of_bytes(budget: object) -> None:
    with pytest.raises(ValueError, match=f"budget={budget!r}"):
        SqliteVectorCache(budget=budget)  # type: ignore[arg-type]
