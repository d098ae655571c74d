"""One LangGraph batch as an engramdb flow: written once, driven by ``batch`` with calls
and by ``abatch`` with awaits (``engramdb.flows``).

As in LangGraph's ``InMemoryStore``, the reads of a batch (gets, searches, listings)
see the store as it was before the batch, and its puts are applied after them, the last
put of a key winning, in one atomic store batch. Items with a TTL read by an op with
``refresh_ttl``, when the store's ``TTLConfig`` has ``refresh_on_read`` (as LangGraph's
SQL stores decide), then get a new expiry, each in its own store batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from engramdb import MemoryRecord, NotFoundError, Scope
from engramdb.flows import Flow, Store
from engramdb.flows.context import FlowContext, embed, with_vectors
from engramdb.flows.context import space_id as active_space
from engramdb.store import (
    DeleteItem,
    DeleteItems,
    GetItems,
    ListItems,
    ListScopes,
    Op,
    PatchItem,
    PurgeExpired,
    PutItem,
    ScopeCount,
    ScopeSet,
    SearchResult,
    SearchVectors,
    StoredItem,
    content_sha256,
    decode_f32,
    parse_filter,
)
from langgraph.store.base import GetOp, Item, ListNamespacesOp, SearchItem, SearchOp

from ._namespaces import namespace_of, prefix_scope, select_namespaces, wildcard_free_prefix
from ._ops import Checked, CheckedPut
from ._values import item_id, item_of, item_records, matches, search_item_of

__all__ = ["Settings", "batch_flow", "sweep_flow"]

_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Settings:
    """``context``: the flow context of the index's embedder (None: no index); the
    adapter embeds, checks and stores vectors with its steps, as ``Memory`` does."""

    context: FlowContext | None
    keep_revisions: int
    refresh_on_read: bool = False


def batch_flow(settings: Settings, ops: Sequence[Checked], now: datetime) -> Flow[list[Any]]:
    """The results of checked ops, in op order."""
    results: list[Any] = [None] * len(ops)
    queries = yield from _query_vectors(settings, ops)
    refresh: dict[str, MemoryRecord] = {}
    for position, op in enumerate(ops):
        if isinstance(op, GetOp):
            results[position] = yield from _get(settings, op, now, refresh)
        elif isinstance(op, SearchOp):
            results[position] = yield from _search(settings, op, queries, now, refresh)
        elif isinstance(op, ListNamespacesOp):
            results[position] = yield from _list_namespaces(op, now)
    puts = {(op.namespace, op.key): op for op in ops if isinstance(op, CheckedPut)}
    if puts:
        yield from _write(settings, list(puts.values()), now)
    written = {item_id(namespace, key) for namespace, key in puts}
    for id, record in refresh.items():
        if id not in written:
            yield from _refresh(settings, record, now)
    return results


# -- reads --------------------------------------------------------------------------------


def _query_vectors(
    settings: Settings, ops: Sequence[Checked]
) -> Flow[dict[str, tuple[float, ...]]]:
    """Each distinct query of the batch's searches, embedded once, as a query."""
    if settings.context is None:
        return {}
    queries = list(dict.fromkeys(op.query for op in ops if isinstance(op, SearchOp) and op.query))
    if not queries:
        return {}
    blobs = yield from embed(settings.context, queries, "query")
    return {query: tuple(decode_f32(blob)) for query, blob in zip(queries, blobs, strict=True)}


def _note_refresh(
    record: MemoryRecord, refresh_ttl: bool, refresh: dict[str, MemoryRecord]
) -> None:
    if refresh_ttl and record.metadata.get("ttl") is not None:
        refresh[record.id] = record


def _get(
    settings: Settings, op: GetOp, now: datetime, refresh: dict[str, MemoryRecord]
) -> Flow[Item | None]:
    if not op.namespace:
        return None
    (found,) = yield Store((GetItems((item_id(op.namespace, op.key),), now),))
    stored = found[0]
    if not isinstance(stored, StoredItem):
        return None
    _note_refresh(stored.record, op.refresh_ttl and settings.refresh_on_read, refresh)
    return item_of(stored.record, op.namespace)


