"""Checks of reads that are not searches: expiry, exact scopes and prefixes, content
lookups, listing items and scopes, stats, and a second store object on the same storage.
The searches (vectors, ranking, eligibility, BM25, repair scans, packed segments) are
``_search_checks``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from engramdb._base.types import Scope
from engramdb.store import (
    DeleteItem,
    FindContent,
    GetItems,
    ListItems,
    ListScopes,
    PatchItem,
    PutVector,
    RegisterSpace,
    ScopeCount,
    ScopeSet,
    SearchLexical,
    SearchVectors,
    Stats,
    UnreadableItems,
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
)

__all__ = ["CHECKS"]

CHECKS: list[StoreCheck] = []


@check(CHECKS)
async def check_find_content_answers_the_live_item_of_each_scope_and_text(
    t: StoreUnderTest,
) -> None:
    """``FindContent`` maps each (scope, text hash) to the live item of that scope with
    that text (the smallest id of several); another scope's item, an expired one and a
    text nobody holds are absent."""
    items = [
        record(2, "Sam likes tea"),
        record(1, "Sam likes tea"),
        record(3, "Sam likes tea", KIM),
        record(4, "gone soon", expires_at=later(minutes=1)),
    ]
    await store_items(t, *items)
    pairs = (
        (SAM, sha256("Sam likes tea")),
        (KIM, sha256("Sam likes tea")),
        (SAM, sha256("gone soon")),
        (SAM, sha256("nobody")),
        (("acme",), sha256("Sam likes tea")),
    )
    found = await t.one(FindContent(pairs, later(minutes=2)))
    got = {key: value.id for key, value in found.items()}
    expected = {pairs[0]: "r000001", pairs[1]: "r000003"}
    expect(got == expected, f"FindContent answered {got}, expected {expected}")
    expect(found[pairs[0]] == items[1], "FindContent's record differs from the stored one")


@check(CHECKS, "supports_ttl")
async def check_expiry_hides_an_item_from_its_moment_on(t: StoreUnderTest) -> None:
    """An item whose expires_at is not after now is invisible to every read."""
    when = later(minutes=5)
    temp = record(1, "temporary door code", expires_at=when)
    keep = record(2, "permanent door code policy")
    await store_items(t, temp, keep)
    selection = ScopeSet.of(SAM)

    lexical = t.capabilities.supports_lexical

    async def visible(now: Any) -> list[bool]:
        got, listed, scopes, stats, vector, *words = await t.batch(
            [
                GetItems((temp.id,), now),
                ListItems(selection, 10, now),
                ListScopes((), 10, now),
                Stats(SPACE.id, now),
                SearchVectors(selection, SPACE.id, unit((1, 1, 1, 1)), 10, now, exact=True),
                *([SearchLexical(selection, "door code", 10, now)] if lexical else []),
            ]
        )
        return [
            got[0] is not None,
            temp.id in [r.id for r in listed],
            scopes == [ScopeCount(SAM, 2)],
            (stats.items, stats.expired) == (2, 0),
            temp.id in ids_of(vector),
            *(temp.id in ids_of(result) for result in words),
        ]

    before = await visible(later(minutes=5, milliseconds=-1))
    expect(all(before), f"a live item was hidden: {before!r}")
    after = await visible(when)
    expect(not any(after), f"an item expired at now was still seen: {after!r}")


@check(CHECKS)
async def check_scopes_are_exact_unless_a_prefix_is_asked(t: StoreUnderTest) -> None:
    """An exact selection never returns a neighbour, a parent or a child scope's item;
    a prefix selects by whole parts (("a",) never selects ("ab",))."""
    scopes: list[Scope] = [("a",), ("a", "b"), ("ab",), ("a", "b", "c"), ("b",)]
    items = {scope: record(n, "the same text everywhere", scope) for n, scope in enumerate(scopes)}
    await store_items(t, *items.values())
    query = unit(tuple(b - 127.5 for b in bytes.fromhex(sha256("the same text everywhere"))[:4]))
    cases: list[tuple[ScopeSet, list[Scope]]] = [
        (ScopeSet.of(("a",)), [("a",)]),
        (ScopeSet.of(("a", "b")), [("a", "b")]),
        (ScopeSet(prefixes=(("a",),)), [("a",), ("a", "b"), ("a", "b", "c")]),
        (ScopeSet(prefixes=(("a", "b"),)), [("a", "b"), ("a", "b", "c")]),
        (ScopeSet(exact=(("ab",),), prefixes=(("a", "b", "c"),)), [("ab",), ("a", "b", "c")]),
    ]
    for selection, expected in cases:
        want = sorted(items[s].id for s in expected)
        legs: list[Any] = [
            ListItems(selection, 10, NOW),
            SearchVectors(selection, SPACE.id, query, 10, NOW),
        ]
        if t.capabilities.supports_lexical:
            legs.append(SearchLexical(selection, "text", 10, NOW))
        results = await t.batch(legs)
        got = [sorted(r.id for r in results[0])] + [sorted(ids_of(r)) for r in results[1:]]
        expect(all(ids == want for ids in got), f"{selection!r} selected {got!r}, not {want}")


@check(CHECKS)
async def check_list_items_is_newest_first_with_a_cursor_and_a_filter(t: StoreUnderTest) -> None:
    """ListItems pages newest first by (created_at, id); before= continues strictly
    after a live item of the selection; a filter narrows before the limit."""
    items = [
        record(n, f"note {n}", metadata={"even": n % 2 == 0}, at=later(seconds=n // 2))
        for n in range(7)
    ]
    await store_items(t, *items)
    now = later(minutes=1)
    newest = sorted(items, key=lambda r: (r.created_at, r.id), reverse=True)
    selection = ScopeSet.of(SAM)
    page = await t.one(ListItems(selection, 3, now))
    expect(page == newest[:3], f"the first page is {[r.id for r in page]}")
    rest = await t.one(ListItems(selection, 10, now, before=page[-1].id))
    expect(rest == newest[3:], f"the next page is {[r.id for r in rest]}")
    evens = await t.one(
        ListItems(selection, 2, now, filter=parse_filter({"metadata": {"even": True}}))
    )
    expect(evens == [r for r in newest if r.metadata["even"]][:2], f"filtered: {evens!r}")
    nowhere = await t.one(ListItems(selection, 10, now, before="not-an-id"))
    expect(nowhere == [], f"an unknown cursor listed {nowhere!r}")


@check(CHECKS)
async def check_list_items_continues_below_a_position(t: StoreUnderTest) -> None:
    """ListItems' ``below=(created_at, id)`` lists strictly older items, whether or not an
    item holds that position: the page after a forgotten last item (where ``before=``
    its id finds nothing), and a position no item of this store holds (another shard's),
    between two items of equal ``created_at``. With ``before`` both apply."""
    items = [record(n, f"note {n}", at=later(seconds=n // 2)) for n in range(7)]
    await store_items(t, *items)
    now = later(minutes=1)
    newest = sorted(items, key=lambda r: (r.created_at, r.id), reverse=True)
    selection = ScopeSet.of(SAM)
    last = newest[2]
    same = await t.one(ListItems(selection, 10, now, below=(last.created_at, last.id)))
    expect(same == newest[3:], f"below the third item: {[r.id for r in same]}")
    await t.batch([DeleteItem(last.id)])
    gone = await t.one(ListItems(selection, 10, now, before=last.id))
    expect(gone == [], f"before a forgotten id listed {[r.id for r in gone]}")
    rest = await t.one(ListItems(selection, 10, now, below=(last.created_at, last.id)))
    expect(rest == newest[3:], f"below a forgotten item: {[r.id for r in rest]}")
    a, b = newest[4], newest[3]  # created in the same second: ids decide
    expect(a.created_at == b.created_at and a.id < b.id, "the fixture's pair")
    between = (b.created_at, a.id + "0")  # above a, below b: no item holds it
    foreign = await t.one(ListItems(selection, 10, now, below=between))
    expect(foreign == newest[4:], f"below a foreign position: {[r.id for r in foreign]}")
    both = await t.one(
        ListItems(selection, 10, now, before=newest[5].id, below=(last.created_at, last.id))
    )
    expect(both == newest[6:], f"before and below: {[r.id for r in both]}")
    # A position's time counts to the millisecond, as every store keeps times: 0.4 ms
    # past b's time with an id below b's is b's millisecond, so b is not below it.
    rounded = (b.created_at + timedelta(microseconds=400), a.id + "0")
    kept = await t.one(ListItems(selection, 10, now, below=rounded))
    expect(kept == newest[4:], f"below a position within b's millisecond: {[r.id for r in kept]}")


@check(CHECKS)
async def check_unreadable_items_of_a_healthy_store_are_none(t: StoreUnderTest) -> None:
    """UnreadableItems answers ``[]`` for every selection of a store whose rows all
    decode (every item it was given): live, expired, in scopes and under prefixes. (A
    SQL store's own tests damage a row and find its id.)"""
    await store_items(
        t,
        record(1, "Sam is vegetarian"),
        record(2, "Kim plays", KIM),
        record(3, "gone", expires_at=later(seconds=1)),
    )
    for selection in (ScopeSet.of(SAM), ScopeSet.of(SAM, KIM), ScopeSet(prefixes=(("acme",),))):
        for now in (NOW, later(minutes=1)):
            found = await t.one(UnreadableItems(selection, now))
            expect(found == [], f"UnreadableItems({selection!r}) answered {found!r}, not []")


@check(CHECKS)
async def check_list_scopes_in_scope_order_with_counts_and_pages(t: StoreUnderTest) -> None:
    """ListScopes answers the scopes holding live items, part by part in order, with
    their live counts, under a whole-part prefix, after a cursor scope."""
    layout: dict[Scope, int] = {("a",): 1, ("a", "b"): 2, ("a b",): 1, ("ab",): 3, ("a", "x"): 1}
    items = [
        record(len(layout) * 10 + n + i * 100, f"{scope} {n}", scope)
        for i, (scope, count) in enumerate(layout.items())
        for n in range(count)
    ]
    gone = record(999, "expired", ("a", "c"), expires_at=later(seconds=1))
    await store_items(t, *items, gone)
    now = later(seconds=1)
    ordered = [ScopeCount(scope, layout[scope]) for scope in sorted(layout)]
    listed = await t.one(ListScopes((), 100, now))
    expect(listed == ordered, f"ListScopes answered {listed!r}, not {ordered!r}")
    first = await t.one(ListScopes((), 2, now))
    then = await t.one(ListScopes((), 100, now, after=first[-1].scope))
    expect(first + then == ordered, f"pages {first!r} then {then!r}")
    under = await t.one(ListScopes(("a",), 100, now))
    expect(
        [entry.scope for entry in under] == [("a",), ("a", "b"), ("a", "x")],
        f"under ('a',): {under!r}",
    )


@check(CHECKS)
async def check_stats_count_what_is_stored(t: StoreUnderTest) -> None:
    """Stats counts live and expired items, scopes, pending items and vectors of the
    space asked about, and lists every space."""
    other = SPACE.__class__("test", "other", 4)
    a, b = record(1, "one", SAM), record(2, "two", KIM, expires_at=later(seconds=1))
    c = record(3, "three", KIM)
    await store_items(t, a, b)
    await store_items(t, c, vectors=False)
    await t.batch([RegisterSpace(other, NOW)])
    stats = await stats_of(t, later(seconds=1))
    expect(
        (stats.items, stats.expired, stats.scopes, stats.pending, stats.vectors) == (2, 1, 2, 1, 2),
        f"Stats answered {stats!r}",
    )
    expect(set(stats.spaces) == {SPACE.id, other.id}, f"spaces {stats.spaces!r}")


@check(CHECKS, "another")
async def check_another_store_object_sees_committed_writes(t: StoreUnderTest) -> None:
    """A second store object on the same storage sees every committed write at its next
    batch, including a vector search after another object changed a text."""
    second = t.second()
    assert second is not None
    try:
        a = record(1, "first text")
        await store_items(t, a)
        selection = ScopeSet.of(SAM)
        query = unit(tuple(x - 127.5 for x in bytes.fromhex(sha256("second text"))[:4]))
        seen = await second.one(SearchVectors(selection, SPACE.id, query, 5, NOW))
        expect(ids_of(seen) == [a.id], f"the second object found {seen!r}")
        await t.batch(
            [
                PutVector(SPACE.id, sha256("second text"), vector_of("second text"), NOW),
                PatchItem(a.id, NOW, text="second text"),
            ]
        )
        again = await second.one(SearchVectors(selection, SPACE.id, query, 5, NOW))
        expect(
            again.hits
            and abs(again.hits[0].score - 1.0) < 1e-6
            and again.hits[0].record.text == "second text",
            f"the second object still scores the old text: {again!r}",
        )
        await t.batch([DeleteItem(a.id)])
        gone = await second.one(SearchVectors(selection, SPACE.id, query, 5, NOW))
        expect(gone.hits == (), f"the second object still finds a deleted item: {gone!r}")
    finally:
        await second.close()
