"""Checks of failing batches: each raises the error that names the op at fault, and
changes nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engramdb._base.errors import (
    ConflictError,
    DimensionMismatchError,
    NotFoundError,
    ValidationError,
)
from engramdb._base.types import EmbeddingSpace
from engramdb.store import (
    DeleteItem,
    DeleteItems,
    GetItems,
    History,
    Op,
    PackVectors,
    PatchItem,
    PutItem,
    PutVector,
    RegisterSpace,
    RepairVectors,
    ScopeSet,
    SearchVectors,
    StoreStats,
)
from engramdb.testing._checks import (
    KIM,
    SAM,
    StoreCheck,
    check,
    ids_of,
    record_of,
    stats_of,
    store_items,
)
from engramdb.testing._harness import (
    NOW,
    SPACE,
    StoreUnderTest,
    expect,
    raises,
    record,
    unit,
    unit_blob,
)

__all__ = ["CHECKS"]

CHECKS: list[StoreCheck] = []


# -- atomicity -----------------------------------------------------------------------------


async def unchanged(t: StoreUnderTest, before: StoreStats, *absent: str) -> None:
    after = await stats_of(t)
    expect(
        (after.items, after.vectors, after.pending)
        == (before.items, before.vectors, before.pending),
        f"a failed batch changed the store: {before!r} -> {after!r}",
    )
    for item_id in absent:
        expect(await record_of(t, item_id) is None, f"item {item_id} of a failed batch was stored")


@check(CHECKS)
async def check_a_bad_vector_fails_the_whole_batch(t: StoreUnderTest) -> None:
    """[PutItem, PutVector(bad bytes)] raises ValidationError and stores neither."""
    kept = record(1, "already here")
    await store_items(t, kept)
    before = await stats_of(t)
    new = record(2, "never stored")
    for bad in (b"\x00\x00\x80", b"\x00" * 16, bytes.fromhex("0000c07f") * 4):
        await raises(
            ValidationError,
            t.batch([PutItem(new, NOW), PutVector(SPACE.id, new.content_sha256, bad, NOW)]),
            f"a batch with the vector {bad.hex()}",
        )
    await unchanged(t, before, new.id)


@check(CHECKS)
async def check_a_vector_of_the_wrong_size_for_its_space_fails(t: StoreUnderTest) -> None:
    """A PutVector whose size is not its registered space's dimensions fails its batch
    with DimensionMismatchError (a ValidationError) and stores nothing."""
    await t.batch([RegisterSpace(SPACE, NOW)])
    before = await stats_of(t)
    new = record(1, "eight dimensions")
    await raises(
        DimensionMismatchError,
        t.batch(
            [
                PutItem(new, NOW),
                PutVector(SPACE.id, new.content_sha256, unit_blob([1.0] * 8), NOW),
            ]
        ),
        "an 8-dimensional vector in a 4-dimensional space",
    )
    await unchanged(t, before, new.id)


@check(CHECKS)
async def check_a_failed_condition_fails_the_whole_batch(t: StoreUnderTest) -> None:
    """Writes before a PatchItem of a missing id, a lost compare-and-set or a PutItem into
    another scope's id are undone: the batch raises and changes nothing."""
    x = record(1, "x stays", SAM)
    await store_items(t, x)
    before = await stats_of(t)
    y = record(2, "y never arrives", SAM)
    cases: list[tuple[type[BaseException], list[Any], str]] = [
        (NotFoundError, [PutItem(y, NOW), PatchItem("missing", NOW, importance=0.1)], "patch"),
        (ConflictError, [PutItem(y, NOW), PutItem(replace(x, text="x2"), NOW, 7)], "CAS"),
        (ValidationError, [PutItem(y, NOW), PutItem(replace(x, scope=KIM), NOW)], "scope"),
        (
            NotFoundError,
            [DeleteItem(x.id), PutItem(y, NOW), PatchItem(x.id, NOW, importance=0.2)],
            "patch after delete",
        ),
        (
            ConflictError,
            [DeleteItems(ScopeSet.of(SAM)), PutItem(y, NOW, expected_revision=1)],
            "delete then CAS",
        ),
    ]
    for error, ops, what in cases:
        await raises(error, t.batch(ops), what)
    await unchanged(t, before, y.id)
    expect(await record_of(t, x.id) == x, "x changed although every batch failed")


# -- the error names the op at fault ----------------------------------------------------


@check(CHECKS)
async def check_the_error_names_the_op_that_failed(t: StoreUnderTest) -> None:
    """A failed batch's error is about the op that failed, as the ops before it leave
    the store: not an earlier op that succeeded, nor the state before the batch."""
    x, y = record(1, "x text", SAM), record(2, "y text", SAM)
    await store_items(t, x, y)
    lost = await raises(
        ConflictError,
        t.batch(
            [
                PatchItem(x.id, NOW, importance=0.9, expected_revision=1),
                PatchItem(y.id, NOW, importance=0.1, expected_revision=5),
            ]
        ),
        "the second of two compare-and-sets",
    )
    expect(
        repr(y.id) in str(lost) and repr(x.id) not in str(lost),
        f"the error of y's lost compare-and-set names x: {lost}",
    )
    expect(
        (getattr(lost, "expected", None), getattr(lost, "actual", None)) == (5, 1),
        f"ConflictError.expected/actual of y: {lost!r}",
    )
    new = record(3, "created in the batch", SAM)
    batches: list[list[Op]] = [
        [PatchItem(x.id, NOW, importance=0.9), DeleteItem(x.id), PatchItem("zzz", NOW)],
        [PutItem(new, NOW), PatchItem(new.id, NOW, importance=0.9), PatchItem("zzz", NOW)],
    ]
    for ops in batches:
        missing = await raises(NotFoundError, t.batch(ops), "a patch of a missing id")
        expect(
            "'zzz'" in str(missing) and not any(repr(i) in str(missing) for i in (x.id, new.id)),
            f"the error names another id: {missing}",
        )
    expect(await record_of(t, x.id) == x, "a failed batch changed x")
    expect(await record_of(t, new.id) is None, "a failed batch stored its new item")


