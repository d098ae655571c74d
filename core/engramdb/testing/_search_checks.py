"""Checks of searches: vectors stored and content-addressed, cosine and BM25 ranking,
ties, eligibility, the current revision, coverage, repair scans, packed segments, and a
deeper search that only appends. The other reads are ``_read_checks``."""

from __future__ import annotations

import math
import random
from itertools import pairwise
from typing import Any

from engramdb._base.types import EmbeddingSpace
from engramdb._lexical.bm25 import BM25Index
from engramdb.store import (
    DeleteItem,
    FindVectors,
    PackVectors,
    PatchItem,
    PendingTexts,
    PutItem,
    PutVector,
    RegisterSpace,
    RepairVectors,
    ScopeSet,
    SearchLexical,
    SearchVectors,
    TermStatistics,
    decode_f32,
    quantised,
)
from engramdb.store._filter import parse_filter
from engramdb.testing._checks import (
    KIM,
    SAM,
    StoreCheck,
    check,
    ids_of,
    stats_of,
    store_items,
    vector_of,
)
from engramdb.testing._harness import (
    NOW,
    SPACE,
    StoreUnderTest,
    expect,
    later,
    record,
    sha256,
    unit,
    unit_blob,
)

__all__ = ["CHECKS"]

CHECKS: list[StoreCheck] = []


@check(CHECKS)
async def check_a_vector_search_reports_its_coverage(t: StoreUnderTest) -> None:
    """A vector search reports ``(items with a vector in the space, items)`` of the
    selected scopes (expired items included, filters left out), and ``Stats`` the live
    items with a vector per space."""
    await store_items(
        t, record(1, "Sam is vegetarian"), record(2, "Sam plays"), record(3, "Kim", KIM)
    )
    await store_items(
        t,
        record(4, "pending"),
        record(5, "expired pending", expires_at=later(minutes=1)),
        vectors=False,
    )
    query = unit((1, 1, 1, 1))
    spec = parse_filter({"metadata": {"never": 1}})
    for scopes, filtered, expected in [
        (ScopeSet.of(SAM), None, (2, 4)),
        (ScopeSet.of(SAM, KIM), spec, (3, 5)),
        (ScopeSet.of(("nobody",)), None, (0, 0)),
    ]:
        op = SearchVectors(scopes, SPACE.id, query, 10, later(minutes=2), filter=filtered)
        result = await t.one(op)
        expect(result.coverage == expected, f"coverage {result.coverage}, expected {expected}")
    stats = await stats_of(t, later(minutes=2))
    expect(stats.embedded == ((SPACE.id, 3),), f"Stats.embedded is {stats.embedded}")


@check(CHECKS)
async def check_vectors_are_content_addressed_and_collected(t: StoreUnderTest) -> None:
    """Identical texts share one vector per space; PendingTexts lists each text without
    a vector once; a vector goes with the last item using its text."""
    one, two = record(1, "shared text", SAM), record(2, "shared text", KIM)
    lonely = record(3, "no vector yet")
    await store_items(t, one, two)
    await store_items(t, lonely, vectors=False)
    stats = await stats_of(t)
    expect((stats.vectors, stats.pending) == (1, 1), f"after the puts: {stats!r}")
    pending = await t.one(PendingTexts(SPACE.id, 10))
    expect(pending == [(lonely.content_sha256, lonely.text)], f"pending: {pending!r}")
    await t.batch([DeleteItem(one.id)])
    expect((await stats_of(t)).vectors == 1, "the vector went while an item still used it")
    await t.batch([DeleteItem(two.id)])
    expect((await stats_of(t)).vectors == 0, "the vector outlived its last item")
    found = await t.one(FindVectors(SPACE.id, (one.content_sha256,)))
    expect(found == frozenset(), f"FindVectors still finds {found!r}")


@check(CHECKS)
async def check_put_vector_keeps_the_first_unless_replace(t: StoreUnderTest) -> None:
    """A second PutVector of a hash keeps the first vector; replace=True swaps it and
    searches score the new one."""
    a = record(1, "some text")
    await store_items(t, a)
    query = unit((1, 0, 0, 0))
    other = unit_blob((1, 0, 0, 0))

    async def score() -> float:
        result = await t.one(SearchVectors(ScopeSet.of(SAM), SPACE.id, query, 1, NOW, exact=True))
        return float(result.hits[0].score)

    first = await score()
    await t.batch([PutVector(SPACE.id, a.content_sha256, other, later(seconds=1))])
    expect(abs(await score() - first) < 1e-6, "a PutVector without replace changed the vector")
    await t.batch([PutVector(SPACE.id, a.content_sha256, other, later(seconds=1), replace=True)])
    expect(abs(await score() - 1.0) < 1e-6, "replace=True did not replace the vector")


