"""Memory operations, each written once as a flow of effects (see ``_effects``).

``Memory`` and ``AsyncMemory`` only drive these flows. Every argument is checked first
(``_validate``), before any effect, so a bad argument changes nothing in any store. Each
write is ONE store batch, which the store applies atomically: an update is a patch the
store applies to the current revision (``PatchItem``), never a read in one batch and a
write in another. A recall's search lives in ``_search`` (its ranking in ``engramdb.ranking``),
maintenance (``reindex``, ``maintain``) in ``_maintenance``, the flows of bound views in
``_bound_flows``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from engramdb._base.clock import to_ms
from engramdb._base.errors import ConfigurationError, IngestError, ProviderError, ValidationError
from engramdb._base.types import (
    Hit,
    Hits,
    MemoryRecord,
    Scope,
    Utility,
    content_sha256,
    validate_scope,
)
from engramdb.flows._conversations import (
    check_context,
    conversation_items,
    remember_turns,
    with_context,
)
from engramdb.flows._effects import Flow, Store
from engramdb.flows._maintainer import MaintenanceSnapshot
from engramdb.flows._maintenance import MaintenanceReport, maintain, reindex
from engramdb.flows._search import Found, Search, search
from engramdb.flows._uploads import DocumentParts
from engramdb.flows.context import (
    FlowContext,
    OnEmbedError,
    own_vectors,
    space_id,
    supplied_vector,
    with_vectors,
)
from engramdb.ranking._rerank import rerank_stage
from engramdb.store import (
    KEEP,
    DeleteItem,
    DeleteItems,
    FindContent,
    GetItems,
    GetUtility,
    History,
    ListItems,
    ListScopes,
    Op,
    PatchItem,
    PurgeExpired,
    PutItem,
    ScopeCount,
    ScopeSet,
    Stats,
    StoredItem,
    StoreStats,
)
from engramdb.store._ids import IdSequence
from engramdb.validate import check_int

__all__ = ["UNSET", "MemoryFlows", "MemoryStatus", "OnEmbedError", "Unset"]

_REMEMBER_KEYS = frozenset(
    {"text", "scope", "metadata", "labels", "importance", "expires_at", "ttl", "id"}
    | {"expected_revision", "vector"}
)


class Unset:
    """Marks an argument that was not given (``None`` has a meaning of its own)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


@dataclass(frozen=True, slots=True)
class MemoryStatus:
    """What ``status()`` reports."""

    items: int
    expired: int
    scopes: int
    pending: int
    vectors: int
    active_space: str | None  # None until an embedder that learns its dimensions has run
    spaces: tuple[str, ...]
    schema_version: int | None
    semantic: Literal["ready", "pending"]
    embedded: dict[str, int] = field(default_factory=dict)  # space id -> live items with a
    # vector in it
    maintenance: MaintenanceSnapshot | None = None  # the memory's own maintainer's, if any


