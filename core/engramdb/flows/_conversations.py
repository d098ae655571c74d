"""Conversations: each turn a memory that knows its conversation, its place, its speaker
and its time, and a recall that brings each hit's neighbouring turns (``docs/conversations.md``).

A turn is a JSON-shaped mapping, ``{"speaker": "Sam", "text": "...", "at": ...}`` (``at``,
optional: an aware ``datetime`` or an ISO 8601 string with a timezone; ``metadata``,
optional: more metadata of that turn). :func:`conversation_items` makes each turn a
``remember_many`` item whose metadata holds :data:`TURN_KEYS`: ``conversation`` (the id
the caller gives), ``turn`` (its place, ``start`` + its index: the order survives equal
times), ``speaker`` and ``at`` (RFC 3339 UTC, when given). :func:`remember_turns` reads
which places the scope already holds and writes only the others, in one atomic batch, so
sending a conversation again (or the whole of it after new turns) adds no copy.

:func:`with_context` gives each hit of a recall that is a turn the ``width`` turns before
and after it of the same conversation *in the hit's own scope*: one ``ListItems`` per hit,
every one in one store batch, each filtered on ``conversation`` and a ``turn`` range, so
every store answers it with the ops it has. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from engramdb._base.errors import ValidationError, shown
from engramdb._base.types import Hit, Hits, MemoryRecord, Scope
from engramdb.flows._effects import Flow, Store
from engramdb.json_format import format_time, parse_time
from engramdb.store import ListItems, ScopeSet
from engramdb.store._filter import Filter, parse_filter
from engramdb.validate import check_int

__all__ = [
    "MAX_CONTEXT",
    "MAX_TURNS",
    "TURN_KEYS",
    "check_context",
    "conversation_items",
    "remember_turns",
    "with_context",
]

TURN_KEYS = ("conversation", "turn", "speaker", "at")
"""The metadata keys a turn's memory holds, set by ``remember_conversation`` itself."""
MAX_TURNS = 10_000
"""Most turns one ``remember_conversation`` stores (one atomic batch)."""
MAX_CONTEXT = 20
"""Most turns on each side of a hit that ``recall(context=...)`` answers."""
MAX_CONVERSATION_CHARS = 200
_TURN_FIELDS = ("speaker", "text", "at", "metadata")
_WINDOWS = 16  # windows per listing: its filter stays far under the filter size limit

RememberMany = Callable[[list[dict[str, Any]]], Flow[list[MemoryRecord]]]


def conversation_items(
    turns: object,
    conversation: object,
    start: object = 0,
    metadata: Mapping[str, object] | None = None,
) -> list[dict[str, Any]]:
    """Each turn as a ``remember_many`` item (``text`` and ``metadata``: the turn's, the
    call's ``metadata``, and :data:`TURN_KEYS`), every turn checked before any is made."""
    name = check_conversation(conversation)
    first = check_int("start", start, 0, 2**53 - MAX_TURNS)
    if isinstance(turns, str | bytes | Mapping) or not isinstance(turns, Iterable):
        raise ValidationError(
            f"turns={shown(turns)} must be a list of turns like "
            "{'speaker': 'Sam', 'text': 'I am vegetarian', 'at': '2026-05-08T13:56:00Z'}"
        )
    given = list(turns)
    if not 1 <= len(given) <= MAX_TURNS:
        raise ValidationError(
            f"remember_conversation() got {len(given)} turns; send 1 to {MAX_TURNS} "
            "(a longer conversation in parts, each with its start=)"
        )
    shared = _metadata(metadata, "metadata")
    items = []
    for index, turn in enumerate(given):
        what = f"turn {index}"
        if not isinstance(turn, Mapping):
            raise ValidationError(
                f"{what} is {shown(turn)}; a turn is a mapping like "
                "{'speaker': 'Sam', 'text': '...'}"
            )
        unknown = sorted(str(key) for key in turn if key not in _TURN_FIELDS)
        if unknown:
            raise ValidationError(
                f"{what} has the keys {unknown}; a turn takes only {', '.join(_TURN_FIELDS)}"
            )
        speaker = turn.get("speaker")
        if not isinstance(speaker, str) or not speaker.strip():
            raise ValidationError(
                f"{what}'s speaker is {shown(speaker)}; give who spoke as a non-blank string"
            )
        if not isinstance(turn.get("text"), str):
            raise ValidationError(
                f"{what}'s text is {shown(turn.get('text'))}; give what was said as a string"
            )
        own = _metadata(turn.get("metadata"), f"{what}'s metadata")
        place: dict[str, object] = {
            "conversation": name,
            "turn": first + index,
            "speaker": speaker,
        }
        if turn.get("at") is not None:
            place["at"] = format_time(_moment(turn["at"], what), f"{what}'s at")
        items.append({"text": turn.get("text"), "metadata": {**shared, **own, **place}})
    return items


def check_conversation(conversation: object) -> str:
    if (
        not isinstance(conversation, str)
        or not conversation.strip()
        or len(conversation) > MAX_CONVERSATION_CHARS
    ):
        raise ValidationError(
            f"conversation={shown(conversation)} must name the conversation: a non-blank "
            f"string of at most {MAX_CONVERSATION_CHARS} characters, e.g. 'support-4711'"
        )
    return conversation


