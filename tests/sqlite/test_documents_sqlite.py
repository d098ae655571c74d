"""Documents on a SQLite file: a chunk's place survives a reopen, the document's chunks
are found by the SQL filter, a re-import of the same text writes nothing, a re-import of
a folder costs the same per document at any size, and a large document is stored a
batch at a time."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

from engramdb import HashEmbedder, Memory
from engramdb.documents import DocumentSummary, span_of
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


def note(i: int) -> str:
    """A note of five sections (five chunks at max_chars=120), its own text."""
    return "\n\n".join(
        f"## Part {j}\n\nNote {i}, part {j}: the boat leaves at {j}." for j in range(5)
    )


def sqlite_work(store: SqliteStore, action: Callable[[], object]) -> tuple[int, int]:
    """(SQLite virtual-machine steps, statements) that ``action`` makes the store's
    connection run: a count of the work done, not a time."""
    conn = store._conn
    assert conn is not None
    steps = statements = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0  # go on

    def statement(_sql: str) -> None:
        nonlocal statements
        statements += 1

    conn.set_progress_handler(step, 100)
    conn.set_trace_callback(statement)
    try:
        action()
    finally:
        conn.set_progress_handler(None, 0)
        conn.set_trace_callback(None)
    return steps * 100, statements


def test_remembering_a_folder_again_costs_the_same_per_document_at_50_and_400(
    tmp_path: Path,
) -> None:
    """Re-importing an unchanged folder reads what the scope holds of its documents in
    one listing, not one per document: the SQLite work (virtual-machine steps and
    statements) per document stays flat from 50 to 400 documents, and nothing is
    written. (One lookup per document scans the scope each time: 8x the work per
    document at 8x the documents.)"""

    def reimport_work(count: int) -> tuple[float, float]:
        store = SqliteStore(tmp_path / f"folder-{count}.db")
        with Memory(store, HashEmbedder(dimensions=64)) as memory:
            sam = memory.bind(SAM)
            documents = {f"notes/{i:04d}.md": note(i) for i in range(count)}
            assert all(d.added for d in sam.remember_documents(documents, max_chars=120))
            assert store._conn is not None
            written = store._conn.total_changes
            again: list[DocumentSummary] = []
            steps, statements = sqlite_work(
                store, lambda: again.extend(sam.remember_documents(documents, max_chars=120))
            )
            assert not any(d.added for d in again) and len(again) == count
            assert store._conn.total_changes == written  # nothing written
        return steps / count, statements / count

    per_document = {count: reimport_work(count) for count in (50, 400)}
    (steps_50, statements_50), (steps_400, statements_400) = per_document[50], per_document[400]
    assert steps_400 < 1.5 * steps_50, per_document
    assert statements_400 <= statements_50, per_document


def test_a_large_document_is_stored_a_batch_at_a_time(tmp_path: Path) -> None:
    """Remembering a long document holds its text, where its chunks are and one batch
    of 256 chunks at a time, not every chunk's item, checked copy and record at once:
    the memory it uses at its peak (beyond what stays after: the store's and the
    embedder's caches) grows far less than the document: by 1.3x from 300 chunks to
    2,400. (Before, every chunk's item, copy and record were held at once: 3.6x.)"""

    def transient_peak(paragraphs: int) -> int:
        text = "\n\n".join(
            f"{' '.join('abcdefghij'[i // 10**p % 10] for p in range(4))}: the hotel is near "
            "the harbour, breakfast is included, the porter carries the bags upstairs."
            for i in range(paragraphs)
        )  # every paragraph its own text, five to a chunk
        path = tmp_path / f"big-{paragraphs}.db"
        with Memory(SqliteStore(path), HashEmbedder(dimensions=64)) as memory:
            sam = memory.bind(SAM)
            sam.remember_documents({"warm.md": "A first note loads what a write needs."})
            tracemalloc.start()
            try:
                (summary,) = sam.remember_documents({"big.md": text})
                after, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        assert summary.added and len(summary.chunk_ids) == paragraphs // 5
        return peak - after

    small, large = transient_peak(1_500), transient_peak(12_000)
    assert large < 2 * small, (small, large)
