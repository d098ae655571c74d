"""Checks of receipts and evidence (the ops of a store that declares ``supports_policy``),
of ``PurgeExpired`` and of a scoped ``DeleteItem`` (every store's)."""

from __future__ import annotations

from datetime import datetime

from engramdb._base.errors import NotFoundError
from engramdb._base.types import Utility
from engramdb.store import (
    ConsumeSelection,
    DeleteItem,
    GetUtility,
    PatchItem,
    PurgeExpired,
    PutItem,
    RecordSelection,
    ScopeSet,
    SetManual,
    TrimScope,
)
from engramdb.testing._checks import KIM, SAM, StoreCheck, check, record_of, store_items
from engramdb.testing._harness import NOW, StoreUnderTest, expect, later, raises, record

__all__ = ["CHECKS"]

CHECKS: list[StoreCheck] = []

_HOUR = later(hours=1)


def _select(
    selection: str,
    *ids: str,
    at: datetime = NOW,
    context: str = "",
    keep: int = 256,
    expires: datetime = _HOUR,
) -> RecordSelection:
    return RecordSelection(selection, SAM, ids, context, at, expires, keep)


def _consume(
    selection: str,
    score: float = 0.5,
    *,
    at: datetime | None = None,
    scope: tuple[str, ...] = SAM,
    max_contexts: int = 8,
    reinforce: bool = False,
) -> ConsumeSelection:
    return ConsumeSelection(
        selection, scope, score, at or later(minutes=1), max_contexts, reinforce
    )


async def _utility(t: StoreUnderTest, *ids: str) -> dict[str, Utility]:
    found = await t.one(GetUtility(ids))
    expect(isinstance(found, dict), f"GetUtility answered {found!r}, not a dict")
    return found  # type: ignore[no-any-return]


async def _two(t: StoreUnderTest) -> tuple[str, str]:
    a, b = record(1, "Sam is vegetarian"), record(2, "Sam plays the cello")
    await store_items(t, a, b)
    return a.id, b.id


@check(CHECKS, "supports_policy")
async def check_a_selection_counts_one_exposure_per_live_memory(t: StoreUnderTest) -> None:
    """``RecordSelection`` gives each distinct live memory it names one exposure at its
    ``now`` (an id named twice counts once, a missing id is ignored); ``GetUtility``
    answers only the ids with evidence."""
    a, b = await _two(t)
    expect(await _utility(t, a, b) == {}, "memories that were never shown have no evidence")
    await t.one(_select("s1", a, b, a, "r999999"))
    await t.one(_select("s2", a, at=later(minutes=2)))
    found = await _utility(t, a, b, "r999999")
    expect(sorted(found) == [a, b], f"evidence for {sorted(found)}, expected {[a, b]}")
    expect(
        (found[a].exposures, found[a].last_exposed_at) == (2, later(minutes=2)),
        f"a: {found[a]!r}, expected 2 exposures, the last at NOW+2min",
    )
    expect(
        (found[b].exposures, found[b].last_exposed_at, found[b].eval_count) == (1, NOW, 0),
        f"b: {found[b]!r}, expected 1 exposure at NOW and no evaluation",
    )


@check(CHECKS, "supports_policy")
async def check_a_receipt_is_consumed_once(t: StoreUnderTest) -> None:
    """``ConsumeSelection`` applies ``score / len(memory_ids)`` to each memory of the
    receipt and answers True once; again, or from another scope, it answers False and
    changes nothing (another scope's attempt leaves the receipt usable)."""
    a, b = await _two(t)
    await t.one(_select("s1", a, b))
    expect(await t.one(_consume("s1", scope=KIM)) is False, "another scope consumed the receipt")
    unused = await _utility(t, a)
    expect(unused[a].eval_count == 0, "another scope's attempt applied an evaluation")
    expect(await t.one(_consume("s1", 0.5)) is True, "the receipt's own scope was refused")
    expect(await t.one(_consume("s1", 0.5)) is False, "a receipt was consumed twice")
    found = await _utility(t, a, b)
    for item_id in (a, b):
        expect(
            (found[item_id].eval_count, found[item_id].eval_sum) == (1, 0.25),
            f"{item_id}: {found[item_id]!r}, expected one evaluation of 0.5 / 2 = 0.25",
        )


@check(CHECKS, "supports_policy")
async def check_an_expired_receipt_applies_nothing(t: StoreUnderTest) -> None:
    """A receipt is live strictly before its ``expires_at``: consumed at that time it
    answers False, applies nothing and is gone."""
    a, _ = await _two(t)
    await t.one(_select("s1", a, expires=later(minutes=5)))
    expect(await t.one(_consume("s1", at=later(minutes=5))) is False, "an expired receipt was used")
    expect(await t.one(_consume("s1", at=later(minutes=1))) is False, "the receipt survived")
    expect((await _utility(t, a))[a].eval_count == 0, "an expired receipt applied an evaluation")


