"""Concurrency: processes and threads writing and recalling one SQLite file at once.

Writers remember items with their own ids and rewrite earlier ones to their next
revision (``expected_revision``), while readers recall random words and check every hit
(conc_workers.problems_of): its text is the text of exactly its id and revision, its
evidence names that id, revision and the text's sha256, and its similarity is the cosine
of the query and the text as the same embedder computes them. No error of any kind may
escape a call (a ``database is locked`` would be a ``StoreError``), no hit may be torn,
and afterwards every item is there at its last revision.

The figures (operations, recalls, hits checked, errors) are printed for
docs/reliability.md; run with ``-s`` to see them.
"""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from conc_workers import PROCESS_WORKER, SCOPE, embedder, problems_of, read, text_of, write
from sqlite_helpers import race

from engramdb import Memory
from engramdb._base.types import content_sha256
from engramdb.sqlite import SqliteStore

WRITER_PROCESSES, READER_PROCESSES, ITEMS_PER_PROCESS = 4, 2, 500
WRITER_THREADS, READER_THREADS, ITEMS_PER_THREAD = 6, 2, 100


def assert_all_there(db_path: Path, writers: list[dict[str, Any]], expected_items: int) -> None:
    """Every item each writer remembered is stored at the last revision it wrote, with
    that revision's text, and nothing else is in the scope."""
    last = {item: rev for w in writers for item, rev in w["revisions"].items()}
    assert len(last) == expected_items
    with Memory(SqliteStore(db_path), embedder()) as memory:
        got = {item: memory.get(item) for item in last}
        assert memory.status().items == expected_items
    stored = {item: r and (r.scope, r.text, r.revision) for item, r in got.items()}
    assert stored == {item: (SCOPE, text_of(item, rev), rev) for item, rev in last.items()}


def report(what: str, writers: list[dict[str, Any]], readers: list[dict[str, Any]]) -> None:
    figures = {
        "operations": sum(w["operations"] for w in writers),
        "recalls": sum(r["recalls"] for r in readers),
        "hits checked": sum(r["hits"] for r in readers),
        "similarities checked": sum(r["similarities"] for r in readers),
        "errors": sum(len(x["errors"]) for x in writers + readers),
        "torn hits": sum(len(r["problems"]) for r in readers),
        "slowest write step (s)": round(max(w["slowest"] for w in writers), 2),
    }
    print(f"\n{what}: {json.dumps(figures)}")


def test_the_hit_check_catches_each_kind_of_torn_hit(tmp_path: Path) -> None:
    """The check the readers run finds nothing wrong in a real hit, and one problem in
    each forged one: a revision, an evidence revision, a sha256, a text or a similarity
    that belongs to another revision."""
    with Memory(SqliteStore(tmp_path / "memory.db"), embedder()) as memory:
        memory.remember(text_of("x-1", 1), SCOPE, id="x-1")
        memory.update("x-1", text=text_of("x-1", 2))
        (hit,) = memory.recall(text_of("x-1", 2).split(": ")[1], [SCOPE])
    query, check = text_of("x-1", 2).split(": ")[1], embedder()
    old_text = text_of("x-1", 1)
    old = dataclasses.replace(hit.memory, text=old_text, content_sha256=content_sha256(old_text))
    forged = [
        dataclasses.replace(hit, memory=dataclasses.replace(hit.memory, revision=1)),
        dataclasses.replace(hit, evidence={**hit.evidence, "revision": 1}),
        dataclasses.replace(hit, evidence={**hit.evidence, "content_sha256": old.content_sha256}),
        dataclasses.replace(hit, memory=old),
        dataclasses.replace(hit, similarity=(hit.similarity or 0) - 0.01),
    ]
    assert problems_of(hit, query, check) == []
    assert [len(problems_of(h, query, check)) >= 1 for h in forged] == [True] * 5


def test_writer_and_reader_processes_share_one_file_without_error_or_torn_hit(
    tmp_path: Path, long_factor: int
) -> None:
    """4 writer processes each remember 500 items (x10 with --long) and rewrite every
    second one's text, while 2 reader processes recall until the writers are done: no
    call raises (no ``database is locked``), every hit the readers saw is one consistent
    revision, and every item is there at its last revision."""
    db_path = tmp_path / "memory.db"
    Memory(SqliteStore(db_path), embedder()).close()  # migrated before the race
    count = ITEMS_PER_PROCESS * long_factor
    outputs = race(
        tmp_path,
        PROCESS_WORKER,
        [str(db_path), str(WRITER_PROCESSES), str(count)],
        workers=WRITER_PROCESSES + READER_PROCESSES,
        timeout=120 * long_factor,
    )
    results = [json.loads(out) for out in outputs]
    writers, readers = results[:WRITER_PROCESSES], results[WRITER_PROCESSES:]
    report("processes", writers, readers)

    assert [x["errors"] for x in writers + readers] == [[]] * len(results)
    assert [r["problems"] for r in readers] == [[]] * READER_PROCESSES
    assert [w["operations"] for w in writers] == [count + count // 2] * WRITER_PROCESSES
    assert all(r["recalls"] > 0 and r["similarities"] > 0 for r in readers)
    assert_all_there(db_path, writers, WRITER_PROCESSES * count)


def test_eight_threads_share_one_memory_without_error_or_torn_hit(
    tmp_path: Path, long_factor: int
) -> None:
    """8 threads share ONE ``Memory(SqliteStore(file))``: 6 remember 100 items each (x10
    with --long) and rewrite every second one's text, 2 recall until the writers are
    done. No call raises, every hit is one consistent revision, every item is there at its
    last revision."""
    db_path = tmp_path / "memory.db"
    count = ITEMS_PER_THREAD * long_factor
    memory = Memory(SqliteStore(db_path), embedder())
    with memory, ThreadPoolExecutor(WRITER_THREADS + READER_THREADS) as pool:
        writes = [pool.submit(write, memory, f"t{n}", count, seed=n) for n in range(WRITER_THREADS)]
        reads = [
            pool.submit(read, memory, lambda: all(f.done() for f in writes), 100 + n)
            for n in range(READER_THREADS)
        ]
        writers = [f.result() for f in writes]
        readers = [f.result() for f in reads]
    report("threads", writers, readers)

    assert [x["errors"] for x in writers + readers] == [[]] * len(writers + readers)
    assert [r["problems"] for r in readers] == [[]] * READER_THREADS
    assert [w["operations"] for w in writers] == [count + count // 2] * WRITER_THREADS
    assert all(r["recalls"] > 0 and r["similarities"] > 0 for r in readers)
    assert_all_there(db_path, writers, WRITER_THREADS * count)
