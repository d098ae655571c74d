"""SqliteStore behaviour that only a SQLite file can show, and the dialect's D1 limits."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import NOW, SPACE, blob, record, sha256, unit

from engramdb import (
    CorruptDataError,
    HashEmbedder,
    InMemoryStore,
    Memory,
    StoreError,
    ValidationError,
    _sqlite_dialect,
)
from engramdb._filter import parse_filter
from engramdb._lexical import BM25Index
from engramdb._sqlite_dialect import (
    MAX_PARAMS,
    MIGRATIONS,
    SqliteVectorCache,
    VersionSource,
    is_write,
    migration_statements,
    run_batch,
)
from engramdb._store import (
    DeleteItem,
    DeleteScope,
    FindVectors,
    GetItems,
    ListItems,
    Op,
    PendingTexts,
    PutItem,
    PutVector,
    RegisterSpace,
    SearchLexical,
    SearchVectors,
    Stats,
)
from engramdb._types import EmbeddingSpace, MemoryRecord
from engramdb.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
SAM = ("acme", "user", "sam")
KIM = ("acme", "user", "kim")


def put(rec: MemoryRecord, vector: tuple[float, ...]) -> list[Op]:
    """The ops Memory sends for one new item: its vector, then the item."""
    return [PutVector(SPACE.id, rec.content_sha256, blob(vector), NOW), PutItem(rec)]


def vector_count(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def store(db_path: Path) -> Any:
    with SqliteStore(db_path) as opened:
        opened.batch([RegisterSpace(SPACE, NOW)])
        yield opened


def test_a_file_store_uses_wal_foreign_keys_and_the_busy_timeout(db_path: Path) -> None:
    with SqliteStore(db_path, busy_timeout=2.5) as store:
        conn = store._conn
        assert conn is not None
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
        assert store.capabilities.durable
    with SqliteStore() as in_memory:
        assert not in_memory.capabilities.durable


def test_vectors_survive_reopening(db_path: Path) -> None:
    """Items and their vectors are on disk: a new process-level store finds them by meaning."""
    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=64)) as memory:
        kept = memory.remember("Sam is vegetarian", scope=SAM)
        memory.remember("Sam lives in Lisbon", scope=SAM)
    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=64)) as memory:
        hits = memory.recall("vegetarian", scopes=[SAM], mode="vector")
        assert hits[0].memory.id == kept.id
        assert hits[0].similarity is not None and hits[0].similarity > 0.5
        status = memory.status()
        assert (status.items, status.vectors, status.pending) == (2, 2, 0)
        assert status.schema_version == 1


def _other_process(db_path: Path, code: str) -> str:
    """Run ``code`` in a fresh Python process with ``memory`` open on ``db_path``."""
    script = (
        "import sys\n"
        "from engramdb import HashEmbedder, Memory\n"
        "from engramdb.sqlite import SqliteStore\n"
        f"memory = Memory(SqliteStore({str(db_path)!r}), HashEmbedder(dimensions=64))\n"
        f"{code}\n"
        "memory.close()\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "core"), str(ROOT / "drivers"), env.get("PYTHONPATH", "")]
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_another_processs_writes_are_seen_by_the_next_recall(db_path: Path) -> None:
    """The per-scope generation invalidates this process's vector cache."""
    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=64)) as memory:
        memory.remember("Sam is vegetarian", scope=SAM)
        first = memory.recall("Sam likes tofu", scopes=[SAM], mode="vector")
        assert [h.memory.text for h in first] == ["Sam is vegetarian"]  # cache now built

        new_id = _other_process(
            db_path, "print(memory.remember('Sam likes tofu', scope=('acme','user','sam')).id)"
        )
        second = memory.recall("Sam likes tofu", scopes=[SAM], mode="vector")
        assert second[0].memory.id == new_id
        assert second[0].similarity == pytest.approx(1.0)

        _other_process(db_path, f"assert memory.forget({new_id!r})")
        third = memory.recall("Sam likes tofu", scopes=[SAM], mode="vector")
        assert new_id not in [h.memory.id for h in third]


