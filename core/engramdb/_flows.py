"""Memory operations, each written once as a flow of effects (see ``_effects``).

``Memory`` and ``AsyncMemory`` only drive these flows. Validation happens here, before
any effect, so a bad argument changes nothing in any store.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from ._clock import Clock, from_ms, to_ms
from ._codec import decode_f32
from ._effects import Embed, Flow, Store
from ._embedder import Embedder
from ._errors import (
    ConfigurationError,
    DimensionMismatchError,
    NotFoundError,
    ProviderError,
    StoreError,
    ValidationError,
)
from ._filter import parse_filter
from ._fusion import rrf
from ._ids import new_id
from ._store import (
    DeleteItem,
    DeleteScope,
    FindVectors,
    GetItems,
    ListItems,
    Op,
    PendingTexts,
    PutItem,
    PutVector,
    RegisterSpace,
    SearchLexical,
    SearchVectors,
    Stats,
    StoredItem,
    StoreStats,
)
from ._types import (
    EmbedKind,
    Evidence,
    Hit,
    Hits,
    MemoryRecord,
    RecallMode,
    Scope,
    check_unicode,
    utf8,
    validate_scope,
)
from ._vectors import unit_f32

__all__ = ["UNSET", "Limits", "MemoryFlows", "MemoryStatus", "OnEmbedError", "Unset"]

OnEmbedError = Literal["lexical", "raise"]
_MODES = ("hybrid", "vector", "lexical")
_REMEMBER_KEYS = frozenset(
    {"text", "scope", "metadata", "labels", "importance", "expires_at", "id"}
)


class Unset:
    """Marks an argument that was not given (``None`` has a meaning of its own)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


@dataclass(frozen=True, slots=True)
class Limits:
    """Input limits. Every one is checked before anything is stored."""

    max_text_bytes: int = 32 * 1024
    max_metadata_bytes: int = 16 * 1024
    max_labels: int = 64
    max_top_k: int = 1000
    max_id_chars: int = 128


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


@dataclass(frozen=True, slots=True)
class _Prepared:
    record: MemoryRecord
    given_id: bool


