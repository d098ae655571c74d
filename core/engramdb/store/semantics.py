"""The reference semantics of a store batch: what every op does, written once.

:func:`resolve` runs a batch of op records (``engramdb.store``) against a
:class:`State` and answers one result per op, in op order. It is the meaning of the
store protocol as code, used three ways:

* ``InMemoryStore`` is a :class:`State` plus ``resolve``;
* a SQL store whose guard aborted a batch replays the batch with ``resolve`` over the
  rows the batch names (``State.of(records, spaces)``) to raise the error of the op at
  fault, with the message every store gives;
* the differential check (``engramdb.testing.differential_check``) compares a store's
  answers with ``resolve``'s on random batches.

A batch runs in two passes. The first *resolves* every op, in one ``match``, against the
state as the earlier ops of the batch leave it (an overlay of the items they touch): it
checks every condition that can fail (a missing or expired id, a lost compare-and-set, a
bad vector, a query of the wrong size) and computes every write's outcome, changing
nothing. The second applies the outcomes and runs the reads, in op order; nothing in it
can fail. So a batch that raises leaves the state exactly as it was, and a batch costs
what its ops touch, never a copy of the state.

:data:`OPS` is the table of the op types ``resolve`` answers. Each store declares its own
table as ``OPS`` (``engramdb.testing.check_op_table`` fails when an op of the protocol
is missing from it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, get_args

from engramdb import store
from engramdb._base.clock import to_ms
from engramdb._base.errors import StoreError
from engramdb._base.types import MemoryRecord, Utility
from engramdb.store import Op, check_batch
from engramdb.store._outcomes import (
    check_query,
    check_restore,
    check_vector,
    evaluated,
    exposed,
    live,
    manually_valued,
    next_revision,
    patched,
)
from engramdb.store._state import Receipt, State

__all__ = ["OPS", "State", "resolve"]

_Step = Callable[[], Any]

OPS: Final[frozenset[type]] = frozenset(get_args(Op))
"""The op types :func:`resolve` answers: every op of the protocol, each a case of its
``match`` (a test holds the two together)."""


def resolve(ops: Sequence[Op], state: State) -> list[Any]:
    """Run the batch ``ops`` against ``state``: one result per op, in op order.

    Atomic: when an op raises (``ValidationError``, ``NotFoundError``,
    ``ConflictError``, ``DimensionMismatchError``, as every store must), ``state`` is
    unchanged; otherwise it holds every write of the batch. A ``StoreError`` names an
    object that is no op of the protocol.
    """
    check_batch(ops)
    overlay = _Overlay(state)
    steps = [_resolve(op, overlay) for op in ops]  # may raise: nothing changed
    return [step() for step in steps]


def _resolve(op: Op, overlay: _Overlay) -> _Step:
    """Check ``op`` against the state as the batch has changed it so far and return the
    step that applies it (and answers it) in pass 2."""
    state = overlay.state
    match op:
        case store.PutItem():
            old = overlay.record(op.record.id)
            record = next_revision(old, op.record, op.now, op.expected_revision)
            if record is op.record:  # new, or replacing an expired item: no history
                return overlay.set(record, (), 0, fresh=True)
            assert old is not None
            return overlay.set(record, (*overlay.history(old.id), old), op.keep_revisions)
        case store.RestoreItem():
            check_restore(overlay.record(op.record.id), op)
            history = tuple(reversed(op.history))  # the state keeps them oldest first
            stored = overlay.set(op.record, history, len(history), fresh=True)
            if op.utility is None:
                return _sequence(stored, lambda: op.record)
            return _sequence(stored, overlay.change({op.record.id: op.utility}, {}, op.record))
        case store.PatchItem():
            old = overlay.record(op.id)
            record = patched(old, op)
            assert old is not None
            return overlay.set(record, (*overlay.history(old.id), old), op.keep_revisions)
        case store.DeleteItem():
            found = overlay.record(op.id)
            if found is None or (op.scopes is not None and found.scope not in op.scopes):
                return lambda: False
            return overlay.remove([op.id], True)
        case store.DeleteItems():
            ids = [
                record.id
                for record in overlay.records()
                if record.scope in op.scopes and (op.filter is None or op.filter.matches(record))
            ]
            return overlay.remove(ids, len(ids))
        case store.PutVector():
            check_vector(op, overlay.spaces.get(op.space_id))
            return lambda: state.put_vector(op)
        case store.RegisterSpace():
            overlay.spaces.setdefault(op.space.id, op.space.dimensions)
            return lambda: state.register(op)
        case store.DropSpace():
            overlay.spaces.pop(op.space_id, None)
            return lambda: state.drop_space(op)
        case store.PurgeExpired():
            return _purge_expired(op, overlay)
        case store.TrimScope():
            gone = _beyond(op, overlay)
            return overlay.remove(gone, len(gone))
        case store.RecordSelection():
            return _record_selection(op, overlay)
        case store.ConsumeSelection():
            return _consume_selection(op, overlay)
        case store.SetManual():
            return _set_manual(op, overlay)
        case store.GetItems():
            return lambda: state.get_items(op)
        case store.FindVectors():
            return lambda: state.find_vectors(op)
        case store.GetVectors():
            return lambda: state.get_vectors(op)
        case store.FindContent():
            return lambda: state.find_content(op)
        case store.ListItems():
            return lambda: state.list_items(op)
        case store.ListScopes():
            return lambda: state.list_scopes(op)
        case store.History():
            return lambda: state.history_of(op)
        case store.UnreadableItems():
            return lambda: []  # the reference keeps records as objects: each one reads
        case store.SearchVectors():
            check_query(op, overlay.spaces.get(op.space_id))
            return lambda: state.search_vectors(op)
        case store.SearchLexical():
            return lambda: state.search_lexical(op)
        case store.PendingTexts():
            return lambda: state.pending_texts(op)
        case store.RepairVectors():
            return lambda: state.repair_vectors(op)
        case store.PackVectors():
            return lambda: 0  # the reference keeps no packed segments
        case store.Stats():
            return lambda: state.stats(op)
        case store.GetUtility():
            return lambda: state.get_utility(op)
        case _:
            raise StoreError(f"no store op is {op!r}; see engramdb.store for the ops")


# -- the outcomes of the writes that touch many items -------------------------------------


def _sequence(*steps: _Step) -> _Step:
    """One step running ``steps`` in order and answering the last one's result."""
    return lambda: [step() for step in steps][-1]


