"""Growing a sharded tenant by doubling: each object moves out what now belongs elsewhere.

With ``SHARDS`` doubled from ``N`` to ``2N``, a memory of shard ``n`` stays there or
belongs to shard ``n + N`` (``shard_of(id, 2N)``; every id carries its text's place,
``engramdb.shards``, so a memory moves with its text). Each of the ``N`` old objects
moves its own, a page at a time, on its alarm (:func:`step`):

1. it lists the next page of its memories (scope by scope, newest first, below the
   cursor kept under :data:`MOVE_KEY`) and keeps those whose id names the new shard;
2. it writes them as a backup (``engramdb.backup.backup_records``: each record as it
   is, with its history, evidence and vectors, so nothing is embedded again) and sends
   it to the new object, which restores it (:func:`receive`, ``on_conflict="skip"``:
   a page sent again after a crash keeps what the new object holds);
3. it deletes them, then saves the cursor past the page.

A move killed anywhere resumes at its cursor: a page imported but not deleted is sent
again (and skipped), one deleted but whose cursor was not saved is listed again without
its movers. While a page is in flight (step 2 awaits the new object) the object answers
writes with a 503 to retry, so no write lands on a copy that is about to be deleted.
Meanwhile the Worker asks an id's new shard first and its old one on a 404, and a
recall or a page may meet a memory in both objects for the length of one page: the
merge keeps it once.
"""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from engramdb import MemoryRecord, StoreError
from engramdb.backup import backup_records, restore
from engramdb.json_format import format_time, parse_time
from engramdb.shards import shard_of
from engramdb.store import DeleteItem, ListItems, ListScopes, ScopeSet

from ._js_values import py_value

__all__ = ["MOVE_KEY", "PAGE", "Move", "Send", "begin", "load", "receive", "step"]

MOVE_KEY = "engramdb:move"
"""The object's storage key of its move, while one runs."""
PAGE = 200
"""Memories listed per step (those that move are sent in one request)."""

Send = Callable[[str, int, str, bytes], Awaitable[tuple[int, dict[str, str], str]]]
"""How an object asks another of its tenant: (tenant, shard, envelope, body) -> answer."""


@dataclass(frozen=True)
class Move:
    """A move out of one object: its tenant, its shard, the count it grows to, and the
    cursor (the scope being listed and the position below which its next page starts)."""

    tenant: str
    shard: int
    to: int
    scope: list[str] | None = None
    below: list[str] | None = None  # [created_at as the API writes it, id]


async def load(storage: Any) -> Move | None:
    """The object's move, or None."""
    kept = py_value(await storage.get(MOVE_KEY))
    return None if kept is None else Move(**json.loads(str(kept)))


async def begin(storage: Any, tenant: str, shard: int, to: int) -> None:
    """Start moving out of shard ``shard`` what belongs to a new shard of ``to`` (kept
    across restarts: the alarm that runs it needs no request)."""
    if await load(storage) is None:
        await storage.put(MOVE_KEY, json.dumps(asdict(Move(tenant, shard, to))))


async def step(store: Any, storage: Any, send: Send, move: Move) -> bool:
    """One page of ``move`` (the caller holds writes meanwhile): True while pages
    remain, False once it is done (its key deleted)."""
    now = datetime.now(UTC)
    found = _next_page(store, move, now)
    if found is None:
        await storage.delete(MOVE_KEY)
        return False
    scope, listed = found
    targets: dict[int, list[MemoryRecord]] = {}
    for record in listed:
        target = shard_of(record.id, move.to)
        if target != move.shard:
            targets.setdefault(target, []).append(record)
    for target, movers in sorted(targets.items()):
        out = io.StringIO()
        backup_records(store, movers, out, now=now)
        sent = json.dumps({"receive": True, "shard": target, "shards": move.to})
        status, _, text = await send(move.tenant, target, sent, out.getvalue().encode())
        if status != 200:
            raise StoreError(f"shard {target} refused a page of the move: {status} {text}")
        store.batch([DeleteItem(record.id, ScopeSet.of(record.scope)) for record in movers])
    last = listed[-1]
    below = [format_time(last.created_at) or "", last.id]
    moved = Move(move.tenant, move.shard, move.to, scope, below)
    await storage.put(MOVE_KEY, json.dumps(asdict(moved)))
    return True


def _next_page(
    store: Any, move: Move, now: datetime
) -> tuple[list[str], Sequence[MemoryRecord]] | None:
    """The next page of the move's listing: the cursor's scope below its position, else
    the first non-empty scope after it; None when every scope is listed."""
    scope = tuple(move.scope) if move.scope is not None else None
    below = None if move.below is None else (parse_time(move.below[0], "below"), move.below[1])
    if scope is None:
        scope = _scope_after(store, None, now)
    while scope is not None:
        (listed,) = store.batch([ListItems(ScopeSet.of(scope), PAGE, now, below=below)])
        if listed:
            return list(scope), listed
        scope, below = _scope_after(store, scope, now), None
    return None


def _scope_after(store: Any, scope: tuple[str, ...] | None, now: datetime) -> Any:
    (after,) = store.batch([ListScopes((), 1, now, scope)])
    return after[0].scope if after else None


def receive(store: Any, body: bytes) -> dict[str, int]:
    """Restore a page of a move into this object (its vectors as they were made: the
    objects of one tenant trust each other's); items it holds already are kept."""
    report = restore(
        store, body.decode("utf-8").split("\n"), "skip", source="a move", trust_vectors=True
    )
    return {"restored": report.restored, "skipped": report.skipped}
