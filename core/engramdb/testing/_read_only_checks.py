"""Checks of a read-only store object (``capabilities.read_only``): it answers reads of
the storage it shares, and refuses every batch that writes, changing nothing."""

from __future__ import annotations

from engramdb._base.errors import StoreError
from engramdb.store import (
    ConsumeSelection,
    DeleteItem,
    DeleteItems,
    GetItems,
    Op,
    PatchItem,
    PurgeExpired,
    PutItem,
    PutVector,
    RecordSelection,
    RegisterSpace,
    ScopeSet,
    SearchLexical,
    SearchVectors,
    SetManual,
    TrimScope,
)
from engramdb.testing._checks import (
    SAM,
    StoreCheck,
    check,
    ids_of,
    record_of,
    stats_of,
    store_items,
    vector_of,
)
from engramdb.testing._harness import NOW, SPACE, StoreUnderTest, expect, later, raises, record

__all__ = ["CHECKS"]

CHECKS: list[StoreCheck] = []


def _writes() -> list[Op]:
    """One op of each kind that may change a store (the policy's included: a read-only
    store refuses them whether or not it keeps policy evidence)."""
    new = record(2, "kim likes tea")
    sam = ScopeSet.of(SAM)
    return [
        PutItem(new, NOW),
        PatchItem("r000001", later(seconds=1), importance=0.9),
        DeleteItem("r000001"),
        DeleteItems(sam),
        PutVector(SPACE.id, new.content_sha256, vector_of(new.text), NOW),
        RegisterSpace(SPACE, NOW),
        PurgeExpired(later(days=365), 10),
        RecordSelection("s1", SAM, ("r000001",), "", NOW, later(hours=1), 256),
        ConsumeSelection("s1", SAM, 0.5, NOW, 8, False),
        SetManual("r000001", 0.5, NOW, False, sam),
        TrimScope(SAM, 0, NOW, False),
    ]


@check(CHECKS, "read_only")
async def check_a_read_only_store_answers_reads_and_refuses_every_write(
    t: StoreUnderTest,
) -> None:
    """A read-only store object on the storage declares ``capabilities.read_only``,
    answers reads of what the writable one stored (``GetItems``, both search legs), and
    refuses each write op, alone or after a read in one batch, with ``StoreError``
    saying "read-only"; afterwards the storage holds exactly what it held."""
    kept = record(1, "sam eats pasta")
    await store_items(t, kept)
    before = await stats_of(t)
    reader = t.reader()
    expect(reader is not None, "the target offered no read-only store")
    assert reader is not None
    try:
        expect(reader.capabilities.read_only, "the read-only store does not declare read_only")
        expect(
            await record_of(reader, kept.id) == kept,
            "the read-only store does not answer GetItems",
        )
        (found,) = await reader.batch(
            [SearchVectors(ScopeSet.of(SAM), SPACE.id, (1.0, 0.0, 0.0, 0.0), 5, NOW)]
        )
        expect(ids_of(found) == [kept.id], f"SearchVectors answered {ids_of(found)}")
        if reader.capabilities.supports_lexical:
            (found,) = await reader.batch([SearchLexical(ScopeSet.of(SAM), "pasta", 5, NOW)])
            expect(ids_of(found) == [kept.id], f"SearchLexical answered {ids_of(found)}")
        for op in _writes():
            for batch in ([op], [GetItems((kept.id,), NOW), op]):
                what = f"a read-only store given {[type(o).__name__ for o in batch]}"
                error = await raises(StoreError, reader.batch(batch), what)
                expect("read-only" in str(error), f"{what} said {error}, not 'read-only'")
    finally:
        await reader.close()
    expect(await record_of(t, kept.id) == kept, "a refused write changed the stored memory")
    after = await stats_of(t)
    expect(after == before, f"refused writes changed the store: {before} became {after}")