@check(CHECKS)
async def check_search_vectors_scores_cosine_best_first(t: StoreUnderTest) -> None:
    """SearchVectors answers the cosine similarity of each stored vector to the query,
    best first, equal scores newest first (items created together: by id, descending),
    at most k, with the vector's time in the space."""
    vectors = {1: (1, 0, 0, 0), 2: (1, 1, 0, 0), 3: (0, 1, 0, 0), 4: (1, 1, 0, 0), 5: (-1, 0, 0, 0)}
    items = {n: record(n, f"vector {n}") for n in vectors}
    ops: list[Any] = [RegisterSpace(SPACE, NOW)]
    for n, values in vectors.items():
        ops.append(
            PutVector(SPACE.id, items[n].content_sha256, unit_blob(values), later(seconds=n))
        )
        ops.append(PutItem(items[n], NOW))
    await t.batch(ops)
    for exact in (True, False):
        result = await t.one(
            SearchVectors(ScopeSet.of(SAM), SPACE.id, unit((1, 0.2, 0, 0)), 4, NOW, exact=exact)
        )
        expect(ids_of(result) == ["r000001", "r000004", "r000002", "r000003"], f"order {result!r}")
        expected = [0.98058, 0.83205, 0.83205, 0.19612]
        got = [hit.score for hit in result.hits]
        expect(all(abs(a - b) < 1e-4 for a, b in zip(got, expected, strict=True)), f"{got}")
        expect(result.hits[2].embedded_at == later(seconds=2), f"{result.hits[2]!r}")


@check(CHECKS)
async def check_ties_come_back_newest_first(t: StoreUnderTest) -> None:
    """Equal scores come back newest first: by created_at, then id, both descending, in
    both legs and across the selected scopes; a search cut to k keeps the newest of the
    tied items, and an item created earlier than one with a smaller id (as an import or
    a restore makes it) comes after it."""
    text = "green tea every morning"
    tied = [
        record(1, text, at=later(seconds=-1)),
        record(2, text, at=later(seconds=-3)),  # a greater id, created earlier
        record(3, text, KIM, at=later(seconds=-2)),
        record(4, text, at=later(seconds=-2)),
        record(5, text, KIM, at=later(seconds=-1)),
    ]
    weaker = record(6, "green tea and a slice of lemon cake", KIM, at=later(seconds=-9))
    await store_items(t, *tied, weaker)
    newest_first = ["r000005", "r000001", "r000004", "r000003", "r000002", weaker.id]
    selection = ScopeSet((), (SAM[:2],))
    query = unit(decode_f32(vector_of(text)))
    for k in (6, 4, 1):
        legs: list[Any] = [
            SearchVectors(selection, SPACE.id, query, k, NOW, exact=exact)
            for exact in (True, False)
        ]
        if t.capabilities.supports_lexical:
            legs.append(SearchLexical(selection, "green tea", k, NOW))
        for leg, result in zip(legs, await t.batch(legs), strict=True):
            scores = [hit.score for hit in result.hits]
            expect(
                ids_of(result) == newest_first[:k],
                f"{type(leg).__name__} k={k} answered {ids_of(result)} (scores {scores}), "
                f"expected {newest_first[:k]}: equal scores newest first, by created_at "
                "then id",
            )
    # One more, written after the searches (a store that caches its index keeps up).
    await store_items(t, record(7, text, at=later(seconds=-1)))
    legs = [
        SearchVectors(selection, SPACE.id, query, 1, NOW, exact=exact) for exact in (True, False)
    ]
    if t.capabilities.supports_lexical:
        legs.append(SearchLexical(selection, "green tea", 1, NOW))
    for result in await t.batch(legs):
        expect(ids_of(result) == ["r000007"], f"after a write, k=1 answered {ids_of(result)}")


