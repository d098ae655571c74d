"""Crash safety of SqliteStore: a writer process SIGKILLed at random points.

A writer (``crash_writer.py``) loops ``remember``, ``remember_many``, ``update`` and
``forget`` on a database file and reports each operation before it starts and after it
returns. The parent kills it with SIGKILL at a seeded random moment: during the first
open of a fresh file (the schema being created), during the migration of a release 0.1.0
file, and during operations; then it checks the file and starts the next writer on it.

After every kill: ``PRAGMA integrity_check`` is ``ok``; every acknowledged memory is
there with its acknowledged revision and text, is got, and is recalled by its text both
lexically and by vector (unless its embedding was deferred); no forgotten memory is there
or recalled; no item lacks its full-text row or (when not deferred) its vector, and no
full-text row, vector or revision outlives its item. The one operation in flight at the
kill is applied whole or not at all.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crash_processes import child_env

from engramdb import HashEmbedder, Memory
from engramdb.sqlite import SqliteStore
from engramdb.store._sqlite.schema import MIGRATIONS

HEAD = len(MIGRATIONS)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RELEASE = FIXTURES / "release-0.1.0.db"
WRITER = Path(__file__).with_name("crash_writer.py")
SEED = 20261201


@dataclass
class Known:
    """What the parent knows was acknowledged about one memory."""

    scope: tuple[str, ...]
    text: str
    revision: int
    deferred: bool  # stored pending (defer_embedding): it may have no vector yet


@dataclass
class Model:
    """The acknowledged state of one database file."""

    dimensions: int
    live: dict[str, Known] = field(default_factory=dict)
    forgotten: dict[str, Known] = field(default_factory=dict)

    def acknowledge(self, ack: dict[str, Any]) -> None:
        if ack["op"] == "forget":
            assert ack["existed"], f"the writer forgot a memory the store did not hold: {ack}"
            self.forgotten[ack["id"]] = self.live.pop(ack["id"])
            return
        for rec in ack["records"]:
            before = self.live.get(rec["id"])
            deferred = rec["deferred"]
            if deferred is None:  # a metadata update: as pending as it was
                deferred = before is not None and before.deferred
            self.live[rec["id"]] = Known(
                tuple(rec["scope"]), rec["text"], rec["revision"], deferred
            )


def release_model() -> Model:
    """The memories of tests/fixtures/release-0.1.0.db (from its JSON description)."""
    answers = json.loads(RELEASE.with_suffix(".json").read_text(encoding="utf-8"))
    pending = {
        r["id"]
        for r in answers["recalls"]
        if r["dimensions"] == 32 and r["evidence"]["space_id"] is None
    }
    model = Model(dimensions=32)
    for r in answers["records"]:
        model.live[r["id"]] = Known(tuple(r["scope"]), r["text"], r["revision"], r["id"] in pending)
    return model


@dataclass
class Figures:
    kills: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)


def run_and_kill(
    path: Path, model: Model, seed: int, after: str, delay: float, figures: Figures, kind: str
) -> dict[str, Any] | None:
    """Start a writer on ``path``; SIGKILL it ``delay`` seconds after it prints ``after``.

    Feeds every acknowledged operation to ``model``; returns the one in flight (None if
    the writer was not inside an operation). Records whether the kill landed inside the
    open (the writer had not printed ``ready``).
    """
    live_file = path.with_suffix(".live.json")
    live_file.write_text(json.dumps([[i, list(k.scope)] for i, k in model.live.items()]))
    stderr = path.with_suffix(".stderr")
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(WRITER),
                str(path),
                str(model.dimensions),
                str(seed),
                str(live_file),
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=child_env(),
        )
        assert proc.stdout is not None
        lines = []
        while True:
            line = proc.stdout.readline()
            assert line, f"the writer exited early: {stderr.read_text()}"
            lines.append(line.rstrip("\n"))
            if lines[-1] == after:
                break
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        lines += proc.stdout.read().splitlines()
        proc.stdout.close()
        assert proc.wait() == -signal.SIGKILL, stderr.read_text()
    figures.kills[kind] += 1
    if "ready" not in lines:
        figures.kills[f"{kind}, inside the open"] += 1
    in_flight = None
    for line in lines:
        word, _, payload = line.partition(" ")
        if word == "begin":
            in_flight = json.loads(payload)
        elif word == "ack":
            model.acknowledge(json.loads(payload))
            figures.counts["operations acknowledged"] += 1
            in_flight = None
    if in_flight is not None:
        figures.counts["kills inside an operation"] += 1
    return in_flight


def broken_rows(conn: sqlite3.Connection, space_id: str) -> dict[str, list[Any]]:
    """Rows that a half-applied write would leave: each list must be empty."""
    queries = {
        "items without a full-text row": "SELECT id FROM items WHERE tokens > 0 "
        "AND seq NOT IN (SELECT doc FROM items_terms)",
        "full-text rows without an item": "SELECT DISTINCT doc FROM items_terms "
        "WHERE doc NOT IN (SELECT seq FROM items)",
        "items whose token count differs from their full-text row": "SELECT id FROM items "
        "WHERE tokens != (SELECT count(*) FROM items_terms WHERE doc = items.seq)",
        "vectors without an item": "SELECT content_sha256 FROM vectors "
        "WHERE content_sha256 NOT IN (SELECT content_sha256 FROM items)",
        "revisions without an item": "SELECT id FROM item_revisions "
        "WHERE id NOT IN (SELECT id FROM items)",
        "scopes whose item count is wrong": "SELECT scope_key FROM scopes WHERE items != "
        "(SELECT count(*) FROM items WHERE items.scope_key = scopes.scope_key)",
    }
    found = {name: conn.execute(sql).fetchall() for name, sql in queries.items()}
    found["items without a vector"] = [
        row[0]
        for row in conn.execute(
            "SELECT id FROM items WHERE content_sha256 NOT IN "
            "(SELECT content_sha256 FROM vectors WHERE space_id = ?)",
            (space_id,),
        )
    ]
    return found


def settle(model: Model, actual: dict[str, tuple[str, int]], in_flight: dict[str, Any]) -> str:
    """Check that the operation in flight was applied whole or not at all; adopt it into
    ``model`` if it was. Returns "applied" or "not applied"."""
    op = in_flight["op"]
    if op in ("remember", "remember_many"):
        new = {i: actual[i] for i in actual if i not in model.live}
        if not new:
            return "not applied"
        assert sorted(text for text, _ in new.values()) == sorted(in_flight["texts"]), (
            f"a {op} in flight was applied in part: {new} for {in_flight}"
        )
        if "id" in in_flight:
            assert list(new) == [in_flight["id"]]
        deferred = bool(in_flight.get("defer"))
        for i, (text, revision) in new.items():
            assert revision == 1
            model.live[i] = Known(tuple(in_flight["scope"]), text, 1, deferred)
        return "applied"
    known = model.live[in_flight["id"]]
    if op == "forget":
        if in_flight["id"] in actual:
            return "not applied"
        model.forgotten[in_flight["id"]] = model.live.pop(in_flight["id"])
        return "applied"
    text, revision = actual[in_flight["id"]]
    if revision == known.revision:
        assert text == known.text
        return "not applied"
    assert revision == known.revision + 1, f"{in_flight}: revision {revision} after {known}"
    assert text == (in_flight["text"] or known.text)
    deferred = known.deferred and not in_flight["text"]
    model.live[in_flight["id"]] = Known(known.scope, text, revision, deferred)
    return "applied"


def check_after_kill(
    path: Path, model: Model, in_flight: dict[str, Any] | None, figures: Figures
) -> None:
    """Every promise of the module docstring, for the file the writer was killed on."""
    if path.exists():  # a kill before SQLite created the file leaves none
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.close()
        assert 0 <= version <= HEAD
        figures.counts[f"kills that left schema version {version}"] += 1
    embedder = HashEmbedder(dimensions=model.dimensions)
    with Memory(SqliteStore(path), embedder) as memory:  # reopening migrates what is left
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == HEAD
            conn.execute("INSERT INTO items_fts (items_fts) VALUES ('integrity-check')")
            broken = broken_rows(conn, str(embedder.space))
            actual = {
                i: (text, revision)
                for i, text, revision in conn.execute("SELECT id, text, revision FROM items")
            }
        conn.close()
        if in_flight is not None:
            figures.counts[f"operations in flight, {settle(model, actual, in_flight)}"] += 1
        unembedded = broken.pop("items without a vector")
        assert broken == {name: [] for name in broken}
        assert set(unembedded) <= {i for i, k in model.live.items() if k.deferred}
        assert {i: (k.text, k.revision) for i, k in model.live.items()} == actual
        assert not set(model.forgotten) & set(actual)
        for item_id, known in model.live.items():
            got = memory.get(item_id)
            assert got is not None and (got.text, got.revision) == (known.text, known.revision)
            for mode in ("lexical", "vector"):
                if mode == "vector" and known.deferred:
                    continue
                hits = memory.recall(known.text, scopes=[known.scope], mode=mode, top_k=100)
                assert item_id in {h.memory.id for h in hits}, (mode, item_id, known)
            figures.counts["acknowledged memories verified"] += 1
        for item_id, known in list(model.forgotten.items())[-10:]:
            hits = memory.recall(known.text, scopes=[known.scope], top_k=100)
            assert memory.get(item_id) is None and item_id not in {h.memory.id for h in hits}
            figures.counts["forgotten memories verified absent"] += 1


def open_seconds(tmp_path: Path) -> tuple[float, float]:
    """How long this process takes to create a fresh file and to migrate a release copy."""
    fresh, old = tmp_path / "timing-fresh.db", tmp_path / "timing-old.db"
    shutil.copyfile(RELEASE, old)
    took = []
    for path in (fresh, old):
        start = time.perf_counter()
        SqliteStore(path).close()
        took.append(time.perf_counter() - start)
    return took[0], took[1]


def test_a_writer_killed_at_random_points_loses_no_acknowledged_write(
    tmp_path: Path, long_factor: int
) -> None:
    """SIGKILL a writer 8 times inside the first open of a fresh file, 8 times inside
    the migration of a release 0.1.0 file and 30 times during operations on that file
    (x ``long_factor``; a kill aimed inside an open may land after it): after each
    kill the file is sound and holds exactly the acknowledged memories, plus the
    operation in flight whole or not at all."""
    rng = random.Random(SEED)
    figures = Figures()
    create, migrate = open_seconds(tmp_path)
    seed = 0
    for attempt in range(8 * long_factor):
        path, model = tmp_path / f"fresh-{attempt}.db", Model(dimensions=16)
        seed += 1
        in_flight = run_and_kill(
            path, model, seed, "opening", rng.uniform(0, create), figures, "fresh file"
        )
        check_after_kill(path, model, in_flight, figures)
    for attempt in range(8 * long_factor):
        path, model = tmp_path / f"release-{attempt}.db", release_model()
        shutil.copyfile(RELEASE, path)
        seed += 1
        in_flight = run_and_kill(
            path, model, seed, "opening", rng.uniform(0, migrate), figures, "migration"
        )
        check_after_kill(path, model, in_flight, figures)
    for _ in range(30 * long_factor):  # on the last migrated file, with its model
        seed += 1
        in_flight = run_and_kill(
            path, model, seed, "ready", rng.uniform(0, 0.3), figures, "operations"
        )
        check_after_kill(path, model, in_flight, figures)
    print(f"\ncrash figures: kills {dict(figures.kills)}; {dict(figures.counts)}")
    assert figures.kills["fresh file, inside the open"] >= 1
    assert figures.kills["migration, inside the open"] >= 1
    assert figures.counts["operations acknowledged"] >= 150 * long_factor