def _selection(prefix: tuple[str, ...], now: datetime) -> Flow[ScopeSet | None]:
    """The scopes under ``prefix`` (``()``: every scope), or None when there are none."""
    if prefix:
        scope = prefix_scope(prefix)
        return None if scope is None else ScopeSet(prefixes=(scope,))
    scopes = yield from _scopes((), now)
    roots = tuple(dict.fromkeys((scope[0],) for scope in scopes))
    return ScopeSet(prefixes=roots) if roots else None


def _scopes(prefix: tuple[str, ...], now: datetime) -> Flow[list[tuple[str, ...]]]:
    found: list[tuple[str, ...]] = []
    after = None
    while True:
        (page,) = yield Store((ListScopes(prefix, _PAGE, now, after),))
        found += [count.scope for count in page if isinstance(count, ScopeCount)]
        if len(page) < _PAGE:
            return found
        after = found[-1]


def _records(scopes: ScopeSet, now: datetime) -> Flow[list[MemoryRecord]]:
    """Every live record of ``scopes``, newest first."""
    found: list[MemoryRecord] = []
    before = None
    while True:
        (page,) = yield Store((ListItems(scopes, _PAGE, now, before),))
        found += page
        if len(page) < _PAGE:
            return found
        before = found[-1].id


def _search(
    settings: Settings,
    op: SearchOp,
    queries: dict[str, tuple[float, ...]],
    now: datetime,
    refresh: dict[str, MemoryRecord],
) -> Flow[list[SearchItem]]:
    scopes = yield from _selection(op.namespace_prefix, now)
    if scopes is None:
        return []
    if op.query and settings.context is not None and not op.filter:
        top = yield from _top_scored(settings, scopes, queries[op.query], op.offset + op.limit, now)
        if top is not None:  # the page holds scored items only: found from the vectors
            for _, record in top[op.offset :]:
                _note_refresh(record, op.refresh_ttl and settings.refresh_on_read, refresh)
            return [search_item_of(record, score) for score, record in top[op.offset :]]
    records = yield from _records(scopes, now)
    items = [r for r in records if _is_item(r) and matches(_value(r), op.filter)]
    ranked: list[tuple[float | None, MemoryRecord]] = [(None, r) for r in items]
    if op.query and settings.context is not None and items:
        best = yield from _best_scores(settings, scopes, queries[op.query], len(records), now)
        scored = [(best[r.id], r) for r in items if r.metadata.get("indexed") and r.id in best]
        scored.sort(key=lambda pair: -pair[0])
        kept = {r.id for _, r in scored}
        ranked = [*scored, *((None, r) for r in items if r.id not in kept)]
    page = ranked[op.offset : op.offset + op.limit]
    for _, record in page:
        _note_refresh(record, op.refresh_ttl and settings.refresh_on_read, refresh)
    return [search_item_of(record, score) for score, record in page]


def _top_scored(
    settings: Settings, scopes: ScopeSet, query: tuple[float, ...], wanted: int, now: datetime
) -> Flow[list[tuple[float, MemoryRecord]] | None]:
    """The ``wanted`` best-scored items, best first, in the order the full ranking of
    :func:`_search` gives them (ties newest first), found from the nearest vectors and
    their items alone; None when fewer than ``wanted`` items are scored, so the page
    needs unscored items and the full ranking.

    An item's score is its best text's, so the nearest ``k`` vectors settle every item
    whose best is above the ``k``-th score (no vector left out can beat it); ``k`` grows
    until ``wanted`` items are settled or every vector was seen.
    """
    assert settings.context is not None
    space_id = active_space(settings.context)
    if space_id is None:
        return None
    k = 2 * wanted + 8
    while True:
        (result,) = yield Store((SearchVectors(scopes, space_id, query, k, now),))
        assert isinstance(result, SearchResult)
        best: dict[str, float] = {}
        for hit in result.hits:  # best first: an item's first hit is its best text
            owner = hit.record.metadata.get("part_of", hit.record.id)
            best.setdefault(str(owner), hit.score)
        complete = len(result.hits) < k
        floor = None if complete else result.hits[-1].score
        settled = [id for id, score in best.items() if floor is None or score > floor]
        (found,) = yield Store((GetItems(tuple(settled), now),))
        ranked = [
            (best[stored.record.id], stored.record)
            for stored in found
            if isinstance(stored, StoredItem)
            and _is_item(stored.record)
            and stored.record.metadata.get("indexed")
        ]
        if len(ranked) >= wanted or complete:
            break
        k *= 4
    if len(ranked) < wanted:
        return None
    ranked.sort(key=lambda pair: (pair[0], pair[1].created_at, pair[1].id), reverse=True)
    return ranked[:wanted]


