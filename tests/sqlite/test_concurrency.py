"""SqliteStore under concurrency: processes and threads sharing one database file.

Every write is one ``BEGIN IMMEDIATE`` transaction whose guards decide inside SQLite
(compare-and-set, "the item still exists"), so a read-modify-write loop with
``expected_revision`` loses no increment and an update never writes back an item that a
concurrent forget removed. One store object serialises its connection with a lock, so
threads may share it and close it from anywhere.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import SAM, plain, race

from engramdb import HashEmbedder, Memory, NotFoundError, StoreError
from engramdb.sqlite import SqliteStore

_INCREMENTER = """
import sys, time
from pathlib import Path
from engramdb import ConflictError, HashEmbedder, Memory
from engramdb.sqlite import SqliteStore

db, item_id, ready, go = sys.argv[1:5]
memory = Memory(SqliteStore(db), HashEmbedder(dimensions=16))
Path(ready).touch()
while not Path(go).exists():
    time.sleep(0.001)
conflicts = 0
for _ in range(200):
    while True:
        current = memory.get(item_id)
        try:
            memory.update(
                item_id,
                metadata={"n": current.metadata["n"] + 1},
                expected_revision=current.revision,
            )
            break
        except ConflictError:
            conflicts += 1
memory.close()
print(conflicts)
"""


def test_two_processes_increment_one_counter_without_losing_an_update(tmp_path: Path) -> None:
    """Two processes, started together, each do 200 read-modify-write increments of one
    memory's counter with ``expected_revision``, retrying on ``ConflictError``: the
    counter ends at exactly 400 and the revision at 401."""
    db_path = tmp_path / "memory.db"
    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=16)) as memory:
        counter = memory.remember("the shared counter", scope=SAM, metadata={"n": 0})
    race(tmp_path, _INCREMENTER, [str(db_path), counter.id])

    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=16)) as memory:
        final = memory.get(counter.id)
        assert final is not None
        assert (final.metadata, final.revision) == ({"n": 400}, 401)
        assert [r.revision for r in memory.history(counter.id)] == list(range(400, 390, -1))


_COMPLETER = """
import json, sys, time
from pathlib import Path
from engramdb import HashEmbedder, Memory
from engramdb.sqlite import SqliteStore

db, selections, ready, go = sys.argv[1:5]
view = Memory(SqliteStore(db), HashEmbedder(dimensions=16)).bind(("acme", "user", "sam"))
Path(ready).touch()
while not Path(go).exists():
    time.sleep(0.001)