def content_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class MemoryFlows:
    """Builds the flow of every memory operation."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        clock: Clock,
        redact: Callable[[str], str] | None = None,
        on_embed_error: OnEmbedError = "lexical",
        limits: Limits | None = None,
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
        self.redact = redact
        self.on_embed_error: OnEmbedError = on_embed_error
        self.limits = limits or Limits()

    # -- validation ---------------------------------------------------------------------

    def _now(self) -> datetime:
        """The clock's reading at the millisecond precision stores keep (a naive reading
        is rejected with a clear message)."""
        return from_ms(to_ms(self.clock()))

    def _text(self, text: object, what: str = "text") -> str:
        if not isinstance(text, str):
            raise ValidationError(f"{what} must be a string, not {type(text).__name__}")
        if not text.strip():
            raise ValidationError(f"{what} is empty or only whitespace; pass some text")
        if "\x00" in text:  # SQLite's JSON and string functions stop at it; Postgres refuses it
            raise ValidationError(
                f"{what} contains a NUL character (U+0000) at position {text.index(chr(0))}; "
                "remove it"
            )
        size = len(utf8(text, what))
        if size > self.limits.max_text_bytes:
            raise ValidationError(
                f"{what} is {size} bytes of UTF-8, over the limit of "
                f"{self.limits.max_text_bytes}; split it or raise Limits.max_text_bytes"
            )
        return text

    def _document_text(self, text: object) -> str:
        checked = self._text(text)
        if self.redact is None:
            return checked
        return self._text(self.redact(checked), "text after redact()")

    def _metadata(self, metadata: object) -> dict[str, object]:
        if metadata is None:
            return {}
        if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
            raise ValidationError(
                f"metadata={metadata!r} must be a JSON object: a dict with string keys"
            )
        try:
            encoded = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                f"metadata is not JSON-serialisable ({exc}); use str, numbers, bools, "
                "None, lists and dicts"
            ) from None
        size = len(utf8(encoded, "metadata as JSON"))
        if size > self.limits.max_metadata_bytes:
            raise ValidationError(
                f"metadata is {size} bytes as JSON, over the limit "
                f"of {self.limits.max_metadata_bytes}; store less or raise "
                "Limits.max_metadata_bytes"
            )
        loaded: dict[str, object] = json.loads(encoded)
        return loaded

    def _labels(self, labels: object) -> dict[str, list[str]]:
        if labels is None:
            return {}
        if not isinstance(labels, Mapping):
            raise ValidationError(
                f"labels={labels!r} must be a dict of label name to a list of strings"
            )
        checked: dict[str, list[str]] = {}
        count = 0
        for name, values in labels.items():
            if not isinstance(name, str) or not name.strip():
                raise ValidationError(f"label name {name!r} must be a non-empty string")
            check_unicode(name, "a label name")
            if isinstance(values, str):
                values = [values]
            if not isinstance(values, (list, tuple)) or not all(
                isinstance(v, str) and v for v in values
            ):
                raise ValidationError(
                    f"labels[{name!r}]={values!r} must be a list of non-empty strings"
                )
            checked[name] = sorted({check_unicode(v, f"labels[{name!r}]") for v in values})
            count += len(checked[name])
        if count > self.limits.max_labels:
            raise ValidationError(
                f"{count} label values given; the limit is {self.limits.max_labels}"
            )
        return checked

    @staticmethod
    def _importance(importance: object) -> float:
        if (
            isinstance(importance, bool)
            or not isinstance(importance, (int, float))
            or not 0.0 <= importance <= 1.0
        ):
            raise ValidationError(f"importance={importance!r} must be a number from 0.0 to 1.0")
        return float(importance)

    @staticmethod
    def _expires_at(expires_at: object) -> datetime | None:
        if expires_at is None:
            return None
        if not isinstance(expires_at, datetime):
            raise ValidationError(
                f"expires_at={expires_at!r} must be a timezone-aware datetime or None"
            )
        return from_ms(to_ms(expires_at))

    def _id(self, value: object) -> str:
        if not isinstance(value, str) or not value.strip() or len(value) > self.limits.max_id_chars:
            raise ValidationError(
                f"id={value!r} must be a non-empty string of at most "
                f"{self.limits.max_id_chars} characters"
            )
        if any(ord(c) < 0x20 for c in value):
            raise ValidationError(f"id={value!r} contains a control character; remove it")
        return check_unicode(value, "id")

    def _scopes(self, scopes: object) -> tuple[Scope, ...]:
        if isinstance(scopes, tuple) and scopes and all(isinstance(p, str) for p in scopes):
            raise ValidationError(
                f"scopes={scopes!r} looks like a single scope; pass a list of scopes, "
                f"e.g. scopes=[{scopes!r}]"
            )
        if isinstance(scopes, (str, bytes)) or not isinstance(scopes, Iterable):
            raise ValidationError(
                f"scopes={scopes!r} must be a list of scopes, e.g. [('acme', 'user', 'u42')]"
            )
        checked = tuple(dict.fromkeys(validate_scope(scope) for scope in scopes))
        if not checked:
            raise ValidationError("scopes is empty; name at least one scope to recall from")
        return checked

    def _int(self, name: str, value: object, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValidationError(f"{name}={value!r} must be an integer from {low} to {high}")
        return value

    def _prepare(
        self,
        text: object,
        scope: object,
        metadata: object,
        labels: object,
        importance: object,
        expires_at: object,
        id: object,
        now: datetime,
    ) -> _Prepared:
        clean = self._document_text(text)
        record = MemoryRecord(
            id=self._id(id) if id is not None else new_id(to_ms(now)),
            scope=validate_scope(scope),
            text=clean,
            metadata=self._metadata(metadata),
            labels=self._labels(labels),
            importance=self._importance(importance),
            created_at=now,
            updated_at=now,
            expires_at=self._expires_at(expires_at),
            revision=1,
            content_sha256=content_sha256(clean),
        )
        return _Prepared(record, given_id=id is not None)

    # -- embedding ----------------------------------------------------------------------

    def _embed(self, texts: Sequence[str], kind: EmbedKind) -> Flow[list[bytes]]:
        """Embed ``texts`` in batches of ``max_batch``; unit float32 bytes out."""
        blobs: list[bytes] = []
        step = max(1, int(self.embedder.max_batch))
        for start in range(0, len(texts), step):
            chunk = tuple(texts[start : start + step])
            vectors = yield Embed(chunk, kind)
            blobs.extend(self._check_vectors(vectors, len(chunk)))
        return blobs

    def _check_vectors(self, vectors: object, count: int) -> list[bytes]:
        space = self.embedder.space
        if not isinstance(vectors, Sequence) or len(vectors) != count:
            got = len(vectors) if isinstance(vectors, Sequence) else type(vectors).__name__
            raise ProviderError(
                f"the embedder {space.id} returned {got} vectors for {count} texts; "
                "check the embedder",
                provider=space.provider,
            )
        blobs = []
        for vector in vectors:
            if len(vector) != space.dimensions:
                raise DimensionMismatchError(
                    f"the embedder returned a vector of {len(vector)} dimensions but its "
                    f"space {space.id} has {space.dimensions}; fix the embedder's dimensions",
                    expected=space.dimensions,
                    actual=len(vector),
                )
            blobs.append(unit_f32(vector))
        return blobs

    # -- writes -------------------------------------------------------------------------

    def _write(self, prepared: Sequence[_Prepared], now: datetime) -> Flow[list[MemoryRecord]]:
        """Store new or replacing items with their vectors in one atomic batch."""
        given = tuple(p.record.id for p in prepared if p.given_id)
        records = [p.record for p in prepared]
        if given:
            (existing,) = yield Store((GetItems(given, now),))
            found = {item.record.id: item.record for item in existing if item is not None}
            for index, record in enumerate(records):
                old = found.get(record.id)
                if old is None:
                    continue
                if old.scope != record.scope:
                    raise ValidationError(
                        f"id={record.id!r} already belongs to scope {old.scope!r}; "
                        "use another id or forget() the old memory first"
                    )
                records[index] = replace(
                    record, created_at=old.created_at, revision=old.revision + 1
                )
        vector_ops = yield from self._vectors_for(records, now)
        yield Store((*vector_ops, *(PutItem(r) for r in records)))
        return records

    def _vectors_for(self, records: Sequence[MemoryRecord], now: datetime) -> Flow[list[Op]]:
        """Embed the texts whose hash has no vector in the active space yet."""
        texts = {r.content_sha256: r.text for r in records}
        space_id = self._space_id()
        present: frozenset[str] = frozenset()  # an unknown space has no vectors yet
        if space_id is not None:
            (present,) = yield Store((FindVectors(space_id, tuple(texts)),))
        # In hash order: B-tree stores then insert into the vectors' primary key in order
        # (a few per cent faster in SQLite: python -m bench.writes).
        missing = sorted(sha for sha in texts if sha not in present)
        if not missing:
            return []
        blobs = yield from self._embed([texts[sha] for sha in missing], "document")
        space = self.embedder.space  # an embedder may learn its dimensions on first use
        return [
            RegisterSpace(space, now),
            *(
                PutVector(space.id, sha, blob, now)
                for sha, blob in zip(missing, blobs, strict=True)
            ),
        ]

    def remember(
        self,
        text: object,
        scope: object,
        *,
        metadata: object = None,
        labels: object = None,
        importance: object = 0.5,
        expires_at: object = None,
        id: object = None,
    ) -> Flow[MemoryRecord]:
        now = self._now()
        prepared = self._prepare(text, scope, metadata, labels, importance, expires_at, id, now)
        records = yield from self._write([prepared], now)
        return records[0]

    def remember_many(self, items: object) -> Flow[list[MemoryRecord]]:
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise ValidationError(
                "remember_many() takes a list of dicts like {'text': ..., 'scope': (...)}"
            )
        now = self._now()
        prepared: list[_Prepared] = []
        for position, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise ValidationError(
                    f"item {position} is {item!r}; pass a dict with text and scope"
                )
            if not _REMEMBER_KEYS.issuperset(item) or "text" not in item or "scope" not in item:
                unknown = set(item) - _REMEMBER_KEYS
                raise ValidationError(
                    f"item {position} has unknown keys {sorted(map(str, unknown))} or lacks "
                    f"text/scope; allowed keys are {sorted(_REMEMBER_KEYS)}"
                )
            try:
                prepared.append(
                    self._prepare(
                        item["text"],
                        item["scope"],
                        item.get("metadata"),
                        item.get("labels"),
                        item.get("importance", 0.5),
                        item.get("expires_at"),
                        item.get("id"),
                        now,
                    )
                )
            except ValidationError as exc:
                raise ValidationError(f"item {position}: {exc}") from None
        ids = [p.record.id for p in prepared]
        if len(set(ids)) != len(ids):
            raise ValidationError("remember_many() got the same id twice; ids must be unique")
        if not prepared:
            return []
        records = yield from self._write(prepared, now)
        return records

    def update(
        self,
        id: object,
        *,
        text: object = UNSET,
        metadata: object = UNSET,
        labels: object = UNSET,
        importance: object = UNSET,
        expires_at: object = UNSET,
    ) -> Flow[MemoryRecord]:
        now = self._now()
        checked_id = self._id(id)
        changes: dict[str, Any] = {}
        if not isinstance(text, Unset):
            clean = self._document_text(text)
            changes["text"] = clean
            changes["content_sha256"] = content_sha256(clean)
        if not isinstance(metadata, Unset):
            changes["metadata"] = self._metadata(metadata)
        if not isinstance(labels, Unset):
            changes["labels"] = self._labels(labels)
        if not isinstance(importance, Unset):
            changes["importance"] = self._importance(importance)
        if not isinstance(expires_at, Unset):
            changes["expires_at"] = self._expires_at(expires_at)
        (found,) = yield Store((GetItems((checked_id,), now),))
        if found[0] is None:
            raise NotFoundError(f"no memory with id={checked_id!r}; it was forgotten or expired")
        old: MemoryRecord = found[0].record
        record: MemoryRecord = replace(
            old, **changes, revision=old.revision + 1, updated_at=from_ms(to_ms(now))
        )
        vector_ops = yield from self._vectors_for([record], now)
        yield Store((*vector_ops, PutItem(record)))
        return record

    def forget(self, id: object) -> Flow[bool]:
        (deleted,) = yield Store((DeleteItem(self._id(id)),))
        return bool(deleted)

    def forget_scope(self, scope: object) -> Flow[int]:
        (count,) = yield Store((DeleteScope(validate_scope(scope)),))
        return int(count)

    def reindex(
        self, batch_size: object = 64, progress: Callable[[int], None] | None = None
    ) -> Flow[int]:
        """Embed every text that has no vector in the active space; return how many."""
        size = self._int("batch_size", batch_size, 1, 10_000)
        done = 0
        seen: set[str] = set()
        while True:
            # An embedder that learns its dimensions on first use has no space yet: every
            # text counts as pending, and the first batch teaches it its space.
            space_id = self._space_id() or ""
            (pending,) = yield Store((PendingTexts(space_id, size),))
            if not pending:
                return done
            hashes = [sha for sha, _ in pending]
            if seen.intersection(hashes):
                raise StoreError(
                    "reindex() stored vectors that the store still reports as pending; "
                    "the store is inconsistent"
                )
            seen.update(hashes)
            now = self._now()
            blobs = yield from self._embed([text for _, text in pending], "document")
            space = self.embedder.space
            yield Store(
                (
                    RegisterSpace(space, now),
                    *(
                        PutVector(space.id, sha, blob, now)
                        for sha, blob in zip(hashes, blobs, strict=True)
                    ),
                )
            )
            done += len(pending)
            if progress is not None:
                progress(done)

    # -- reads --------------------------------------------------------------------------

    def get(self, id: object) -> Flow[MemoryRecord | None]:
        (found,) = yield Store((GetItems((self._id(id),), self._now()),))
        return found[0].record if found[0] is not None else None

    def list(
        self, scope: object, limit: object = 50, before: object = None
    ) -> Flow[list[MemoryRecord]]:
        checked = validate_scope(scope)
        size = self._int("limit", limit, 1, 10_000)
        cursor = self._id(before) if before is not None else None
        (records,) = yield Store((ListItems(checked, size, self._now(), cursor),))
        return list(records)

    def _space_id(self) -> str | None:
        """The active space's id, or None while the embedder has not learned it yet."""
        try:
            return self.embedder.space.id
        except ConfigurationError:
            return None

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
        )

    def recall(
        self,
        query: object,
        scopes: object,
        *,
        top_k: object = 10,
        mode: object = "hybrid",
        min_similarity: object = None,
        filter: object = None,
        rrf_k: object = 60,
        weights: object = None,
        exact: object = False,
    ) -> Flow[Hits]:
        text = self._text(query, "query")
        checked_scopes = self._scopes(scopes)
        k = self._int("top_k", top_k, 1, self.limits.max_top_k)
        if mode not in _MODES:
            raise ValidationError(f"mode={mode!r} is not supported; use one of {list(_MODES)}")
        recall_mode: RecallMode = mode  # type: ignore[assignment]
        floor = _similarity_floor(min_similarity)
        checked_filter = parse_filter(filter)
        fusion_k = self._int("rrf_k", rrf_k, 1, 10_000)
        fusion_weights = _weights(weights)
        if not isinstance(exact, bool):
            raise ValidationError(f"exact={exact!r} must be True or False")
        now = self._now()
        depth = min(max(5 * k, 50), 1000)

        space_id: str | None = None  # of the query vector, once it is embedded
        query_vector: tuple[float, ...] | None = None
        error: str | None = None
        if recall_mode != "lexical":
            try:
                (blob,) = yield from self._embed([text], "query")
                space_id = self.embedder.space.id
                query_vector = _unit_tuple(blob)
            except Exception as exc:
                if self.on_embed_error == "raise":
                    raise
                error = type(exc).__name__

        ops: list[Op] = []
        if space_id is not None and query_vector is not None:
            ops.append(
                SearchVectors(
                    checked_scopes, space_id, query_vector, depth, now, exact, checked_filter
                )
            )
        if recall_mode != "vector" or query_vector is None:
            ops.append(SearchLexical(checked_scopes, text, depth, now, checked_filter))
        results = yield Store(tuple(ops))
        vector_hits: list[tuple[str, float]] = results[0] if query_vector is not None else []
        lexical_hits: list[tuple[str, float]] = (
            results[-1] if isinstance(ops[-1], SearchLexical) else []
        )
        if floor is not None:
            vector_hits = [(i, s) for i, s in vector_hits if s >= floor]

        similarity = dict(vector_hits)
        relevance = dict(lexical_hits)
        fused = rrf(
            {"vector": [i for i, _ in vector_hits], "lexical": [i for i, _ in lexical_hits]},
            k=fusion_k,
            weights=fusion_weights,
        )
        if query_vector is None:
            status: Literal["used", "degraded", "lexical_only"] = (
                "degraded" if error else "lexical_only"
            )
        else:
            status = "used"
        ranked = fused[:k]
        ids = tuple(f.id for f in ranked)
        if not ids:
            return Hits(
                (), status=status, selection_id=new_id(to_ms(now)), mode=recall_mode, error=error
            )
        (items,) = yield Store((GetItems(ids, now, space_id),))
        hits = []
        for fused_hit, item in zip(ranked, items, strict=True):
            if item is None:  # forgotten between the search and the read
                continue
            hits.append(
                _hit(
                    item,
                    fused_hit.score,
                    fused_hit.ranks,
                    similarity,
                    relevance,
                    space_id,
                    recall_mode,
                    query_vector is not None,
                )
            )
        return Hits(
            hits, status=status, selection_id=new_id(to_ms(now)), mode=recall_mode, error=error
        )


