"""Checks of what a backup reads and writes: stored vector bytes (``GetVectors``) and
items restored exactly as given (``RestoreItem``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engramdb._base.errors import ConflictError, ValidationError
from engramdb._base.types import ContextUtility, EmbeddingSpace, MemoryRecord, Utility
from engramdb.store import (
    GetItems,
    GetUtility,
    GetVectors,
    History,
    ListItems,
    PatchItem,
    PutItem,
    PutVector,
    RegisterSpace,
    RestoreItem,
    ScopeSet,
    SetManual,
    Stats,
)
from engramdb.testing._checks import (
    KIM,
    SAM,
    StoreCheck,
    check,
    record_of,
    stats_of,
    store_items,
    vector_of,
)
from engramdb.testing._harness import NOW, SPACE, StoreUnderTest, expect, later, raises, record

__all__ = ["CHECKS"]

CHECKS: list[StoreCheck] = []

_ODD = 0.1 + 0.2  # 0.30000000000000004: 17 significant digits, which must survive as is


def _restored() -> tuple[MemoryRecord, tuple[MemoryRecord, ...], Utility]:
    """An item at revision 3, created a day before NOW and changed since, with its two
    earlier revisions (newest first) and evidence in two contexts."""
    first = record(
        1, "Sam liked tea", at=later(days=-1), labels={"topic": ["drinks"]}, importance=_ODD
    )
    second = replace(first, text="Sam likes tea", revision=2, updated_at=later(hours=-5))
    current = replace(
        second,
        text="Sam likes coffee, not tea",
        metadata={"source": "chat", "n": [1, 2.5, None]},
        labels={"topic": ["drinks", "sam"]},
        importance=0.7,
        revision=3,
        updated_at=later(hours=-1),
        expires_at=later(days=30),
    )
    current = replace(current, content_sha256=record(1, current.text).content_sha256)
    second = replace(second, content_sha256=record(1, second.text).content_sha256)
    utility = Utility(
        exposures=7,
        last_exposed_at=later(minutes=-3),
        eval_count=3,
        eval_sum=1 / 3,
        manual=-0.25,
        manual_updated_at=later(minutes=-2),
        reinforced_at=later(minutes=-30),
        contexts=(
            ContextUtility("topic:sam", 2, 2 / 3, later(minutes=-10)),
            ContextUtility("topic:drinks", 1, _ODD, later(minutes=-20)),
        ),
    )
    return current, (second, first), utility


@check(CHECKS)
async def check_get_vectors_answers_the_stored_bytes_and_times(t: StoreUnderTest) -> None:
    """GetVectors answers, for each asked hash with a vector in the space, the bytes
    exactly as stored and the vector's embedded_at; a hash without one (or with one only
    in another space) is absent, and a hash asked twice is answered once."""
    a, b, c = record(1, "Sam is vegetarian"), record(2, "Sam plays"), record(3, "no vector")
    await store_items(t, a, b)
    await store_items(t, c, vectors=False)
    other = EmbeddingSpace("other", "unit", 4)
    at = later(seconds=7)
    await t.batch(
        [RegisterSpace(other, NOW), PutVector(other.id, c.content_sha256, vector_of("c"), at)]
    )
    hashes = (b.content_sha256, c.content_sha256, a.content_sha256, b.content_sha256, "0" * 64)
    found = await t.one(GetVectors(SPACE.id, hashes))
    expect(
        found
        == {
            a.content_sha256: (vector_of(a.text), NOW),
            b.content_sha256: (vector_of(b.text), NOW),
        },
        f"GetVectors of the space answered {found!r}",
    )
    expect(all(type(raw) is bytes for raw, _ in found.values()), "the vectors are not bytes")
    found = await t.one(GetVectors(other.id, hashes))
    expect(found == {c.content_sha256: (vector_of("c"), at)}, f"the other space: {found!r}")
    expect(await t.one(GetVectors("nowhere@4", hashes)) == {}, "an unknown space has vectors")


@check(CHECKS)
async def check_restore_item_stores_the_record_as_given(t: StoreUnderTest) -> None:
    """RestoreItem inserts the record exactly as given (id, times, revision, expiry,
    labels, metadata, a 17-digit importance), answers it, and keeps its history (newest
    first, as History answers it) and its evidence (as GetUtility answers it) on stores
    that keep them; the item is listed and counted like any other."""
    current, history, utility = _restored()
    (stored,) = await t.batch([RestoreItem(current, NOW, history, utility)])
    expect(stored == current, f"RestoreItem answered {stored!r}")
    expect(await record_of(t, current.id) == current, "GetItems disagrees with the restore")
    listed = await t.one(ListItems(ScopeSet.of(SAM), 10, NOW))
    expect(listed == [current], f"ListItems answered {listed!r}")
    expect((await stats_of(t)).items == 1, "Stats does not count the restored item")
    if t.capabilities.supports_history:
        kept = await t.one(History(current.id, 10, NOW))
        expect(kept == list(history), f"History of the restored item answered {kept!r}")
        expect(kept[1].importance == _ODD, f"the history's importance changed: {kept[1]!r}")
    if t.capabilities.supports_policy:
        evidence = await t.one(GetUtility((current.id,)))
        expect(evidence == {current.id: utility}, f"GetUtility answered {evidence!r}")
    # It is an item like the others: a patch makes its next revision.
    patched = await t.one(PatchItem(current.id, NOW, importance=0.1))
    expect(patched.revision == 4 and patched.created_at == current.created_at, f"{patched!r}")


@check(CHECKS)
async def check_restore_item_without_history_or_evidence(t: StoreUnderTest) -> None:
    """A RestoreItem without history and evidence stores the record alone: History
    answers nothing and GetUtility has no entry for it."""
    current, _, _ = _restored()
    await t.batch([RestoreItem(current, NOW)])
    expect(await record_of(t, current.id) == current, "the record was not stored as given")
    if t.capabilities.supports_history:
        expect(await t.one(History(current.id, 10, NOW)) == [], "a history appeared")
    if t.capabilities.supports_policy:
        expect(await t.one(GetUtility((current.id,))) == {}, "evidence appeared")


@check(CHECKS)
async def check_restore_item_refuses_a_live_id_and_writes_nothing(t: StoreUnderTest) -> None:
    """RestoreItem of an id a live item holds (in its scope or another) raises
    ConflictError and its whole batch writes nothing; two restores of one id in a batch
    conflict too."""
    current, history, utility = _restored()
    held = record(1, "Kim's own note", KIM)
    await store_items(t, held)
    before = await stats_of(t)
    other = record(2, "never stored")
    await raises(
        ConflictError,
        t.batch([PutItem(other, NOW), RestoreItem(current, NOW, history, utility)]),
        "a restore over a live id",
    )
    expect(await record_of(t, held.id) == held, "the refused restore changed the live item")
    expect(await record_of(t, other.id) is None, "the refused batch kept its put")
    expect(await stats_of(t) == before, "the refused restore changed the store")
    fresh = replace(current, id="r000009")
    await raises(
        ConflictError,
        t.batch([RestoreItem(fresh, NOW), RestoreItem(fresh, NOW)]),
        "two restores of one id",
    )
    expect(await record_of(t, fresh.id) is None, "the refused batch kept its first restore")


@check(CHECKS)
async def check_restore_item_replaces_an_expired_item_whole(t: StoreUnderTest) -> None:
    """An expired item's id is free: RestoreItem replaces it with its history and its
    evidence, in any scope, and nothing of the old item (its history, its evidence)
    remains; a vector its text shares with the restored one stays."""
    current, history, _ = _restored()
    old = record(1, current.text, KIM, expires_at=NOW)
    await store_items(t, old)
    await t.batch([PatchItem(old.id, later(seconds=-1), importance=0.3)])  # a history entry
    if t.capabilities.supports_policy:
        await t.batch([SetManual(old.id, 0.9, later(seconds=-1), False, ScopeSet.of(KIM))])
    (stored,) = await t.batch([RestoreItem(current, NOW, history)])
    expect(stored == current, f"RestoreItem over an expired item answered {stored!r}")
    expect(await record_of(t, current.id) == current, "the expired item was not replaced")
    expect(await t.one(ListItems(ScopeSet.of(KIM), 10, NOW)) == [], "the old scope lists it")
    if t.capabilities.supports_history:
        kept = await t.one(History(current.id, 10, NOW))
        expect(kept == list(history), f"the old history remains: {kept!r}")
    if t.capabilities.supports_policy:
        evidence = await t.one(GetUtility((current.id,)))
        expect(evidence == {}, f"the old evidence remains: {evidence!r}")
    found = await t.one(GetVectors(SPACE.id, (current.content_sha256,)))
    expect(set(found) == {current.content_sha256}, "the shared vector went with the old item")
    item = (await t.one(GetItems((current.id,), NOW, SPACE.id)))[0]
    expect(item is not None and item.embedded_at == NOW, f"its vector is not found: {item!r}")


@check(CHECKS)
async def check_restore_item_refuses_a_history_that_is_not_its_own(t: StoreUnderTest) -> None:
    """A history holding another item's revision, or revisions out of order (not newest
    first, not below the record's), raises ValidationError and writes nothing."""
    current, (second, first), _ = _restored()
    bad: list[tuple[str, Any]] = [
        ("oldest first", (first, second)),
        ("the record's own revision", (replace(second, revision=3),)),
        ("another item's revision", (replace(second, id="r000002"),)),
        ("another scope's revision", (replace(second, scope=KIM),)),
        ("revision 0", (replace(first, revision=0),)),
    ]
    for what, history in bad:
        await raises(
            ValidationError, t.batch([RestoreItem(current, NOW, history)]), f"a history of {what}"
        )
    stats = await t.one(Stats(SPACE.id, NOW))
    expect(stats.items == 0, f"a refused restore stored {stats!r}")
