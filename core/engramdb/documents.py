"""Documents, not only notes: a long text cut into chunks, each chunk a memory.

``view.remember_document(text, source="notes/trip.md")`` (a bound view, sync or async)
cuts ``text`` with :func:`chunk_text` and remembers each chunk as a memory of the view's
scope, with the document's place in its metadata (top-level keys, so recall and list
filters can use them):

===================  ===========================================================
``document_id``      the document's id, from its source: ``doc-`` and 26 hex digits
``document_source``  the source as given (a path, a URL, an id of yours)
``document_sha256``  the SHA-256 of the whole text
``document_chunk``   the chunk's position, from 0
``document_chunks``  how many chunks the document has
``document_start``   where the chunk starts in the text (a code point offset)
``document_end``     where it ends: ``text[start:end]`` is the chunk's text
``document_lines``   its first and last line in the text, ``[first, last]``, from 1
===================  ===========================================================

A hit of a chunk so says where in its source it came from (:func:`span_of`, and
:func:`lines_of` for its lines: a chunk stored before engramdb recorded lines has no
``document_lines``, and answers None until its document is remembered with another text).
Remembering a source again with the same text adds nothing; with another text, it adds
the new chunks and then forgets the old ones (a crash in between leaves both, never
neither). ``view.forget_document(source)`` forgets every chunk of a source.
``view.remember_documents({source: text, ...})`` remembers many, reading what the scope
holds of them in one listing, and answers a :class:`DocumentSummary` for each.

A document is checked (:func:`plan_document`: a source and a text of valid Unicode, the
text without NUL) before anything is computed from it, and every chunk before the first
is stored; chunks are then cut from the text a batch at a time, so only a batch of them
is in memory at once.

Nothing here does I/O: a file is read by the caller (``engramdb import`` reads a
folder of ``.md``, ``.markdown`` and ``.txt`` files).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from engramdb._base.errors import ValidationError, shown
from engramdb._base.types import MemoryRecord, utf8

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DOCUMENT_KEYS",
    "Chunk",
    "Document",
    "DocumentSummary",
    "DocumentUpload",
    "chunk_text",
    "document_id",
    "lines_of",
    "span_of",
]

T = TypeVar("T")
DEFAULT_MAX_CHARS = 600
"""The default most characters of a chunk (about 150 tokens): of 400, 600, 800 and 1,200,
the size that recalled the most within a reading budget (docs/documents.md)."""
_LEAST_MAX_CHARS = 50
DOCUMENT_KEYS = (
    "document_id",
    "document_source",
    "document_sha256",
    "document_chunk",
    "document_chunks",
    "document_start",
    "document_end",
    "document_lines",
)
"""The metadata keys a chunk's memory holds (a document's own metadata may not use them)."""

_BLOCK = re.compile(r"\n[ \t]*\n")  # a blank line ends a paragraph
_HEADING = re.compile(r"#{1,6}\s")  # a Markdown heading starts a section
_SENTENCE = re.compile(r"(?<=[.!?…])[\"')\]]*\s+")  # after a sentence's end
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a text: ``text == whole[start:end]``, never empty, no leading or
    trailing whitespace."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class Document:
    """What ``remember_document`` did: the document's ``id`` and ``source``, the
    ``sha256`` of its text, its ``chunks`` (the memories, in order) and whether it
    ``added`` them (False: the source already held this very text)."""

    id: str
    source: str
    sha256: str
    chunks: tuple[MemoryRecord, ...]
    added: bool


@dataclass(frozen=True, slots=True)
class DocumentSummary:
    """What ``remember_documents`` did with one document: as :class:`Document`, with
    the ids of its chunks (``chunk_ids``, in order) instead of their records, so that a
    folder's worth of documents is not held in memory a second time."""

    id: str
    source: str
    sha256: str
    chunk_ids: tuple[str, ...]
    added: bool


@dataclass(frozen=True, slots=True)
class DocumentUpload:
    """What ``remember_document_part`` did: the ``source`` and ``sha256`` of the document
    sent in ``parts``, the parts held (``received``, in order), and the
    :class:`Document` remembered once the last part arrived (None before)."""

    source: str
    sha256: str
    parts: int
    received: tuple[int, ...]
    document: Document | None


