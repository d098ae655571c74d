"""A bound view's writes, checked before anything is written, and its documents: the
arguments of ``remember`` / ``remember_many`` and each chunk of ``remember_document(s)``
checked as one, documents planned into chunks, stored a batch at a time and replaced
(``BoundMemory`` and ``AsyncBoundMemory`` run the flows, ``bound``)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from engramdb._base.errors import ValidationError, shown
from engramdb._base.types import MemoryRecord, Scope
from engramdb.documents import DocumentPlan, chunks_filter, document_id, held_chunk, plan_document
from engramdb.documents import unchanged as unchanged_chunks
from engramdb.flows._bound_flows import BoundFlows
from engramdb.flows._conversations import conversation_items, remember_turns
from engramdb.flows._effects import Flow
from engramdb.flows._labels import Labels
from engramdb.flows._uploads import DocumentParts
from engramdb.flows.context import supplied_vector

__all__ = [
    "DocumentSteps",
    "Label",
    "Outcome",
    "ViewWrites",
    "document_pairs",
    "record",
    "record_id",
]

T = TypeVar("T")

_ITEM_KEYS = frozenset(
    {"text", "durability", "metadata", "labels", "importance", "expires_at", "ttl", "vector"}
)
Prepared = tuple[str, Scope, Labels, dict[str, Any]]
_PAGE = 10_000  # chunks read per list call (the most a list call gives)
_BATCH = 256  # chunks stored per atomic batch (remember_many's default)
_ANY_CHUNK = {"metadata": {"document_id": {"$exists": True}}}


@dataclass(frozen=True, slots=True)
class Label:
    """A step of :meth:`ViewWrites._documents`: the labeler's labels for ``texts``
    (the one thing a sync and an async view do differently besides running a flow)."""

    texts: list[str]


Outcome = tuple[str, str, str, tuple[T, ...], bool]  # the fields of a Document or a summary
DocumentSteps = Generator[Flow[Any] | Label, Any, list[Outcome[T]]]


def record(record: MemoryRecord) -> MemoryRecord:
    return record


def record_id(record: MemoryRecord) -> str:
    return record.id


def document_pairs(documents: object) -> Iterable[tuple[Any, Any]]:
    """The ``(source, text)`` pairs of ``remember_documents``'s mapping."""
    if not isinstance(documents, Mapping):
        raise ValidationError(
            f"documents={shown(documents)} must map each source to its text, e.g. "
            "{'notes/trip.md': '# Trip ...'}"
        )
    return documents.items()