class MemoryFlows:
    """Builds the flow of every memory operation, in one :class:`FlowContext`."""

    def __init__(self, context: FlowContext) -> None:
        self.context = context
        self.uploads = DocumentParts()  # a document sent in parts, until its last one

    def remember(self, text: object, scope: object, **fields: Any) -> Flow[MemoryRecord]:
        record, _ = yield from self.remember_then(text, scope, **fields)
        return record

    def remember_then(
        self,
        text: object,
        scope: object,
        *,
        then: Callable[[datetime], Sequence[Op]] = lambda now: (),
        defer_embedding: object = None,
        dedupe: object = True,
        text_checked: bool = False,
        vector: object = None,
        **fields: Any,
    ) -> Flow[tuple[MemoryRecord, list[Any]]]:
        """Remember, and run the writes ``then(now)`` in the same atomic batch; return the
        record and their results. With ``dedupe`` and no ``id``, a live memory of the
        scope with the same text is returned instead, and nothing is written.
        ``text_checked``: ``text`` comes from :meth:`FlowContext.document_text` already (a bound
        view redacts it once, before its labeler sees it), so it is not redacted again.
        ``vector``: the caller's own vector of the text (:func:`supplied_vector`), stored
        instead of embedding it; a deduplicated text's stored vector must be that one."""
        ctx = self.context
        now = ctx.now()
        defer = ctx.defer(defer_embedding)
        item = {"text": text, "scope": scope, **fields}
        put = ctx.put(item, now, IdSequence(to_ms(now)), text_checked=text_checked)
        sha = put.record.content_sha256
        supplied = {} if vector is None else {sha: supplied_vector(ctx, vector)}
        held: Scope | None = put.record.scope  # whether it holds the text: not known yet
        if ctx.check.flag("dedupe", dedupe) and fields.get("id") is None:
            existing = yield from _existing([put], now)
            if existing:
                own = yield from own_vectors(ctx, supplied, now)  # the same, or refused
                if own:
                    yield Store(tuple(own))
                return existing[_content(put)], []
            held = None  # the scope holds no such text: its vector is embedded anew
        texts = {sha: put.record.text}
        owners = {sha: (held,)}
        record, *results = yield from with_vectors(
            ctx, texts, [put, *then(now)], now, defer, owners=owners, supplied=supplied
        )
        return record, results

    def remember_many(
        self,
        items: object,
        batch_size: object = 256,
        progress: Callable[[int, int], None] | None = None,
        defer_embedding: object = None,
        dedupe: object = True,
        *,
        then: Callable[[datetime], Sequence[Op]] = lambda now: (),
        text_checked: bool = False,
    ) -> Flow[list[MemoryRecord]]:
        """Check every item, then store them ``batch_size`` at a time, each batch atomic,
        calling ``progress(stored, total)`` after each; a provider failure raises
        ``IngestError`` with the batches already stored. With ``dedupe``, an item without
        an ``id`` whose text its scope already holds (or an earlier item of the same call
        holds) is not stored again: its position answers the existing record. The writes
        ``then(now)`` run in each batch (a bound view's capacity); ``text_checked``: the
        texts come from :meth:`FlowContext.document_text` already (as for
        :meth:`remember_then`)."""
        ctx = self.context
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
            raise ValidationError(
                "remember_many() takes a list of dicts like {'text': ..., 'scope': (...)}"
            )
        size = check_int("batch_size", batch_size, 1, 100_000)
        defer = ctx.defer(defer_embedding)
        dedupe = ctx.check.flag("dedupe", dedupe)
        now = ctx.now()
        next_id = IdSequence(to_ms(now))  # ascending in the order given
        puts: list[PutItem] = []
        chosen: set[int] = set()  # positions that name their id: never deduplicated
        supplied: dict[str, bytes] = {}  # content hash -> the items' own vector of it
        for position, item in enumerate(items):
            checked = ctx.check.remember_item(position, item, _REMEMBER_KEYS)
            try:
                puts.append(ctx.put(checked, now, next_id, text_checked=text_checked))
                if checked.get("vector") is not None:
                    _supply(supplied, puts[-1], supplied_vector(ctx, checked["vector"]))
            except ValidationError as exc:
                raise ValidationError(f"item {position}: {exc}") from None
            if checked.get("id") is not None:
                chosen.add(position)
        ids = [put.record.id for put in puts]
        if len(set(ids)) != len(ids):
            raise ValidationError("remember_many() got the same id twice; ids must be unique")
        contents = [_content(put) for put in puts]  # computed once: read many times below
        first: dict[tuple[Scope, str], int] = {}  # deduplicated content -> its first position
        for position, content in enumerate(contents):
            if dedupe and position not in chosen:
                first.setdefault(content, position)

        def is_first(position: int) -> bool:
            return first.get(contents[position]) == position

        stored: list[MemoryRecord] = []
        known: dict[tuple[Scope, str], MemoryRecord] = {}  # deduplicated content -> record
        for start in range(0, len(puts), size):
            chunk = range(start, min(start + size, len(puts)))
            known.update((yield from _existing([puts[p] for p in chunk if is_first(p)], now)))
            writes = [
                p
                for p in chunk
                if not (dedupe and p not in chosen) or (is_first(p) and contents[p] not in known)
            ]
            # A deduplicated item is written only when its scope holds no such text.
            held = [None if dedupe and p not in chosen else puts[p].record.scope for p in writes]
            try:
                shas = {contents[p][1] for p in chunk}
                vectors = {sha: blob for sha, blob in supplied.items() if sha in shas}
                records = yield from _write(
                    ctx, [puts[p] for p in writes], now, defer, then(now), held, vectors
                )
            except ProviderError as exc:
                raise IngestError(
                    f"remember_many() stored {start} of {len(puts)} items, then the "
                    f"embedding provider failed ({type(exc).__name__}); the error's "
                    "`committed` holds what was stored; run the import again to go on",
                    committed=stored,
                    index=start,
                    provider=exc.provider,
                ) from exc
            written = dict(zip(writes, records, strict=True))
            for position in chunk:
                if position in written:
                    record = written[position]
                    if is_first(position):
                        known[_content(record)] = record
                else:
                    record = known[contents[position]]
                stored.append(record)
            if progress is not None:
                progress(len(stored), len(puts))
        return stored

    def remember_conversation(
        self,
        turns: object,
        scope: object,
        conversation: object,
        start: object = 0,
        metadata: Mapping[str, object] | None = None,
        labels: object = None,
        defer_embedding: object = None,
    ) -> Flow[list[MemoryRecord]]:
        """``Memory.remember_conversation``: each turn a memory of ``scope``
        (``_conversations``), the places ``scope`` does not hold yet in one atomic batch."""
        ctx = self.context
        checked = validate_scope(scope)
        given = ctx.check.labels(labels)
        items = []
        for index, item in enumerate(conversation_items(turns, conversation, start, metadata)):
            try:  # every turn checked (and redacted, once) before anything is read or written
                text = ctx.document_text(item["text"])
                ctx.check.metadata(item["metadata"])
            except ValidationError as exc:
                raise ValidationError(f"turn {index}: {exc}") from None
            items.append({**item, "text": text, "scope": checked, "labels": given})

        def remember_many(new: list[dict[str, Any]]) -> Flow[list[MemoryRecord]]:
            return self.remember_many(
                new, len(new), None, defer_embedding, False, text_checked=True
            )

        return (yield from remember_turns(remember_many, items, checked, ctx.now()))

    def update(
        self,
        id: object,
        *,
        text: object = UNSET,
        metadata: object = UNSET,
        labels: object = UNSET,
        importance: object = UNSET,
        expires_at: object = UNSET,
        expected_revision: object = None,
        scopes: ScopeSet | None = None,
    ) -> Flow[MemoryRecord]:
        """``scopes`` (a bound view's): the store patches the item only if it is in one
        of them, inside the write batch; otherwise ``NotFoundError``, as for no item."""
        ctx = self.context
        now = ctx.now()
        patch = PatchItem(
            ctx.check.id(id),
            now,
            text=KEEP if isinstance(text, Unset) else ctx.document_text(text),
            metadata=KEEP if isinstance(metadata, Unset) else ctx.document_metadata(metadata),
            labels=KEEP if isinstance(labels, Unset) else ctx.check.labels(labels),
            importance=(
                KEEP if isinstance(importance, Unset) else ctx.check.importance(importance)
            ),
            expires_at=KEEP if isinstance(expires_at, Unset) else ctx.expires_at(expires_at),
            expected_revision=ctx.check.expected_revision(expected_revision),
            keep_revisions=ctx.keep_revisions,
            scopes=scopes,
        )
        if expected_revision == 0:
            raise ValidationError(
                "expected_revision=0 means 'must not exist', which update() cannot satisfy; "
                "pass the revision you read"
            )
        texts = {content_sha256(patch.text): patch.text} if isinstance(patch.text, str) else {}
        owners: dict[str, tuple[Scope | None, ...]] = {}
        if texts and not ctx.defer_embedding and space_id(ctx) is not None:
            # The item's scope decides which stored vector its text may reuse (see
            # with_vectors); an item out of reach (the patch will refuse it) reuses none.
            (found,) = yield Store((GetItems((patch.id,), now),))
            held = found[0].record.scope if found and found[0] is not None else None
            if held is not None and scopes is not None and held not in scopes:
                held = None
            owners = dict.fromkeys(texts, (held,))
        records: list[MemoryRecord] = yield from with_vectors(
            ctx, texts, [patch], now, ctx.defer_embedding, owners=owners
        )
        return records[0]

    def forget(self, id: object) -> Flow[bool]:
        ctx = self.context
        (deleted,) = yield Store((DeleteItem(ctx.check.id(id)),))
        return bool(deleted)

    def forget_scope(self, scope: object, descendants: object = False) -> Flow[int]:
        ctx = self.context
        selection = ctx.check.selection(
            scope, descendants=ctx.check.flag("descendants", descendants)
        )
        (count,) = yield Store((DeleteItems(selection),))
        return int(count)

    def forget_where(self, scope: object, filter: object, descendants: object = False) -> Flow[int]:
        ctx = self.context
        selection = ctx.check.selection(
            scope, descendants=ctx.check.flag("descendants", descendants)
        )
        (count,) = yield Store((DeleteItems(selection, ctx.check.required_filter(filter)),))
        return int(count)

    def reindex(
        self, batch_size: object = 64, progress: Callable[[int], None] | None = None
    ) -> Flow[int]:
        """Embed every text without a usable vector in the active space (``_maintenance``)."""
        return (yield from reindex(self.context, batch_size, progress))

    def maintain(
        self, max_items: object = 1000, repair_after: object = "", prune_spaces: object = False
    ) -> Flow[MaintenanceReport]:
        """One bounded maintenance pass (``_maintenance``)."""
        return (yield from maintain(self.context, max_items, repair_after, prune_spaces))

    # -- reads --------------------------------------------------------------------------

    def get(self, id: object) -> Flow[MemoryRecord | None]:
        """The live item ``id``, with its evidence (``utility``) when the store keeps it."""
        ctx = self.context
        item_id = ctx.check.id(id)
        ops: list[Op] = [GetItems((item_id,), ctx.now())]
        if ctx.capabilities.supports_policy:
            ops.append(GetUtility((item_id,)))
        results = yield Store(tuple(ops))
        found: StoredItem | None = results[0][0]
        if found is None:
            return None
        if len(results) == 1:
            return found.record
        return replace(found.record, utility=results[1].get(item_id, Utility()))

    def purge_expired(self, batch_size: object = 1000) -> Flow[int]:
        """Delete every item expired now, ``batch_size`` per batch; return how many."""
        ctx = self.context
        size = check_int("batch_size", batch_size, 1, 100_000)
        now = ctx.now()
        total = 0
        while True:
            (count,) = yield Store((PurgeExpired(now, size),))
            total += int(count)
            if count < size:
                return total

    def list_scopes(
        self, prefix: object = (), limit: object = 100, cursor: object = None
    ) -> Flow[list[ScopeCount]]:
        ctx = self.context
        op = ListScopes(
            ctx.check.prefix(prefix),
            check_int("limit", limit, 1, 10_000),
            ctx.now(),
            ctx.check.cursor(cursor),
        )
        (scopes,) = yield Store((op,))
        return list(scopes)

    def history(self, id: object, limit: object = 10) -> Flow[list[MemoryRecord]]:
        ctx = self.context
        op = History(ctx.check.id(id), check_int("limit", limit, 1, 1000), ctx.now())
        if not ctx.capabilities.supports_history:
            raise ConfigurationError(
                "this store keeps no revision history (supports_history is False)"
            )
        (revisions,) = yield Store((op,))
        return list(revisions)

    def list(
        self, scope: object, limit: object = 50, before: object = None, filter: object = None
    ) -> Flow[list[MemoryRecord]]:
        ctx = self.context
        op = ListItems(
            ctx.check.selection(scope),
            check_int("limit", limit, 1, 10_000),
            ctx.now(),
            ctx.check.id(before) if before is not None else None,
            ctx.check.filter(filter),
        )
        (records,) = yield Store((op,))
        return list(records)

    def status(self) -> Flow[MemoryStatus]:
        ctx = self.context
        active = space_id(ctx)
        (stats,) = yield Store((Stats(active or "", ctx.now()),))
        assert isinstance(stats, StoreStats)
        return MemoryStatus(
            items=stats.items,
            expired=stats.expired,
            scopes=stats.scopes,
            pending=stats.pending,
            vectors=stats.vectors,
            active_space=active,
            spaces=stats.spaces,
            schema_version=stats.schema_version,
            semantic="ready" if stats.pending == 0 else "pending",
            embedded=dict(stats.embedded),
        )

    def recall(
        self,
        query: object,
        scopes: object,
        rerank: object = None,
        context: object = 0,
        **options: Any,
    ) -> Flow[Hits]:
        """``Memory.recall``: the first ``top_k`` hits of a :meth:`search` of ``scopes``,
        the first ``rerank`` of its fused order re-scored first (:meth:`reranked`), each
        turn of a conversation with its ``context`` neighbours (``_conversations``)."""
        ctx = self.context
        count = ctx.rerank_count(rerank)
        width = check_context(context)
        search = self.search(query, ctx.check.scopes(scopes), candidates=count > 0, **options)
        found = yield from search.run()
        found, ranked = yield from self.reranked(search, found, found.ranked, count)
        return (yield from with_context(found.hits(ranked), width, found.now))

    def reranked(
        self, search: Search, found: Found, ranked: Sequence[Hit], count: int
    ) -> Flow[tuple[Found, Sequence[Hit]]]:
        """A recall's ``found`` and its hits: the first ``count`` of ``ranked`` re-scored
        by the rerank stage (``_rerank``; its failure makes ``found`` say
        ``status="degraded"``), then the first ``top_k``."""
        if count:
            stage = yield from rerank_stage(self.context, search.text, ranked, count)
            ranked = stage.hits
            if stage.error is not None:
                error = stage.error if found.error is None else f"{found.error}; {stage.error}"
                found = replace(found, status="degraded", error=error)
        return found, ranked[: search.ranking.top_k]

    def search(self, query: object, selection: ScopeSet, **options: Any) -> Search:
        """A recall's search of ``selection``, its arguments checked now (``_search``)."""
        return search(self.context, query, selection, **options)


