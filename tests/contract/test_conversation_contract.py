"""The conversation contract: every store, sync and async, keeps a conversation's turns
with their speaker, time and place, once, and answers a recalled turn with its
neighbours of the same conversation and scope (``docs/conversations.md``).

Collected as it is by the PostgreSQL, D1 and Durable Object suites too.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engramdb import ValidationError

SAM = ("acme", "user", "sam")
KIM = ("acme", "user", "kim")
AT = "2026-05-08T13:56:00Z"  # every turn at the same moment: the order is the turns'

TRIP = [
    {"speaker": "Sam", "text": "We are planning the autumn trip", "at": AT},
    {"speaker": "Kim", "text": "Lisbon or Porto?", "at": AT},
    {"speaker": "Sam", "text": "Porto, I love the bridges over the river", "at": AT},
    {"speaker": "Kim", "text": "Then we book the train", "at": AT},
    {"speaker": "Sam", "text": "And a boat tour", "at": AT},
]


def texts(records: Any) -> list[str]:
    return [record.text for record in records]


async def the_hit(memory: Any, query: str, scopes: Any, **options: Any) -> Any:
    hits = await memory.recall(query, scopes, top_k=1, mode="lexical", **options)
    assert len(hits) == 1
    return hits[0]


async def test_each_turn_is_remembered_with_its_speaker_time_and_place(memory: Any) -> None:
    """A record per turn, in turn order, whose metadata names the conversation, the
    turn's place, its speaker and its time (RFC 3339 UTC); equal times keep the order."""
    records = await memory.remember_conversation(TRIP, SAM, conversation="trip")
    assert texts(records) == [turn["text"] for turn in TRIP]
    assert [r.metadata for r in records] == [
        {
            "conversation": "trip",
            "turn": i,
            "speaker": t["speaker"],
            "at": "2026-05-08T13:56:00.000Z",
        }
        for i, t in enumerate(TRIP)
    ]
    listed = await memory.list(SAM, filter={"metadata": {"conversation": "trip"}})
    assert sorted(r.metadata["turn"] for r in listed) == [0, 1, 2, 3, 4]


async def test_a_recalled_turn_comes_with_the_turns_around_it_in_order(memory: Any) -> None:
    """``context=1``: the turn before and the turn after, in turn order, not the hit
    itself; ``context=2`` two each side, cut at the conversation's ends."""
    await memory.remember_conversation(TRIP, SAM, conversation="trip")
    hit = await the_hit(memory, "bridges river", [SAM], context=1)
    assert hit.memory.text == TRIP[2]["text"]
    assert texts(hit.context) == [TRIP[1]["text"], TRIP[3]["text"]]
    first = await the_hit(memory, "planning autumn", [SAM], context=2)
    assert texts(first.context) == [TRIP[1]["text"], TRIP[2]["text"]]


async def test_without_context_a_hit_has_none_and_a_plain_memory_never_has(memory: Any) -> None:
    await memory.remember_conversation(TRIP, SAM, conversation="trip")
    await memory.remember("Sam keeps a list of bridges worth a visit", SAM)
    assert (await the_hit(memory, "bridges river", [SAM])).context == ()
    plain = await the_hit(memory, "list worth visit", [SAM], context=3)
    assert "conversation" not in plain.memory.metadata
    assert plain.context == ()


async def test_context_stays_in_its_conversation(memory: Any) -> None:
    """Two conversations of one scope share turn numbers; a hit's context is only its
    own conversation's."""
    await memory.remember_conversation(TRIP, SAM, conversation="trip")
    other = [{"speaker": "Ana", "text": f"unrelated line {i}"} for i in range(5)]
    await memory.remember_conversation(other, SAM, conversation="other")
    hit = await the_hit(memory, "bridges river", [SAM], context=1)
    assert texts(hit.context) == [TRIP[1]["text"], TRIP[3]["text"]]


async def test_context_never_crosses_scopes(memory: Any) -> None:
    """The same conversation id and places in another scope: a recall of one scope gets
    none of them, and a recall of both gives each hit its own scope's neighbours."""
    await memory.remember_conversation(TRIP, SAM, conversation="trip")
    kims = [{"speaker": "Kim", "text": f"Kim's private note {i}"} for i in range(5)]
    await memory.remember_conversation(kims, KIM, conversation="trip")
    hit = await the_hit(memory, "bridges river", [SAM], context=2)
    assert all(record.scope == SAM for record in hit.context)
    assert len(hit.context) == 4
    hits = await memory.recall("bridges private note", [SAM, KIM], top_k=10, context=1)
    assert {hit.memory.scope for hit in hits} == {SAM, KIM}
    for hit in hits:
        assert hit.context and {record.scope for record in hit.context} == {hit.memory.scope}


