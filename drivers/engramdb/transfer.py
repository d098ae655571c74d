"""Copy memories from one store to another: a SQLite file into PostgreSQL, or back.

:func:`copy_memories` reads every scope (under an optional prefix) of the source page by
page through the store protocol and writes each page into the target in ONE batch: the
items exactly as they are (id, scope, text, metadata, labels, importance, times,
revision, expiry), and, when the source's vectors can be read (:class:`SqliteVectors`),
their vectors in every space, so nothing is embedded again. An item whose id the target
already holds is skipped, so a copy that was interrupted is resumed by running it again.
Earlier revisions, the policy's evidence and expired items are not copied: a full
backup (:mod:`engramdb.backup`) keeps those too.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from engramdb import EmbeddingSpace, Scope, StoreError
from engramdb.driver import from_ms
from engramdb.store import (
    GetItems,
    GetVectors,
    ListItems,
    ListScopes,
    Op,
    PutItem,
    PutVector,
    RegisterSpace,
    ScopeSet,
    Stats,
)

__all__ = ["CopyReport", "SqliteVectors", "copy_memories"]


@dataclass(frozen=True, slots=True)
class CopyReport:
    scopes: int  # scopes read
    copied: int  # items written to the target
    skipped: int  # items the target already held (by id)
    vectors: int  # vectors written to the target


class SqliteVectors:
    """The embedding spaces and stored vector bytes of a SQLite file, read over a
    read-only connection. Kept for callers of earlier releases: the store protocol now
    answers the bytes (``GetVectors``), which :func:`copy_memories` uses by default."""

    def __init__(self, path: str) -> None:
        self.path = path

    def spaces(self) -> list[EmbeddingSpace]:
        rows = self._query("SELECT provider, model, dimensions, variant FROM spaces ORDER BY id")
        return [EmbeddingSpace(str(p), str(m), int(d), v) for p, m, d, v in rows]

    def read(self, space_id: str, hashes: Sequence[str]) -> dict[str, tuple[bytes, datetime]]:
        """The vector bytes and embedding time of each of ``hashes`` that has a vector."""
        found: dict[str, tuple[bytes, datetime]] = {}
        distinct = list(dict.fromkeys(hashes))
        for start in range(0, len(distinct), 500):
            chunk = distinct[start : start + 500]
            rows = self._query(
                "SELECT content_sha256, vector, embedded_at FROM vectors WHERE space_id = ? "
                f"AND content_sha256 IN ({','.join('?' * len(chunk))})",
                (space_id, *chunk),
            )
            found.update((sha, (bytes(raw), from_ms(int(at)))) for sha, raw, at in rows)
        return found

    def sample(self, space_id: str, limit: int) -> list[tuple[str, bytes, str, list[str]]]:
        """Up to ``limit`` vectors of ``space_id`` that items hold, picked at random: each
        hash, vector bytes, the text of an item holding it and the ids of those items
        (at most 10)."""
        rows = self._query(
            "SELECT v.content_sha256, v.vector FROM vectors v WHERE v.space_id = ? AND "
            "EXISTS (SELECT 1 FROM items i WHERE i.content_sha256 = v.content_sha256) "
            "ORDER BY random() LIMIT ?",
            (space_id, limit),
        )
        found = []
        for sha, raw in rows:
            held = self._query(
                "SELECT id, text FROM items WHERE content_sha256 = ? ORDER BY id LIMIT 10", (sha,)
            )
            if held:
                found.append((str(sha), bytes(raw), str(held[0][1]), [str(i) for i, _ in held]))
        return found

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            conn = sqlite3.connect(f"file:{quote(os.path.abspath(self.path))}?mode=ro", uri=True)
            try:
                return conn.execute(sql, tuple(params)).fetchall()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the vectors of {self.path!r} ({exc})") from exc


def copy_memories(
    source: Any,
    target: Any,
    *,
    prefix: Scope = (),
    vectors: SqliteVectors | None = None,
    page_size: int = 500,
    progress: Callable[[int], None] | None = None,
) -> CopyReport:
    """Copy the live memories of ``source``'s scopes under ``prefix`` into ``target``
    (two sync stores), with their vectors in every space of the source (``vectors``,
    when given, reads them from a SQLite file instead); see the module docstring.

    ``progress(n)`` is called with the number of items read so far after each page.
    """
    now = datetime.now(UTC)
    if vectors is not None:
        spaces = vectors.spaces()
        fetch = vectors.read
    else:
        (stats,) = source.batch([Stats("", now)])
        spaces = [EmbeddingSpace.from_id(space_id) for space_id in sorted(stats.spaces)]

        def fetch(space_id: str, hashes: Sequence[str]) -> dict[str, tuple[bytes, datetime]]:
            (found,) = source.batch([GetVectors(space_id, tuple(hashes))])
            return dict(found)

    if spaces:
        target.batch([RegisterSpace(space, now) for space in spaces])
    scopes = copied = skipped = written = read = 0
    after: Scope | None = None
    while True:
        (page,) = source.batch([ListScopes(prefix, 100, now, after)])
        for entry in page:
            scopes += 1
            before: str | None = None
            while True:
                (records,) = source.batch(
                    [ListItems(ScopeSet.of(entry.scope), page_size, now, before)]
                )
                if not records:
                    break
                before = records[-1].id
                read += len(records)
                (present,) = target.batch([GetItems(tuple(r.id for r in records), now)])
                new = [r for r, there in zip(records, present, strict=True) if there is None]
                ops: list[Op] = [PutItem(r, now, expected_revision=0) for r in new]
                for space in spaces:
                    stored = fetch(space.id, [r.content_sha256 for r in new]) if new else {}
                    ops += [PutVector(space.id, sha, raw, at) for sha, (raw, at) in stored.items()]
                if ops:
                    target.batch(ops)
                copied += len(new)
                skipped += len(records) - len(new)
                written += sum(isinstance(op, PutVector) for op in ops)
                if progress is not None:
                    progress(read)
                if len(records) < page_size:
                    break
        if len(page) < 100:
            return CopyReport(scopes, copied, skipped, written)
        after = page[-1].scope
