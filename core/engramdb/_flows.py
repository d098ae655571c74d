"""Memory operations, each written once as a flow of effects (see ``_effects``).

``Memory`` and ``AsyncMemory`` only drive these flows. Every argument is checked first
(``_validate``), before any effect, so a bad argument changes nothing in any store. Each
write is ONE store batch, which the store applies atomically: an update is a patch the
store applies to the current revision (``PatchItem``), never a read in one batch and a
write in another. A recall's search lives in ``_search`` (its ranking in ``_ranking``),
maintenance (``reindex``, ``maintain``) in ``_maintenance``, the flows of bound views in
``_bound_flows``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from ._clock import Clock, from_ms, to_ms
from ._effects import Embed, Flow, Store
from ._embedder import Embedder
from ._errors import (
    ConfigurationError,
    IngestError,
    ProviderError,
    ValidationError,
    shown,
)
from ._ids import IdSequence
from ._maintenance import MaintenanceReport, maintain, reindex
from ._search import Search, search
from ._types import (
    EmbeddingSpace,
    EmbedKind,
    Hits,
    MemoryRecord,
    Scope,
    Utility,
    content_sha256,
    validate_scope,
)
from ._validate import Limits, Validator, check_float, check_int
from ._vectors import unit_f32
from .store import (
    KEEP,
    DeleteItem,
    DeleteItems,
    FindContent,
    FindVectors,
    GetItems,
    GetUtility,
    History,
    ListItems,
    ListScopes,
    Op,
    PatchItem,
    PurgeExpired,
    PutItem,
    PutVector,
    RegisterSpace,
    ScopeCount,
    ScopeSet,
    Stats,
    StoreCapabilities,
    StoredItem,
    StoreStats,
)

__all__ = ["UNSET", "MemoryFlows", "MemoryStatus", "OnEmbedError", "Unset"]

OnEmbedError = Literal["lexical", "raise"]
_REMEMBER_KEYS = frozenset(
    {"text", "scope", "metadata", "labels", "importance", "expires_at", "ttl", "id"}
    | {"expected_revision"}
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


class MemoryFlows:
    """Builds the flow of every memory operation."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        clock: Clock,
        capabilities: StoreCapabilities | None = None,
        redact: Callable[[str], str] | None = None,
        on_embed_error: OnEmbedError = "lexical",
        limits: Limits | None = None,
        keep_revisions: int = 10,
        defer_embedding: bool = False,
    ) -> None:
        if on_embed_error not in ("lexical", "raise"):
            raise ValidationError(
                f"on_embed_error={on_embed_error!r} is not supported; use 'lexical' or 'raise'"
            )
        if not all(callable(getattr(embedder, name, None)) for name in ("embed", "aembed")):
            raise ValidationError(
                f"embedder {embedder!r} must have embed() and aembed() methods and a space"
            )
        self.embedder = embedder
        self.clock = clock
        self.capabilities = capabilities or StoreCapabilities()
        self.redact = redact
        self.on_embed_error: OnEmbedError = on_embed_error
        self.check = Validator(limits)
        self.keep_revisions = check_int("keep_revisions", keep_revisions, 0, 1000)
        self.defer_embedding = self.check.flag("defer_embedding", defer_embedding)
        if not self.capabilities.supports_history:
            self.keep_revisions = 0
        self._known_spaces: set[str] = set()  # learned spaces checked against the store

    # -- arguments ----------------------------------------------------------------------

    def _now(self) -> datetime:
        """The clock's reading at the millisecond precision stores keep (a naive reading
        is rejected with a clear message)."""
        return from_ms(to_ms(self.clock()))

    def _document_text(self, text: object) -> str:
        checked = self.check.text(text)
        if self.redact is None:
            return checked
        return self.check.text(self.redact(checked), "text after redact()")

    def _document_metadata(self, metadata: object) -> dict[str, object]:
        """Checked metadata, with ``redact`` applied to every string value in it."""
        checked = self.check.metadata(metadata)
        if self.redact is None or not checked:
            return checked
        return self.check.metadata(_redacted(checked, self.redact))

    def _expires_at(self, expires_at: object) -> datetime | None:
        checked = self.check.expires_at(expires_at)
        if checked is not None and not self.capabilities.supports_ttl:
            raise ValidationError(
                "this store does not support expiry (supports_ttl is False); pass expires_at=None"
            )
        return checked

    def _expiry(self, expires_at: object, ttl: object, now: datetime) -> datetime | None:
        """``expires_at``, or ``now`` + ``ttl`` (a ``timedelta`` or seconds); not both."""
        if ttl is None:
            return self._expires_at(expires_at)
        if expires_at is not None:
            raise ValidationError("pass expires_at or ttl, not both")
        if isinstance(ttl, int | float) and not isinstance(ttl, bool):
            ttl = timedelta(seconds=check_float("ttl", ttl, 0.001, 100 * 365 * 86400.0))
        if not isinstance(ttl, timedelta) or ttl <= timedelta(0):
            raise ValidationError(
                f"ttl={shown(ttl)} must be a positive timedelta or a number of seconds"
            )
        try:
            until = now + ttl
        except OverflowError:  # past datetime.max
            raise ValidationError(
                f"ttl={shown(ttl)} ends after the year 9999; pass a shorter ttl or none"
            ) from None
        return self._expires_at(until)

    def _record(
        self,
        item: Mapping[str, Any],
        now: datetime,
        next_id: Callable[[], str],
        *,
        text_checked: bool = False,
    ) -> MemoryRecord:
        """The record of ``item``; ``text_checked``: its text already went through
        :meth:`_document_text` (checked and redacted once, e.g. before a labeler saw it)."""
        text = item["text"] if text_checked else self._document_text(item["text"])
        given = item.get("id")
        return MemoryRecord(
            id=self.check.id(given) if given is not None else next_id(),
            scope=validate_scope(item["scope"]),
            text=text,
            metadata=self._document_metadata(item.get("metadata")),
            labels=self.check.labels(item.get("labels")),
            importance=self.check.importance(item.get("importance", 0.5)),
            created_at=now,
            updated_at=now,
            expires_at=self._expiry(item.get("expires_at"), item.get("ttl"), now),
            revision=1,
            content_sha256=content_sha256(text),
        )

    def _put(
        self,
        item: Mapping[str, Any],
        now: datetime,
        next_id: Callable[[], str],
        *,
        text_checked: bool = False,
    ) -> PutItem:
        return PutItem(
            self._record(item, now, next_id, text_checked=text_checked),
            now,
            expected_revision=self.check.expected_revision(item.get("expected_revision")),
            keep_revisions=self.keep_revisions,
        )

    # -- embedding ----------------------------------------------------------------------

    def _embed(self, texts: Sequence[str], kind: EmbedKind) -> Flow[list[bytes]]:
        """Embed ``texts`` in batches of ``max_batch``; unit float32 bytes out, in the
        order of ``texts``, all of the space the embedder has after the first batch. The
        batches are cut in length order, so that a local model pads each batch to texts
        of about one length (2x faster with sentence-transformers on short texts:
        ``python -m bench.embed_order``)."""
        blobs: list[bytes] = [b""] * len(texts)
        step = max(1, int(self.embedder.max_batch))
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
        first: EmbeddingSpace | None = None
        for start in range(0, len(order), step):
            positions = order[start : start + step]
            vectors = yield Embed(tuple(texts[i] for i in positions), kind)
            space = self.embedder.space
            if first is not None and space != first:
                raise ProviderError(
                    f"the embedder's space changed from {first.id} to {space.id} within one "
                    "call; nothing was stored, try again",
                    provider=space.provider,
                )
            first = space
            checked = self._check_vectors(vectors, len(positions), space)
            for i, blob in zip(positions, checked, strict=True):
                blobs[i] = blob
        return blobs

    def _check_vectors(self, vectors: object, count: int, space: EmbeddingSpace) -> list[bytes]:
        """The embedder's answer as unit float32 blobs; a ``ProviderError`` (the embedder
        failed, not the caller) for a wrong count or size or an unusable vector."""
        if not isinstance(vectors, Sequence) or len(vectors) != count:
            got = len(vectors) if isinstance(vectors, Sequence) else type(vectors).__name__
            raise ProviderError(
                f"the embedder {space.id} returned {got} vectors for {count} texts; "
                "check the embedder",
                provider=space.provider,
            )
        blobs = []
        for vector in vectors:
            try:
                size: int | None = len(vector)
            except TypeError:
                size = None
            if size != space.dimensions:
                raise ProviderError(
                    f"the embedder returned a vector of {size} dimensions but its space "
                    f"{space.id} has {space.dimensions}; fix the embedder's dimensions",
                    provider=space.provider,
                )
            try:
                blobs.append(unit_f32(vector))
            except ValidationError as exc:
                raise ProviderError(
                    f"the embedder {space.id} returned an unusable vector ({exc})",
                    provider=space.provider,
                ) from exc
        return blobs

    def _space_id(self) -> str | None:
        """The active space's id, or None while the embedder has not learned it yet."""
        try:
            return self.embedder.space.id
        except ConfigurationError:
            return None

    def _vector_ops(
        self, hashes: Sequence[str], texts: Sequence[str], now: datetime, replace: bool = False
    ) -> Flow[list[Op]]:
        if not hashes:
            return []
        blobs = yield from self._embed(texts, "document")
        space = yield from self._checked_space(now)
        return [
            RegisterSpace(space, now),
            *(
                PutVector(space.id, sha, blob, now, replace)
                for sha, blob in zip(hashes, blobs, strict=True)
            ),
        ]

    def _checked_space(self, now: datetime) -> Flow[EmbeddingSpace]:
        """The embedder's space after an answer, checked against the store's spaces
        when its dimensions were learned from that answer (see below)."""
        space = self.embedder.space  # an embedder may learn its dimensions on first use
        if space.id not in self._known_spaces and getattr(
            self.embedder, "dimensions_learned", False
        ):
            yield from self._check_learned_space(space, now)
        return space

    def _check_learned_space(self, space: EmbeddingSpace, now: datetime) -> Flow[None]:
        """Refuse a space whose dimensions came from an answer when the store holds the
        same model (and variant) with other dimensions: the answer was wrong, or the
        model changed, which only ``dimensions=`` may say. The embedder forgets the
        refused size (``forget_dimensions()``, when it has one)."""
        (stats,) = yield Store((Stats(space.id, now),))
        assert isinstance(stats, StoreStats)
        if space.id not in stats.spaces:
            family = _family(space.id)
            for stored in stats.spaces:
                if _family(stored) == family:
                    forget = getattr(self.embedder, "forget_dimensions", None)
                    if callable(forget):  # so that the next valid answer teaches it again
                        forget()
                    raise ProviderError(
                        f"the embedder answered vectors of {space.dimensions} dimensions but "
                        f"the store holds {stored} for that model; nothing was stored. If "
                        f"the model's size really changed, pass dimensions={space.dimensions} "
                        "to the embedder (a new space); otherwise try again",
                        provider=space.provider,
                    )
        self._known_spaces.add(space.id)

    # -- writes -------------------------------------------------------------------------

    def _defer(self, value: object) -> bool:
        """A call's ``defer_embedding`` (None: the memory's default)."""
        return self.defer_embedding if value is None else self.check.flag("defer_embedding", value)

    def _with_vectors(
        self, texts: Mapping[str, str], writes: Sequence[Op], now: datetime, defer: bool = False
    ) -> Flow[list[Any]]:
        """Run ``writes`` in one atomic batch with the vectors that their texts (hash ->
        text) lack in the active space, embedded now; return the writes' results.

        The vectors found before the batch are looked up again inside it: if another
        writer's forget collected one in between (its last holder went), it is embedded
        and put in a follow-up batch, so no written item is left without its vector.
        With ``defer``, nothing is embedded: the items are pending until ``maintain()``
        or ``reindex()`` embeds them (the lexical leg finds them at once).
        """
        if defer:
            return list((yield Store(tuple(writes))))
        space_id = self._space_id()
        present: frozenset[str] = frozenset()  # an unknown space has no vectors yet
        if space_id is not None and texts:
            (present,) = yield Store((FindVectors(space_id, tuple(texts)),))
        missing = sorted(sha for sha in texts if sha not in present)
        vector_ops = yield from self._vector_ops(missing, [texts[sha] for sha in missing], now)
        recheck = [FindVectors(space_id, tuple(sorted(present)))] if space_id and present else []
        results = yield Store((*vector_ops, *writes, *recheck))
        lost = sorted(present - results[-1]) if recheck else []
        if lost:
            yield Store(tuple((yield from self._vector_ops(lost, [texts[s] for s in lost], now))))
        return list(results[len(vector_ops) : len(vector_ops) + len(writes)])

    def _write(
        self, puts: Sequence[PutItem], now: datetime, defer: bool
    ) -> Flow[list[MemoryRecord]]:
        """Store the items with the vectors they lack in one atomic batch."""
        texts = {put.record.content_sha256: put.record.text for put in puts}
        return (yield from self._with_vectors(texts, puts, now, defer))

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
        **fields: Any,
    ) -> Flow[tuple[MemoryRecord, list[Any]]]:
        """Remember, and run the writes ``then(now)`` in the same atomic batch; return the
        record and their results. With ``dedupe`` and no ``id``, a live memory of the
        scope with the same text is returned instead, and nothing is written.
        ``text_checked``: ``text`` comes from :meth:`_document_text` already (a bound
        view redacts it once, before its labeler sees it), so it is not redacted again."""
        now = self._now()
        defer = self._defer(defer_embedding)
        item = {"text": text, "scope": scope, **fields}
        put = self._put(item, now, IdSequence(to_ms(now)), text_checked=text_checked)
        if self.check.flag("dedupe", dedupe) and fields.get("id") is None:
            existing = yield from self._existing([put], now)
            if existing:
                return existing[_content(put)], []
        texts = {put.record.content_sha256: put.record.text}
        record, *results = yield from self._with_vectors(texts, [put, *then(now)], now, defer)
        return record, results

    def _existing(
        self, puts: Sequence[PutItem], now: datetime
    ) -> Flow[dict[tuple[Scope, str], MemoryRecord]]:
        """The live memories that already hold the texts of ``puts`` in their scopes."""
        if not puts:
            return {}
        (found,) = yield Store((FindContent(tuple(map(_content, puts)), now),))
        return dict(found)

    def remember_many(
        self,
        items: object,
        batch_size: object = 256,
        progress: Callable[[int, int], None] | None = None,
        defer_embedding: object = None,
        dedupe: object = True,
    ) -> Flow[list[MemoryRecord]]:
        """Check every item, then store them ``batch_size`` at a time, each batch atomic,
        calling ``progress(stored, total)`` after each; a provider failure raises
        ``IngestError`` with the batches already stored. With ``dedupe``, an item without
        an ``id`` whose text its scope already holds (or an earlier item of the same call
        holds) is not stored again: its position answers the existing record."""
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
            raise ValidationError(
                "remember_many() takes a list of dicts like {'text': ..., 'scope': (...)}"
            )
        size = check_int("batch_size", batch_size, 1, 100_000)
        defer = self._defer(defer_embedding)
        dedupe = self.check.flag("dedupe", dedupe)
        now = self._now()
        next_id = IdSequence(to_ms(now))  # ascending in the order given
        puts: list[PutItem] = []
        chosen: set[int] = set()  # positions that name their id: never deduplicated
        for position, item in enumerate(items):
            checked = self.check.remember_item(position, item, _REMEMBER_KEYS)
            try:
                puts.append(self._put(checked, now, next_id))
            except ValidationError as exc:
                raise ValidationError(f"item {position}: {exc}") from None
            if checked.get("id") is not None:
                chosen.add(position)
        ids = [put.record.id for put in puts]
        if len(set(ids)) != len(ids):
            raise ValidationError("remember_many() got the same id twice; ids must be unique")
        first: dict[tuple[Scope, str], int] = {}  # deduplicated content -> its first position
        for position, put in enumerate(puts):
            if dedupe and position not in chosen:
                first.setdefault(_content(put), position)

        def is_first(position: int) -> bool:
            return first.get(_content(puts[position])) == position

        stored: list[MemoryRecord] = []
        known: dict[tuple[Scope, str], MemoryRecord] = {}  # deduplicated content -> record
        for start in range(0, len(puts), size):
            chunk = range(start, min(start + size, len(puts)))
            known.update((yield from self._existing([puts[p] for p in chunk if is_first(p)], now)))
            writes = [
                p
                for p in chunk
                if not (dedupe and p not in chosen)
                or (is_first(p) and _content(puts[p]) not in known)
            ]
            try:
                records = yield from self._write([puts[p] for p in writes], now, defer)
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
                    record = known[_content(puts[position])]
                stored.append(record)
            if progress is not None:
                progress(len(stored), len(puts))
        return stored

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
    ) -> Flow[MemoryRecord]:
        now = self._now()
        patch = PatchItem(
            self.check.id(id),
            now,
            text=KEEP if isinstance(text, Unset) else self._document_text(text),
            metadata=KEEP if isinstance(metadata, Unset) else self._document_metadata(metadata),
            labels=KEEP if isinstance(labels, Unset) else self.check.labels(labels),
            importance=(
                KEEP if isinstance(importance, Unset) else self.check.importance(importance)
            ),
            expires_at=KEEP if isinstance(expires_at, Unset) else self._expires_at(expires_at),
            expected_revision=self.check.expected_revision(expected_revision),
            keep_revisions=self.keep_revisions,
        )
        if expected_revision == 0:
            raise ValidationError(
                "expected_revision=0 means 'must not exist', which update() cannot satisfy; "
                "pass the revision you read"
            )
        texts = {content_sha256(patch.text): patch.text} if isinstance(patch.text, str) else {}
        records: list[MemoryRecord] = yield from self._with_vectors(
            texts, [patch], now, self.defer_embedding
        )
        return records[0]

    def forget(self, id: object) -> Flow[bool]:
        (deleted,) = yield Store((DeleteItem(self.check.id(id)),))
        return bool(deleted)

    def forget_scope(self, scope: object, descendants: object = False) -> Flow[int]:
        selection = self.check.selection(
            scope, descendants=self.check.flag("descendants", descendants)
        )
        (count,) = yield Store((DeleteItems(selection),))
        return int(count)

    def forget_where(self, scope: object, filter: object, descendants: object = False) -> Flow[int]:
        selection = self.check.selection(
            scope, descendants=self.check.flag("descendants", descendants)
        )
        (count,) = yield Store((DeleteItems(selection, self.check.required_filter(filter)),))
        return int(count)

    def reindex(
        self, batch_size: object = 64, progress: Callable[[int], None] | None = None
    ) -> Flow[int]:
        """Embed every text without a usable vector in the active space (``_maintenance``)."""
        return (yield from reindex(self, batch_size, progress))

    def maintain(
        self, max_items: object = 1000, repair_after: object = "", prune_spaces: object = False
    ) -> Flow[MaintenanceReport]:
        """One bounded maintenance pass (``_maintenance``)."""
        return (yield from maintain(self, max_items, repair_after, prune_spaces))

    # -- reads --------------------------------------------------------------------------

    def get(self, id: object) -> Flow[MemoryRecord | None]:
        """The live item ``id``, with its evidence (``utility``) when the store keeps it."""
        item_id = self.check.id(id)
        ops: list[Op] = [GetItems((item_id,), self._now())]
        if self.capabilities.supports_policy:
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
        size = check_int("batch_size", batch_size, 1, 100_000)
        now = self._now()
        total = 0
        while True:
            (count,) = yield Store((PurgeExpired(now, size),))
            total += int(count)
            if count < size:
                return total

    def list_scopes(
        self, prefix: object = (), limit: object = 100, cursor: object = None
    ) -> Flow[list[ScopeCount]]:
        op = ListScopes(
            self.check.prefix(prefix),
            check_int("limit", limit, 1, 10_000),
            self._now(),
            self.check.cursor(cursor),
        )
        (scopes,) = yield Store((op,))
        return list(scopes)

    def history(self, id: object, limit: object = 10) -> Flow[list[MemoryRecord]]:
        op = History(self.check.id(id), check_int("limit", limit, 1, 1000), self._now())
        if not self.capabilities.supports_history:
            raise ConfigurationError(
                "this store keeps no revision history (supports_history is False)"
            )
        (revisions,) = yield Store((op,))
        return list(revisions)

    def list(
        self, scope: object, limit: object = 50, before: object = None, filter: object = None
    ) -> Flow[list[MemoryRecord]]:
        op = ListItems(
            self.check.selection(scope),
            check_int("limit", limit, 1, 10_000),
            self._now(),
            self.check.id(before) if before is not None else None,
            self.check.filter(filter),
        )
        (records,) = yield Store((op,))
        return list(records)

    def status(self) -> Flow[MemoryStatus]:
        space_id = self._space_id()
        (stats,) = yield Store((Stats(space_id or "", self._now()),))
        assert isinstance(stats, StoreStats)
        return MemoryStatus(
            items=stats.items,
            expired=stats.expired,
            scopes=stats.scopes,
            pending=stats.pending,
            vectors=stats.vectors,
            active_space=space_id,
            spaces=stats.spaces,
            schema_version=stats.schema_version,
            semantic="ready" if stats.pending == 0 else "pending",
            embedded=dict(stats.embedded),
        )

    def recall(self, query: object, scopes: object, **options: Any) -> Flow[Hits]:
        """``Memory.recall``: the first ``top_k`` hits of a :meth:`search` of ``scopes``."""
        found = yield from self.search(query, self.check.scopes(scopes), **options).run()
        return found.hits(found.ranked)

    def search(self, query: object, selection: ScopeSet, **options: Any) -> Search:
        """A recall's search of ``selection``, its arguments checked now (``_search``)."""
        return search(self, query, selection, **options)


def _family(space_id: str) -> tuple[str, str]:
    """A space id without its dimensions: ``("openai/m", "variant")`` for
    ``openai/m@512#variant`` (a provider or model never holds ``@`` or ``#``)."""
    base, _, variant = space_id.partition("#")
    return base.rpartition("@")[0], variant


def _content(item: PutItem | MemoryRecord) -> tuple[Scope, str]:
    """What deduplication compares: the scope and the text's hash."""
    record = item.record if isinstance(item, PutItem) else item
    return record.scope, record.content_sha256


def _redacted(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` (JSON-like) with ``redact`` applied to each string that is a value."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted(v, redact) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v, redact) for k, v in value.items()}
    return value
