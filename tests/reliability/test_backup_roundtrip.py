"""A full backup restores a database as it was: 10,000 memories with revisions and
history, policy evidence (exposures, evaluations in label contexts, manual values),
expiry, labels, importance and vectors in two embedding spaces, backed up, restored
into a fresh SQLite file and into PostgreSQL, and each backed up again: the three
backups are byte-equal (docs/reliability.md, "Backup and restore").

The PostgreSQL half uses the server of tests/postgres (``PG_DSN``, or a throwaway one
started by ``pg_server``; ``bash .ci/setup-postgres``) and is skipped, saying why, only
when psycopg is not installed or no PostgreSQL with pgvector is found.
"""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engramdb import HashEmbedder, Memory
from engramdb.backup import backup, backup_records, restore
from engramdb.sqlite import SqliteStore
from engramdb.store import (
    KEEP,
    ConsumeSelection,
    GetItems,
    PatchItem,
    RecordSelection,
    ScopeSet,
    SetManual,
)

ITEMS = 10_000
SCOPES = [("acme", "user", f"u{n:02d}") for n in range(20)] + [("acme", "team"), ("solo",)]


def _populate(path: Path) -> None:
    """The source database: see the module docstring."""
    store = SqliteStore(path)
    with Memory(store, HashEmbedder(64)) as memory:
        records = memory.remember_many(
            (
                {
                    "text": f"memory {n} of {SCOPES[n % len(SCOPES)][-1]}: "
                    f"{'tea' if n % 3 else 'coffee'} at {n % 24}h \u2028 note ✓",
                    "scope": SCOPES[n % len(SCOPES)],
                    "labels": {"topic": [f"t{n % 5}"], "kind": ["fact" if n % 2 else "event"]},
                    "importance": (n % 11) / 10,
                    "metadata": {"n": n, "source": "chat" if n % 2 else "import"},
                    "ttl": timedelta(days=30 + n % 7) if n % 9 == 0 else None,
                }
                for n in range(ITEMS)
            ),
            batch_size=2000,
        )
    store = SqliteStore(path)  # the memory closed the first one
    now = datetime.now(UTC)
    # Revisions and history: 2,000 items changed once, 500 of them three times.
    for rounds in range(3):
        changed = records[: 2000 if rounds == 0 else 500]
        for start in range(0, len(changed), 500):
            store.batch(
                [
                    PatchItem(
                        r.id,
                        now + timedelta(seconds=rounds + 1),
                        text=f"{r.text} (revised {rounds + 1})" if n % 2 else KEEP,
                        importance=((n + rounds) % 7) / 10,
                        metadata={"n": n, "round": rounds + 1},
                    )
                    for n, r in enumerate(changed[start : start + 500])
                ]
            )
    # Evidence: per scope, receipts of recalls, each evaluated in a label context, and
    # manual values.
    by_scope: dict[tuple[str, ...], list[str]] = {}
    for r in records:
        by_scope.setdefault(r.scope, []).append(r.id)
    at = now + timedelta(minutes=1)
    for number, (scope, ids) in enumerate(sorted(by_scope.items())):
        ops: list[object] = []
        for k in range(0, min(len(ids), 200), 4):
            key = f"sel-{number}-{k}"
            chosen = tuple(ids[k : k + 4])
            ops += [
                RecordSelection(
                    key, scope, chosen, f"topic:t{k % 5}", at, at + timedelta(hours=1), 100
                ),
                ConsumeSelection(key, scope, (k % 9 - 4) / 3, at, 5, True),
            ]
        ops += [
            SetManual(i, (j % 5 - 2) / 2, at, True, ScopeSet.of(scope))
            for j, i in enumerate(ids[200:260])
        ]
        store.batch(ops)  # type: ignore[arg-type]
    store.close()
    # A second space: a 32-dimensional embedder embeds every text again.
    with Memory(SqliteStore(path), HashEmbedder(32)) as other:
        other.reindex(batch_size=1000)