def _is_item(record: MemoryRecord) -> bool:
    return isinstance(record.metadata.get("value"), dict)  # a part has none


def _value(record: MemoryRecord) -> dict[str, Any]:
    return cast(dict[str, Any], record.metadata["value"])


def _best_scores(
    settings: Settings, scopes: ScopeSet, query: tuple[float, ...], k: int, now: datetime
) -> Flow[dict[str, float]]:
    """The best cosine similarity of each item among its texts' vectors."""
    assert settings.context is not None
    space_id = active_space(settings.context)
    if space_id is None:  # nothing was embedded yet
        return {}
    (result,) = yield Store((SearchVectors(scopes, space_id, query, k, now, exact=True),))
    assert isinstance(result, SearchResult)
    best: dict[str, float] = {}
    for hit in result.hits:
        owner = hit.record.metadata.get("part_of", hit.record.id)
        assert isinstance(owner, str)
        best[owner] = max(best.get(owner, -2.0), hit.score)
    return best


def _list_namespaces(op: ListNamespacesOp, now: datetime) -> Flow[list[tuple[str, ...]]]:
    conditions = tuple(op.match_conditions or ())
    fixed = wildcard_free_prefix(conditions)
    scope = prefix_scope(fixed) if fixed else ()
    if scope is None:
        return []
    scopes = yield from _scopes(scope, now)
    return select_namespaces(
        (namespace_of(scope) for scope in scopes), conditions, op.max_depth, op.limit, op.offset
    )


# -- writes -------------------------------------------------------------------------------


def _write(settings: Settings, puts: Sequence[CheckedPut], now: datetime) -> Flow[None]:
    """Every put and delete, with the vectors of new texts, in one atomic store batch.
    A put reuses a stored vector only for a text its own scope holds already (see
    ``engramdb.flows.context.with_vectors``): what one namespace's writes cost never depends on
    another's texts."""
    ops: list[Op] = []
    texts: dict[str, str] = {}
    owners: dict[str, set[Scope | None]] = {}
    for put in puts:
        for text in put.texts:
            sha = content_sha256(text)
            texts[sha] = text
            owners.setdefault(sha, set()).add(put.scope)
        id = item_id(put.namespace, put.key)
        exact = ScopeSet.of(put.scope)
        ops.append(DeleteItems(exact, _parts_of(id)))
        if put.value is None:
            ops.append(DeleteItem(id, exact))
            continue
        for record in item_records(
            put.scope, put.namespace, put.key, put.value, put.texts, put.ttl, now
        ):
            ops.append(PutItem(record, now, keep_revisions=settings.keep_revisions))
    if texts and settings.context is not None:
        yield from with_vectors(settings.context, texts, ops, now, owners=owners)
    else:
        yield Store(tuple(ops))


def _refresh(settings: Settings, record: MemoryRecord, now: datetime) -> Flow[None]:
    """Move the expiry of an item read with ``refresh_ttl`` (and of its parts) to ``ttl``
    minutes from now; an item gone since the read is left alone."""
    ttl = record.metadata["ttl"]
    assert isinstance(ttl, int | float)
    expires_at = now + timedelta(minutes=ttl)
    parts = ScopeSet.of(record.scope)
    (found,) = yield Store((ListItems(parts, _PAGE, now, filter=_parts_of(record.id)),))
    for id in (record.id, *(part.id for part in found)):
        try:
            yield Store(
                (PatchItem(id, now, expires_at=expires_at, keep_revisions=settings.keep_revisions),)
            )
        except NotFoundError:
            continue


def _parts_of(id: str) -> Any:
    return parse_filter({"metadata": {"part_of": id}})


def sweep_flow(batch_size: int, now: datetime) -> Flow[int]:
    """Delete every expired item; answer how many records went."""
    total = 0
    while True:
        (purged,) = yield Store((PurgeExpired(now, batch_size),))
        total += cast(int, purged)
        if purged < batch_size:
            return total
