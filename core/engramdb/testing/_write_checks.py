"""Checks of writes: results in op order, atomic batches, narrow conditional writes,
revisions and history, deletes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engramdb._base.errors import ConflictError, NotFoundError, ValidationError
from engramdb._base.types import EmbeddingSpace, MemoryRecord, Scope
from engramdb.store import (
    DeleteItem,
    DeleteItems,
    DropSpace,
    FindVectors,
    GetItems,
    History,
    ListItems,
    ListScopes,
    PatchItem,
    PendingTexts,
    PutItem,
    PutVector,
    RegisterSpace,
    RepairVectors,
    ScopeCount,
    ScopeSet,
    SearchLexical,
    SearchResult,
    SearchVectors,
    Stats,
    StoredItem,
    VectorRepair,
)
from engramdb.store._filter import parse_filter
from engramdb.testing._checks import (
    KIM,
    SAM,
    StoreCheck,
    check,
    ids_of,
    record_of,
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
    raises,
    record,
    sha256,
    unit,
)

__all__ = ["CHECKS"]

CHECKS: list[StoreCheck] = []


# -- every op, results in op order -----------------------------------------------------


@check(CHECKS)
async def check_drop_space_removes_its_vectors_and_registration(t: StoreUnderTest) -> None:
    """``DropSpace`` deletes every vector of one space and its registration, answers how
    many vectors went, and leaves the items (pending in that space) and other spaces."""
    other = EmbeddingSpace("other", "model", 4)
    a, b = record(1, "Sam is vegetarian"), record(2, "Sam plays the cello")
    await store_items(t, a, b)
    await t.batch(
        [RegisterSpace(other, NOW), PutVector(other.id, a.content_sha256, vector_of("x"), NOW)]
    )
    expect(await t.one(DropSpace(SPACE.id)) == 2, "DropSpace did not answer 2 vectors")
    stats = await stats_of(t)
    expect(stats.spaces == (other.id,), f"spaces after the drop: {stats.spaces}")
    expect((stats.items, stats.pending) == (2, 2), f"items after the drop: {stats}")
    found = await t.one(FindVectors(other.id, (a.content_sha256,)))
    expect(found == {a.content_sha256}, "the other space lost its vector")
    result = await t.one(SearchVectors(ScopeSet.of(SAM), SPACE.id, unit((1, 1, 1, 1)), 5, NOW))
    expect(result.hits == (), "a dropped space still answers a search")
    expect(await t.one(DropSpace(SPACE.id)) == 0, "a second drop found vectors")


@check(CHECKS)
async def check_results_come_in_op_order(t: StoreUnderTest) -> None:
    """A batch of every op answers one result per op, in op order, each of its type (the
    stepped ops in the batches they may be in: a repair scan alone, a vector search
    among reads)."""
    a = record(1, "Sam is vegetarian")
    b = record(2, "Sam plays the cello")
    c = record(3, "to be forgotten")
    optional: list[Any] = []
    if t.capabilities.supports_history:
        optional.append(History(a.id, 10, NOW))
    if t.capabilities.supports_lexical:
        optional.append(SearchLexical(ScopeSet.of(SAM), "cello", 10, NOW))
    ops: list[Any] = [
        RegisterSpace(SPACE, NOW),
        PutVector(SPACE.id, a.content_sha256, vector_of(a.text), NOW),
        PutItem(a, NOW),
        PutItem(b, NOW),
        PutItem(c, NOW),
        GetItems((a.id, "missing", b.id), NOW, SPACE.id),
        FindVectors(SPACE.id, (a.content_sha256, b.content_sha256)),
        ListItems(ScopeSet.of(SAM), 10, NOW),
        ListScopes((), 10, NOW),
        PendingTexts(SPACE.id, 10),
        Stats(SPACE.id, NOW),
        PatchItem(b.id, NOW, importance=0.9),
        DeleteItem(c.id),
        DeleteItems(ScopeSet.of(KIM)),
    ]
    results = await t.batch(ops)
    expect(len(results) == len(ops), f"{len(ops)} ops gave {len(results)} results")
    put_a, put_b, put_c, got, found, listed, scopes, pending, stats = results[2:11]
    patched, deleted, deleted_many = results[11:14]
    # The stepped ops: a repair scan alone, a vector search among reads.
    (repair,) = await t.batch([RepairVectors(SPACE.id, 10)])
    reads = [
        SearchVectors(ScopeSet.of(SAM), SPACE.id, unit((1, 0, 0, 0)), 10, NOW),
        *optional,
    ]
    answers = await t.batch(reads)
    expect(len(answers) == len(reads), f"{len(reads)} reads gave {len(answers)} results")
    vector = answers[0]
    expect((put_a, put_b, put_c) == (a, b, c), f"PutItem answered {put_a!r}, {put_b!r}")
    expect(
        [type(x) for x in got] == [StoredItem, type(None), StoredItem]
        and got[0].record == a
        and got[0].embedded_at == NOW
        and got[2].embedded_at is None,
        f"GetItems answered {got!r}",
    )
    expect(found == frozenset({a.content_sha256}), f"FindVectors answered {found!r}")
    expect([r.id for r in listed] == [c.id, b.id, a.id], f"ListItems answered {listed!r}")
    expect(scopes == [ScopeCount(SAM, 3)], f"ListScopes answered {scopes!r}")
    expect(
        pending == sorted([(b.content_sha256, b.text), (c.content_sha256, c.text)]),
        f"PendingTexts answered {pending!r} (in hash order)",
    )
    expect((stats.items, stats.pending, stats.vectors) == (3, 2, 1), f"Stats: {stats!r}")
    expect(
        isinstance(patched, MemoryRecord) and patched.importance == 0.9 and patched.revision == 2,
        f"PatchItem answered {patched!r}",
    )
    expect(deleted is True and deleted_many == 0, f"deletes answered {deleted!r}, {deleted_many!r}")
    expect(isinstance(repair, VectorRepair) and repair.corrupt == (), f"RepairVectors: {repair!r}")
    expect(
        isinstance(vector, SearchResult) and ids_of(vector) == [a.id] and vector.skipped == (),
        f"SearchVectors answered {vector!r} (only a has a vector)",
    )
    for op, result in zip(optional, answers[1:], strict=True):
        if isinstance(op, History):
            expect(result == [], f"History of a first revision answered {result!r}")
        else:
            expect(ids_of(result) == [b.id], f"SearchLexical answered {result!r}")


@check(CHECKS)
async def check_reads_see_the_earlier_writes_of_their_batch(t: StoreUnderTest) -> None:
    """Within a batch, a read sees the writes before it and not those after it."""
    a = record(1, "first")
    got_before, _, got_after, deleted, got_last = await t.batch(
        [
            GetItems((a.id,), NOW),
            PutItem(a, NOW),
            GetItems((a.id,), NOW),
            DeleteItem(a.id),
            GetItems((a.id,), NOW),
        ]
    )
    expect(got_before == [None], f"a read before the put saw {got_before!r}")
    expect(got_after[0] is not None and got_after[0].record == a, f"after the put: {got_after!r}")
    expect(deleted is True and got_last == [None], f"after the delete: {got_last!r}")


@check(CHECKS)
async def check_get_items_answers_in_the_order_asked(t: StoreUnderTest) -> None:
    """GetItems answers one entry per id asked, in that order, None for a missing id, and
    an id asked twice twice."""
    a, b = record(1, "alpha"), record(2, "beta")
    await store_items(t, a, b)
    (got,) = await t.batch([GetItems((b.id, "nope", a.id, b.id), NOW)])
    expect(
        [None if x is None else x.record.id for x in got] == [b.id, None, a.id, b.id],
        f"GetItems answered {got!r}",
    )


# -- narrow writes -------------------------------------------------------------------------


@check(CHECKS)
async def check_put_item_inserts_then_makes_the_next_revision(t: StoreUnderTest) -> None:
    """Putting a live id again in its scope makes its next revision: revision + 1, the
    old created_at, everything else as given."""
    first = record(1, "Sam likes tea", metadata={"v": 1})
    await store_items(t, first)
    second = record(1, "Sam likes coffee", at=later(seconds=5), metadata={"v": 2}, importance=0.9)
    stored = await t.one(PutItem(second, later(seconds=5)))
    expect(stored == replace(second, revision=2, created_at=NOW), f"PutItem stored {stored!r}")
    expect(
        await record_of(t, first.id, later(seconds=5)) == stored, "GetItems disagrees with PutItem"
    )


@check(CHECKS)
async def check_an_update_is_never_dated_before_its_creation(t: StoreUnderTest) -> None:
    """A writer whose clock stepped back (``now`` before the item's ``created_at``)
    revises the item, but its ``updated_at`` stays the creation time: no stored record
    is updated before it was created (a backup of it restores)."""
    first = record(1, "Sam likes tea", at=later(minutes=5))
    await store_items(t, first)
    behind = NOW  # five minutes before the creation
    put = await t.one(PutItem(record(1, "Sam likes coffee"), behind))
    expect(
        (put.revision, put.created_at, put.updated_at) == (2, first.created_at, first.created_at),
        f"PutItem with a clock behind the creation stored {put!r}",
    )
    patched = await t.one(PatchItem(first.id, behind, importance=0.2))
    expect(
        (patched.revision, patched.updated_at) == (3, first.created_at),
        f"PatchItem with a clock behind the creation stored {patched!r}",
    )
    stored = await record_of(t, first.id, later(minutes=5))
    expect(stored == patched, f"GetItems answered {stored!r}, not {patched!r}")


@check(CHECKS)
async def check_put_item_refuses_an_id_of_another_scope(t: StoreUnderTest) -> None:
    """A live id belongs to its scope: putting it in another raises ValidationError."""
    x = record(1, "Sam's note", SAM)
    await store_items(t, x)
    await raises(ValidationError, t.batch([PutItem(replace(x, scope=KIM), NOW)]), "move")
    expect(await record_of(t, x.id) == x, "the refused put changed the item")


@check(CHECKS)
async def check_an_expired_id_is_free(t: StoreUnderTest) -> None:
    """An expired item's id may be put again, in any scope: the new record is stored as
    given (revision 1, its own created_at) and nothing of the old one remains."""
    old = record(1, "door code 4711", SAM, expires_at=later(seconds=5))
    await store_items(t, old)
    await t.batch([PatchItem(old.id, NOW, importance=0.3)])  # a history entry
    new = record(1, "Kim's door code", KIM, at=later(seconds=10))
    stored = await t.one(PutItem(new, later(seconds=10)))
    expect(stored == new, f"an expired id was revised instead of replaced: {stored!r}")
    listed = await t.one(ListItems(ScopeSet.of(SAM), 10, later(seconds=10)))
    expect(listed == [], f"the old scope still lists {listed!r}")
    if t.capabilities.supports_history:
        history = await t.one(History(new.id, 10, later(seconds=10)))
        expect(history == [], f"the replaced item kept the old history {history!r}")


@check(CHECKS)
async def check_put_item_compare_and_set(t: StoreUnderTest) -> None:
    """expected_revision=0 demands a new id, n demands revision n; otherwise
    ConflictError and nothing changes."""
    a = record(1, "v1")
    stored = await t.one(PutItem(a, NOW, expected_revision=0))
    expect(stored == a, f"a create-only put answered {stored!r}")
    error = await raises(ConflictError, t.batch([PutItem(a, NOW, expected_revision=0)]), "0")
    expect(getattr(error, "actual", 1) in (1, None), f"ConflictError.actual={error!r}")
    second = await t.one(PutItem(replace(a, text="v2"), NOW, expected_revision=1))
    expect(second.revision == 2, f"expected_revision=1 answered {second!r}")
    await raises(ConflictError, t.batch([PutItem(replace(a, text="v3"), NOW, 1)]), "stale")
    missing = record(9, "never")
    await raises(ConflictError, t.batch([PutItem(missing, NOW, expected_revision=1)]), "new")
    expect((await record_of(t, a.id)) == second, "a lost compare-and-set changed the item")


@check(CHECKS)
async def check_patch_item_changes_only_the_given_fields(t: StoreUnderTest) -> None:
    """A patch changes the fields it names, raises the revision by one and sets
    updated_at; everything else stays."""
    a = record(
        1,
        "Sam likes tea",
        metadata={"a": 1},
        labels={"t": ["x"]},
        importance=0.4,
        expires_at=later(days=9),
    )
    await store_items(t, a)
    at = later(seconds=3)
    meta = await t.one(PatchItem(a.id, at, metadata={"b": 2}))
    expect(
        meta == replace(a, metadata={"b": 2}, revision=2, updated_at=at),
        f"a metadata patch stored {meta!r}",
    )
    text = await t.one(PatchItem(a.id, at, text="Sam likes coffee", expires_at=None))
    expect(
        text
        == replace(
            meta,
            text="Sam likes coffee",
            content_sha256=sha256("Sam likes coffee"),
            expires_at=None,
            revision=3,
        ),
        f"a text patch stored {text!r}",
    )
    both = await t.one(PatchItem(a.id, at, labels={}, importance=1.0))
    expect(both == replace(text, labels={}, importance=1.0, revision=4), f"stored {both!r}")


@check(CHECKS)
async def check_patch_item_of_a_missing_or_expired_id_raises_not_found(t: StoreUnderTest) -> None:
    """PatchItem of an id that is not a live item raises NotFoundError and writes nothing."""
    soon = record(1, "expires", expires_at=later(seconds=1))
    await store_items(t, soon)
    before = await stats_of(t, later(seconds=1))
    await raises(NotFoundError, t.batch([PatchItem("nope", NOW, importance=0.2)]), "missing")
    await raises(
        NotFoundError, t.batch([PatchItem(soon.id, later(seconds=1), text="revived")]), "expired"
    )
    after = await stats_of(t, later(seconds=1))
    expect(after == before, f"a failed patch changed the store: {after!r}")
    expect(await record_of(t, soon.id) == soon, "the expired item was changed")


@check(CHECKS)
async def check_a_scoped_patch_changes_only_an_item_of_its_scopes(t: StoreUnderTest) -> None:
    """``PatchItem(..., scopes=...)`` of an item in another scope raises NotFoundError
    (as for a missing id), writes nothing and fails its whole batch; an item of one of
    the scopes (exact or by prefix) is patched."""
    a = record(1, "Sam's door code is 4711", SAM)
    y = record(2, "y never arrives", KIM)
    await store_items(t, a)
    before = await stats_of(t)
    for scopes in (ScopeSet.of(KIM), ScopeSet(prefixes=(("acme", "user", "kim"),))):
        await raises(
            NotFoundError,
            t.batch([PutItem(y, NOW), PatchItem(a.id, NOW, text="stolen", scopes=scopes)]),
            f"a patch scoped to {scopes!r}",
        )
        await raises(
            NotFoundError,
            t.batch([PatchItem(a.id, NOW, importance=0.1, expected_revision=1, scopes=scopes)]),
            f"a compare-and-set patch scoped to {scopes!r}",
        )
    expect(await stats_of(t) == before, "a patch of another scope's item changed the store")
    expect(await record_of(t, a.id) == a, "another scope's patch changed the item")
    expect(await record_of(t, y.id) is None, "the failed batch kept its put")
    at = later(seconds=1)
    mine = await t.one(PatchItem(a.id, at, importance=0.9, scopes=ScopeSet(prefixes=(("acme",),))))
    expect(mine == replace(a, importance=0.9, revision=2, updated_at=at), f"stored {mine!r}")


@check(CHECKS)
async def check_patch_item_compare_and_set(t: StoreUnderTest) -> None:
    """A patch with expected_revision applies only to that revision."""
    a = record(1, "counter")
    await store_items(t, a)
    ok = await t.one(PatchItem(a.id, NOW, metadata={"n": 1}, expected_revision=1))
    error = await raises(
        ConflictError,
        t.batch([PatchItem(a.id, NOW, metadata={"n": 9}, expected_revision=1)]),
        "a stale expected_revision",
    )
    expect(getattr(error, "expected", 1) in (1, None), f"ConflictError.expected: {error!r}")
    expect(getattr(error, "actual", 2) in (2, None), f"ConflictError.actual: {error!r}")
    expect(await record_of(t, a.id) == ok, "a lost compare-and-set changed the item")


@check(CHECKS, "supports_history")
async def check_history_keeps_the_newest_earlier_revisions(t: StoreUnderTest) -> None:
    """History answers earlier revisions newest first, at most keep_revisions of them;
    nothing for a missing, expired or deleted id."""
    a = record(1, "rev 1")
    await store_items(t, a)
    for n in range(2, 7):
        await t.batch([PatchItem(a.id, later(seconds=n), text=f"rev {n}", keep_revisions=3)])
    history = await t.one(History(a.id, 10, later(seconds=9)))
    expect([r.revision for r in history] == [5, 4, 3], f"kept revisions {history!r}")
    expect([r.text for r in history] == ["rev 5", "rev 4", "rev 3"], f"texts {history!r}")
    expect(history[0].updated_at == later(seconds=5), f"the time of rev 5: {history[0]!r}")
    limited = await t.one(History(a.id, 1, later(seconds=9)))
    expect([r.revision for r in limited] == [5], f"limit=1 answered {limited!r}")
    await t.batch([PutItem(replace(a, text="rev 7"), later(seconds=9), keep_revisions=0)])
    history = await t.one(History(a.id, 10, later(seconds=9)))
    expect(history == [], f"keep_revisions=0 kept {history!r}")
    await t.batch([PatchItem(a.id, later(seconds=9), text="rev 8")])
    await t.batch([DeleteItem(a.id)])
    expect(await t.one(History(a.id, 10, later(seconds=9))) == [], "history survived a delete")
    expect(await t.one(History("nope", 10, NOW)) == [], "history of a missing id")


# -- deletes -------------------------------------------------------------------------------


@check(CHECKS)
async def check_deletes_report_what_they_removed(t: StoreUnderTest) -> None:
    """DeleteItem answers whether the id existed (expired or not); DeleteItems answers
    how many items of its selection matched its filter, prefixes by whole parts."""
    scopes: list[Scope] = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("a b",)]
    items = [
        record(n, f"note {n}", scope, metadata={"k": n % 2}) for n, scope in enumerate(scopes * 2)
    ]
    await store_items(t, *items)
    expired = record(99, "gone soon", ("z",), expires_at=later(seconds=1))
    await store_items(t, expired)
    deleted = await t.batch([DeleteItem(expired.id), DeleteItem(expired.id)])
    expect(deleted == [True, False], f"DeleteItem answered {deleted!r}")
    under_a = ScopeSet(prefixes=(("a", "b"),))
    count = await t.one(DeleteItems(under_a, parse_filter({"metadata": {"k": 1}})))
    expect(count == 2, f"DeleteItems(prefix a/b, k=1) answered {count}")
    count = await t.one(DeleteItems(ScopeSet(exact=(("a",),), prefixes=(("a", "b"),))))
    expect(count == 4, f"DeleteItems(a + prefix a/b) answered {count}")
    left = await t.one(ListScopes((), 10, NOW))
    expect(
        left == [ScopeCount(("a b",), 2), ScopeCount(("ab",), 2)],
        f"after the deletes the scopes are {left!r} (('ab',) is not under ('a',))",
    )