async def test_sending_a_conversation_again_adds_no_turn(memory: Any) -> None:
    """The same turns again answer the same records; the conversation grown by two turns
    adds only those two; a later part sent with ``start`` continues the places."""
    first = await memory.remember_conversation(TRIP[:3], SAM, conversation="trip")
    again = await memory.remember_conversation(TRIP[:3], SAM, conversation="trip")
    assert [r.id for r in again] == [r.id for r in first]
    grown = await memory.remember_conversation(TRIP, SAM, conversation="trip")
    assert [r.id for r in grown[:3]] == [r.id for r in first]
    assert (await memory.status()).items == 5
    later = [{"speaker": "Kim", "text": "Booked!"}]
    (booked,) = await memory.remember_conversation(later, SAM, conversation="trip", start=5)
    assert booked.metadata["turn"] == 5
    assert (await memory.status()).items == 6
    hit = await the_hit(memory, "boat tour", [SAM], context=1)
    assert texts(hit.context) == [TRIP[3]["text"], "Booked!"]


async def test_a_repeated_line_is_a_turn_of_its_own(memory: Any) -> None:
    """Two turns with the same text are two turns (no deduplication by text)."""
    turns = [{"speaker": "Sam", "text": "ok"}, {"speaker": "Kim", "text": "ok"}]
    records = await memory.remember_conversation(turns, SAM, conversation="c")
    assert len({r.id for r in records}) == 2


@pytest.mark.parametrize(
    "turns, options, named",
    [
        ([*TRIP[:2], {"speaker": "Sam", "text": "  "}], {}, "turn 2"),
        ([{"speaker": "", "text": "hi"}], {}, "speaker"),
        ([{"speaker": "Sam", "text": "hi", "at": "yesterday"}], {}, "at"),
        ([{"speaker": "Sam", "text": "hi", "at": datetime(2026, 1, 1)}], {}, "timezone"),
        ([{"speaker": "Sam", "text": "hi", "mood": "glad"}], {}, "mood"),
        ([{"speaker": "Sam", "text": "hi", "metadata": {"turn": 7}}], {}, "turn"),
        ([], {}, "0 turns"),
        (TRIP, {"conversation": ""}, "conversation"),
        (TRIP, {"start": -1}, "start"),
    ],
)
async def test_a_bad_turn_is_refused_and_nothing_is_stored(
    memory: Any, turns: Any, options: dict[str, Any], named: str
) -> None:
    arguments = {"conversation": "trip", **options}
    with pytest.raises(ValidationError, match=named):
        await memory.remember_conversation(turns, SAM, **arguments)
    assert (await memory.status()).items == 0


async def test_context_out_of_range_is_refused(memory: Any) -> None:
    await memory.remember_conversation(TRIP, SAM, conversation="trip")
    with pytest.raises(ValidationError, match="context=21"):
        await memory.recall("bridges", [SAM], context=21)


async def test_an_aware_datetime_is_kept_as_utc(memory: Any) -> None:
    moment = datetime(2026, 5, 8, 13, 56, tzinfo=UTC)
    (record,) = await memory.remember_conversation(
        [{"speaker": "Sam", "text": "hi", "at": moment}], SAM, conversation="c"
    )
    assert record.metadata["at"] == "2026-05-08T13:56:00.000Z"


async def test_every_hit_of_a_long_recall_gets_its_own_neighbours(memory: Any) -> None:
    """Twenty hits of one conversation (more windows than one listing holds): each hit's
    context is exactly the turns beside its own place."""
    turns = [{"speaker": "Sam", "text": f"note number {i}"} for i in range(30)]
    await memory.remember_conversation(turns, SAM, conversation="notes")
    hits = await memory.recall("note number", [SAM], top_k=20, mode="lexical", context=1)
    assert len(hits) == 20
    for hit in hits:
        place = hit.memory.metadata["turn"]
        near = [p for p in (place - 1, place + 1) if 0 <= p < 30]
        assert [r.metadata["turn"] for r in hit.context] == near
