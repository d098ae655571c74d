"""A backup taken while writers run always restores, and restores to the same bytes
(docs/reliability.md, "Backup and restore").

A property test: random texts, metadata, labels, histories and evidence in a source
store; two writer threads (each with its own store object: its own connection) update,
add, forget and evaluate memories without pause while backups are taken page by small
page; then every backup is restored into a fresh SQLite file and into a fresh
PostgreSQL database, and each of those backed up again gives the file's bytes. The
source is a SQLite file, and a PostgreSQL database (whose read batches run at
REPEATABLE READ). ``--long`` takes ten times the examples.

Before each page was read in one batch, an update between a page's records and their
histories wrote a line whose history held the record's own revision: the restore of
such a file was refused whole ("the history of item ... holds revision N out of order").
"""

from __future__ import annotations

import io
import os
import random
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import EngramError, HashEmbedder, Memory, Policy
from engramdb.backup import backup, restore
from engramdb.sqlite import SqliteStore

SCOPES = [("acme", "user", "sam"), ("acme", "user", "kim"), ("solo",)]
WRITERS = 2
BACKUPS = 3

_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=12,
)
_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
_metadata = st.dictionaries(
    _text, st.one_of(_json_leaf, st.lists(_json_leaf, max_size=3)), max_size=4
)
_labels = st.dictionaries(
    _text.filter(str.strip), st.lists(_text, min_size=1, max_size=3), max_size=3
)
_memory = st.fixed_dictionaries(
    {
        "text": _text.filter(str.strip),
        "metadata": _metadata,
        "labels": _labels,
        "importance": st.floats(0, 1),
        "scope": st.sampled_from(SCOPES),
        "revisions": st.integers(0, 3),
    }
)


class _Databases:
    """Fresh PostgreSQL databases on one server, each dropped at the end."""

    def __init__(self, admin: str) -> None:
        self.admin = admin
        self.names: list[str] = []

    def new(self) -> str:
        import pg_server

        name = f"engramdb_online_{os.getpid()}_{len(self.names)}"
        self.names.append(name)
        return str(pg_server.create_database(self.admin, name))

    def drop(self) -> None:
        import pg_server

        for name in self.names:
            pg_server.drop_database(self.admin, name)
        self.names.clear()


def _populate(open_store: Callable[[], Any], memories: list[dict[str, Any]]) -> list[str]:
    """The source's memories, each revised ``revisions`` times, some evaluated."""
    with Memory(open_store(), HashEmbedder(32)) as memory:
        ids = []
        for n, spec in enumerate(memories):
            record = memory.remember(
                spec["text"],
                scope=spec["scope"],
                metadata=spec["metadata"],
                labels=spec["labels"],
                importance=spec["importance"],
                ttl=timedelta(days=30) if n % 3 == 0 else None,
            )
            for revision in range(spec["revisions"]):
                memory.update(record.id, text=f"{spec['text']} ({revision + 1})")
            ids.append(record.id)
        for scope in SCOPES:
            view = memory.bind(scope, policy=Policy(reinforcement=True))
            hits = view.recall("a", top_k=3)
            if hits.selection_id is not None:
                view.complete(hits.selection_id, 0.5)
    return ids


def _writer(open_store: Callable[[], Any], ids: list[str], seed: int, stop: threading.Event) -> int:
    """Write without pause until ``stop``: updates of text, metadata, labels and
    importance (new revisions), new memories, forgets, evaluations, feedback."""
    rng = random.Random(seed)
    done = 0
    with Memory(open_store(), HashEmbedder(32)) as memory:
        while not stop.is_set():
            target = rng.choice(ids)
            kind = rng.randrange(7)
            try:
                if kind <= 2:
                    memory.update(target, text=f"written by {seed} at {done}")
                elif kind == 3:
                    memory.update(
                        target, metadata={"w": seed, "n": done}, labels={"w": [str(seed)]}
                    )
                elif kind == 4:
                    scope = rng.choice(SCOPES)
                    ids.append(memory.remember(f"new {seed} {done}", scope=scope).id)
                elif kind == 5 and rng.random() < 0.3:
                    memory.forget(target)
                else:
                    view = memory.bind(rng.choice(SCOPES), policy=Policy(reinforcement=True))
                    hits = view.recall("written new", top_k=2)
                    if hits and hits.selection_id is not None:
                        view.complete(hits.selection_id, rng.choice([-1.0, 0.5, 1.0]))
                    if hits:
                        view.feedback(hits[0].memory.id, rng.choice([None, -0.5, 1.0]))
            except EngramError:
                pass  # a forgotten target: another writer got there first
            done += 1
    return done