def _content(item: PutItem | MemoryRecord) -> tuple[Scope, str]:
    """What deduplication compares: the scope and the text's hash."""
    record = item.record if isinstance(item, PutItem) else item
    return record.scope, record.content_sha256


def _existing(
    puts: Sequence[PutItem], now: datetime
) -> Flow[dict[tuple[Scope, str], MemoryRecord]]:
    """The live memories that already hold the texts of ``puts`` in their scopes."""
    if not puts:
        return {}
    (found,) = yield Store((FindContent(tuple(map(_content, puts)), now),))
    return dict(found)


def _write(
    ctx: FlowContext,
    puts: Sequence[PutItem],
    now: datetime,
    defer: bool,
    then: Sequence[Op],
    held: Sequence[Scope | None],
    supplied: Mapping[str, bytes],
) -> Flow[list[MemoryRecord]]:
    """Store the items with the vectors they lack, and run the writes ``then``, in one
    atomic batch; answer the records. ``held``: for each put, its scope, or None when
    that scope is known to hold no such text (``with_vectors``'s owners); ``supplied``:
    the callers' own vectors of the batch's texts (those of items deduplicated too: their
    stored vector must be the same)."""
    texts = {put.record.content_sha256: put.record.text for put in puts}
    owners: dict[str, set[Scope | None]] = {}
    for put, scope in zip(puts, held, strict=True):
        owners.setdefault(put.record.content_sha256, set()).add(scope)
    results = yield from with_vectors(
        ctx, texts, [*puts, *then], now, defer, owners=owners, supplied=supplied
    )
    return results[: len(puts)]


def _supply(supplied: dict[str, bytes], put: PutItem, blob: bytes) -> None:
    """Note ``blob`` as the own vector of ``put``'s text (one per text in a call)."""
    if supplied.setdefault(put.record.content_sha256, blob) != blob:
        raise ValidationError(
            "vector= differs from an earlier item's vector for the same text; a text has "
            "one vector per space: pass the same vector for each copy"
        )
