"""The flows of a bound view: authority fixed by the operator, policy applied.

A bound view (``memory.bind(scope, read=..., session=...)``) acts for one
:class:`Authority`. Its writes go to the bound scope, or with ``durability="session"`` to
the session's sub-scope ``(*scope, "session", session)`` (refused when no session is
bound); its recall searches the bound scope, the session and the read-only ``read``
scopes, nothing else; ``get``, ``history``, ``update``, ``forget``, ``complete`` and
``feedback`` answer as if a memory outside those scopes did not exist (``update`` and
``forget`` reach only the bound scope and session, and the store checks that inside the
write batch). ``list``, ``forget_all`` and ``status`` see the bound scope and session,
``list_scopes`` the scopes under the bound scope: never another scope's data. Evidence
(exposures, evaluations, manual values) is written only for memories of the view's own
scope and session: memories of ``read`` scopes are ranked by the evidence their owners
recorded, so a reader can neither change another scope's evidence nor learn about another
reader's use of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from dataclasses import fields as fields_of
from datetime import datetime
from typing import Any, Literal

from engramdb._base.clock import to_ms
from engramdb._base.errors import ConfigurationError, NotFoundError, ValidationError, shown
from engramdb._base.types import Hit, Hits, MemoryRecord, Remembered, Scope, Utility, validate_scope
from engramdb.flows._conversations import check_context, with_context
from engramdb.flows._effects import Flow, Store
from engramdb.flows._labels import Labels, context_key
from engramdb.flows._maintainer import MaintenanceSnapshot
from engramdb.flows._operations import UNSET, MemoryFlows
from engramdb.flows._policy import Policy
from engramdb.flows._policy import rerank as apply_policy
from engramdb.flows.context import FlowContext
from engramdb.store import (
    ConsumeSelection,
    DeleteItem,
    DeleteItems,
    GetItems,
    GetUtility,
    History,
    ListItems,
    ListScopes,
    RecordSelection,
    ScopeCount,
    ScopeSet,
    SetManual,
    Stats,
    StoreStats,
    TrimScope,
)
from engramdb.store._ids import new_id
from engramdb.validate import check_float, check_int

__all__ = ["SESSION", "Authority", "BoundFlows", "BoundStatus", "Durability"]

SESSION = "session"
"""The scope part between a bound scope and a session id."""

Durability = Literal["shared", "session"]
_DURABILITIES = ("shared", "session")
_FORGET_BATCH = 500  # deletes per store batch of forget_many


@dataclass(frozen=True, slots=True)
class BoundStatus:
    """What a bound view's ``status()`` reports: nothing that counts another scope's
    data (``Memory.status()`` counts the whole store)."""

    scope: Scope
    session: str | None
    items: int  # live memories of the bound scope and session
    active_space: str | None  # None until an embedder that learns its dimensions has run
    schema_version: int | None
    maintenance: MaintenanceSnapshot | None = None  # the memory's own maintainer's, scoped


@dataclass(frozen=True, slots=True)
class Authority:
    """What a bound view may touch: its ``scope``, the ``session`` sub-scope, and the
    read-only ``read`` selection."""

    scope: Scope
    read: ScopeSet
    session: str | None = None

    @classmethod
    def of(cls, ctx: FlowContext, scope: object, read: object, session: object) -> Authority:
        bound = validate_scope(scope)
        if session is not None:
            if not isinstance(session, str):
                raise ValidationError(f"session={shown(session)} must be a string id or None")
            validate_scope((*bound, SESSION, session))
        reads = ScopeSet() if not read else ctx.check.scopes(read)
        return cls(bound, reads, session)

    @property
    def session_scope(self) -> Scope | None:
        return None if self.session is None else (*self.scope, SESSION, self.session)

    @property
    def receipts(self) -> Scope:
        """Where the view's selection receipts live: its session's scope, else its scope
        (so another session cannot complete this session's recalls)."""
        return self.session_scope or self.scope

    @property
    def writable(self) -> ScopeSet:
        own = self.session_scope
        return ScopeSet.of(self.scope) if own is None else ScopeSet.of(self.scope, own)

    @property
    def visible(self) -> ScopeSet:
        return ScopeSet(
            tuple(dict.fromkeys((*self.writable.exact, *self.read.exact))), self.read.prefixes
        )

    def target(self, durability: object) -> Scope:
        """The scope a write of ``durability`` goes to."""
        if durability not in _DURABILITIES:
            raise ValidationError(
                f"durability={shown(durability)} is not supported; use 'shared' or 'session'"
            )
        if durability == "shared":
            return self.scope
        if self.session_scope is None:
            raise ValidationError(
                "durability='session' needs a session bound by the operator "
                "(memory.bind(scope, session=...)); this view has none, use 'shared'"
            )
        return self.session_scope


class BoundFlows:
    """Builds the flow of every operation of a bound view."""

    def __init__(self, context: FlowContext, authority: Authority, policy: Policy) -> None:
        self.context = context
        self.flows = MemoryFlows(context)  # the operations a view builds on
        self.authority = authority
        self.policy = policy

    @property
    def _policy_store(self) -> bool:
        return self.context.capabilities.supports_policy

    def _require_policy_store(self, what: str) -> None:
        if not self._policy_store:
            raise ConfigurationError(
                f"{what} needs a store that keeps policy evidence (supports_policy is False "
                "for this store)"
            )

    # -- arguments ----------------------------------------------------------------------

    def labels(self, labels: object) -> Labels:
        """Given labels, checked and normalised under the view's label rules."""
        return self.policy.label_rules.check(self.context.check.labels(labels))

    def merged(self, labels: Labels, automatic: Labels) -> Labels:
        """The given labels, and the labeler's for the names they do not set (none of the
        labeler's when together they overflow the limits: that is not the write's fault)."""
        merged = {**automatic, **labels}
        try:
            self.context.check.labels(merged)
        except ValidationError:
            return labels
        return merged

    def proposed(self, proposed: object) -> Labels:
        """A labeler's answer, kept where the rules allow it; anything unusable is none."""
        try:
            return self.policy.label_rules.keep(self.context.check.labels(proposed))
        except ValidationError:
            return {}

    # -- operations ---------------------------------------------------------------------

    def remember(
        self,
        text: str,
        scope: Scope,
        labels: Labels,
        automatic: Labels,
        **fields: Any,
    ) -> Flow[Remembered]:
        """Remember ``text`` (checked and redacted by the view, once) in ``scope`` (from
        :meth:`Authority.target`) with the given labels and, for the names they do not
        set, the labeler's; beyond ``max_items``, drop the memories the capacity does not
        keep, in the same batch."""
        capacity = self.policy.max_items

        def trim(now: datetime) -> list[TrimScope]:
            if capacity is None:
                return []
            return [TrimScope(scope, capacity, now, self.policy.reinforcement)]

        record, results = yield from self.flows.remember_then(
            text,
            scope,
            labels=self.merged(labels, automatic),
            then=trim,
            text_checked=True,
            **fields,
        )
        values = {f.name: getattr(record, f.name) for f in fields_of(record)}
        return Remembered(**values, dropped=int(results[0]) if results else 0)

    def recall(
        self,
        query: object,
        *,
        top_k: object,
        labels: object,
        rerank: object = None,
        context: object = 0,
        **options: Any,
    ) -> Flow[Hits]:
        """The policy orders every candidate (keeping the first ``max(top_k, rerank)``),
        then the rerank stage re-scores the first ``rerank`` of that order; each hit
        that is a turn comes with its ``context`` neighbours of its own scope (a scope
        the view sees: ``_conversations.with_context``)."""
        width = check_context(context)
        label_context = context_key(self.labels(labels))
        policy = self.policy
        count = self.context.rerank_count(rerank)
        search = self.flows.search(
            query,
            self.authority.visible,
            top_k=top_k,
            candidates=policy.reranks or count > 0,
            **options,
        )
        found = yield from search.run()
        ranked: Sequence[Hit] = found.ranked
        now = found.now
        if policy.reranks:
            utilities: Mapping[str, Utility] = {}
            if policy.needs_utility and self._policy_store and ranked:
                (utilities,) = yield Store((GetUtility(tuple(h.memory.id for h in ranked)),))
            kept = replace(search.ranking, top_k=max(search.ranking.top_k, count))
            ranked = apply_policy(ranked, utilities, label_context, now, policy, kept)
        found, ranked = yield from self.flows.reranked(search, found, ranked, count)
        selection_id = new_id(to_ms(now))
        if self._policy_store and found.scorable:  # a read-only store's recall writes nothing
            writable = self.authority.writable
            mine = tuple(hit.memory.id for hit in ranked if hit.memory.scope in writable)
            receipt = RecordSelection(
                selection_id,
                self.authority.receipts,
                mine,
                label_context,
                now,
                now + policy.selection_ttl,
                policy.max_selections,
            )
            yield Store((receipt,))
        return (yield from with_context(found.hits(ranked, selection_id), width, now))

    def complete(self, selection_id: object, score: object) -> Flow[bool]:
        if selection_id is None:
            raise ValidationError(
                "selection_id=None names no recall: a recall on a read-only store writes "
                "no receipt (its Hits.error says so), so there is nothing to score; "
                "recall through a store open for writing to score its hits"
            )
        op = ConsumeSelection(
            self.context.check.id(selection_id),
            self.authority.receipts,
            check_float("score", score, -1.0, 1.0),
            self.context.now(),
            self.policy.max_contexts,
            self.policy.reinforcement,
        )
        self._require_policy_store("complete()")
        (consumed,) = yield Store((op,))
        return bool(consumed)

    def feedback(self, memory_id: object, value: object) -> Flow[MemoryRecord | None]:
        checked = None if value is None else check_float("value", value, -1.0, 1.0)
        item_id = self.context.check.id(memory_id)
        self._require_policy_store("feedback()")
        now = self.context.now()
        op = SetManual(item_id, checked, now, self.policy.reinforcement, self.authority.writable)
        (found,) = yield Store((op,))
        if not found:
            return None
        return (yield from self.get(item_id))

    def get(self, memory_id: object) -> Flow[MemoryRecord | None]:
        record = yield from self.flows.get(memory_id)
        if record is None or record.scope not in self.authority.visible:
            return None
        return record

    def forget(self, memory_id: object) -> Flow[bool]:
        op = DeleteItem(self.context.check.id(memory_id), self.authority.writable)
        (deleted,) = yield Store((op,))
        return bool(deleted)

    def forget_many(self, ids: Sequence[str]) -> Flow[int]:
        """Delete the memories ``ids`` of the bound scope or session, ``_FORGET_BATCH`` a
        store batch (each atomic); answer how many there were."""
        check, scopes = self.context.check, self.authority.writable
        count = 0
        for start in range(0, len(ids), _FORGET_BATCH):
            part = ids[start : start + _FORGET_BATCH]
            deleted = yield Store(tuple(DeleteItem(check.id(i), scopes) for i in part))
            count += sum(map(bool, deleted))
        return count

    def history(self, memory_id: object, limit: object) -> Flow[list[MemoryRecord] | None]:
        """The earlier revisions of a memory the view can see, read in the batch that
        checks its scope; None when it cannot see it."""
        item_id = self.context.check.id(memory_id)
        now = self.context.now()
        op = History(item_id, check_int("limit", limit, 1, 1000), now)
        if not self.context.capabilities.supports_history:
            raise ConfigurationError(
                "this store keeps no revision history (supports_history is False)"
            )
        (found,), revisions = yield Store((GetItems((item_id,), now), op))
        if found is None or found.record.scope not in self.authority.visible:
            return None
        return list(revisions)

    def update(self, memory_id: object, **changes: Any) -> Flow[MemoryRecord | None]:
        """Patch a memory of the bound scope or session (labels under the view's rules);
        None when there is none. The store checks the scope in the write batch, so an
        item moved out of it meanwhile is not changed."""
        if changes.get("labels", UNSET) is not UNSET:
            changes["labels"] = self.labels(changes["labels"])
        try:
            return (
                yield from self.flows.update(memory_id, scopes=self.authority.writable, **changes)
            )
        except NotFoundError:
            return None

    def remember_many(
        self, rows: list[dict[str, Any]], batch_size: object, dedupe: object
    ) -> Flow[list[MemoryRecord]]:
        """Remember ``rows`` (each ``{"text", "scope", "labels", ...}``, checked and
        redacted by the view, labels merged), a store batch per ``batch_size``, each with
        the capacity's trims of the scopes written."""
        scopes = list(dict.fromkeys(row["scope"] for row in rows))
        capacity = self.policy.max_items

        def trim(now: datetime) -> list[TrimScope]:
            if capacity is None:
                return []
            return [TrimScope(scope, capacity, now, self.policy.reinforcement) for scope in scopes]

        return (
            yield from self.flows.remember_many(
                rows, batch_size, dedupe=dedupe, then=trim, text_checked=True
            )
        )

    def list_scopes(self, limit: object, cursor: object) -> Flow[list[ScopeCount]]:
        """The scopes under the bound scope (itself included) that hold memories."""
        return (yield from self.flows.list_scopes(self.authority.scope, limit, cursor))

    def forget_all(self) -> Flow[int]:
        """Delete every memory of the bound scope and session; answer how many."""
        (count,) = yield Store((DeleteItems(self.authority.writable),))
        return int(count)

    def status(self, space_id: str | None) -> Flow[BoundStatus]:
        """Counts of the bound scope and session only; the schema version."""
        now = self.context.now()
        own = self.authority.writable.exact
        found = yield Store((*(ListScopes(scope, 1, now) for scope in own), Stats("", now)))
        *firsts, stats = found
        assert isinstance(stats, StoreStats)
        items = sum(
            first[0].items
            for scope, first in zip(own, firsts, strict=True)
            if first and first[0].scope == scope
        )
        authority = self.authority
        return BoundStatus(
            authority.scope, authority.session, items, space_id, stats.schema_version
        )

    def list(
        self, limit: object, before: object, filter: object, below: object = None
    ) -> Flow[list[MemoryRecord]]:
        """The memories of the bound scope and session, newest first."""
        check = self.context.check
        op = ListItems(
            self.authority.writable,
            check_int("limit", limit, 1, 10_000),
            self.context.now(),
            check.id(before) if before is not None else None,
            check.filter(filter),
            _position(below, check.id),
        )
        (records,) = yield Store((op,))
        return list(records)


def _position(below: object, check_id: Callable[[object], str]) -> tuple[datetime, str] | None:
    """``list``'s ``below``: None, or a position ``(created_at, id)`` (an aware time)."""
    if below is None:
        return None
    if (
        isinstance(below, tuple)
        and len(below) == 2
        and isinstance(below[0], datetime)
        and below[0].tzinfo is not None
    ):
        return below[0], check_id(below[1])
    raise ValidationError(
        f"below={shown(below)} must be a position (created_at, id): an aware datetime and "
        "a memory's id, e.g. (record.created_at, record.id)"
    )
