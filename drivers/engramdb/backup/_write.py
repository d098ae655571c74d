"""Writing backups: every live item of a store, or the items a caller names, as JSON
Lines with a header and an end marker (``engramdb.backup``)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from engramdb import (
    MemoryRecord,
    Scope,
)
from engramdb.json_format import (
    dumps_line,
    format_time,
    record_to_json,
)
from engramdb.store import (
    GetItems,
    GetUtility,
    GetVectors,
    History,
    ListItems,
    ListScopes,
    Op,
    ScopeSet,
    Stats,
    StoreCapabilities,
    UnreadableItems,
)

from ._format import (
    _HISTORY,
    _UNREADABLE,
    END_KIND,
    FORMAT,
    KIND,
    BackupReport,
    _Writer,
    utility_to_json,
)

# -- backup ------------------------------------------------------------------------------


def _capabilities(store: Any) -> StoreCapabilities:
    found = getattr(store, "capabilities", None)
    return found if isinstance(found, StoreCapabilities) else StoreCapabilities()


class _Lines:
    """Writes lines to ``out`` and keeps the SHA-256 of what it wrote."""

    def __init__(self, out: _Writer) -> None:
        self.out = out
        self.sha256 = hashlib.sha256()

    def write(self, value: object) -> None:
        line = dumps_line(value) + "\n"
        self.sha256.update(line.encode("utf-8", "surrogatepass"))
        self.out.write(line)


def backup(
    store: Any,
    out: _Writer,
    prefix: Scope = (),
    *,
    now: datetime | None = None,
    page_size: int = 500,
) -> BackupReport:
    """Write a backup of ``store``'s live items in the scopes under ``prefix`` (``()``:
    every scope) to ``out`` (anything with ``write(str)``); see the module docstring.

    Writers may run meanwhile: each page of ``page_size`` items is read in one batch
    with its history, evidence and vectors. A live item whose stored row does not
    decode cannot be backed up: its id is in the report's ``unreadable`` (and the end
    marker's); ``engramdb doctor`` finds it too.
    """
    now = now or datetime.now(UTC)
    written = _Written(store, out, now)
    for scope in _scopes(store, prefix, now):
        written.scopes += 1
        selection = ScopeSet.of(scope)
        before: str | None = None
        while True:  # to an empty page: a page may be short of rows that do not decode
            (listed,) = store.batch([ListItems(selection, page_size, now, before)])
            if not listed:
                break
            before = listed[-1].id
            written.page(listed)
        (bad,) = store.batch([UnreadableItems(selection, now, _UNREADABLE)])
        written.unreadable += bad
    return written.end()


def backup_records(
    store: Any, records: Sequence[MemoryRecord], out: _Writer, *, now: datetime | None = None
) -> BackupReport:
    """Write a backup of the items ``records`` name to ``out``: each read again, in one
    batch, as it is now, with its history, evidence and vectors (one gone since is left
    out). A complete backup file, which :func:`restore` reads as any other: what a
    tenant's Durable Object sends another when memories move between them."""
    written = _Written(store, out, now or datetime.now(UTC))
    written.page(records)
    return written.end()


class _Written:
    """A backup being written: its header first, then pages of items, then the end."""

    def __init__(self, store: Any, out: _Writer, now: datetime) -> None:
        (stats,) = store.batch([Stats("", now)])
        self.store, self.now, self.spaces = store, now, sorted(stats.spaces)
        self.lines = _Lines(out)
        self.lines.write({"format": FORMAT, "kind": KIND, "spaces": self.spaces})
        self.scopes = self.items = self.revisions = self.evidence = self.vectors = 0
        self.ids: set[str] = set()  # an id met again (its scope changed meanwhile): once
        self.unreadable: list[str] = []

    def page(self, listed: Sequence[MemoryRecord]) -> None:
        for line in _page(self.store, listed, self.spaces, self.now):
            if line["record"]["id"] in self.ids:
                continue
            self.ids.add(line["record"]["id"])
            self.lines.write(line)
            self.items += 1
            self.revisions += len(line["history"])
            self.evidence += line["utility"] is not None
            self.vectors += len(line["vectors"])

    def end(self) -> BackupReport:
        self.lines.write(
            {
                "kind": END_KIND,
                "items": self.items,
                "unreadable": self.unreadable,
                "sha256": self.lines.sha256.hexdigest(),
            }
        )
        return BackupReport(
            self.scopes,
            self.items,
            self.revisions,
            self.evidence,
            self.vectors,
            tuple(self.unreadable),
        )


def _page(
    store: Any, listed: Sequence[MemoryRecord], spaces: Sequence[str], now: datetime
) -> Iterator[dict[str, Any]]:
    """The lines of one page of items: each record as it is in ONE batch with its
    history, evidence and vectors (an item gone since it was listed is left out)."""
    capabilities = _capabilities(store)
    ids = tuple(r.id for r in listed)
    hashes = tuple(dict.fromkeys(r.content_sha256 for r in listed))
    reads: list[Op] = [GetItems(ids, now)]
    if capabilities.supports_history:
        reads += [History(item_id, _HISTORY, now) for item_id in ids]
    if capabilities.supports_policy:
        reads.append(GetUtility(ids))
    reads += [GetVectors(space, hashes) for space in spaces]
    answers = iter(store.batch(reads))
    current = next(answers)
    histories = [next(answers) for _ in ids] if capabilities.supports_history else []
    utilities = next(answers) if capabilities.supports_policy else {}
    stored: list[dict[str, tuple[bytes, datetime]]] = [dict(next(answers)) for _ in spaces]
    # A text changed since the listing has its vectors read now: a vector is immutable
    # once stored (per space and text), so a later read finds the same one, or none.
    changed = tuple(
        dict.fromkeys(
            found.record.content_sha256
            for found in current
            if found is not None and found.record.content_sha256 not in hashes
        )
    )
    if changed:
        for vectors_of, more in zip(
            stored, store.batch([GetVectors(space, changed) for space in spaces]), strict=True
        ):
            vectors_of.update(more)
    for position, found in enumerate(current):
        if found is None:
            continue
        record = found.record
        utility = utilities.get(record.id)
        yield {
            "record": record_to_json(record),
            "history": [record_to_json(earlier) for earlier in histories[position]]
            if histories
            else [],
            "utility": None if utility is None else utility_to_json(utility),
            "vectors": [
                {
                    "space_id": space,
                    "vector": base64.b64encode(vectors_of[record.content_sha256][0]).decode(),
                    "embedded_at": format_time(vectors_of[record.content_sha256][1]),
                }
                for space, vectors_of in zip(spaces, stored, strict=True)
                if record.content_sha256 in vectors_of
            ],
        }


def _scopes(store: Any, prefix: Scope, now: datetime) -> Iterator[Scope]:
    after: Scope | None = None
    while True:
        (page,) = store.batch([ListScopes(prefix, 100, now, after)])
        yield from (entry.scope for entry in page)
        if len(page) < 100:
            return
        after = page[-1].scope