@check(CHECKS)
async def check_eligibility_is_decided_before_ranking(t: StoreUnderTest) -> None:
    """With k=1, a filter or an expiry that excludes the best match yields the best
    eligible one, in both legs; it never yields nothing or an ineligible item."""
    best = record(1, "green tea green tea", metadata={"src": "email"}, expires_at=later(days=1))
    weaker = record(2, "green tea and cake", metadata={"src": "chat"})
    ops: list[Any] = [RegisterSpace(SPACE, NOW)]
    for r, values in ((best, (1, 0, 0, 0)), (weaker, (1, 1, 1, 0))):
        ops += [PutVector(SPACE.id, r.content_sha256, unit_blob(values), NOW), PutItem(r, NOW)]
    await t.batch(ops)
    chat = parse_filter({"metadata": {"src": "chat"}})
    query = unit((1, 0, 0, 0))
    selection = ScopeSet.of(SAM)
    cases: list[tuple[Any, Any]] = [(NOW, chat), (later(days=1), None)]
    for now, spec in cases:
        legs: list[Any] = [SearchVectors(selection, SPACE.id, query, 1, now, filter=spec)]
        if t.capabilities.supports_lexical:
            legs.append(SearchLexical(selection, "green tea", 1, now, filter=spec))
        for result in await t.batch(legs):
            expect(ids_of(result) == [weaker.id], f"k=1 answered {ids_of(result)} ({now}, {spec})")


@check(CHECKS, "supports_lexical")
async def check_search_lexical_ranks_by_bm25(t: StoreUnderTest) -> None:
    """SearchLexical finds items sharing a term with the query (stemmed, case- and
    accent-folded), best BM25 first, equal scores newest first, with the vector time
    when asked."""
    items = [
        record(1, "The quick brown fox jumps over the lazy dog"),
        record(2, "A fox and a dog became friends"),
        record(3, "Café crème and croissants"),
        record(4, "Running shoes"),
    ]
    await store_items(t, *items[:3])
    await store_items(t, items[3], vectors=False)
    selection = ScopeSet.of(SAM)
    fox = await t.one(SearchLexical(selection, "FOXES dog", 10, NOW, space_id=SPACE.id))
    expect(ids_of(fox) == ["r000002", "r000001"], f"'FOXES dog' found {ids_of(fox)}")
    expect(fox.hits[0].score > fox.hits[1].score > 0, f"scores {fox!r}")
    expect(fox.hits[0].embedded_at == NOW, f"embedded_at {fox.hits[0]!r}")
    cafe = await t.one(SearchLexical(selection, "cafe creme", 10, NOW))
    expect(ids_of(cafe) == ["r000003"], f"'cafe creme' found {ids_of(cafe)}")
    run = await t.one(SearchLexical(selection, "run", 10, NOW, space_id=SPACE.id))
    expect(ids_of(run) == ["r000004"] and run.hits[0].embedded_at is None, f"'run': {run!r}")
    nothing = await t.one(SearchLexical(selection, "!!! ???", 10, NOW))
    expect(nothing.hits == (), f"a query without terms found {nothing!r}")


@check(CHECKS, "supports_lexical")
async def check_bm25_statistics_are_those_of_the_searched_scopes(t: StoreUnderTest) -> None:
    """BM25's statistics (how many items, how many hold each term, their mean length)
    are those of the scopes a search selects, expired items included, whatever the
    filter: the scores equal BM25 over those scopes' texts alone, and writing to another
    scope changes none of them."""
    sam = [
        record(1, "Sam paints the sunrise at the lake", SAM),
        record(2, "Sam plays the cello", SAM),
        record(3, "a sunrise hike", SAM, expires_at=later(seconds=1)),
        record(4, "tea", SAM),
    ]
    await store_items(t, *sam)
    selection = ScopeSet.of(SAM)
    query = SearchLexical(selection, "sunrise lake", 10, later(seconds=2))
    before = await t.one(query)
    reference = BM25Index()
    for item in sam:
        reference.add(item.id, item.text)
    expected = [(doc, score) for doc, score in reference.search("sunrise lake") if doc != "r000003"]
    got = [(hit.record.id, hit.score) for hit in before.hits]
    expect(
        [doc for doc, _ in got] == [doc for doc, _ in expected]
        and all(
            math.isclose(a, b, rel_tol=1e-9) for (_, a), (_, b) in zip(got, expected, strict=False)
        ),
        f"scores {got} are not BM25 over Sam's scope alone {expected}",
    )
    # The statistics the scores were computed with: 4 items, "sunrise" in 2 (the
    # expired one counts), "lake" in 1; an unknown term in none; no statistics for a
    # search that finds nothing.
    expect(
        before.statistics == TermStatistics(4, (2, 1)),
        f"statistics {before.statistics!r}, not 4 items with the terms in 2 and 1",
    )
    unknown = await t.one(SearchLexical(selection, "zebra lake sunrise", 10, later(seconds=2)))
    expect(
        unknown.statistics == TermStatistics(4, (0, 1, 2)),
        f"statistics {unknown.statistics!r}, not (4, (0, 1, 2))",
    )
    none = await t.one(SearchLexical(selection, "zebra", 10, later(seconds=2)))
    expect(none.statistics is None, f"a search that found nothing has {none.statistics!r}")
    others = [record(10 + n, f"sunrise sunrise lake {n}", KIM) for n in range(20)]
    await store_items(t, *others)
    after = await t.one(query)
    expect(
        [(hit.record.id, hit.score) for hit in after.hits] == got,
        f"items of another scope changed the scores: {got} -> {after!r}",
    )
    expect(after.statistics == before.statistics, f"another scope moved {after.statistics!r}")


