"""engramdb.documents: a long text cut on its natural boundaries, each chunk a memory
that says where in its source it comes from; a source remembered again adds nothing
unless its text changed; forgetting a document forgets its chunks."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb import AsyncMemory, HashEmbedder, InMemoryStore, Limits, Memory, ValidationError
from engramdb.documents import (
    DOCUMENT_KEYS,
    DocumentUpload,
    chunk_text,
    document_id,
    lines_of,
    plan_document,
    span_of,
)
from engramdb.flows._uploads import MAX_UPLOADS

SAM = ("acme", "user", "sam")
KIM = ("acme", "user", "kim")
TRIP = """# Trip to Oslo

## Flights

Sam flies out on Monday at 7. The return flight is on Friday evening.

## Hotel

The hotel is near the harbour. Breakfast is included. Check-in opens at 3 pm.

## People

Kim meets Sam at the airport.
"""


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from([*"ab .!?#\n\t", "é", "👍", "\u2028"]), max_size=600),
    max_chars=st.integers(min_value=50, max_value=200),
)
def test_chunks_are_slices_that_fit_and_cover_the_text(text: str, max_chars: int) -> None:
    """Every chunk is ``text[start:end]``, stripped, not empty, at most ``max_chars``;
    chunks come in order without overlap, and every non-space character is in one."""
    chunks = chunk_text(text, max_chars)
    covered = 0
    last_end = 0
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end] == chunk.text.strip() != ""
        assert len(chunk.text) <= max_chars and chunk.start >= last_end
        last_end = chunk.end
        covered += sum(not c.isspace() for c in chunk.text)
    assert covered == sum(not c.isspace() for c in text)


def test_headings_start_chunks_and_paragraphs_pack_until_full() -> None:
    chunks = chunk_text(TRIP, max_chars=200)
    assert [c.text.splitlines()[0] for c in chunks] == [
        "# Trip to Oslo",
        "## Hotel",
        "## People",
    ]
    assert chunks[0].text.startswith("# Trip to Oslo\n\n## Flights\n\nSam flies")  # titles stay
    long = "One sentence here. " * 30  # one paragraph of 570 characters
    pieces = chunk_text(long, max_chars=100)
    assert all(p.text.endswith("here.") for p in pieces)  # cut after sentences only
    assert [len(p.text) for p in chunk_text("x" * 250, max_chars=100)] == [100, 100, 50]


def test_a_document_is_chunks_with_their_place_in_the_source() -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    sam = memory.bind(SAM)
    doc = sam.remember_document(
        TRIP, source="notes/oslo.md", max_chars=200, labels={"topic": ["travel"]}
    )
    assert doc.added and doc.id == document_id("notes/oslo.md") and len(doc.chunks) == 3
    for position, chunk in enumerate(doc.chunks):
        source, start, end = span_of(chunk) or ("", 0, 0)
        assert (source, TRIP[start:end]) == ("notes/oslo.md", chunk.text)
        assert chunk.metadata["document_chunk"] == position
        assert chunk.metadata["document_chunks"] == 3 and chunk.labels == {"topic": ["travel"]}
    hit = sam.recall("breakfast at the hotel", top_k=1)[0]
    assert span_of(hit.memory) is not None and "Breakfast is included" in hit.memory.text
    assert span_of(memory.remember("a note", SAM)) is None


def test_remembering_a_source_again_adds_nothing_or_replaces_its_chunks() -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    sam = memory.bind(SAM)
    first = sam.remember_document(TRIP, source="notes/oslo.md", max_chars=200)
    again = sam.remember_document(TRIP, source="notes/oslo.md", max_chars=200)
    assert not again.added and again.chunks == first.chunks
    assert len(sam.list()) == 3
    edited = TRIP.replace("Friday", "Saturday")
    changed = sam.remember_document(edited, source="notes/oslo.md", max_chars=200)
    assert changed.added and len(changed.chunks) == 3
    assert {r.id for r in sam.list()} == {c.id for c in changed.chunks}  # old ones gone
    assert any("Saturday" in c.text for c in changed.chunks)
    other = sam.remember_document(TRIP, source="notes/copy.md", max_chars=200)
    assert other.added and len(sam.list()) == 6  # another source keeps its own chunks
    assert sam.forget_document("notes/oslo.md") == 3
    assert {r.id for r in sam.list()} == {c.id for c in other.chunks}
    assert sam.forget_document("notes/oslo.md") == 0


def test_a_document_stays_in_its_scope() -> None:
    """Kim's view neither sees nor forgets Sam's document of the same source."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    sam, kim = memory.bind(SAM), memory.bind(KIM)
    sams = sam.remember_document(TRIP, source="notes/oslo.md")
    assert kim.forget_document("notes/oslo.md") == 0
    kims = kim.remember_document(TRIP, source="notes/oslo.md")
    assert kims.added and {c.id for c in kims.chunks}.isdisjoint(c.id for c in sams.chunks)
    assert [r.id for r in sam.list()] == [c.id for c in reversed(sams.chunks)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "  \n", "source": "a.md"}, "the document 'a.md' is empty"),
        ({"text": "x", "source": " "}, "source=' ' must name the document"),
        ({"text": "x", "source": "a.md", "max_chars": 10}, "max_chars=10 must be"),
        (
            {"text": "x", "source": "a.md", "metadata": {"document_start": 1}},
            "metadata key 'document_start' is the document's own",
        ),
    ],
)
def test_bad_input_is_one_error_and_stores_nothing(kwargs: dict[str, object], message: str) -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    with pytest.raises(ValidationError, match=message):
        memory.bind(SAM).remember_document(**kwargs)  # type: ignore[arg-type]
    assert memory.bind(SAM).list() == []
    assert set(DOCUMENT_KEYS) >= {"document_start", "document_source"}