def _live_ids(ids: Iterable[str], now: datetime, overlay: _Overlay) -> list[str]:
    return [i for i in dict.fromkeys(ids) if live(overlay.record(i), now)]


def _purge_expired(op: store.PurgeExpired, overlay: _Overlay) -> _Step:
    expired = sorted(
        (r for r in overlay.records() if not live(r, op.now)),
        key=lambda r: (to_ms(r.expires_at) if r.expires_at else 0, r.id),
    )
    purged = [r.id for r in expired[: op.limit]]
    now_ms = to_ms(op.now)
    stale = {key: None for key, r in overlay.receipts() if r.expires_ms <= now_ms}
    return _sequence(overlay.change({}, stale), overlay.remove(purged, len(purged)))


def _record_selection(op: store.RecordSelection, overlay: _Overlay) -> _Step:
    now_ms = to_ms(op.now)
    ids = tuple(dict.fromkeys(op.memory_ids))
    kept = {k: r for k, r in overlay.receipts() if r.scope == op.scope and r.expires_ms > now_ms}
    receipts: dict[str, Receipt | None] = {
        k: None for k, r in overlay.receipts() if r.scope == op.scope and k not in kept
    }
    kept[op.id] = receipts[op.id] = Receipt(op.scope, ids, op.context, now_ms, to_ms(op.expires_at))
    oldest = sorted((r.created_ms, k) for k, r in kept.items())
    for _created, key in oldest[: max(0, len(oldest) - op.keep)]:
        receipts[key] = None
    evidence: dict[str, Utility | None] = {}
    for item_id in _live_ids(ids, op.now, overlay):
        evidence[item_id] = exposed(overlay.evidence(item_id), op.now)
    return overlay.change(evidence, receipts)


def _consume_selection(op: store.ConsumeSelection, overlay: _Overlay) -> _Step:
    receipt = overlay.receipt(op.id)
    if receipt is None or receipt.scope != op.scope:
        return lambda: False
    if receipt.expires_ms <= to_ms(op.now):
        return overlay.change({}, {op.id: None}, False)
    evidence: dict[str, Utility | None] = {}
    if receipt.memory_ids:
        share = op.score / len(receipt.memory_ids)
        for item_id in _live_ids(receipt.memory_ids, op.now, overlay):
            evidence[item_id] = evaluated(overlay.evidence(item_id), share, receipt.context, op)
    return overlay.change(evidence, {op.id: None}, True)


