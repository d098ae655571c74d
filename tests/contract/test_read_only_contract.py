"""The read-only contract: a memory over a read-only store (``capabilities.read_only``)
recalls without writing a receipt, and refuses every write, changing nothing; on every
store that opens read-only, sync and async (the others skip)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fakes import CountingEmbedder

from engramdb import ConfigurationError, StoreError, ValidationError
from fixtures import bound

SAM = ("acme", "user", "sam")
READ_ONLY = (
    "read-only: the store is open read-only, so this recall wrote no receipt "
    "(selection_id is None) and complete() cannot score it"
)


@pytest.fixture
def reader(make_memory: Callable[..., Any]) -> Callable[..., Any]:
    """Memories over a read-only store on ``make_memory``'s storage (skips without one)."""
    read_only = getattr(make_memory, "read_only", None)
    if read_only is None:
        pytest.skip("this store kind has no read-only store object on the same storage")
    return read_only  # type: ignore[no-any-return]


async def test_recall_on_a_read_only_store_writes_no_receipt_and_says_why(
    memory: Any, reader: Callable[..., Any], embedder: CountingEmbedder
) -> None:
    """A bound view's recall and ``Memory.recall`` on a read-only store answer the hits
    the writable store answers, with ``selection_id`` None, ``error`` the read-only
    reason and ``status`` still the search's own ("used")."""
    writer = bound(memory, SAM)
    await writer.remember("sam eats pasta on fridays")
    await writer.remember("sam plays chess")
    expected = [hit.memory.id for hit in await writer.recall("what does sam eat?")]
    view = bound(reader(embedder), SAM)
    for hits in (
        await view.recall("what does sam eat?"),
        await reader(embedder).recall("what does sam eat?", [SAM]),
    ):
        assert [hit.memory.id for hit in hits] == expected
        assert (hits.selection_id, hits.error, hits.status) == (None, READ_ONLY, "used")


async def test_every_write_on_a_read_only_store_is_refused_and_changes_nothing(
    memory: Any, reader: Callable[..., Any], embedder: CountingEmbedder
) -> None:
    """remember, update, forget, forget_all, feedback and complete (of a receipt the
    writable store wrote) on a read-only store each raise ``StoreError`` saying
    "read-only"; remember and update of a text embed nothing first; the memories, their
    evidence and the receipt are as they were (the receipt still scores once through the
    writable store)."""
    writer = bound(memory, SAM)
    kept = await writer.remember("sam eats pasta on fridays")
    selection = (await writer.recall("pasta")).selection_id
    before = [(m.id, m.revision) for m in await writer.list()]
    evidence = (await writer.get(kept.id)).utility
    view = bound(reader(embedder), SAM)
    embedded = list(embedder.embedded)
    writes = {
        "remember": lambda: view.remember("sam likes tea"),
        "update": lambda: view.update(kept.id, importance=0.9),
        "update of the text": lambda: view.update(kept.id, text="sam eats risotto"),
        "forget": lambda: view.forget(kept.id),
        "forget_all": lambda: view.forget_all(),
        "feedback": lambda: view.feedback(kept.id, 1.0),
        "complete": lambda: view.complete(selection, 1.0),
    }
    for name, write in writes.items():
        with pytest.raises(StoreError, match="read-only") as caught:
            await write()
        assert "without read_only=True" in str(caught.value), name
    assert embedder.embedded == embedded
    assert [(m.id, m.revision) for m in await writer.list()] == before
    assert (await writer.get(kept.id)).utility == evidence
    assert await writer.complete(selection, 1.0) is True


async def test_complete_of_a_read_only_recall_names_why_there_is_nothing_to_score(
    memory: Any, reader: Callable[..., Any], embedder: CountingEmbedder
) -> None:
    """``complete(hits.selection_id)`` of a read-only recall (None) raises one
    ``ValidationError`` that says a read-only recall writes no receipt, on a writable
    view too (nothing to score anywhere)."""
    await bound(memory, SAM).remember("sam eats pasta")
    hits = await bound(reader(embedder), SAM).recall("pasta")
    for view in (bound(reader(embedder), SAM), bound(memory, SAM)):
        with pytest.raises(ValidationError, match="read-only store writes no receipt"):
            await view.complete(hits.selection_id, 1.0)


def test_a_memory_over_a_read_only_store_runs_no_maintainer(
    reader: Callable[..., Any], embedder: CountingEmbedder
) -> None:
    """``maintain=True`` over a read-only store is one ``ConfigurationError`` naming
    ``maintain=False`` (every maintenance pass writes)."""
    with pytest.raises(ConfigurationError, match="pass maintain=False"):
        reader(embedder, maintain=True)