def test_vectors_without_items_are_garbage_collected(store: SqliteStore, db_path: Path) -> None:
    """A vector lives while some item has its hash: shared, replaced, deleted."""
    one = record(1, "shared text")
    two = record(2, "shared text", scope=KIM)
    three = record(3, "old text")
    store.batch([*put(one, (1, 0, 0, 0)), PutItem(two), *put(three, (0, 1, 0, 0))])
    assert vector_count(db_path) == 2

    store.batch([DeleteItem(one.id)])
    assert vector_count(db_path) == 2  # item two still uses "shared text"
    store.batch([DeleteScope(KIM)])
    assert vector_count(db_path) == 1

    updated = record(3, "new text", revision=2)
    store.batch([*put(updated, (0, 0, 1, 0))])
    (found,) = store.batch([FindVectors(SPACE.id, (sha256("old text"), sha256("new text")))])
    assert found == {sha256("new text")}
    assert vector_count(db_path) == 1


def test_lexical_ranking_equals_bm25index(store: SqliteStore) -> None:
    """FTS5 bm25() and the pure-Python BM25Index give the same order and scores."""
    corpus = [
        "The quick brown fox jumps over the lazy dog",
        "A fox and a dog became friends",
        "Running shoes for trail running",
        "She runs every morning before work",
        "Café crème and croissants in Paris",
        "The dog sleeps; the fox runs away",
        "Nothing here matches",
    ]
    index = BM25Index()
    ops: list[Op] = []
    for number, text in enumerate(corpus):
        rec = record(number, text)
        index.add(rec.id, text)
        ops.append(PutItem(rec))
    store.batch(ops)
    for query in ("fox dog", "running run", "cafe creme", "the", "zebra", "fox!"):
        (got,) = store.batch([SearchLexical((SAM,), query, 10, NOW)])
        expected = index.search(query, 10)
        assert [i for i, _ in got] == [i for i, _ in expected], query
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-9)


def test_ops_with_more_than_100_ids_or_scopes_are_chunked(store: SqliteStore) -> None:
    """D1 refuses more than 100 bound parameters; every op still answers completely."""
    scopes = [("tenant", str(n)) for n in range(150)]
    ops: list[Op] = []
    for number, scope in enumerate(scopes):
        rec = record(number, f"note number {number} about apples", scope=scope)
        ops += put(rec, (1, number / 150, 0, 0))
    store.batch(ops)
    ids = tuple(record(n, "").id for n in range(250))
    hashes = tuple(sha256(f"note number {n} about apples") for n in range(250))
    got, found, vector, lexical, filtered = store.batch(
        [
            GetItems(ids, NOW, SPACE.id),
            FindVectors(SPACE.id, hashes),
            SearchVectors(tuple(scopes), SPACE.id, unit((1, 0, 0, 0)), 200, NOW, exact=True),
            SearchLexical(tuple(scopes), "apples", 200, NOW),
            SearchVectors(
                tuple(scopes), SPACE.id, unit((1, 0, 0, 0)), 5, NOW,
                filter=parse_filter({"metadata": {"missing": 1}}),
            ),
        ]
    )  # fmt: skip
    assert [g is not None for g in got] == [True] * 150 + [False] * 100
    assert len(found) == 150
    assert len(vector) == 150 and vector[0][0] == record(0, "").id
    assert len(lexical) == 150
    assert filtered == []