@check(CHECKS)
async def check_searches_answer_the_current_revision(t: StoreUnderTest) -> None:
    """After a text patch, searches score the new text's vector and answer the new
    record; after a metadata patch they answer the same ids and scores with the new
    metadata."""
    a = record(1, "the cat sleeps on the red sofa")
    b = record(2, "quarterly revenue grew")
    await store_items(t, a, b)
    selection = ScopeSet.of(SAM)
    query = unit(tuple(x - 127.5 for x in bytes.fromhex(sha256(b.text))[:4]))
    before = await t.one(SearchVectors(selection, SPACE.id, query, 10, NOW))
    await t.batch([PatchItem(a.id, NOW, metadata={"seen": True})])
    after = await t.one(SearchVectors(selection, SPACE.id, query, 10, NOW))
    expect(
        [(h.record.id, round(h.score, 9)) for h in after.hits]
        == [(h.record.id, round(h.score, 9)) for h in before.hits],
        f"a metadata patch changed the scores: {before!r} -> {after!r}",
    )
    expect(
        next(h for h in after.hits if h.record.id == a.id).record.metadata == {"seen": True},
        "a search answered the old revision's metadata",
    )
    await t.batch(
        [
            PutVector(SPACE.id, b.content_sha256, vector_of(b.text), NOW),
            PatchItem(a.id, NOW, text=b.text),
        ]
    )
    result = await t.one(SearchVectors(selection, SPACE.id, query, 10, NOW))
    hit = next(h for h in result.hits if h.record.id == a.id)
    expect(abs(hit.score - 1.0) < 1e-6, f"the patched text scored {hit.score}")
    expect(hit.record.text == b.text and hit.record.revision == 3, f"record {hit.record!r}")
    if t.capabilities.supports_lexical:
        lexical = await t.one(SearchLexical(selection, "sofa", 10, NOW))
        expect(lexical.hits == (), f"the old text is still found lexically: {lexical!r}")


@check(CHECKS)
async def check_repair_vectors_pages_through_a_space(t: StoreUnderTest) -> None:
    """RepairVectors examines a space's vectors in hash order, ``limit`` at a time: sound
    vectors are never reported, and the scan ends with last=None."""
    items = [record(n, f"text {n}") for n in range(5)]
    await store_items(t, *items)
    seen: list[str] = []
    after = ""
    for _ in range(10):
        repair = await t.one(RepairVectors(SPACE.id, 2, after))
        expect(repair.corrupt == (), f"sound vectors reported corrupt: {repair!r}")
        if repair.last is None:
            break
        seen.append(repair.last)
        after = repair.last
    hashes = sorted(r.content_sha256 for r in items)
    expect(seen == [hashes[1], hashes[3]], f"the scan stopped at {seen}, hashes {hashes}")