def _set_manual(op: store.SetManual, overlay: _Overlay) -> _Step:
    record = overlay.record(op.id)
    if record is None or not live(record, op.now) or record.scope not in op.scopes:
        return lambda: False
    return overlay.change({op.id: manually_valued(overlay.evidence(op.id), op)}, {}, True)


def _beyond(op: store.TrimScope, overlay: _Overlay) -> list[str]:
    """The live items of ``op.scope`` beyond the ``keep`` to keep: the most useful (with
    ``by_utility``), then the newest, are kept."""
    records = [r for r in overlay.records() if r.scope == op.scope and live(r, op.now)]

    def worth(r: MemoryRecord) -> tuple[float, int, str]:
        value = overlay.evidence(r.id).value() if op.by_utility else 0.0
        return (value, to_ms(r.created_at), r.id)

    records.sort(key=worth, reverse=True)
    return [r.id for r in records[op.keep :]]


class _Overlay:
    """Pass 1's view of the state: the items, histories, evidence, receipts and spaces as
    the batch's earlier ops leave them, without changing the state."""

    __slots__ = ("_evidence", "_history", "_items", "_receipts", "spaces", "state")

    def __init__(self, state: State) -> None:
        self.state = state
        self._items: dict[str, MemoryRecord | None] = {}  # None: removed by the batch
        self._history: dict[str, tuple[MemoryRecord, ...]] = {}
        self._evidence: dict[str, Utility | None] = {}  # None: no evidence (any more)
        self._receipts: dict[str, Receipt | None] = {}  # None: gone
        self.spaces = dict(state.spaces)

    def evidence(self, item_id: str) -> Utility:
        if item_id in self._evidence:
            return self._evidence[item_id] or Utility()
        return self.state.utility.get(item_id, Utility())

    def receipts(self) -> Iterator[tuple[str, Receipt]]:
        for key, receipt in self.state.receipts.items():
            if key not in self._receipts:
                yield key, receipt
        yield from ((k, r) for k, r in self._receipts.items() if r is not None)

    def receipt(self, key: str) -> Receipt | None:
        if key in self._receipts:
            return self._receipts[key]
        return self.state.receipts.get(key)

    def change(
        self,
        evidence: Mapping[str, Utility | None],
        receipts: Mapping[str, Receipt | None],
        result: object = None,
    ) -> _Step:
        """Set evidence and receipts (None: remove them) now, and in the state in pass 2."""
        self._evidence.update(evidence)
        self._receipts.update(receipts)
        state = self.state

        def step() -> object:
            state.change(evidence, receipts)
            return result

        return step

    def record(self, item_id: str) -> MemoryRecord | None:
        if item_id in self._items:
            return self._items[item_id]
        return self.state.items.get(item_id)

    def history(self, item_id: str) -> tuple[MemoryRecord, ...]:
        if item_id in self._history:
            return self._history[item_id]
        return self.state.history.get(item_id, ())

    def records(self) -> Iterator[MemoryRecord]:
        for item_id, record in self.state.items.items():
            if item_id not in self._items:
                yield record
        yield from (record for record in self._items.values() if record is not None)

    def set(
        self,
        record: MemoryRecord,
        history: tuple[MemoryRecord, ...],
        keep: int,
        *,
        fresh: bool = False,
    ) -> _Step:
        """Make ``record`` the item, with the newest ``keep`` revisions of ``history``;
        a ``fresh`` item (new, or replacing an expired one) starts without evidence."""
        history = history[max(0, len(history) - keep) :]
        self._items[record.id] = record
        self._history[record.id] = history
        if fresh:
            self._evidence[record.id] = None
        state = self.state

        def step() -> MemoryRecord:
            state.set(record, history)
            if fresh:
                state.utility.pop(record.id, None)
            return record

        return step

    def remove(self, ids: list[str], result: object) -> _Step:
        for item_id in ids:
            self._items[item_id] = None
            self._history[item_id] = ()
            self._evidence[item_id] = None
        state = self.state

        def step() -> object:
            for item_id in ids:
                state.remove(item_id)
            return result

        return step