print(json.dumps([view.complete(s, 0.5) for s in json.loads(selections)]))
"""


def test_two_processes_completing_the_same_selections_apply_each_once(tmp_path: Path) -> None:
    """Two processes, started together, complete the same 60 selections in the same
    order: each selection answers True in exactly one of them, and every memory holds
    exactly 60 evaluations."""
    db_path = tmp_path / "memory.db"
    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=16)) as memory:
        view = memory.bind(SAM)
        records = [view.remember(f"the deploy window note {n}") for n in range(2)]
        selections = [view.recall("deploy window").selection_id for _ in range(60)]
    outputs = race(tmp_path, _COMPLETER, [str(db_path), json.dumps(selections)])
    first, second = (json.loads(out) for out in outputs)
    assert [a + b for a, b in zip(first, second, strict=True)] == [1] * 60
    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=16)) as memory:
        for record in records:
            utility = memory.get(record.id).utility
            assert (utility.exposures, utility.eval_count) == (60, 60)
            assert utility.eval_sum == pytest.approx(60 * 0.25)


def test_an_update_racing_a_forget_never_resurrects_the_item(db_path: Path) -> None:
    """For 200 items, one thread forgets each while another (with its own connection)
    updates it, released together item by item. An update that loses raises
    ``NotFoundError`` and writes nothing: afterwards no item, revision or vector is left,
    and nothing is got, listed or recalled."""
    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=16)) as memory:
        ids = [
            r.id
            for r in memory.remember_many(
                [{"text": f"note {n} about tofu", "scope": SAM} for n in range(200)]
            )
        ]
    together = threading.Barrier(2, timeout=30)

    def forget_each() -> list[bool]:
        with Memory(SqliteStore(db_path), HashEmbedder(dimensions=16)) as memory:
            out = []
            for item_id in ids:
                together.wait()
                out.append(memory.forget(item_id))
            return out

    def update_each() -> list[str]:
        with Memory(SqliteStore(db_path), HashEmbedder(dimensions=16)) as memory:
            out = []
            for n, item_id in enumerate(ids):
                together.wait()
                try:  # a text update embeds and reads first: a wider window for the forget
                    if n % 2:
                        memory.update(item_id, text=f"note {n} rewritten about tofu")
                    else:
                        memory.update(item_id, metadata={"touched": n})
                    out.append("updated")
                except NotFoundError:
                    out.append("not found")
            return out

    def released(work: Callable[[], Any]) -> Any:
        try:
            return work()
        except BaseException:
            together.abort()  # fail now, not after the other thread's barrier timeout
            raise

    with ThreadPoolExecutor(2) as pool:
        forgotten = pool.submit(released, forget_each)
        updated = pool.submit(released, update_each)
        assert forgotten.result() == [True] * 200  # the item was there for every forget
        outcomes = updated.result()
    assert set(outcomes) <= {"updated", "not found"}

    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=16)) as memory:
        assert [memory.get(item_id) for item_id in ids] == [None] * 200
        assert memory.list(SAM, limit=1000) == []
        assert list(memory.recall("note rewritten about tofu", scopes=[SAM])) == []
    with plain(db_path) as conn:
        left = [
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("items", "item_revisions", "vectors")
        ]
    assert left == [0, 0, 0]


def test_eight_threads_share_one_memory_without_error_or_loss(db_path: Path) -> None:
    """Eight threads share ONE ``Memory(SqliteStore(file))`` for 320 mixed remember,
    update, recall and forget calls: none fails, every memory remembered and not
    forgotten is there with its last update, and nothing forgotten is."""
    memory = Memory(SqliteStore(db_path), HashEmbedder(dimensions=32))

    def work(thread: int) -> tuple[dict[str, tuple[str, dict[str, Any], int]], set[str]]:
        rng = random.Random(thread)
        scope = ("acme", "thread", str(thread))
        kept: dict[str, tuple[str, dict[str, Any], int]] = {}  # id -> text, metadata, revision
        forgotten: set[str] = set()
        for step in range(40):
            choice = rng.random()
            if choice < 0.35 or not kept:
                text = f"thread {thread} step {step} remembers tofu"
                rec = memory.remember(text, scope=scope, metadata={"step": step})
                kept[rec.id] = (rec.text, rec.metadata, rec.revision)
            elif choice < 0.65:
                item_id = rng.choice(sorted(kept))
                if rng.random() < 0.5:
                    text = f"thread {thread} step {step} rewrote tofu"
                    rec = memory.update(item_id, text=text)
                else:
                    rec = memory.update(item_id, metadata={"step": step})
                kept[item_id] = (rec.text, rec.metadata, rec.revision)
            elif choice < 0.85:
                hits = memory.recall("tofu", scopes=[scope], top_k=50)
                assert {h.memory.id for h in hits} <= set(kept)
            else:
                item_id = rng.choice(sorted(kept))
                assert memory.forget(item_id)
                del kept[item_id]
                forgotten.add(item_id)
        return kept, forgotten

    with memory, ThreadPoolExecutor(8) as pool:
        results = [f.result() for f in [pool.submit(work, t) for t in range(8)]]
        for thread, (kept, forgotten) in enumerate(results):
            scope = ("acme", "thread", str(thread))
            for item_id, (text, metadata, revision) in kept.items():
                got = memory.get(item_id)
                assert got is not None and (got.text, got.metadata, got.revision) == (
                    text,
                    metadata,
                    revision,
                )
            assert all(memory.get(item_id) is None for item_id in forgotten)
            assert {r.id for r in memory.list(scope, limit=1000)} == set(kept)
        assert memory.status().items == sum(len(kept) for kept, _ in results) > 0
        assert sum(len(forgotten) for _, forgotten in results) > 0


def test_a_store_closes_from_another_thread_and_then_refuses_calls(db_path: Path) -> None:
    """``close()`` works from a thread that did not open the store (no
    ``sqlite3.ProgrammingError``), waits for a running batch, and every call after it
    raises ``StoreError``; a store opened in a worker thread serves and closes in this one."""
    memory = Memory(SqliteStore(db_path), HashEmbedder(dimensions=16))
    kept = memory.remember("Sam is vegetarian", scope=SAM)
    reading = threading.Event()

    def read_until_closed() -> StoreError:
        while True:
            try:
                assert memory.get(kept.id) == kept
            except StoreError as exc:
                return exc
            reading.set()

    with ThreadPoolExecutor(2) as pool:
        reader = pool.submit(read_until_closed)
        assert reading.wait(10)
        pool.submit(memory.close).result()
        assert "closed" in str(reader.result(timeout=10))
    for call in (lambda: memory.get(kept.id), lambda: memory.remember("x", scope=SAM)):
        with pytest.raises(StoreError, match="closed"):
            call()
    memory.close()  # a second close is fine

    with ThreadPoolExecutor(1) as pool:
        opened = pool.submit(lambda: Memory(SqliteStore(db_path), HashEmbedder(dimensions=16)))
        elsewhere = opened.result()
    assert elsewhere.get(kept.id) == kept
    elsewhere.close()
    with pytest.raises(StoreError, match="closed"):
        elsewhere.get(kept.id)
