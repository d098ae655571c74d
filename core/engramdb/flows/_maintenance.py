"""Maintenance flows: embed what is pending, repair what does not decode, purge what
expired, drop the vectors of spaces nobody embeds in any more.

:func:`reindex` does all of it for the active space, unbounded; :func:`maintain` runs
one bounded pass (``Memory.maintain``, the ``Maintainer``'s unit of work). Both commit as
they go: the content-addressed vector table is the resume point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engramdb._base.errors import StoreError, ValidationError, shown
from engramdb.flows._effects import Flow, Store
from engramdb.flows.context import FlowContext, space_id, vector_ops
from engramdb.store import DropSpace, PackVectors, PendingTexts, PurgeExpired, RepairVectors, Stats
from engramdb.validate import check_int

__all__ = ["MaintenanceReport", "maintain", "reindex"]

_REPAIR_PAGE = 1000


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What one ``maintain()`` pass did: texts embedded, corrupt vectors repaired, expired
    memories purged; ``pending``: texts still without a vector in the active space (0:
    done); ``repair_after``: where the next pass's repair scan goes on ("" : start over);
    ``pruned``: vectors of other spaces deleted (``prune_spaces=True``); ``packed``:
    vectors copied into packed segments (one scope per pass, on a store that
    ``packs_vectors``)."""

    embedded: int
    repaired: int
    purged: int
    pending: int
    repair_after: str
    pruned: int = 0  # vectors of other spaces deleted (prune_spaces=True)
    packed: int = 0  # vectors copied into packed segments (PackVectors)

    @property
    def work_left(self) -> bool:
        """Whether the next pass is due at once: texts are pending, a repair scan goes
        on, or this pass packed (``PackVectors`` packs a few segments per pass, so a
        large scope written without packing takes several)."""
        return self.pending > 0 or self.repair_after != "" or self.packed > 0


def reindex(
    ctx: FlowContext, batch_size: object = 64, progress: Callable[[int], None] | None = None
) -> Flow[int]:
    """Embed every text without a usable vector in the active space: the pending
    ones, then those whose stored vector does not decode. Return how many."""
    size = check_int("batch_size", batch_size, 1, 10_000)
    done = 0
    seen: set[str] = set()
    while True:
        # An embedder that learns its dimensions on first use has no space yet: every
        # text counts as pending, and the first batch teaches it its space.
        (pending,) = yield Store((PendingTexts(space_id(ctx) or "", size),))
        if not pending:
            break
        hashes = [sha for sha, _ in pending]
        if seen.intersection(hashes):
            raise StoreError(
                "reindex() stored vectors that the store still reports as pending; "
                "the store is inconsistent"
            )
        seen.update(hashes)
        ops = yield from vector_ops(ctx, hashes, [t for _, t in pending], ctx.now())
        yield Store(tuple(ops))
        done += len(pending)
        if progress is not None:
            progress(done)
    active = space_id(ctx)
    after: str | None = ""
    while active is not None and after is not None:
        (repair,) = yield Store((RepairVectors(active, _REPAIR_PAGE, after),))
        after = repair.last
        for start in range(0, len(repair.corrupt), size):
            chunk = repair.corrupt[start : start + size]
            ops = yield from vector_ops(
                ctx, [sha for sha, _ in chunk], [t for _, t in chunk], ctx.now(), replace=True
            )
            yield Store(tuple(ops))
            done += len(chunk)
            if progress is not None:
                progress(done)
    return done


def maintain(
    ctx: FlowContext,
    max_items: object = 1000,
    repair_after: object = "",
    prune_spaces: object = False,
) -> Flow[MaintenanceReport]:
    """One bounded pass: embed up to ``max_items`` pending texts; unless that used the
    whole budget, examine up to ``max_items`` stored vectors for corruption from
    ``repair_after`` on (re-embedding those that do not decode); purge up to
    ``max_items`` expired memories; and once nothing is pending pack the vectors of one
    large scope its segments do not cover (on a store that ``packs_vectors``: a cold
    search then reads a few blobs, not a row per vector); with ``prune_spaces``, once
    nothing is pending, drop the vectors of every space but the active one. Every step
    commits as it goes, so a pass that fails leaves its progress stored, and the next
    pass goes on from the store's state."""
    budget = check_int("max_items", max_items, 1, 1_000_000)
    prune = ctx.check.flag("prune_spaces", prune_spaces)
    if not isinstance(repair_after, str):
        raise ValidationError(f"repair_after={shown(repair_after)} must be a string")
    embedded = 0
    while embedded < budget:
        # The first read of a pass asks for the whole budget (one scan of the pending
        # texts, not one per embedder batch); an embedder that has no space yet learns
        # it from the first batch, so until then one batch at a time.
        step = max(1, int(ctx.embedder.max_batch))
        active = space_id(ctx)
        limit = budget - embedded if active is not None else min(budget - embedded, step)
        (pending,) = yield Store((PendingTexts(active or "", limit),))
        if not pending:
            break
        for start in range(0, len(pending), step):  # each batch committed as it goes
            chunk = pending[start : start + step]
            hashes = [sha for sha, _ in chunk]
            ops = yield from vector_ops(ctx, hashes, [t for _, t in chunk], ctx.now())
            yield Store(tuple(ops))
            embedded += len(chunk)
    repaired, after = 0, repair_after
    active = space_id(ctx)
    if active is not None and embedded < budget:
        # A pass that spent its whole budget embedding leaves the scan where it was: the
        # backlog comes first, and the scan goes on from ``repair_after`` once it drains.
        (repair,) = yield Store((RepairVectors(active, budget, repair_after),))
        corrupt = list(repair.corrupt)
        if corrupt:
            ops = yield from vector_ops(
                ctx, [sha for sha, _ in corrupt], [t for _, t in corrupt], ctx.now(), True
            )
            yield Store(tuple(ops))
        repaired, after = len(corrupt), repair.last or ""
    now = ctx.now()
    purged, stats = yield Store((PurgeExpired(now, budget), Stats(space_id(ctx) or "", now)))
    pruned = 0
    if prune and active is not None and stats.pending == 0:
        others = tuple(DropSpace(space) for space in stats.spaces if space != active)
        if others:
            pruned = sum((yield Store(others)))
    packed = 0
    if active is not None and ctx.capabilities.packs_vectors and stats.pending == 0:
        # Only once the texts are embedded: a vector arriving in a packed range deletes
        # its segment, so packing while embedding would pack the same ids pass after pass.
        (packed,) = yield Store((PackVectors(active),))
    return MaintenanceReport(
        embedded, repaired, int(purged), stats.pending, after, pruned, int(packed)
    )
