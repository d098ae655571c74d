"""engramdb.documents: a long text cut on its natural boundaries, each chunk a memory
that says where in its source it comes from; a source remembered again adds nothing
unless its text changed; forgetting a document forgets its chunks."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb import AsyncMemory, HashEmbedder, InMemoryStore, Memory, ValidationError
from engramdb.documents import DOCUMENT_KEYS, chunk_text, document_id, span_of

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
