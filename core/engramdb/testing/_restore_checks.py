"""Checks of what a backup reads and writes: stored vector bytes (``GetVectors``) and
items restored exactly as given (``RestoreItem``)."""

from __future__ import annotations

import struct
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
    SearchVectors,
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
from engramdb.testing._harness import (
    NOW,
    SPACE,
    StoreUnderTest,
    expect,
    later,
    raises,
    record,
    unit,
)

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


_MANY = 120  # a restore's batch in small: PostgresStore writes such runs set-based


def _many() -> tuple[list[RestoreItem], list[PutVector], EmbeddingSpace]:
    """What a restore of ``_MANY`` memories writes: items in three scopes (every third
    with two earlier revisions, every fourth with evidence, every tenth sharing its text
    with the item before it, of another scope), and a vector per distinct text in
    ``SPACE`` (and for every fifth in a second space), each text's vector once."""
    items: list[RestoreItem] = []
    for n in range(_MANY):
        scope = (SAM, KIM, ("acme", "team"))[n % 3]
        shared = n - 1 if n % 10 == 9 else n  # the text of the item before, in its scope
        text = f"memory {shared} of {('sam', 'kim', 'team')[shared % 3]}"
        first = record(10 + n, text + " (first)", scope, at=later(days=-2, seconds=n))
        second = replace(
            first, text=text + " (second)", revision=2, updated_at=later(days=-1, seconds=n)
        )
        current = replace(first, text=text, revision=3, updated_at=later(hours=-1, seconds=n))
        current = replace(current, content_sha256=record(0, text).content_sha256)
        second = replace(second, content_sha256=record(0, second.text).content_sha256)
        history = (second, replace(first, content_sha256=record(0, first.text).content_sha256))
        utility = Utility(exposures=n, eval_count=1, eval_sum=n / 7) if n % 4 == 0 else None
        if n % 3 == 0:
            items.append(RestoreItem(current, NOW, history, utility))
        else:
            items.append(RestoreItem(replace(current, revision=1), NOW, (), utility))
    other = EmbeddingSpace("other", "unit", 4)
    vectors: list[PutVector] = []
    seen: set[str] = set()
    for n, op in enumerate(items):
        sha = op.record.content_sha256
        if sha not in seen:
            seen.add(sha)
            vectors.append(PutVector(SPACE.id, sha, vector_of(op.record.text), later(seconds=n)))
            if n % 5 == 0:
                vectors.append(PutVector(other.id, sha, vector_of(str(n)), later(seconds=-n)))
    return items, vectors, other