def test_the_async_view_does_the_same() -> None:
    async def scenario() -> tuple[bool, bool, int, int]:
        memory = AsyncMemory(InMemoryStore(), HashEmbedder())
        sam = memory.bind(SAM)
        first = await sam.remember_document(TRIP, source="notes/oslo.md", max_chars=200)
        again = await sam.remember_document(TRIP, source="notes/oslo.md", max_chars=200)
        forgotten = await sam.forget_document("notes/oslo.md")
        return first.added, again.added, forgotten, len(await sam.list())

    assert asyncio.run(scenario()) == (True, False, 3, 0)


@pytest.mark.parametrize(
    ("text", "source", "message"),
    [
        ("Sam flies \ud800 on Monday.", "a.md", r"the document 'a.md' has a lone surrogate"),
        ("Sam flies on Monday.", "b\udcff.md", r"source='b\\udcff.md' has a lone surrogate"),
    ],
)
def test_a_lone_surrogate_is_one_validation_error_and_stores_nothing(
    text: str, source: str, message: str
) -> None:
    """A lone surrogate in the text or in the source (a file name that is not UTF-8,
    decoded with ``surrogateescape``) is refused before anything is hashed or stored,
    with a ValidationError naming it: never a raw UnicodeEncodeError."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    sam = memory.bind(SAM)
    with pytest.raises(ValidationError, match=message):
        sam.remember_document(text, source=source)
    with pytest.raises(ValidationError, match=message):
        sam.remember_documents({"fine.md": "A fine note.", source: text})
    assert sam.list() == []


def test_a_nul_names_the_document_and_where_it_is() -> None:
    """A NUL character is refused with the document's source and its position in the
    whole text (not the position in some chunk of an unnamed item)."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    text = "# Notes\n\nAll fine here.\n\nBut not\x00 here."
    with pytest.raises(ValidationError) as caught:
        memory.bind(SAM).remember_document(text, source="notes/c.md")
    assert str(caught.value) == (
        f"the document 'notes/c.md' has a NUL character (U+0000) at position "
        f"{text.index(chr(0))}; remove it"
    )


def test_remember_documents_checks_every_document_before_it_stores_one() -> None:
    """A bad document anywhere in the call (here the last one) refuses the whole call
    with one error naming it, and nothing of the documents before it is stored."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    sam = memory.bind(SAM)
    documents = {f"notes/{i}.md": f"Note {i} is fine." for i in range(5)}
    documents["notes/zz.md"] = "Fine, then a NUL: \x00."
    with pytest.raises(ValidationError, match=r"the document 'notes/zz.md' has a NUL"):
        sam.remember_documents(documents)
    assert sam.list() == []


def test_every_chunk_is_checked_before_the_first_batch_is_stored() -> None:
    """Chunks are stored 256 at a time, but every chunk is checked before the first
    batch: a chunk too long for a memory (4-byte characters past Limits.max_text_bytes)
    far into a document refuses it whole, naming the chunk."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    sections = [f"# Section {i}\n\nShort text {i}." for i in range(300)]
    sections.append("# Last\n\n" + "👍" * 9000)  # 36,000 bytes of UTF-8, one chunk
    with pytest.raises(ValidationError, match=r"the document 'big.md', chunk 300: text is"):
        memory.bind(SAM).remember_document("\n\n".join(sections), source="big.md", max_chars=10_000)
    assert memory.bind(SAM).list() == []