def _backup(store: object) -> str:
    out = io.StringIO()
    backup(store, out)
    return out.getvalue()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The populated SQLite file and its backup."""
    path = tmp_path_factory.mktemp("backup") / "source.db"
    _populate(path)
    store = SqliteStore(path)
    text = _backup(store)
    store.close()
    yield path, text


def test_the_backup_holds_everything_that_was_asked_for(source: tuple[Path, str]) -> None:
    _path, text = source
    header, *lines, _end = text.split("\n")[:-1]
    assert json.loads(header)["spaces"] == ["hash/bow@32", "hash/bow@64"]
    assert len(lines) == ITEMS
    items = [json.loads(line) for line in lines]
    assert sum(len(i["history"]) for i in items) == 2000 + 500 * 2
    assert sum(i["utility"] is not None for i in items) >= 4000
    assert sum(bool(i["utility"] and i["utility"]["contexts"]) for i in items) >= 4000
    assert sum(bool(i["utility"] and i["utility"]["manual"] is not None) for i in items) >= 1000
    assert sum(i["record"]["expires_at"] is not None for i in items) > ITEMS // 10
    spaces = [{v["space_id"] for v in i["vectors"]} for i in items]
    assert sum(s == {"hash/bow@32", "hash/bow@64"} for s in spaces) >= ITEMS - 1000
    assert all("hash/bow@32" in s for s in spaces)


def test_a_backup_of_some_records_holds_their_lines_of_the_full_backup(
    source: tuple[Path, str], tmp_path: Path
) -> None:
    """``backup_records`` (what a tenant's object sends another when memories move):
    the header of the full backup, then exactly the lines it holds for those records,
    and an end marker that ``restore`` accepts; a record forgotten since is left out."""
    path, text = source
    header, *lines, _end = text.split("\n")[:-1]
    chosen = lines[100:3000:37]
    ids = [json.loads(line)["record"]["id"] for line in chosen]
    store = SqliteStore(path)
    (records,) = store.batch([GetItems(tuple(ids), datetime.now(UTC))])
    gone = replace(records[0].record, id="0" * 26)  # no such memory: left out
    out = io.StringIO()
    report = backup_records(store, [found.record for found in records] + [gone], out)
    store.close()
    head, *some, end = out.getvalue().split("\n")[:-1]
    assert head == header and some == chosen and report.items == len(chosen)
    assert json.loads(end)["items"] == len(chosen)
    target = SqliteStore(tmp_path / "some.db")
    assert restore(target, out.getvalue().split("\n"), trust_vectors=True).restored == len(ids)
    target.close()


def _restores_to_the_same_bytes(target: object, text: str, where: str) -> None:
    """Restore ``text`` into ``target`` in one transaction (the default) and back it up
    again: the same bytes."""
    started = time.perf_counter()
    report = restore(target, text.split("\n"), trust_vectors=True)
    took = time.perf_counter() - started
    assert (report.restored, report.skipped) == (ITEMS, 0)
    again = _backup(target)
    target.close()  # type: ignore[attr-defined]
    assert again == text
    print(f"\n10,000-memory restore into {where}: {took:.1f} s")


def test_a_restore_into_a_fresh_sqlite_file_backs_up_to_the_same_bytes(
    source: tuple[Path, str], tmp_path: Path
) -> None:
    _restores_to_the_same_bytes(SqliteStore(tmp_path / "target.db"), source[1], "SQLite")


def test_a_restore_into_postgresql_backs_up_to_the_same_bytes(
    source: tuple[Path, str], pg_admin: str
) -> None:
    import pg_server

    from engramdb.postgres import PostgresStore

    name = f"engramdb_backup_{os.getpid()}"
    dsn = pg_server.create_database(pg_admin, name)
    try:
        _restores_to_the_same_bytes(PostgresStore(dsn), source[1], "PostgreSQL")
    finally:
        pg_server.drop_database(pg_admin, name)
