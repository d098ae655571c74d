"""Documents on a SQLite file: a chunk's place survives a reopen, the document's chunks
are found by the SQL filter, and a re-import of the same text writes nothing."""

from __future__ import annotations

from pathlib import Path

from engramdb import HashEmbedder, Memory
from engramdb.documents import span_of
from engramdb.sqlite import SqliteStore

SAM = ("acme", "user", "sam")
TEXT = "\n\n".join(
    f"## Part {i}\n\nThe part number {i} says something about boats." for i in range(40)
)


def test_a_document_round_trips_through_a_file(tmp_path: Path) -> None:
    path = tmp_path / "docs.db"
    with Memory(SqliteStore(path), HashEmbedder()) as memory:
        doc = memory.bind(SAM).remember_document(TEXT, source="boats.md", max_chars=120)
        assert doc.added and len(doc.chunks) == 40
    with Memory(SqliteStore(path), HashEmbedder()) as memory:
        sam = memory.bind(SAM)
        again = sam.remember_document(TEXT, source="boats.md", max_chars=120)
        assert not again.added and again.chunks == doc.chunks  # same ids, revisions, times
        assert len(sam.list(limit=100)) == 40
        hit = sam.recall("part number 17", top_k=1)[0]
        source, start, end = span_of(hit.memory) or ("", 0, 0)
        assert source == "boats.md" and TEXT[start:end] == hit.memory.text
        assert sam.forget_document("boats.md") == 40 and sam.list() == []
