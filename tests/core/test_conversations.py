"""Conversations in the core: the context of a recall's hits costs one store batch,
whatever the number of hits; a bound view's context comes only from what it can see;
the turns are one atomic write; ``hit.context`` has one JSON form, which a hit without
context does not change (``docs/conversations.md``). The same behaviour on every store
is ``tests/contract/test_conversation_contract.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from engramdb import HashEmbedder, InMemoryStore, Memory, ValidationError
from engramdb.json_format import hit_to_json, hits_from_json, hits_to_json
from engramdb.store import ListItems, Op, PutItem

SAM = ("acme", "user", "sam")
SHARED = ("acme", "shared")
HIDDEN = ("acme", "hidden")


class Counting(InMemoryStore):
    """An InMemoryStore that keeps every batch it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[Op]] = []

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        self.batches.append(list(ops))
        return super().batch(ops)


def lines(speaker: str, words: str, count: int) -> list[dict[str, str]]:
    return [{"speaker": speaker, "text": f"{words} {i}"} for i in range(count)]


def test_the_context_of_every_hit_is_read_in_one_batch() -> None:
    """Ten hits of two conversations and two scopes: one more batch than the recall
    without context, holding one listing per scope (each scope read once, not once per
    hit), each of exactly that scope."""
    store = Counting()
    memory = Memory(store, HashEmbedder())
    memory.remember_conversation(lines("Sam", "river walk", 6), SAM, conversation="a")
    memory.remember_conversation(lines("Sam", "river boat", 6), SAM, conversation="b")
    memory.remember_conversation(lines("Kim", "river view", 6), SHARED, conversation="a")
    store.batches.clear()
    plain = memory.recall("river", [SAM, SHARED], top_k=10, mode="lexical")
    without = len(store.batches)
    store.batches.clear()
    hits = memory.recall("river", [SAM, SHARED], top_k=10, mode="lexical", context=1)
    assert [h.memory.id for h in hits] == [h.memory.id for h in plain]
    assert len(store.batches) == without + 1
    listings = store.batches[-1]
    assert all(isinstance(op, ListItems) for op in listings)
    assert {h.memory.scope for h in hits} == {SAM, SHARED}
    assert sorted(op.scopes.exact for op in listings) == [(SHARED,), (SAM,)]
    assert all(not op.scopes.prefixes for op in listings)
    assert all(h.context and {r.scope for r in h.context} == {h.memory.scope} for h in hits)


def test_a_views_context_comes_only_from_the_scope_of_its_hit() -> None:
    """A view reading ("acme", "shared") gets a shared hit's neighbours from that scope,
    never those of a scope it cannot see that holds the same conversation and places."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    memory.remember_conversation(lines("Ops", "shared note", 4), SHARED, conversation="c")
    memory.remember_conversation(lines("Ops", "hidden note", 4), HIDDEN, conversation="c")
    view = memory.bind(SAM, read=[SHARED])
    (hit,) = view.recall("note 2", top_k=1, mode="lexical", context=2)
    assert hit.memory.scope == SHARED
    assert [r.text for r in hit.context] == ["shared note 0", "shared note 1", "shared note 3"]


def test_a_views_turns_go_to_its_scope_or_session_and_are_not_sent_twice() -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    view = memory.bind(SAM, session="chat-1")
    turns = lines("Sam", "line", 3)
    shared = view.remember_conversation(turns, conversation="c")
    assert {r.scope for r in shared} == {SAM}
    mine = view.remember_conversation(turns, conversation="c", durability="session")
    assert {r.scope for r in mine} == {(*SAM, "session", "chat-1")}
    assert [r.id for r in view.remember_conversation(turns, conversation="c")] == [
        r.id for r in shared
    ]
    assert view.count() == 6


def test_the_new_turns_are_one_atomic_batch() -> None:
    """Every turn not held yet is put in one store batch (all or none is stored)."""
    store = Counting()
    memory = Memory(store, HashEmbedder())
    memory.remember_conversation(lines("Sam", "line", 2), SAM, conversation="c")
    store.batches.clear()
    memory.remember_conversation(lines("Sam", "line", 5), SAM, conversation="c")
    puts = [[op for op in ops if isinstance(op, PutItem)] for ops in store.batches]
    assert [len(p) for p in puts if p] == [3]


def test_a_view_checks_every_turn_before_it_writes() -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    view = memory.bind(SAM)
    with pytest.raises(ValidationError, match="turn 1"):
        view.remember_conversation(
            [{"speaker": "Sam", "text": "fine"}, {"speaker": "Sam", "text": " "}],
            conversation="c",
        )
    assert view.count() == 0


def test_context_has_one_json_form_and_a_hit_without_it_is_unchanged() -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    memory.remember_conversation(lines("Sam", "river walk", 3), SAM, conversation="a")
    hits = memory.recall("walk 1", [SAM], top_k=1, mode="lexical", context=1)
    answer = hits_to_json(hits)
    assert [turn["text"] for turn in answer["hits"][0]["context"]] == [
        "river walk 0",
        "river walk 2",
    ]
    assert hits_from_json(answer)[0].context == hits[0].context
    plain = memory.recall("walk 1", [SAM], top_k=1, mode="lexical")
    assert "context" not in hit_to_json(plain[0])
    with pytest.raises(ValidationError, match="context"):
        hits_from_json({**answer, "hits": [{**answer["hits"][0], "context": {"no": 1}}]})