class ViewWrites:
    """What a bound view writes, checked and planned once for both faces: a remember's
    arguments (:meth:`_prepare`, :meth:`_prepare_many`, :meth:`_rows`) and documents
    split into chunks, stored and replaced (:meth:`_documents`); the view supplies
    ``_bound``, its flows."""

    _bound: BoundFlows
    _bound_uploads: DocumentParts

    def _held(
        self, doc_ids: list[str], keep: Callable[[MemoryRecord], T]
    ) -> Flow[dict[str, list[tuple[int, object, T]]]]:
        """The chunks the bound scope holds of each document of ``doc_ids``
        (:func:`~engramdb.documents.held_chunk`, with ``keep(record)``), in one listing
        (pages of ``_PAGE``): by the document's id for one document; for more, every
        chunk of the scope, those of other documents dropped as they come, so that N
        documents cost one read of the scope, not N."""
        held: dict[str, list[tuple[int, object, T]]] = {doc_id: [] for doc_id in doc_ids}
        if not held:
            return held
        spec = chunks_filter(doc_ids[0]) if len(held) == 1 else _ANY_CHUNK
        before = None
        while True:
            page = yield from self._bound.list(_PAGE, before, spec)
            for record in page:
                doc_id = record.metadata.get("document_id")
                if isinstance(doc_id, str) and doc_id in held:
                    held[doc_id].append(held_chunk(record, keep(record)))
            if len(page) < _PAGE:
                return held
            before = page[-1].id

    def _documents(
        self,
        documents: Iterable[tuple[Any, Any]],
        max_chars: int,
        metadata: object,
        labels: object,
        progress: Callable[[int, int], None] | None,
        keep: Callable[[MemoryRecord], T],
    ) -> DocumentSteps[T]:
        """What ``remember_document(s)`` does, written once for both faces: it yields
        the flows to run and the texts to label (:class:`Label`) and answers each
        document's fields, with ``keep(record)`` of each chunk (the record, or its id).

        Nothing is stored before every document is checked, the scope's chunks of all
        of them are read (one listing) and every chunk to store is checked; then each
        changed document's chunks are stored ``_BATCH`` at a time, and its old chunks
        forgotten after them (a crash in between leaves both, never neither). Only a
        batch of chunks is in memory at a time, besides what ``keep`` keeps."""
        own = self._bound.context.check.metadata(metadata)
        self._bound.labels(labels)  # checked once here, and with each chunk below
        given = labels if isinstance(labels, Mapping) else None
        plans = [plan_document(text, source, max_chars, own, given) for source, text in documents]
        held: dict[str, list[tuple[int, object, tuple[str, T]]]] = yield self._held(
            [plan.id for plan in plans], lambda record: (record.id, keep(record))
        )
        kept = {
            plan.id: unchanged_chunks(held[plan.id], plan.sha256, len(plan.spans)) for plan in plans
        }
        for plan in plans:  # every chunk to store, checked before anything is stored
            if not kept[plan.id]:
                self._check_chunks(plan)
        done: list[Outcome[T]] = []
        for count, plan in enumerate(plans, start=1):
            old = [chunk_id for _, _, (chunk_id, _) in held.pop(plan.id)]
            unchanged = kept.pop(plan.id)
            if unchanged:
                chunks = tuple(chunk for _, chunk in unchanged)
            else:
                stored: list[T] = []
                for start in range(0, len(plan.spans), _BATCH):
                    prepared = self._prepared_chunks(plan, start)
                    automatic = yield Label([text for text, *_ in prepared])
                    records = yield self._bound.remember_many(
                        self._rows(prepared, automatic), _BATCH, False
                    )
                    stored += map(keep, records)
                yield self._bound.forget_many(old)
                chunks = tuple(stored)
            done.append((plan.id, plan.source, plan.sha256, chunks, not unchanged))
            if progress is not None:
                progress(count, len(plans))
        return done

    def _prepared_chunks(self, plan: DocumentPlan, start: int, stop: int = 0) -> list[Prepared]:
        """The chunks ``start`` to ``stop`` (default: a batch) of ``plan``, checked as
        ``remember`` checks its arguments; the error names the document and the chunk."""
        return self._prepare_many(
            plan.items(start, stop or start + _BATCH),
            lambda position: f"the document {shown(plan.source)}, chunk {start + position}",
        )

    def _check_chunks(self, plan: DocumentPlan) -> None:
        """Every chunk of ``plan`` checked as :meth:`_prepared_chunks` checks it, nothing
        kept: each chunk's text, and the rest (metadata, labels) with the last chunk,
        whose metadata is the longest (the chunks' metadata differ only in their
        numbers, and the last one's are the largest)."""
        last = len(plan.spans) - 1
        self._prepared_chunks(plan, last, last + 1)
        context = self._bound.context
        for position, (start, end) in enumerate(plan.spans):
            try:
                context.document_text(plan.text[start:end])
            except ValidationError as exc:
                raise ValidationError(
                    f"the document {shown(plan.source)}, chunk {position}: {exc}"
                ) from None

    def _part(
        self, text: str, source: str, sha256: object, part: object, parts: object
    ) -> tuple[tuple[Any, ...], dict[int, str], str | None]:
        """Hold a part of a document sent in parts (``engramdb.flows._uploads``): the
        upload's key, the parts held, and the whole text once every part is held."""
        document_id(source)  # checks the source
        if not isinstance(text, str) or not text:
            raise ValidationError(f"text={shown(text)} must be the part's text, a string")
        uploads = self._bound_uploads
        key, held = uploads.add(self._bound.authority.scope, source, sha256, part, parts, text)
        return key, held, uploads.whole(key, held) if len(held) == key[3] else None

    def _forget_document(self, source: str) -> Flow[int]:
        doc_id = document_id(source)
        held = yield from self._held([doc_id], lambda record: record.id)
        return (yield from self._bound.forget_many([chunk_id for *_, chunk_id in held[doc_id]]))

    def _prepare(
        self, text: object, durability: object, labels: object, **fields: Any
    ) -> tuple[str, Scope, Labels, dict[str, Any]]:
        """A remember's arguments, checked before the labeler runs or anything is
        written: the (redacted) text, the scope, the given labels and the other fields."""
        bound = self._bound
        ctx = bound.context
        checked = ctx.document_text(text)  # redacted before the labeler sees it
        scope = bound.authority.target(durability)
        given = bound.labels(labels)
        ctx.expiry(fields["expires_at"], fields["ttl"], ctx.now())
        fields["importance"] = ctx.check.importance(fields["importance"])
        fields["metadata"] = ctx.check.metadata(fields["metadata"])
        if fields.get("vector") is not None:  # checked before the labeler runs
            supplied_vector(ctx, fields["vector"])
        return checked, scope, given, fields

    def _prepare_many(
        self, items: object, named: Callable[[int], str] = "item {}".format
    ) -> list[Prepared]:
        """Every item of a ``remember_many``, checked as :meth:`_prepare` checks one,
        before any labeler runs or anything is written (an error starts with
        ``named(position)``)."""
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
            raise ValidationError("remember_many() takes a list of dicts like {'text': ...}")
        prepared = []
        for position, item in enumerate(items):
            if not isinstance(item, Mapping) or "text" not in item or set(item) - _ITEM_KEYS:
                raise ValidationError(
                    f"item {position} is {shown(item)}; pass a dict with text and any of "
                    f"{sorted(_ITEM_KEYS - {'text'})} (a view chooses the scope)"
                )
            try:
                prepared.append(
                    self._prepare(
                        item["text"],
                        item.get("durability", "shared"),
                        item.get("labels"),
                        metadata=item.get("metadata"),
                        importance=item.get("importance", 0.5),
                        expires_at=item.get("expires_at"),
                        ttl=item.get("ttl"),
                        vector=item.get("vector"),
                    )
                )
            except ValidationError as exc:
                raise ValidationError(f"{named(position)}: {exc}") from None
        return prepared

    def _prepare_turns(
        self,
        turns: object,
        conversation: object,
        start: object,
        durability: object,
        metadata: Mapping[str, object] | None,
        labels: object,
    ) -> list[Prepared]:
        """Every turn of a ``remember_conversation`` as an item of :meth:`_prepare_many`
        (``_conversations.conversation_items``), checked before anything is written."""
        items = conversation_items(turns, conversation, start, metadata)
        given = [{**item, "durability": durability, "labels": labels} for item in items]
        return self._prepare_many(given, "turn {}".format)

    def _turns(self, rows: list[dict[str, Any]]) -> Flow[list[MemoryRecord]]:
        """Store the turns ``rows`` whose places their scope does not hold yet, in one
        atomic batch (``_conversations.remember_turns``)."""
        bound = self._bound

        def remember_many(new: list[dict[str, Any]]) -> Flow[list[MemoryRecord]]:
            return bound.remember_many(new, len(new), False)

        now = bound.context.now()
        return (yield from remember_turns(remember_many, rows, rows[0]["scope"], now))

    def _rows(self, prepared: list[Prepared], automatic: list[Labels]) -> list[dict[str, Any]]:
        return [
            {"text": text, "scope": scope, "labels": self._bound.merged(given, found), **fields}
            for (text, scope, given, fields), found in zip(prepared, automatic, strict=True)
        ]