@check(CHECKS, "supports_policy")
async def check_receipts_beyond_keep_are_evicted_oldest_first(t: StoreUnderTest) -> None:
    """A scope keeps the newest ``keep`` receipts (by time, then id): recording a third
    with ``keep=2`` evicts the oldest; expired receipts of the scope go too; another
    scope's receipts are untouched."""
    a, _ = await _two(t)
    await t.one(RecordSelection("k1", KIM, (a,), "", NOW, _HOUR, 1))
    await t.one(_select("s1", a, keep=2))
    await t.one(_select("s2", a, at=later(minutes=1), keep=2))
    await t.one(_select("s3", a, at=later(minutes=2), keep=2))
    at = later(minutes=3)
    got = [await t.one(_consume(s, at=at)) for s in ("s1", "s2", "s3")]
    expect(got == [False, True, True], f"consumed {got}, expected the oldest evicted")
    kim = await t.one(_consume("k1", at=at, scope=KIM))
    expect(kim is True, "another scope's receipt was evicted")


@check(CHECKS, "supports_policy")
async def check_context_summaries_keep_the_most_recent(t: StoreUnderTest) -> None:
    """A receipt's label context gets its own summary per memory; a memory keeps the
    ``max_contexts`` most recently updated ones, newest first."""
    a, _ = await _two(t)
    for minute, context in enumerate(("topic=a", "topic=b", "topic=c", "topic=a"), start=1):
        selection = f"s{minute}"
        await t.one(_select(selection, a, at=later(minutes=minute), context=context))
        await t.one(_consume(selection, 1.0, at=later(minutes=minute), max_contexts=2))
    found = (await _utility(t, a))[a]
    summaries = [(c.key, c.eval_count, c.eval_sum, c.updated_at) for c in found.contexts]
    expected = [("topic=a", 1, 1.0, later(minutes=4)), ("topic=c", 1, 1.0, later(minutes=3))]
    expect(summaries == expected, f"contexts {summaries}, expected {expected}")
    expect((found.eval_count, found.eval_sum) == (4, 4.0), f"totals of {found!r}")


@check(CHECKS, "supports_policy")
async def check_reinforcement_marks_positive_evidence_only(t: StoreUnderTest) -> None:
    """With ``reinforce``, a positive evaluation or manual value sets ``reinforced_at``;
    a negative one, or any without ``reinforce``, leaves it."""
    a, b = await _two(t)
    await t.one(_select("s1", a))
    await t.one(_consume("s1", -0.5, reinforce=True, at=later(minutes=1)))
    await t.one(_select("s2", a))
    await t.one(_consume("s2", 0.5, reinforce=False, at=later(minutes=2)))
    expect((await _utility(t, a))[a].reinforced_at is None, "reinforced without a positive score")
    await t.one(_select("s3", a))
    await t.one(_consume("s3", 0.5, reinforce=True, at=later(minutes=3)))
    expect((await _utility(t, a))[a].reinforced_at == later(minutes=3), "not reinforced")
    await t.one(SetManual(b, 0.4, later(minutes=4), True, ScopeSet.of(SAM)))
    expect((await _utility(t, b))[b].reinforced_at == later(minutes=4), "manual not reinforced")


@check(CHECKS, "supports_policy")
async def check_manual_value_is_set_and_cleared_within_scopes(t: StoreUnderTest) -> None:
    """``SetManual`` sets or clears the manual value of a live item of its scopes and
    answers True; for an item of other scopes, an expired or a missing one it answers
    False and changes nothing."""
    a, _ = await _two(t)
    expiring = record(3, "gone soon", expires_at=later(minutes=1))
    await store_items(t, expiring)
    sam = ScopeSet.of(SAM)
    expect(await t.one(SetManual(a, 0.7, NOW, False, ScopeSet.of(KIM))) is False, "other scope")
    expect(await _utility(t, a) == {}, "a refused manual value left evidence")
    expect(await t.one(SetManual(a, 0.7, NOW, False, sam)) is True, "set refused")
    found = (await _utility(t, a))[a]
    expect((found.manual, found.manual_updated_at) == (0.7, NOW), f"after set: {found!r}")
    expect(await t.one(SetManual(a, None, later(minutes=1), False, sam)) is True, "clear refused")
    found = (await _utility(t, a))[a]
    expect((found.manual, found.manual_updated_at) == (None, later(minutes=1)), f"{found!r}")
    late = later(minutes=2)
    expect(await t.one(SetManual(expiring.id, 1.0, late, False, sam)) is False, "expired item")
    expect(await t.one(SetManual("r999999", 1.0, NOW, False, sam)) is False, "missing item")