def chunk_text(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> list[Chunk]:
    """``text`` cut into chunks of at most ``max_chars`` characters on its natural
    boundaries: a Markdown heading starts a new chunk (headings in a row stay with the
    paragraph after them); paragraphs (blank-line separated)
    are packed together while they fit; a paragraph too long for one chunk is cut after
    its sentences, a sentence too long at spaces, and a word too long anywhere. Each
    chunk is ``text[start:end]`` with its outer whitespace left out; whitespace alone
    makes no chunk."""
    budget = _max_chars(max_chars)
    if not isinstance(text, str):
        raise ValidationError(f"text={shown(text)} must be a string")
    return [_chunk(text, start, end) for start, end in _spans(text, budget)]


def _spans(text: str, budget: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each chunk of :func:`chunk_text`: where the chunks are,
    without a copy of their text."""
    spans: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None  # the chunk being packed
    titles_only = False  # whether it holds only headings (the next piece joins them)
    for start, end in _pieces(text, budget):
        heading = _HEADING.match(text, start) is not None
        if current is not None and ((heading and not titles_only) or end - current[0] > budget):
            spans.append(current)
            current = None
        titles_only = heading and (current is None or titles_only)
        current = (start, end) if current is None else (current[0], end)
    if current is not None:
        spans.append(current)
    return spans


def document_id(source: str) -> str:
    """The id of the document of ``source``: the same for the same source, so a source
    remembered again finds its chunks."""
    if not isinstance(source, str) or not source.strip():
        raise ValidationError(
            f"source={shown(source)} must name the document (a path, a URL or an id of "
            "yours), e.g. 'notes/trip.md'"
        )
    return "doc-" + hashlib.sha256(utf8(source, f"source={shown(source)}")).hexdigest()[:26]


def span_of(record: MemoryRecord) -> tuple[str, int, int] | None:
    """``(source, start, end)`` of a chunk's memory in its document; None for a memory
    that is not a chunk."""
    meta = record.metadata
    source, start, end = (
        meta.get(k) for k in ("document_source", "document_start", "document_end")
    )
    if isinstance(source, str) and isinstance(start, int) and isinstance(end, int):
        return source, start, end
    return None


def lines_of(record: MemoryRecord) -> tuple[int, int] | None:
    """``(first, last)``: the lines of its document a chunk's memory spans, from 1; None
    for a memory that is not a chunk, or a chunk stored before lines were recorded."""
    lines = record.metadata.get("document_lines")
    if (
        isinstance(lines, list)
        and len(lines) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in lines)
    ):
        return lines[0], lines[1]
    return None


def _line_spans(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ``(first, last)`` line (from 1) of each span of ``text``, in one pass over it
    (the spans are in order and do not overlap)."""
    lines: list[tuple[int, int]] = []
    line, at = 1, 0
    for start, end in spans:
        line += text.count("\n", at, start)
        last = line + text.count("\n", start, end)
        lines.append((line, last))
        line, at = last, end
    return lines


@dataclass(frozen=True, slots=True)
class DocumentPlan:
    """A document checked and cut, before anything is stored: its ``id``, ``source``,
    the ``sha256`` of its ``text`` and the ``spans`` of its chunks (no copy of their
    text: :meth:`items` slices them a batch at a time)."""

    id: str
    source: str
    sha256: str
    text: str
    spans: list[tuple[int, int]]
    metadata: Mapping[str, object]
    labels: Mapping[str, list[str]] | None
    lines: list[tuple[int, int]]

    def items(self, start: int, stop: int) -> list[dict[str, Any]]:
        """The items ``remember_many`` stores for chunks ``start`` to ``stop`` (each
        with the document's ``metadata`` and ``labels``)."""
        return [
            {
                "text": self.text[begin:end],
                "metadata": {
                    **self.metadata,
                    "document_id": self.id,
                    "document_source": self.source,
                    "document_sha256": self.sha256,
                    "document_chunk": position,
                    "document_chunks": len(self.spans),
                    "document_start": begin,
                    "document_end": end,
                    "document_lines": list(self.lines[position]),
                },
                **({"labels": dict(self.labels)} if self.labels else {}),
            }
            for position, (begin, end) in enumerate(self.spans[start:stop], start=start)
        ]


def plan_document(
    text: str,
    source: str,
    max_chars: int,
    metadata: Mapping[str, object],
    labels: Mapping[str, list[str]] | None,
) -> DocumentPlan:
    """``text`` checked (a string of valid Unicode with some text and no NUL) before
    anything is computed from it, then hashed and cut: one ``ValidationError`` naming
    the document and the fix otherwise. ``metadata`` is checked metadata (a dict)."""
    doc_id = document_id(source)  # checks the source
    if not isinstance(text, str):
        raise ValidationError(
            f"the document {shown(source)} is {shown(text)}; pass its text as a str"
        )
    budget = _max_chars(max_chars)
    taken = sorted(set(metadata) & set(DOCUMENT_KEYS))
    if taken:
        raise ValidationError(
            f"metadata key {taken[0]!r} is the document's own (the keys {', '.join(DOCUMENT_KEYS)} "
            "say where a chunk comes from); rename it"
        )
    if not text.strip():
        raise ValidationError(f"the document {shown(source)} is empty; give it some text")
    nul = text.find("\x00")
    if nul >= 0:
        raise ValidationError(
            f"the document {shown(source)} has a NUL character (U+0000) at position {nul}; "
            "remove it"
        )
    spans = _spans(text, budget)
    sha = _sha256(text, source)
    return DocumentPlan(
        doc_id, source, sha, text, spans, metadata, labels, _line_spans(text, spans)
    )


_HASHED_PER_STEP = 1 << 20  # characters encoded at a time: no UTF-8 copy of a whole document


def _sha256(text: str, source: str) -> str:
    """The SHA-256 of ``text``'s UTF-8, encoded a slice at a time; ``ValidationError``
    at a lone surrogate (which has no UTF-8)."""
    digest = hashlib.sha256()
    for at in range(0, len(text), _HASHED_PER_STEP):
        part = text[at : at + _HASHED_PER_STEP]
        try:
            digest.update(part.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise ValidationError(
                f"the document {shown(source)} has a lone surrogate "
                f"{part[exc.start : exc.end]!r} at position {at + exc.start}, which is not "
                "valid Unicode text; fix or re-decode it"
            ) from None
    return digest.hexdigest()


def held_chunk(record: MemoryRecord, chunk: T) -> tuple[int, object, T]:
    """What :func:`unchanged` reads of a chunk the store holds: its position, its
    document's SHA-256, and ``chunk`` (the record, or what a caller keeps of it)."""
    return _position(record), record.metadata.get("document_sha256"), chunk


def unchanged(held: Iterable[tuple[int, object, T]], sha: str, count: int) -> tuple[T, ...]:
    """The chunks already stored (each from :func:`held_chunk`), in order, when they
    are those of the text of ``sha`` (all ``count`` of them); ``()`` otherwise."""
    ordered = sorted(held, key=lambda entry: entry[0])
    if len(ordered) == count and all(
        (position, held_sha) == (i, sha) for i, (position, held_sha, _) in enumerate(ordered)
    ):
        return tuple(chunk for _, _, chunk in ordered)
    return ()


def chunks_filter(doc_id: str) -> dict[str, Any]:
    """The list filter of a document's chunks."""
    return {"metadata": {"document_id": doc_id}}


def _position(record: MemoryRecord) -> int:
    position = record.metadata.get("document_chunk")
    return position if isinstance(position, int) else -1


def _max_chars(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < _LEAST_MAX_CHARS:
        raise ValidationError(
            f"max_chars={shown(value)} must be a whole number of characters from "
            f"{_LEAST_MAX_CHARS}, e.g. {DEFAULT_MAX_CHARS}"
        )
    return value


def _pieces(text: str, budget: int) -> Iterable[tuple[int, int]]:
    """The spans a chunk is packed from, in order: paragraphs, or the sentences, words
    and slices of a paragraph longer than ``budget``; each trimmed, none empty."""
    start = 0
    for gap in [*_BLOCK.finditer(text), None]:
        end = len(text) if gap is None else gap.start()
        yield from _fitting(text, start, end, budget, (_SENTENCE, _SPACE))
        if gap is not None:
            start = gap.end()


def _fitting(
    text: str, start: int, end: int, budget: int, cuts: tuple[re.Pattern[str], ...]
) -> Iterable[tuple[int, int]]:
    """``text[start:end]`` trimmed, whole when it fits, else cut at the first of ``cuts``
    that occurs (the next ones within each part), or every ``budget`` characters."""
    start, end = _trimmed(text, start, end)
    if start == end:
        return
    if end - start <= budget:
        yield start, end
        return
    if not cuts:
        for at in range(start, end, budget):
            yield from _fitting(text, at, min(end, at + budget), budget, ())
        return
    pattern, rest = cuts[0], cuts[1:]
    at = start
    for cut in pattern.finditer(text, start, end):
        yield from _fitting(text, at, cut.start(), budget, rest)
        at = cut.end()
    yield from _fitting(text, at, end, budget, rest)


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _chunk(text: str, start: int, end: int) -> Chunk:
    return Chunk(start, end, text[start:end])
