"""The memory flows read the store's capabilities: they never send an op or a field the
store does not declare, and say so when a call needs one."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from engramdb import ConfigurationError, HashEmbedder, InMemoryStore, Memory, ValidationError
from engramdb.store import Op, PutItem, SearchLexical, StoreCapabilities

SAM = ("acme", "user", "sam")


class Limited(InMemoryStore):
    """An InMemoryStore that declares fewer capabilities and records the ops it gets."""

    def __init__(self, **flags: bool) -> None:
        super().__init__()
        self.capabilities = StoreCapabilities(**flags)
        self.ops: list[Op] = []

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        self.ops += ops
        return super().batch(ops)


def test_without_lexical_search_recall_uses_the_vector_leg_only() -> None:
    """No SearchLexical is ever sent; hybrid recall answers from vectors; mode='lexical'
    raises ConfigurationError."""
    store = Limited(supports_lexical=False)
    memory = Memory(store, HashEmbedder())
    record = memory.remember("Sam is vegetarian", scope=SAM)
    hits = memory.recall("vegetarian", scopes=[SAM])
    assert [h.memory.id for h in hits] == [record.id] and hits.status == "used"
    assert hits[0].bm25 is None and hits[0].similarity is not None
    assert not [op for op in store.ops if isinstance(op, SearchLexical)]
    with pytest.raises(ConfigurationError, match="supports_lexical"):
        memory.recall("vegetarian", scopes=[SAM], mode="lexical")


def test_without_history_nothing_is_kept_and_history_says_why() -> None:
    """Puts and patches carry keep_revisions=0; history() raises ConfigurationError."""
    store = Limited(supports_history=False)
    memory = Memory(store, HashEmbedder(), keep_revisions=10)
    record = memory.remember("v1", scope=SAM, id="x")
    memory.remember("v2", scope=SAM, id="x")
    assert {op.keep_revisions for op in store.ops if isinstance(op, PutItem)} == {0}
    with pytest.raises(ConfigurationError, match="supports_history"):
        memory.history(record.id)


def test_without_expiry_an_expires_at_is_refused_before_anything_is_stored() -> None:
    """expires_at is a ValidationError on remember and update; nothing reaches the store."""
    store = Limited(supports_ttl=False)
    memory = Memory(store, HashEmbedder())
    when = datetime(2030, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError, match="supports_ttl"):
        memory.remember("temporary", scope=SAM, expires_at=when)
    assert store.ops == []
    record = memory.remember("permanent", scope=SAM)
    with pytest.raises(ValidationError, match="supports_ttl"):
        memory.update(record.id, expires_at=when)