@check(CHECKS, "supports_policy")
async def check_forgetting_an_item_drops_its_evidence(t: StoreUnderTest) -> None:
    """Evidence belongs to the item: forgetting it drops the evidence, and an item stored
    again under the same id starts without any."""
    a, _ = await _two(t)
    await t.one(_select("s1", a))
    await t.one(SetManual(a, 0.5, NOW, False, ScopeSet.of(SAM)))
    expect(await t.one(DeleteItem(a)) is True, "the item was not deleted")
    expect(await _utility(t, a) == {}, "evidence outlived its item")
    await t.one(PutItem(record(1, "Sam is vegetarian"), later(minutes=1)))
    expect(await _utility(t, a) == {}, "a new item inherited evidence")


@check(CHECKS, "supports_policy")
async def check_a_failed_batch_records_no_selection(t: StoreUnderTest) -> None:
    """Receipts and exposures are writes of the batch: when a later op fails, neither is
    recorded."""
    a, _ = await _two(t)
    await raises(
        NotFoundError,
        t.batch([_select("s1", a), PatchItem("r999999", NOW, text="x")]),
        "a patch of a missing id",
    )
    expect(await _utility(t, a) == {}, "a failed batch counted an exposure")
    expect(await t.one(_consume("s1")) is False, "a failed batch kept its receipt")


@check(CHECKS, "supports_policy")
async def check_trim_keeps_the_newest_or_the_most_useful(t: StoreUnderTest) -> None:
    """``TrimScope`` keeps the ``keep`` newest live items of its scope (by created_at,
    then id) and deletes the others with their evidence; ``by_utility`` keeps the most
    useful first (a manual value, else the shrunk mean evaluation; none: 0). Expired items
    and other scopes are not counted or touched."""
    items = [
        record(1, "oldest", at=NOW),
        record(2, "older", at=later(minutes=1)),
        record(3, "newer", at=later(minutes=2)),
        record(4, "expired", at=later(minutes=3), expires_at=later(minutes=4)),
        record(5, "newest", at=later(minutes=5)),
        record(6, "kim's", KIM, at=NOW),
    ]
    await store_items(t, *items)
    sam = ScopeSet.of(SAM)
    await t.one(SetManual("r000001", 0.5, NOW, False, sam))
    await t.one(SetManual("r000003", -0.5, NOW, False, sam))
    at = later(minutes=10)
    expect(await t.one(TrimScope(SAM, 3, at, True)) == 1, "by utility: not one deleted")
    gone = [r.id for r in items if await record_of(t, r.id, NOW) is None]
    expect(gone == ["r000003"], f"by utility deleted {gone}, expected the least useful")
    expect(await _utility(t, "r000003") == {}, "a trimmed item kept its evidence")
    expect(await t.one(TrimScope(SAM, 1, at)) == 2, "by age: not two deleted")
    kept = [r.id for r in items if await record_of(t, r.id, NOW) is not None]
    expect(kept == ["r000004", "r000005", "r000006"], f"by age kept {kept}")
    expect(await t.one(TrimScope(SAM, 1, at)) == 0, "a scope within capacity lost items")


@check(CHECKS)
async def check_a_scoped_delete_touches_only_its_scopes(t: StoreUnderTest) -> None:
    """``DeleteItem(id, scopes)`` deletes the item only when it is in ``scopes``."""
    a, _ = await _two(t)
    expect(await t.one(DeleteItem(a, ScopeSet.of(KIM))) is False, "deleted from another scope")
    expect(await record_of(t, a) is not None, "the item went")
    deleted = await t.one(DeleteItem(a, ScopeSet(prefixes=(("acme",),))))
    expect(deleted is True, "a prefix of the item's scope did not delete it")
    expect(await record_of(t, a) is None, "the item is still there")


@check(CHECKS, "supports_ttl")
async def check_purge_removes_expired_items_earliest_first(t: StoreUnderTest) -> None:
    """``PurgeExpired(now, limit)`` deletes at most ``limit`` items expired at ``now``,
    the earliest expiry first, and answers how many; live items stay."""
    items = [
        record(1, "first to go", expires_at=later(minutes=2)),
        record(2, "second to go", expires_at=later(minutes=3)),
        record(3, "third to go", expires_at=later(minutes=1), scope=KIM),
        record(4, "still live", expires_at=later(hours=2)),
        record(5, "never expires"),
    ]
    await store_items(t, *items)
    at = later(minutes=10)
    expect(await t.one(PurgeExpired(at, 2)) == 2, "the first purge did not delete 2 items")
    gone = [r.id for r in items if await record_of(t, r.id, NOW) is None]
    expect(gone == ["r000001", "r000003"], f"purged {gone}, expected the earliest expiries")
    expect(await t.one(PurgeExpired(at, 2)) == 1, "the second purge did not delete the last")
    expect(await t.one(PurgeExpired(at, 2)) == 0, "a purge with nothing expired deleted something")
    kept = [r.id for r in items if await record_of(t, r.id, NOW) is not None]
    expect(kept == ["r000004", "r000005"], f"kept {kept}, expected the live items")