@check(CHECKS)
async def check_a_refused_id_does_not_reveal_its_scope(t: StoreUnderTest) -> None:
    """Putting an id that a live item of another scope holds raises ValidationError
    without naming that scope: a caller confined to its own scope learns nothing more."""
    theirs = record(1, "Kim's profile", KIM)
    await store_items(t, theirs)
    error = await raises(
        ValidationError, t.batch([PutItem(replace(theirs, scope=SAM), NOW)]), "another scope's id"
    )
    expect(not any(part in str(error) for part in KIM), f"the error reveals Kim's scope: {error}")


# -- vectors and queries of a space ----------------------------------------------------------


@check(CHECKS)
async def check_vectors_need_their_registered_space(t: StoreUnderTest) -> None:
    """A PutVector of a space never registered fails with ValidationError (not a
    dimension mismatch); a space registered earlier in the same batch fixes the size of
    its vectors (DimensionMismatchError otherwise). Nothing of the batch is stored."""
    before = await stats_of(t)
    other = EmbeddingSpace("test", "other", 4)
    new = record(1, "a new note")
    unregistered = await raises(
        ValidationError,
        t.batch(
            [PutItem(new, NOW), PutVector(other.id, new.content_sha256, unit_blob([1] * 4), NOW)]
        ),
        "a vector of a space never registered",
    )
    expect(
        not isinstance(unregistered, DimensionMismatchError) and other.id in str(unregistered),
        f"an unregistered space answered {unregistered!r}",
    )
    await raises(
        DimensionMismatchError,
        t.batch(
            [
                RegisterSpace(other, NOW),
                PutItem(new, NOW),
                PutVector(other.id, new.content_sha256, unit_blob([1.0, 0.0, 0.0]), NOW),
            ]
        ),
        "a 3-dimensional vector after registering a 4-dimensional space",
    )
    await unchanged(t, before, new.id)
    stats = await stats_of(t)
    expect(other.id not in stats.spaces, f"the failed batch registered its space: {stats!r}")


@check(CHECKS)
async def check_a_query_of_the_wrong_size_is_refused(t: StoreUnderTest) -> None:
    """A SearchVectors whose query size is not its space's raises DimensionMismatchError
    (with any k), and the searches after it answer as if it never ran."""
    a = record(1, "only item")
    await store_items(t, a)
    selection = ScopeSet.of(SAM)
    for k in (5, 0):
        await raises(
            DimensionMismatchError,
            t.batch([SearchVectors(selection, SPACE.id, unit([1.0, 0.0, 0.0]), k, NOW)]),
            f"a 3-dimensional query in a 4-dimensional space, k={k}",
        )
    nothing = await t.one(SearchVectors(selection, SPACE.id, unit([1.0, 0.0, 0.0, 0.0]), 0, NOW))
    expect(ids_of(nothing) == [], f"k=0 answered {nothing!r}")
    result = await t.one(SearchVectors(selection, SPACE.id, unit([1.0, 0.0, 0.0, 0.0]), 5, NOW))
    expect(ids_of(result) == [a.id] and result.skipped == (), f"the next search: {result!r}")
    empty = await t.one(SearchVectors(selection, "test/never@4", unit([1.0, 0.0, 0.0]), 5, NOW))
    expect(ids_of(empty) == [], f"a search of an unregistered space answered {empty!r}")


# -- batches that mix stepped ops with writes -------------------------------------------------


@check(CHECKS)
async def check_stepped_ops_do_not_share_a_batch_with_writes(t: StoreUnderTest) -> None:
    """A batch with SearchVectors holds only reads, and RepairVectors or PackVectors
    comes alone:
    ValidationError otherwise, with nothing applied."""
    await store_items(t, record(1, "here"))
    before = await stats_of(t)
    new = record(2, "never stored")
    search = SearchVectors(ScopeSet.of(SAM), SPACE.id, unit([1.0, 0.0, 0.0, 0.0]), 5, NOW)
    mixed: list[list[Op]] = [
        [PutItem(new, NOW), search],
        [search, PutItem(new, NOW)],
        [PutItem(new, NOW), RepairVectors(SPACE.id, 10)],
        [RepairVectors(SPACE.id, 10), GetItems((new.id,), NOW)],
        [PackVectors(SPACE.id), GetItems((new.id,), NOW)],
        [PutItem(new, NOW), PackVectors(SPACE.id)],
    ]
    for ops in mixed:
        await raises(ValidationError, t.batch(ops), " + ".join(type(op).__name__ for op in ops))
    await unchanged(t, before, new.id)


# -- one id twice in a batch --------------------------------------------------------------------


@check(CHECKS)
async def check_each_put_of_an_id_answers_its_own_revision(t: StoreUnderTest) -> None:
    """Two PutItems of one id in one batch answer revisions 1 and 2, each its own
    record; the first is the second's history."""
    first = record(1, "Sam is vegetarian")
    second = record(1, "Sam is vegan")
    out = await t.batch(
        [PutItem(first, NOW, keep_revisions=5), PutItem(second, NOW, keep_revisions=5)]
    )
    expect(
        [(r.revision, r.text) for r in out] == [(1, first.text), (2, second.text)],
        f"the two puts answered {out!r}",
    )
    if t.capabilities.supports_history:
        history = await t.one(History(first.id, 10, NOW))
        expect(history == [out[0]], f"the history of the second put is {history!r}")