def test_find_vectors_sends_hashes_in_json_chunks(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hashes go 10,000 to a statement as JSON; with a chunk of 7 all 30 are still found."""
    monkeypatch.setattr(_sqlite_dialect, "_HASHES_PER_STATEMENT", 7)
    records = [record(n, f"text {n}") for n in range(30)]
    store.batch([op for r in records for op in put(r, (1, 0, 0, 0))])
    asked = (*[r.content_sha256 for r in records], sha256("absent"), records[0].content_sha256)
    (found,) = store.batch([FindVectors(SPACE.id, asked)])
    assert found == frozenset(r.content_sha256 for r in records)


@pytest.mark.parametrize(
    "bad_blob",
    [b"\x00\x00\x80", b"\x00" * 12, bytes.fromhex("0000c07f") * 4, blob((1, 1, 1, 1))[:12]],
    ids=["odd-length", "wrong-dimensions", "nan", "short"],
)
def test_a_corrupt_vector_blob_raises_corrupt_data_error(
    store: SqliteStore, db_path: Path, bad_blob: bytes
) -> None:
    """A stored vector that does not decode never scores: the search raises."""
    rec = record(1, "Sam is vegetarian")
    store.batch(put(rec, (1, 0, 0, 0)))
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE vectors SET vector = ?", (bad_blob,))
    conn.commit()
    conn.close()
    # Another connection's write does not bump the generation: force a rebuild.
    store._cache.clear()
    with pytest.raises(CorruptDataError):
        store.batch([SearchVectors((SAM,), SPACE.id, unit((1, 0, 0, 0)), 5, NOW)])
    (items,) = store.batch([GetItems((rec.id,), NOW)])  # the store is still usable
    assert items[0] is not None


def test_a_failed_batch_changes_nothing(store: SqliteStore) -> None:
    """A batch is atomic: an error in a later op rolls back the earlier ones."""
    good = record(1, "kept only if all succeed")
    bad = replace(record(2, "NOT NULL fails inside SQLite"), content_sha256=None)
    with pytest.raises(StoreError):
        store.batch([*put(good, (1, 0, 0, 0)), PutItem(good), PutItem(bad)])
    (items, stats) = store.batch([GetItems((good.id,), NOW), Stats(SPACE.id, NOW)])
    assert items == [None]
    assert (stats.items, stats.vectors) == (0, 0)


def test_a_revision_beyond_64_bits_is_refused_not_rounded(store: SqliteStore) -> None:
    """SQLite would read 2**70 from JSON as a float; the plan refuses it instead."""
    with pytest.raises(ValidationError, match="revision=1180591620717411303424"):
        store.batch([PutItem(record(2, "too big", revision=2**70))])
    (items,) = store.batch([GetItems((record(2, "too big").id,), NOW)])
    assert items == [None]


def test_a_stored_text_with_nul_is_never_cut_by_a_rewrite(db_path: Path) -> None:
    """A row written before U+0000 was refused (by another tool, or an older build) is
    refused on rewrite with a clear error, and its text stays whole."""
    with Memory(SqliteStore(db_path), HashEmbedder()) as memory:
        kept = memory.remember("keep this part", scope=SAM)
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE items SET text = ? WHERE id = ?", ("keep\x00this part", kept.id))
    conn.commit()
    conn.close()
    with Memory(SqliteStore(db_path), HashEmbedder()) as memory:
        with pytest.raises(ValidationError, match="U\\+0000"):
            memory.update(kept.id, metadata={"note": "x"})
        got = memory.get(kept.id)
        assert got is not None and got.text == "keep\x00this part" and got.revision == 1
    with SqliteStore(db_path) as store, pytest.raises(ValidationError, match="U\\+0000"):
        store.batch([PutItem(record(9, "a\x00b"))])


async def test_abatch_runs_the_same_code(store: SqliteStore) -> None:
    rec = record(1, "Sam is vegetarian")
    assert await store.abatch(put(rec, (1, 0, 0, 0))) == [None, None]
    (items,) = await store.abatch([GetItems((rec.id,), NOW)])
    assert items[0].record == rec
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.abatch([Stats(SPACE.id, NOW)])


# --- the same answers as the in-memory store ---------------------------------------------

_WORDS = ["apple", "banana", "cherry", "dates", "elder", "fig", "grape", "honey"]
_META_VALUES: list[object] = [1, 1.0, 2, True, False, "1", "x", 0]


def _random_corpus(seed: int) -> list[Op]:
    rng = random.Random(seed)
    ops: list[Op] = []
    for number in range(60):
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 6)))
        expires = None
        if rng.random() < 0.25:
            expires = NOW + timedelta(minutes=rng.choice([-5, 5]))
        rec = record(
            number,
            text,
            scope=rng.choice([SAM, KIM, ("acme", "team")]),
            metadata={"k": rng.choice(_META_VALUES), "n": number % 3},
            labels={"tag": rng.sample(["red", "blue", "green"], rng.randint(0, 2))},
            expires_at=expires,
        )
        vector = unit(tuple(rng.uniform(-1, 1) for _ in range(4)))
        ops += [PutVector(SPACE.id, rec.content_sha256, blob(vector), NOW), PutItem(rec)]
    return ops


FILTERS: list[dict[str, Any] | None] = [
    None,
    {"metadata": {"k": 1}},
    {"metadata": {"k": True}},
    {"metadata": {"k": False}},
    {"metadata": {"k": "1"}},
    {"metadata": {"k": 0}},
    {"metadata": {"k": 1.0, "n": 1}},
    {"labels": {"tag": "red"}},
    {"labels": {"tag": "blue"}, "metadata": {"n": 2}},
    {"metadata": {"absent": "x"}},
]


def test_approximate_search_equals_the_in_memory_store_with_expiring_items(
    store: SqliteStore,
) -> None:
    """An item expiring next year makes the in-memory store search an eligible set while
    SQLite searches everything; the approximate candidates, and so the hits, agree."""
    space = EmbeddingSpace("test", "wide", 256)
    rng = random.Random(3)
    ops: list[Op] = [RegisterSpace(space, NOW)]
    for number in range(3000):
        later = NOW + timedelta(days=365) if number == 0 else None
        rec = record(number, f"note {number}", expires_at=later)
        vector = blob(tuple(rng.gauss(0, 1) for _ in range(256)))
        ops += [PutVector(space.id, rec.content_sha256, vector, NOW), PutItem(rec)]
    reference = InMemoryStore()
    reference.batch(ops)
    store.batch(ops)
    for _ in range(10):
        query = unit(tuple(rng.gauss(0, 1) for _ in range(256)))
        search = SearchVectors((SAM,), space.id, query, 10, NOW)
        assert store.batch([search]) == reference.batch([search])


@pytest.mark.parametrize("spec", FILTERS, ids=str)
@pytest.mark.parametrize("seed", [1, 2])
def test_searches_and_reads_equal_the_in_memory_store(
    store: SqliteStore, seed: int, spec: dict[str, Any] | None
) -> None:
    """Eligibility (scopes, expiry, filters by JSON type) and ranking agree exactly."""
    reference = InMemoryStore()
    corpus = [RegisterSpace(SPACE, NOW), *_random_corpus(seed)]
    reference.batch(corpus)
    store.batch(corpus)
    rng = random.Random(seed + 100)
    checked = parse_filter(spec)
    scopes = (SAM, ("acme", "team"))
    query = unit(tuple(rng.uniform(-1, 1) for _ in range(4)))
    ids = tuple(record(n, "").id for n in range(0, 70, 3))
    ops: list[Op] = [
        SearchVectors(scopes, SPACE.id, query, 7, NOW, exact=True, filter=checked),
        SearchVectors((KIM,), SPACE.id, query, 100, NOW, filter=checked),
        SearchLexical(scopes, "apple fig honey", 7, NOW, filter=checked),
        SearchLexical((KIM,), "banana", 100, NOW, filter=checked),
        GetItems(ids, NOW, SPACE.id),
        ListItems(SAM, 5, NOW),
        ListItems(KIM, 100, NOW, before=record(40, "").id),
        Stats(SPACE.id, NOW),
        FindVectors(SPACE.id, (sha256("apple"), sha256("nope"))),
    ]
    got = store.batch(ops)
    expected = reference.batch(ops)
    for op, mine, theirs in zip(ops, got, expected, strict=True):
        if isinstance(op, (SearchVectors, SearchLexical)):
            assert [i for i, _ in mine] == [i for i, _ in theirs], op
            assert [s for _, s in mine] == pytest.approx([s for _, s in theirs], rel=1e-6)
        elif isinstance(op, Stats):
            assert mine.items == theirs.items and mine.expired == theirs.expired
            assert (mine.scopes, mine.pending, mine.vectors) == (
                theirs.scopes, theirs.pending, theirs.vectors,
            )  # fmt: skip
        else:
            assert mine == theirs, op


def test_pending_texts_and_deletes_equal_the_in_memory_store(store: SqliteStore) -> None:
    reference = InMemoryStore()
    one, two, three = record(1, "a"), record(2, "b", scope=KIM), record(3, "a", scope=KIM)
    ops: list[Op] = [PutItem(one), PutItem(two), PutItem(three)]
    later: list[Op] = [
        PendingTexts(SPACE.id, 10),
        DeleteItem(one.id),
        DeleteItem(one.id),
        DeleteScope(KIM),
        PendingTexts(SPACE.id, 10),
    ]
    assert store.batch(ops) == reference.batch(ops)
    assert store.batch(later) == reference.batch(later)


# --- plans that a D1 driver can run ------------------------------------------------------


class _Recorder:
    """Runs dialect plans on sqlite3 and records what each yielded list contained."""

    def __init__(self, cache: SqliteVectorCache | None = None) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        for step in MIGRATIONS:
            for statement in migration_statements(step, VersionSource.TABLE):
                self.conn.execute(statement.sql, statement.params)
        self.cache = SqliteVectorCache() if cache is None else cache
        self.yields: list[list[Any]] = []

    def run(self, ops: list[Op], between: Callable[[list[Any]], None] | None = None) -> list[Any]:
        """Run ``ops``; call ``between(statements)`` before answering each yielded list."""
        plan = run_batch(ops, self.cache, schema_version=1)
        try:
            statements = next(plan)
            while True:
                self.yields.append(statements)
                if between is not None:
                    between(statements)
                statements = plan.send(
                    [self.conn.execute(s.sql, s.params).fetchall() for s in statements]
                )
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


_WRITE_SQL = ("INSERT", "UPDATE", "DELETE")


@pytest.fixture
def recorders() -> Iterator[Callable[..., _Recorder]]:
    """Make recorders; close their connections after the test."""
    made: list[_Recorder] = []

    def make(cache: SqliteVectorCache | None = None) -> _Recorder:
        made.append(_Recorder(cache))
        return made[-1]

    yield make
    for recorder in made:
        recorder.conn.close()


def test_plans_keep_every_write_in_one_list_within_d1_limits(
    recorders: Callable[..., _Recorder],
) -> None:
    """Each write batch is ONE yielded list; no statement binds over 100 params or NULL."""
    recorder = recorders()
    records = [record(n, f"text {n}", metadata={"n": n}) for n in range(120)]
    write_batches: list[list[Op]] = [
        [RegisterSpace(SPACE, NOW), *put(records[0], (1, 0, 0, 0))],
        [op for r in records[1:] for op in put(r, (1, 0, 0, 0))],
        [GetItems((records[5].id,), NOW), DeleteItem(records[5].id), DeleteScope(SAM)],
    ]
    for ops in write_batches:
        before = len(recorder.yields)
        recorder.run(ops)
        lists = recorder.yields[before:]
        with_writes = [s for s in lists if any(x.sql.startswith(_WRITE_SQL) for x in s)]
        assert len(with_writes) == 1
    recorder.run(
        [
            GetItems(tuple(r.id for r in records), NOW, SPACE.id),
            SearchVectors((SAM,), SPACE.id, unit((1, 0, 0, 0)), 5, NOW),
            SearchLexical((SAM,), "text", 5, NOW, parse_filter({"metadata": {"n": 1}})),
        ]
    )
    statements = [s for batch in recorder.yields for s in batch]
    assert max(len(s.params) for s in statements) <= MAX_PARAMS
    assert not any(p is None for s in statements for p in s.params)
    assert all(
        isinstance(p, (str, bytes, float)) or (isinstance(p, int) and abs(p) < 2**53)
        for s in statements
        for p in s.params
    )
    assert is_write(PutItem(records[0])) and not is_write(Stats(SPACE.id, NOW))


_AWKWARD = [
    'say "hi"',
    "back\\slash \\u0041",
    "tab\tnew\nline",
    "emoji 😀 é",
    '{"k": [1]}',
    "\u2028",
]


def test_puts_travel_as_json_payloads_and_every_field_comes_back(
    store: SqliteStore, recorders: Callable[..., _Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consecutive PutItems share JSON payloads of bounded size; nothing is altered."""
    monkeypatch.setattr(_sqlite_dialect, "_PUT_ITEMS_BYTES", 400)
    records = [
        record(
            n,
            f"{text} {n}",
            metadata={"q": text, "n": n},
            labels={"t": [text]},
            importance=n / 30,
            expires_at=NOW + timedelta(days=n + 1) if n % 2 else None,
            revision=n + 1,
        )
        for n, text in enumerate(_AWKWARD * 4)
    ]
    recorder = recorders()
    recorder.run([PutItem(r) for r in records])
    payloads = [s.params[0] for batch in recorder.yields for s in batch]
    assert len(payloads) > 3 and all(len(p.encode()) <= 400 for p in payloads)
    store.batch([PutItem(r) for r in records])
    (items,) = store.batch([GetItems(tuple(r.id for r in records), NOW)])
    assert [item.record for item in items] == records


def test_a_scope_is_loaded_in_pages_and_restarts_if_it_changes_meanwhile(
    recorders: Callable[..., _Recorder],
) -> None:
    """Pages bound memory and D1 response size; a write between pages forces a restart."""
    recorder = recorders(SqliteVectorCache(page_bytes=2 * 4 * 4))  # two vectors per page
    records = [record(n, f"text {n}") for n in range(5)]
    recorder.run([RegisterSpace(SPACE, NOW), *(op for r in records for op in put(r, (1, 0, 0, 0)))])
    late = record(9, "late text")
    late_ops = [PutVector(SPACE.id, late.content_sha256, blob((1, 0, 0, 0)), NOW), PutItem(late)]

    pages: list[str] = []

    def write_from_elsewhere(statements: list[Any]) -> None:
        page = statements[-1]
        if "items.id > ?" in page.sql:
            pages.append(page.params[2])
            if len(pages) == 2:  # between the first and the second page
                other = _Recorder.__new__(_Recorder)
                other.conn, other.cache, other.yields = recorder.conn, SqliteVectorCache(), []
                other.run(late_ops)

    (hits,) = recorder.run(
        [SearchVectors((SAM,), SPACE.id, unit((1, 0, 0, 0)), 10, NOW, exact=True)],
        write_from_elsewhere,
    )
    # pages: "", then after the 2nd id; the generation moved, so it restarted from "".
    assert pages[:3] == ["", records[1].id, ""]
    assert sorted(i for i, _ in hits) == sorted([r.id for r in records] + [late.id])
    generation = recorder.conn.execute("SELECT generation FROM scope_generations").fetchone()[0]
    assert recorder.cache.generation('["acme","user","sam"]', SPACE.id) == generation


def test_a_filter_too_big_for_one_statement_is_a_validation_error(store: SqliteStore) -> None:
    """Each string condition binds three parameters; 40 of them cannot fit in 100."""
    from engramdb import ValidationError

    spec = parse_filter({"metadata": {f"key{n}": "x" for n in range(40)}})
    for op in (
        SearchLexical((SAM,), "text", 5, NOW, spec),
        SearchVectors((SAM,), SPACE.id, unit((1, 0, 0, 0)), 5, NOW, filter=spec),
    ):
        with pytest.raises(ValidationError, match="at most 100"):
            store.batch([op])


def test_own_writes_patch_the_cache_and_foreign_writes_reload_it(db_path: Path) -> None:
    """remember/update/forget then recall reuse the cached scope; another process's
    write still forces a reload."""
    store = SqliteStore(db_path)
    with Memory(store, HashEmbedder(dimensions=64)) as memory:
        kept = memory.remember("Sam is vegetarian", scope=SAM)
        gone = memory.remember("Sam owns a bike", scope=SAM)
        memory.remember("Kim is vegan", scope=KIM)
        memory.recall("tofu", scopes=[SAM, KIM], mode="vector")
        loads = store._cache.loads
        assert loads == 2

        added = memory.remember_many(
            [{"text": "Sam likes tofu", "scope": SAM}, {"text": "Sam is vegetarian", "scope": SAM}]
        )
        memory.update(kept.id, text="Sam eats fish now")
        memory.forget(gone.id)
        memory.forget_scope(KIM)
        hits = memory.recall("Sam likes tofu", scopes=[SAM, KIM], mode="vector", top_k=10)
        assert store._cache.loads == loads  # nothing reloaded
        assert hits[0].memory.id == added[0].id
        assert {h.memory.id for h in hits} == {added[0].id, added[1].id, kept.id}
        with Memory(SqliteStore(db_path), HashEmbedder(dimensions=64)) as fresh:
            again = fresh.recall("Sam likes tofu", scopes=[SAM, KIM], mode="vector", top_k=10)
        assert [(h.memory.id, h.similarity) for h in again] == [
            (h.memory.id, h.similarity) for h in hits
        ]

        new_id = _other_process(
            db_path, "print(memory.remember('Sam cooks tofu', scope=('acme','user','sam')).id)"
        )
        after = memory.recall("Sam cooks tofu", scopes=[SAM], mode="vector")
        assert after[0].memory.id == new_id
        assert store._cache.loads == loads + 1  # the foreign write reloaded SAM


def _entry_state(cache: SqliteVectorCache) -> dict[tuple[str, str], Any]:
    state = {}
    for key, space in cache.cached():
        entry = cache._entries[(key, space)]
        index, d = entry.index, entry.index.dimensions
        vectors = {
            k: (index._flat[p * d : (p + 1) * d].tobytes(), index._u8[p * d : (p + 1) * d])
            for k, p in index._positions.items()
        }
        state[(key, space)] = (entry.generation, vectors, dict(entry.expiring))
    return state


def test_patched_cache_entries_equal_freshly_loaded_ones(
    recorders: Callable[..., _Recorder],
) -> None:
    """Random write batches: the patched cache equals one rebuilt from the database."""
    rng = random.Random(11)
    recorder = recorders()
    scopes = [SAM, KIM, ("acme", "user", "lee")]
    texts = [f"text {n}" for n in range(12)]
    items: dict[str, MemoryRecord] = {}
    recorder.run([RegisterSpace(SPACE, NOW)])
    search = [SearchVectors((s,), SPACE.id, unit((1, 0, 0, 0)), 50, NOW) for s in scopes]
    reused = 0
    for round_ in range(40):
        ops: list[Op] = []
        for _ in range(rng.randint(1, 6)):
            choice = rng.random()
            text = rng.choice(texts)
            vector = tuple(rng.uniform(-1, 1) for _ in range(4))
            if choice < 0.45:  # put an item (new, or replace one in its own scope)
                if items and rng.random() < 0.4:
                    old = items[rng.choice(sorted(items))]
                    rec = record(int(old.id[3:]), text, old.scope, revision=old.revision + 1)
                else:
                    expires = NOW + timedelta(days=1) if rng.random() < 0.3 else None
                    rec = record(
                        round_ * 10 + len(ops), text, rng.choice(scopes), expires_at=expires
                    )
                items[rec.id] = rec
                if rng.random() < 0.7:
                    ops.append(PutVector(SPACE.id, rec.content_sha256, blob(vector), NOW))
                ops.append(PutItem(rec))
            elif choice < 0.65:  # a vector alone: pending items of that text gain it
                ops.append(PutVector(SPACE.id, sha256(text), blob(vector), NOW))
            elif choice < 0.9 and items:
                ops.append(DeleteItem(items.pop(rng.choice(sorted(items))).id))
            else:
                scope = rng.choice(scopes)
                items = {i: r for i, r in items.items() if r.scope != scope}
                ops.append(DeleteScope(scope))
        loads = recorder.cache.loads
        recorder.run(ops)
        patched = _entry_state(recorder.cache)
        recorder.run(search)
        assert recorder.cache.loads - loads <= len(scopes) - len(patched)  # no reloads
        reused += len(patched)
        fresh = recorders()
        fresh.conn.close()
        fresh.conn = recorder.conn
        fresh.run(search)
        rebuilt = _entry_state(fresh.cache)
        fresh.conn = sqlite3.connect(":memory:")
        for key in patched:
            assert patched[key] == rebuilt[key], (round_, key)
    assert reused > 40