def check_context(context: object) -> int:
    """``recall``'s ``context``: how many turns on each side of a hit (0: none)."""
    return check_int("context", context, 0, MAX_CONTEXT)


def _metadata(value: object, what: str) -> dict[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"{what} is {shown(value)}; it must be a JSON object or None")
    taken = sorted(key for key in value if key in TURN_KEYS)
    if taken:
        raise ValidationError(
            f"{what} sets {taken}, which remember_conversation() sets itself "
            f"({', '.join(TURN_KEYS)}); rename those keys"
        )
    return dict(value)


def _moment(value: object, what: str) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValidationError(
                f"{what}'s at {value.isoformat()} has no timezone; give it one, e.g. "
                "datetime(..., tzinfo=timezone.utc)"
            )
        return value
    return parse_time(value, f"{what}'s at")


def _window_spec(conversation: str, low: int, high: int) -> dict[str, Any]:
    """The filter of the turns ``low`` to ``high`` (inclusive) of ``conversation``."""
    return {"metadata": {"conversation": conversation, "turn": {"$gte": low, "$lte": high}}}


def _held_filter(conversation: str, low: int, high: int) -> Filter | None:
    return parse_filter(_window_spec(conversation, low, high))


def remember_turns(
    remember_many: RememberMany,
    items: list[dict[str, Any]],
    scope: Scope,
    now: datetime,
) -> Flow[list[MemoryRecord]]:
    """Store the turns ``items`` (one conversation's, in ``scope``) whose places the scope
    does not hold yet, by ``remember_many`` (one atomic batch); answer a record per turn,
    in turn order: a place already held answers its stored turn, unchanged."""
    places = [item["metadata"]["turn"] for item in items]
    conversation = items[0]["metadata"]["conversation"]
    listing = ListItems(
        ScopeSet.of(scope), MAX_TURNS, now, filter=_held_filter(conversation, places[0], places[-1])
    )
    (found,) = yield Store((listing,))
    held: dict[int, MemoryRecord] = {}
    for record in sorted(found, key=lambda r: (r.created_at, r.id)):
        place = _place(record)
        if place is not None:
            held.setdefault(place, record)  # the first stored of a place wins
    new = [item for item, place in zip(items, places, strict=True) if place not in held]
    written = iter((yield from remember_many(new)) if new else [])
    return [held[place] if place in held else next(written) for place in places]


def _place(record: MemoryRecord) -> int | None:
    turn = record.metadata.get("turn")
    return turn if isinstance(turn, int) and not isinstance(turn, bool) else None


def _window(hit: Hit) -> tuple[Scope, str, int] | None:
    """Where a hit's context is: its scope, conversation and place; None for a memory
    that is not a turn."""
    conversation = hit.memory.metadata.get("conversation")
    place = _place(hit.memory)
    if not isinstance(conversation, str) or place is None:
        return None
    return hit.memory.scope, conversation, place


def with_context(hits: Hits, width: int, now: datetime) -> Flow[Hits]:
    """``hits`` with each turn's ``width`` neighbours on each side (``Hit.context``),
    read in one store batch: a listing per scope (and per :data:`_WINDOWS` turns of it)
    whose filter holds every window asked of that scope, so a scope is read once, not
    once per hit; each hit's neighbours come from its own scope only."""
    windows = [_window(hit) for hit in hits] if width else []
    asked: dict[Scope, list[tuple[str, int]]] = {}
    for scope, conversation, place in dict.fromkeys(w for w in windows if w is not None):
        asked.setdefault(scope, []).append((conversation, place))
    if not asked:
        return hits
    listings: list[tuple[Scope, ListItems]] = []
    for scope, places in asked.items():
        for start in range(0, len(places), _WINDOWS):
            part = places[start : start + _WINDOWS]
            either = [_window_spec(c, p - width, p + width) for c, p in part]
            listing = ListItems(
                ScopeSet.of(scope),
                len(part) * (4 * width + 2),  # room for a place held twice (racing senders)
                now,
                filter=parse_filter({"$or": either}),
            )
            listings.append((scope, listing))
    found: dict[tuple[Scope, object], list[MemoryRecord]] = {}
    results = yield Store(tuple(listing for _, listing in listings))
    for (scope, _), records in zip(listings, results, strict=True):
        for record in records:
            found.setdefault((scope, record.metadata.get("conversation")), []).append(record)
    given: list[Hit] = []
    for hit, window in zip(hits, windows, strict=True):
        if window is not None:
            scope, conversation, place = window
            near = _neighbours(found.get((scope, conversation), []), place, width)
            hit = replace(hit, context=near)
        given.append(hit)
    return Hits(
        given,
        status=hits.status,
        selection_id=hits.selection_id,
        mode=hits.mode,
        error=hits.error,
        coverage=hits.coverage,
    )


def _neighbours(
    records: Sequence[MemoryRecord], place: int, width: int
) -> tuple[MemoryRecord, ...]:
    """The turns within ``width`` of ``place``, itself aside, one per place (the first
    stored), in turn order."""
    chosen: dict[int, MemoryRecord] = {}
    for record in sorted(records, key=lambda r: (r.created_at, r.id)):
        turn = _place(record)
        if turn is not None and turn != place and abs(turn - place) <= width:
            chosen.setdefault(turn, record)
    return tuple(chosen[turn] for turn in sorted(chosen))