@check(CHECKS)
async def check_many_restores_and_vectors_in_one_batch(t: StoreUnderTest) -> None:
    """A batch of a hundred RestoreItem ops, then their PutVector ops (as a restore
    writes them), answers each record and a None per vector, and stores exactly what
    the ops one by one would: every record, history, evidence, vector and time; a vector
    given twice in the run keeps the first unless the second replaces; a vector already
    stored is kept; coverage and Stats count them all."""
    items, vectors, other = _many()
    kept = items[3].record.content_sha256  # stored before: a PutVector keeps it
    await t.batch([RegisterSpace(SPACE, NOW), PutVector(SPACE.id, kept, vector_of("kept"), NOW)])
    at = later(minutes=5)
    first, second = items[0].record.content_sha256, items[1].record.content_sha256
    twice = [
        PutVector(SPACE.id, first, vector_of("ignored"), at),  # the first stays
        PutVector(SPACE.id, second, vector_of("replaced"), at, replace=True),
    ]
    ops: list[Any] = [RegisterSpace(SPACE, NOW), RegisterSpace(other, NOW), *items]
    answers = await t.batch([*ops, *vectors, *twice])
    expect(len(answers) == len(ops) + len(vectors) + 2, f"{len(answers)} answers")
    restored = answers[2 : len(ops)]
    expect(restored == [op.record for op in items], "the restores' answers are not the records")
    expect(answers[len(ops) :] == [None] * (len(vectors) + 2), "a PutVector answered a value")
    ids = tuple(op.record.id for op in items)
    found = await t.one(GetItems(ids, NOW, SPACE.id))
    expect([f.record if f else None for f in found] == restored, "GetItems disagrees")
    times = {v.content_sha256: v.embedded_at for v in vectors if v.space_id == SPACE.id}
    times[kept], times[second] = NOW, at
    wrong = [f for f in found if f is None or f.embedded_at != times[f.record.content_sha256]]
    expect(not wrong, f"{len(wrong)} items have another embedded_at, e.g. {wrong[:1]!r}")
    stored = await t.one(GetVectors(SPACE.id, tuple(times)))
    expected = {
        v.content_sha256: (v.vector, v.embedded_at) for v in vectors if v.space_id == SPACE.id
    }
    expected[kept] = (vector_of("kept"), NOW)
    expected[second] = (vector_of("replaced"), at)
    expect(stored == expected, "GetVectors of the space disagrees with the ops one by one")
    given = {v.content_sha256: (v.vector, v.embedded_at) for v in vectors if v.space_id == other.id}
    expect(await t.one(GetVectors(other.id, tuple(given))) == given, "the other space differs")
    if t.capabilities.supports_history:
        for op in items[:30]:
            history = await t.one(History(op.record.id, 10, NOW))
            expect(history == list(op.history), f"History of {op.record.id} is {history!r}")
    if t.capabilities.supports_policy:
        evidence = await t.one(GetUtility(ids))
        wanted = {op.record.id: op.utility for op in items if op.utility is not None}
        expect(evidence == wanted, "GetUtility disagrees with the restored evidence")
    stats = await t.one(Stats(SPACE.id, NOW))
    expect(
        (stats.items, stats.scopes, stats.vectors) == (_MANY, 3, len(times)),
        f"Stats answered {stats!r}",
    )
    embedded = dict(stats.embedded)
    others = sum(op.record.content_sha256 in given for op in items)
    expect(embedded == {SPACE.id: _MANY, other.id: others}, f"Stats.embedded {stats.embedded}")
    for scope in (SAM, KIM):
        result = await t.one(
            SearchVectors(ScopeSet.of(scope), other.id, unit((1, 0, 0, 0)), 3, NOW)
        )
        mine = [op for op in items if op.record.scope == scope]
        covered = sum(op.record.content_sha256 in given for op in mine)
        expect(result.coverage == (covered, len(mine)), f"coverage {result.coverage} of {scope}")


@check(CHECKS)
async def check_a_refused_op_amid_many_restores_writes_nothing(t: StoreUnderTest) -> None:
    """In a batch of many RestoreItem and PutVector ops, one refused op in the middle (a
    history out of order, an id a live item holds, an id restored twice, a vector that
    is not of unit length) raises its error and the batch writes nothing at all."""
    items, vectors, _ = _many()
    items, vectors = items[:60], [v for v in vectors if v.space_id == SPACE.id][:50]
    held = items[30].record
    await store_items(t, replace(held, revision=1), vectors=False)
    before = await stats_of(t)
    bad_history = replace(items[33], history=tuple(reversed(items[33].history)))
    unit_less = replace(vectors[25], vector=struct.pack("<4f", 1.0, 1.0, 0.0, 0.0))
    cases: list[tuple[str, type[Exception], list[Any]]] = [
        ("a history out of order", ValidationError, [*items[31:33], bad_history, *items[34:]]),
        ("an id a live item holds", ConflictError, items),
        ("an id restored twice", ConflictError, [*items[31:], items[40]]),
        (
            "a vector not of unit length",
            ValidationError,
            [*items[31:], *vectors[:25], unit_less, *vectors[26:]],
        ),
    ]
    for what, error, ops in cases:
        await raises(error, t.batch([RegisterSpace(SPACE, NOW), *ops]), what)
        expect(await stats_of(t) == before, f"the batch with {what} wrote something")
        expect(await record_of(t, items[31].record.id) is None, f"{what}: an item was kept")