def _hit(
    item: StoredItem,
    fused_score: float,
    ranks: Mapping[str, int],
    similarity: Mapping[str, float],
    relevance: Mapping[str, float],
    space_id: str | None,
    mode: RecallMode,
    vector_used: bool,
) -> Hit:
    record = item.record
    sim = similarity.get(record.id)
    bm25 = relevance.get(record.id)
    if mode == "vector" and vector_used:
        score = sim if sim is not None else 0.0
    elif mode == "lexical" or not vector_used:
        score = bm25 if bm25 is not None else 0.0
    else:
        score = fused_score
    evidence: Evidence = {
        "id": record.id,
        "scope": record.scope,
        "revision": record.revision,
        "content_sha256": record.content_sha256,
        "space_id": space_id if item.embedded_at is not None else None,
        "embedded_at": item.embedded_at,
    }
    return Hit(
        memory=record,
        score=score,
        similarity=sim,
        vector_rank=ranks.get("vector"),
        lexical_rank=ranks.get("lexical"),
        bm25=bm25,
        evidence=evidence,
    )


def _unit_tuple(blob: bytes) -> tuple[float, ...]:
    return tuple(decode_f32(blob))


def _similarity_floor(value: object) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and -1.0 <= value <= 1.0)
    ):
        raise ValidationError(f"min_similarity={value!r} must be a number from -1.0 to 1.0")
    return float(value)


def _weights(value: object) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError(
            f"weights={value!r} must be a dict like {{'vector': 1.0, 'lexical': 0.5}}"
        )
    rrf({"vector": (), "lexical": ()}, weights=value)  # validates now, before any effect
    return dict(value)
