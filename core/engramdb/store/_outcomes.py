"""The outcome every store must reach: what a write does to an item, and the checks a
store makes on a vector or a query.

Each store (``InMemoryStore``, the SQL plans, a store of your own) either calls these
or reaches the same result another way, and the conformance suites hold it to them.
Import them from :mod:`engramdb.store`, which exports them for store authors
(``docs/stores.md``); ``check_batch`` lives in ``_ops``, beside the ops it reads.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from engramdb._base.clock import to_ms
from engramdb._base.errors import (
    ConflictError,
    DimensionMismatchError,
    NotFoundError,
    ValidationError,
)
from engramdb._base.types import ContextUtility, MemoryRecord, Utility
from engramdb._vectors.codec import check_unit_vector

if TYPE_CHECKING:  # the ops are only annotations here
    from engramdb.store._ops import (
        ConsumeSelection,
        PatchItem,
        PutVector,
        RestoreItem,
        SearchVectors,
        SetManual,
    )

__all__ = [
    "check_query",
    "check_restore",
    "check_vector",
    "conflict",
    "evaluated",
    "exposed",
    "live",
    "manually_valued",
    "next_revision",
    "not_found",
    "other_scope",
    "patched",
]


# -- what a write does to an item: the outcome every store reaches -------------------------


def live(record: MemoryRecord | None, now: datetime) -> bool:
    """Whether ``record`` exists and has not expired at ``now``."""
    return record is not None and (
        record.expires_at is None or to_ms(record.expires_at) > to_ms(now)
    )


def not_found(item_id: str) -> NotFoundError:
    return NotFoundError(f"no memory with id={item_id!r}; it was forgotten or expired")


def conflict(item_id: str, expected: int, actual: int) -> ConflictError:
    where = "does not exist" if actual == 0 else f"is at revision {actual}"
    return ConflictError(
        f"memory {item_id!r} {where}, not revision {expected}; read it again and retry",
        expected=expected,
        actual=actual,
    )


def other_scope(item_id: str) -> ValidationError:
    """The refusal names no scope: a caller confined to its own scope must not learn
    another one's name."""
    return ValidationError(
        f"id={item_id!r} already belongs to another scope; use another id, or forget() "
        "the old memory from its own scope first"
    )


def check_vector(op: PutVector, dimensions: int | None) -> None:
    """Refuse ``op`` unless its vector is a unit vector of its space's registered
    ``dimensions`` (None: the space is not registered)."""
    if dimensions is None:
        raise ValidationError(
            f"space {op.space_id!r} is not registered; send RegisterSpace(space) before "
            "(or in the same batch as) its vectors"
        )
    check_unit_vector(op.vector, dimensions)


def check_query(op: SearchVectors, dimensions: int | None) -> None:
    """Refuse a query whose size is not its space's registered ``dimensions`` (an
    unregistered space, None, holds no vectors: the search answers no hits)."""
    if dimensions is not None and len(op.query) != dimensions:
        raise DimensionMismatchError(
            f"the query has {len(op.query)} dimensions but space {op.space_id!r} has "
            f"{dimensions}; embed the query with the space's model",
            expected=dimensions,
            actual=len(op.query),
        )


def next_revision(
    old: MemoryRecord | None, new: MemoryRecord, now: datetime, expected: int | None
) -> MemoryRecord:
    """The record a ``PutItem(new)`` stores over ``old`` (or raises, changing nothing)."""
    current = old if live(old, now) else None
    actual = 0 if current is None else current.revision
    if current is not None and current.scope != new.scope:
        raise other_scope(new.id)
    if expected is not None and expected != actual:
        raise conflict(new.id, expected, actual)
    if current is None:
        return new
    return replace(
        new,
        revision=current.revision + 1,
        created_at=current.created_at,
        updated_at=max(new.updated_at, current.created_at),  # a clock stepped back
    )


def check_restore(old: MemoryRecord | None, op: RestoreItem) -> None:
    """Refuse ``op`` (changing nothing) when a live item holds its id (``old``, the item
    of that id or None; ``ConflictError``) or when its history is not earlier revisions
    of its record (``ValidationError``): each of the record's id and scope, revisions
    below the record's, newest first, each once. Pass ``old=None`` to check only the
    op."""
    record = op.record
    previous = record.revision
    for earlier in op.history:
        if earlier.id != record.id or earlier.scope != record.scope:
            raise ValidationError(
                f"the history of item {record.id!r} holds a revision of another item or "
                "scope; give only the item's own earlier revisions"
            )
        if not 0 < earlier.revision < previous:
            raise ValidationError(
                f"the history of item {record.id!r} (at revision {record.revision}) holds "
                f"revision {earlier.revision} out of order; give its earlier revisions newest "
                "first, each below the one before"
            )
        previous = earlier.revision
    if live(old, op.now):
        assert old is not None
        raise ConflictError(
            f"memory {record.id!r} already exists (a live item at revision {old.revision}); "
            "a restore inserts new items only: forget it first, or restore without it",
            expected=0,
            actual=old.revision,
        )


def patched(old: MemoryRecord | None, op: PatchItem) -> MemoryRecord:
    """The record a ``PatchItem`` stores over ``old`` (or raises, changing nothing): an
    item outside the patch's ``scopes`` is not found, as a missing one."""
    if (
        old is None
        or not live(old, op.now)
        or (op.scopes is not None and old.scope not in op.scopes)
    ):
        raise not_found(op.id)
    if op.expected_revision is not None and op.expected_revision != old.revision:
        raise conflict(op.id, op.expected_revision, old.revision)
    # A clock that stepped back never dates an update before the creation.
    updated_at = max(op.now, old.created_at)
    return replace(old, **op.changes(), revision=old.revision + 1, updated_at=updated_at)


def evaluated(utility: Utility, share: float, context: str, op: ConsumeSelection) -> Utility:
    """``utility`` after one evaluation ``share`` of ``op`` in ``context`` ("": none):
    the outcome every store reaches."""
    contexts = list(utility.contexts)
    if context:
        found = next((c for c in contexts if c.key == context), None)
        if found is not None:
            contexts.remove(found)
        count, total = (found.eval_count, found.eval_sum) if found else (0, 0.0)
        contexts.append(ContextUtility(context, count + 1, total + share, op.now))
        contexts.sort(key=lambda c: (to_ms(c.updated_at), c.key), reverse=True)
        del contexts[op.max_contexts :]
    return replace(
        utility,
        eval_count=utility.eval_count + 1,
        eval_sum=utility.eval_sum + share,
        reinforced_at=op.now if op.reinforce and op.score > 0 else utility.reinforced_at,
        contexts=tuple(contexts),
    )


def exposed(utility: Utility, now: datetime) -> Utility:
    """``utility`` after one more exposure at ``now`` (``RecordSelection``)."""
    return replace(utility, exposures=utility.exposures + 1, last_exposed_at=now)


def manually_valued(utility: Utility, op: SetManual) -> Utility:
    """``utility`` after ``op`` set (or cleared) its manual value: the outcome every
    store reaches."""
    positive = op.reinforce and op.value is not None and op.value > 0
    return replace(
        utility,
        manual=op.value,
        manual_updated_at=op.now,
        reinforced_at=op.now if positive else utility.reinforced_at,
    )