def test_remember_documents_adds_keeps_and_replaces_as_remember_document_does() -> None:
    """Many documents in one call: new ones are added, unchanged ones add nothing
    (their chunks' ids come back), a changed one replaces its chunks; the answer holds
    each document's chunk ids in order."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    sam = memory.bind(SAM)
    documents = {"notes/oslo.md": TRIP, "todo.txt": "Buy a new bike lock."}
    first = sam.remember_documents(documents, max_chars=200)
    assert [(d.source, d.added, len(d.chunk_ids)) for d in first] == [
        ("notes/oslo.md", True, 3),
        ("todo.txt", True, 1),
    ]
    assert first[0].id == document_id("notes/oslo.md")
    again = sam.remember_documents(documents, max_chars=200)
    assert [d.added for d in again] == [False, False]
    assert [d.chunk_ids for d in again] == [d.chunk_ids for d in first]
    documents["todo.txt"] = "Buy a new bike lock and lights."
    documents["new.md"] = "A new note."
    changed = sam.remember_documents(documents, max_chars=200, labels={"topic": ["notes"]})
    assert [d.added for d in changed] == [False, True, True]
    listed = sam.list(limit=100)
    assert {r.id for r in listed} == {i for d in changed for i in d.chunk_ids}
    assert "Buy a new bike lock." not in [r.text for r in listed]
    single = sam.remember_document(TRIP, source="notes/oslo.md", max_chars=200)
    assert not single.added and tuple(c.id for c in single.chunks) == changed[0].chunk_ids
    with pytest.raises(ValidationError, match=r"must map each source to its text"):
        sam.remember_documents([("a.md", "text")])  # type: ignore[arg-type]


def test_the_async_view_remembers_many_documents_too() -> None:
    async def scenario() -> list[bool]:
        memory = AsyncMemory(InMemoryStore(), HashEmbedder())
        sam = memory.bind(SAM)
        documents = {"a.md": TRIP, "b.md": "Kim meets Sam."}
        first = await sam.remember_documents(documents)
        again = await sam.remember_documents({**documents, "b.md": "Kim meets Sam at 9."})
        return [d.added for d in first + again]

    assert asyncio.run(scenario()) == [True, True, False, True]


def test_metadata_that_only_the_last_chunks_overflow_stores_nothing() -> None:
    """Chunks' metadata differ only in their numbers, which grow along the document: a
    document whose metadata fits the first chunks but not the last (past
    Limits.max_metadata_bytes) is refused before the first batch, naming the last
    chunk."""
    text = "\n\n".join(f"# Section {i}\n\nShort text {i}." for i in range(300))
    plan = plan_document(text, "big.md", 50, {}, None)

    def size(position: int) -> int:
        (item,) = plan.items(position, position + 1)
        return len(json.dumps(item["metadata"], ensure_ascii=False).encode())

    assert size(0) < size(299)
    memory = Memory(InMemoryStore(), HashEmbedder(), limits=Limits(max_metadata_bytes=size(0)))
    with pytest.raises(ValidationError, match=r"the document 'big.md', chunk 299: metadata is"):
        memory.bind(SAM).remember_document(text, source="big.md", max_chars=50)
    assert memory.bind(SAM).list() == []


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from([*"ab .\n", "é", "👍"]), max_size=300))
def test_each_chunks_lines_are_the_lines_it_spans(text: str) -> None:
    """``document_lines`` is ``[first, last]``, from 1: the line of the chunk's first
    character and of its last (a line ends at each ``\\n``)."""
    if not text.strip():
        return
    plan = plan_document(text, "s.md", 50, {}, None)
    for item in plan.items(0, len(plan.spans)):
        meta = item["metadata"]
        start, end = meta["document_start"], meta["document_end"]
        first = text.count("\n", 0, start) + 1
        assert meta["document_lines"] == [first, first + text.count("\n", start, end)]


def test_a_chunk_without_recorded_lines_has_none() -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    meta = {"document_source": "old.md", "document_start": 0, "document_end": 4}
    old = memory.remember("text", SAM, metadata=meta)
    assert (span_of(old), lines_of(old)) == (("old.md", 0, 4), None)
    memory.close()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_document_in_parts_is_remembered_when_its_last_part_arrives() -> None:
    """The parts wait in the memory, shared by its views (each request over HTTP binds
    a new one): nothing is stored before the last part, which remembers the whole text."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    thirds = [TRIP[:60], TRIP[60:120], TRIP[120:]]

    def send(position: int) -> DocumentUpload:
        view = memory.bind(SAM)
        return view.remember_document_part(
            thirds[position], source="trip.md", part=position, parts=3, sha256=_sha(TRIP)
        )

    assert send(2).received == (2,) and send(0).received == (0, 2)
    assert memory.bind(SAM).list() == []
    done = send(1)
    assert done.document is not None and done.document.sha256 == _sha(TRIP)
    assert [c.text for c in done.document.chunks] == [c.text for c in chunk_text(TRIP)]
    assert (
        memory.bind(KIM)
        .remember_document_part(TRIP, source="trip.md", part=0, parts=1, sha256=_sha(TRIP))
        .document.chunks[0]
        .scope
        == KIM
    )  # another scope's upload is its own
    memory.close()


def test_a_memory_holds_the_parts_of_eight_documents_at_most() -> None:
    """A ninth unfinished document drops the parts of the one left longest."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    sam = memory.bind(SAM)
    for n in range(MAX_UPLOADS + 1):
        sam.remember_document_part("a", source=f"{n}.md", part=0, parts=2, sha256=_sha("ab"))
    first = sam.remember_document_part("b", source="0.md", part=1, parts=2, sha256=_sha("ab"))
    last = sam.remember_document_part(
        "b", source=f"{MAX_UPLOADS}.md", part=1, parts=2, sha256=_sha("ab")
    )
    assert (first.received, first.document) == ((1,), None)
    assert last.document is not None and last.document.added
    memory.close()
