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
===================  ===========================================================

A hit of a chunk so says where in its source it came from (:func:`span_of`).
Remembering a source again with the same text adds nothing; with another text, it adds
the new chunks and then forgets the old ones (a crash in between leaves both, never
neither). ``view.forget_document(source)`` forgets every chunk of a source.

Nothing here does I/O: a file is read by the caller (``engramdb import`` reads a
folder of ``.md`` and ``.txt`` files).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._errors import ValidationError, shown
from ._types import MemoryRecord

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DOCUMENT_KEYS",
    "Chunk",
    "Document",
    "chunk_text",
    "document_id",
    "span_of",
]

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
    chunks: list[Chunk] = []
    current: tuple[int, int] | None = None  # the chunk being packed
    titles_only = False  # whether it holds only headings (the next piece joins them)
    for start, end in _pieces(text, budget):
        heading = _HEADING.match(text, start) is not None
        if current is not None and ((heading and not titles_only) or end - current[0] > budget):
            chunks.append(_chunk(text, *current))
            current = None
        titles_only = heading and (current is None or titles_only)
        current = (start, end) if current is None else (current[0], end)
    if current is not None:
        chunks.append(_chunk(text, *current))
    return chunks


def document_id(source: str) -> str:
    """The id of the document of ``source``: the same for the same source, so a source
    remembered again finds its chunks."""
    if not isinstance(source, str) or not source.strip():
        raise ValidationError(
            f"source={shown(source)} must name the document (a path, a URL or an id of "
            "yours), e.g. 'notes/trip.md'"
        )
    return "doc-" + hashlib.sha256(source.encode("utf-8")).hexdigest()[:26]


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


def document_items(
    text: str,
    source: str,
    max_chars: int,
    metadata: Mapping[str, object] | None,
    labels: Mapping[str, list[str]] | None,
) -> tuple[str, str, list[dict[str, Any]]]:
    """The document's id, its text's SHA-256 and the items ``remember_many`` stores for
    its chunks (each with the document's ``metadata`` and ``labels``)."""
    doc_id = document_id(source)
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"the document {source!r} is empty; give it some text")
    own = dict(metadata or {})
    taken = sorted(set(own) & set(DOCUMENT_KEYS))
    if taken:
        raise ValidationError(
            f"metadata key {taken[0]!r} is the document's own (the keys {', '.join(DOCUMENT_KEYS)} "
            "say where a chunk comes from); rename it"
        )
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    chunks = chunk_text(text, max_chars)
    items = [
        {
            "text": chunk.text,
            "metadata": {
                **own,
                "document_id": doc_id,
                "document_source": source,
                "document_sha256": sha,
                "document_chunk": position,
                "document_chunks": len(chunks),
                "document_start": chunk.start,
                "document_end": chunk.end,
            },
            **({"labels": dict(labels)} if labels else {}),
        }
        for position, chunk in enumerate(chunks)
    ]
    return doc_id, sha, items


def unchanged(existing: Iterable[MemoryRecord], sha: str, count: int) -> tuple[MemoryRecord, ...]:
    """The chunks already stored, in order, when they are those of the text of ``sha``
    (all ``count`` of them); ``()`` otherwise."""
    held = sorted(existing, key=lambda r: _position(r))
    if len(held) == count and all(
        r.metadata.get("document_sha256") == sha and _position(r) == i for i, r in enumerate(held)
    ):
        return tuple(held)
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