def _backups_under_writers(open_store: Callable[[], Any], ids: list[str], seed: int) -> list[str]:
    """``BACKUPS`` backups of the source taken while ``WRITERS`` threads write."""
    stop = threading.Event()
    counts: list[int] = []
    threads = [
        threading.Thread(
            target=lambda s=s: counts.append(_writer(open_store, ids, seed * 10 + s, stop))
        )
        for s in range(WRITERS)
    ]
    for thread in threads:
        thread.start()
    files = []
    try:
        for _ in range(BACKUPS):
            store = open_store()
            out = io.StringIO()
            backup(store, out, page_size=7)
            store.close()
            files.append(out.getvalue())
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert sum(counts) > 0, "the writers wrote nothing while the backups were taken"
    return files


def _restores_to_the_same_bytes(text: str, target: Any) -> None:
    restore(target, text.split("\n"), trust_vectors=True)
    again = io.StringIO()
    backup(target, again)
    target.close()
    assert again.getvalue() == text


def _check_every_backup(files: list[str], tmp_path: Path, databases: _Databases) -> None:
    from engramdb.postgres import PostgresStore

    for number, text in enumerate(files):
        _restores_to_the_same_bytes(text, SqliteStore(tmp_path / f"restored-{number}.db"))
        _restores_to_the_same_bytes(text, PostgresStore(databases.new()))


_EXAMPLES = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=False,
)


@pytest.mark.slow
def test_a_backup_taken_while_writers_run_restores_to_the_same_bytes_sqlite(
    tmp_path_factory: pytest.TempPathFactory, pg_admin: str, long_factor: int
) -> None:
    """Every backup of a SQLite file taken under two writers restores, into SQLite and
    PostgreSQL alike, and backs up again to its own bytes."""

    @settings(_EXAMPLES, max_examples=4 * long_factor)
    @given(st.lists(_memory, min_size=20, max_size=60), st.integers(0, 2**16))
    def run(memories: list[dict[str, Any]], seed: int) -> None:
        tmp_path = tmp_path_factory.mktemp("online")
        path = tmp_path / "source.db"
        ids = _populate(lambda: SqliteStore(path), memories)
        files = _backups_under_writers(lambda: SqliteStore(path), ids, seed)
        databases = _Databases(pg_admin)
        try:
            _check_every_backup(files, tmp_path, databases)
        finally:
            databases.drop()

    run()


@pytest.mark.slow
def test_a_backup_taken_while_writers_run_restores_to_the_same_bytes_postgres(
    tmp_path_factory: pytest.TempPathFactory, pg_admin: str, long_factor: int
) -> None:
    """The same with the source in PostgreSQL: its read batches see one snapshot."""
    from engramdb.postgres import PostgresStore

    @settings(_EXAMPLES, max_examples=3 * long_factor)
    @given(st.lists(_memory, min_size=20, max_size=60), st.integers(0, 2**16))
    def run(memories: list[dict[str, Any]], seed: int) -> None:
        tmp_path = tmp_path_factory.mktemp("online")
        databases = _Databases(pg_admin)
        try:
            source = databases.new()
            ids = _populate(lambda: PostgresStore(source), memories)
            files = _backups_under_writers(lambda: PostgresStore(source), ids, seed)
            _check_every_backup(files, tmp_path, databases)
        finally:
            databases.drop()

    run()