@check(CHECKS, "another")
async def check_packed_vectors_change_no_answer(t: StoreUnderTest) -> None:
    """``PackVectors`` (where the store's op table holds it) answers a count of vectors
    packed, at most the scope's, and changes no answer: a vector search from the same
    object, and from a second object (a cold cache, which loads the packed segments),
    finds what it found before; a write to the packed scope afterwards (a forget, a new
    item) is seen by a fresh object too."""
    if PackVectors not in getattr(t.store, "OPS", ()):
        return
    texts = [f"packed text {i}" for i in range(12)]
    records = [record(i + 1, text) for i, text in enumerate(texts)]
    await store_items(t, *records)
    selection = ScopeSet.of(SAM)
    query = unit(tuple(x - 127.5 for x in bytes.fromhex(sha256(texts[3]))[:4]))
    search = SearchVectors(selection, SPACE.id, query, 5, NOW)
    before = await t.one(search)
    packed = await t.one(PackVectors(SPACE.id, min_vectors=1))
    expect(
        isinstance(packed, int) and 0 <= packed <= len(records), f"PackVectors answered {packed}"
    )
    expect(await t.one(search) == before, "a search changed after PackVectors")
    expect(await t.one(PackVectors(SPACE.id, min_vectors=1)) == 0, "packed a current scope again")
    for step in range(2):
        second = t.second()
        assert second is not None
        try:
            seen = await second.one(search)
        finally:
            await second.close()
        expect(seen == before, f"a second object (a cold load) found {seen!r}, not {before!r}")
        if step == 0:  # a write to the packed scope; then pack and look again
            await t.batch([DeleteItem(before.hits[0].record.id)])
            before = await t.one(search)
            await t.one(PackVectors(SPACE.id, min_vectors=1))


@check(CHECKS)
async def check_a_deeper_search_only_appends(t: StoreUnderTest) -> None:
    """A search asked for more begins with the answer for fewer: the first 10 hits of
    k=100 and k=1000 are those of k=10, the first 100 of k=1000 those of k=100 (ids and
    scores), in both legs, with many exact ties at each cut; every score is on the
    ranking's grid of 2**-30 (``quantised``), by which every store ranks alike. (The
    vector search without ``exact`` is asked from k=100, the least a recall asks.)

    Also where the vector search is approximate, as a store's leg is over more vectors
    than it scores exactly (400 items of 64 random dimensions in another scope): k=10,
    100 and 400. A leg asks its index for a head of 100 whatever k and only extends it
    (``engramdb.driver.vector_searches_for``, ``extend_vector_head``), so a vector the
    head missed above its 100th hit stays missed: k=400 answers most of the 400."""
    items = [record(n, f"tea {'garden ' * (n % 5)}note {n % 7}") for n in range(1, 151)]
    await store_items(t, *items)
    selection = ScopeSet.of(SAM)
    query = unit((0.3, -0.2, 0.9, 0.1))
    spread = EmbeddingSpace("test", "spread", 64)
    rng = random.Random(64)
    many = [record(n, f"spread note {n}", KIM) for n in range(1000, 1400)]
    await t.batch(
        [
            RegisterSpace(spread, NOW),
            *(
                PutVector(spread.id, r.content_sha256, unit_blob(_gaussian(rng, 64)), NOW)
                for r in many
            ),
            *(PutItem(r, NOW) for r in many),
        ]
    )
    spread_queries = [unit(_gaussian(rng, 64)) for _ in range(5)]
    # (name, the ks asked in turn, the search for k, the fewest hits the deepest holds)
    searches: list[tuple[str, tuple[int, ...], Any, int]] = [
        (
            "exact",
            (10, 100, 1000),
            lambda k: SearchVectors(selection, SPACE.id, query, k, NOW, exact=True),
            150,
        ),
        (
            "approximate",
            (100, 1000),
            lambda k: SearchVectors(selection, SPACE.id, query, k, NOW),
            150,
        ),
        *(
            (
                f"approximate, 400 x 64, query {n}",
                (10, 100, 400),
                lambda k, q=q: SearchVectors(ScopeSet.of(KIM), spread.id, q, k, NOW),
                300,
            )
            for n, q in enumerate(spread_queries)
        ),
    ]
    if t.capabilities.supports_lexical:
        searches.append(
            (
                "lexical",
                (10, 100, 1000),
                lambda k: SearchLexical(selection, "tea garden", k, NOW),
                150,
            )
        )
    for name, ks, search, fewest in searches:
        answers = []
        for k in ks:
            result = await t.one(search(k))
            answers.append([(hit.record.id, hit.score) for hit in result.hits])
        for shallow, deep in pairwise(answers):
            expect(
                deep[: len(shallow)] == shallow,
                f"{name}: a deeper search does not begin with the shallower one: "
                f"{deep[: len(shallow)]} != {shallow}",
            )
        off = [score for _, score in answers[-1] if score != quantised(score)]
        expect(not off, f"{name}: scores off the grid of 2**-30: {off[:3]}")
        expect(
            len(answers[-1]) >= fewest,
            f"{name}: k={ks[-1]} answered {len(answers[-1])} hits, fewer than {fewest}",
        )


def _gaussian(rng: random.Random, d: int) -> list[float]:
    return [rng.gauss(0.0, 1.0) for _ in range(d)]
