"""SqliteStore behaviour that only a SQLite file can show, and the dialect's D1 limits.

What every store must do (op semantics, equality with ``InMemoryStore``) is the
conformance suite's; here is what is SQLite's own: the file's settings, its triggers
(vector garbage collection, per-scope generations, the full-text index), the vector
cache over them, what leaves the file on forget, and plans a D1 driver can run.
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import (
    KIM,
    NOW,
    SAM,
    SPACE,
    Recorder,
    blob,
    other_process,
    plain,
    put,
    record,
    sha256,
    unit,
)

from engramdb import (
    HashEmbedder,
    InMemoryStore,
    Memory,
    StoreError,
    ValidationError,
)
from engramdb._base.types import scope_key
from engramdb._lexical.bm25 import BM25Index
from engramdb._vectors.index_data import INDEX_DATA_VERSION
from engramdb.sqlite import SqliteStore
from engramdb.store import (
    DeleteItem,
    DeleteItems,
    FindVectors,
    GetItems,
    ListItems,
    ListScopes,
    Op,
    PatchItem,
    PutItem,
    PutVector,
    RegisterSpace,
    ScopeSet,
    SearchLexical,
    SearchVectors,
    Stats,
)
from engramdb.store._filter import parse_filter
from engramdb.store._sqlite import MAX_PARAMS, SqliteVectorCache, reads, writes
from engramdb.store._sqlite.filters import MAX_FILTER_SQL_BYTES, filter_sql
from engramdb.store._sqlite.schema import HEAD_VERSION
from engramdb.validate import Validator

_WRITE_SQL = ("INSERT", "UPDATE", "DELETE")


def vector_count(path: Path) -> int:
    with plain(path) as conn:
        return int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(db_path) as opened:
        opened.batch([RegisterSpace(SPACE, NOW)])
        yield opened


@pytest.fixture
def recorders() -> Iterator[Callable[..., Recorder]]:
    """Make recorders; close their connections after the test."""
    made: list[Recorder] = []

    def make(cache: SqliteVectorCache | None = None) -> Recorder:
        made.append(Recorder(cache))
        return made[-1]

    yield make
    for recorder in made:
        recorder.conn.close()


def write_lists(yields: list[list[Any]]) -> list[list[Any]]:
    """The yielded statement lists that hold a write."""
    return [batch for batch in yields if any(s.sql.startswith(_WRITE_SQL) for s in batch)]


# --- the file ----------------------------------------------------------------------------


def test_a_file_store_turns_on_wal_after_migrating_with_its_connection_settings(
    db_path: Path,
) -> None:
    """A file switches to WAL only once migrated; the connection has foreign keys, the
    busy timeout and secure_delete (on unless asked otherwise); the store is durable and
    thread-safe."""
    db_path.touch()  # migrate=False opens only an existing file
    with SqliteStore(db_path, migrate=False, busy_timeout=2.5) as store:
        conn = store._conn
        assert conn is not None
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
        assert store.migrate() == HEAD_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
        assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
        assert conn.execute("PRAGMA mmap_size").fetchone()[0] == 1 << 30
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 8192  # a new file
        assert store.capabilities.durable and store.capabilities.thread_safe
    with plain(db_path) as other:  # WAL is a property of the file
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with SqliteStore(db_path, secure_delete=False) as store:
        assert store._conn is not None
        assert store._conn.execute("PRAGMA secure_delete").fetchone()[0] == 0
    with SqliteStore() as in_memory:
        assert not in_memory.capabilities.durable and in_memory.capabilities.thread_safe


def test_vectors_survive_reopening(db_path: Path) -> None:
    """Items and their vectors are on disk: a new store object finds them by meaning."""
    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=64)) as memory:
        kept = memory.remember("Sam is vegetarian", scope=SAM)
        memory.remember("Sam lives in Lisbon", scope=SAM)
    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=64)) as memory:
        hits = memory.recall("vegetarian", scopes=[SAM], mode="vector")
        assert hits[0].memory == kept
        assert hits[0].similarity is not None and hits[0].similarity > 0.5
        status = memory.status()
        assert (status.items, status.vectors, status.pending) == (2, 2, 0)
        assert status.schema_version == HEAD_VERSION


def test_another_processs_writes_are_seen_by_the_next_recall(db_path: Path) -> None:
    """The per-scope generation, bumped by triggers in any process, invalidates this
    process's vector cache: an added item is found, a forgotten one is not."""
    with Memory(SqliteStore(db_path), HashEmbedder(dimensions=64)) as memory:
        memory.remember("Sam is vegetarian", scope=SAM)
        first = memory.recall("Sam likes tofu", scopes=[SAM], mode="vector")
        assert [h.memory.text for h in first] == ["Sam is vegetarian"]  # cache now built

        new_id = other_process(
            db_path, f"print(memory.remember('Sam likes tofu', scope={SAM!r}).id)"
        )
        second = memory.recall("Sam likes tofu", scopes=[SAM], mode="vector")
        assert second[0].memory.id == new_id
        assert second[0].similarity == pytest.approx(1.0)

        other_process(db_path, f"assert memory.forget({new_id!r})")
        third = memory.recall("Sam likes tofu", scopes=[SAM], mode="vector")
        assert [h.memory.text for h in third] == ["Sam is vegetarian"]


def test_vectors_without_items_are_garbage_collected(store: SqliteStore, db_path: Path) -> None:
    """A vector lives while some item has its hash: shared, deleted, replaced, patched."""
    one = record(1, "shared text")
    two = record(2, "shared text", scope=KIM)
    three = record(3, "old text")
    store.batch([*put(one, (1, 0, 0, 0)), PutItem(two, NOW), *put(three, (0, 1, 0, 0))])
    assert vector_count(db_path) == 2

    store.batch([DeleteItem(one.id)])
    assert vector_count(db_path) == 2  # item two still uses "shared text"
    store.batch([DeleteItems(ScopeSet.of(KIM))])
    assert vector_count(db_path) == 1

    store.batch([*put(record(3, "new text"), (0, 0, 1, 0))])  # the next revision of three
    (found,) = store.batch([FindVectors(SPACE.id, (sha256("old text"), sha256("new text")))])
    assert found == {sha256("new text")}
    assert vector_count(db_path) == 1

    store.batch(
        [
            PutVector(SPACE.id, sha256("newer text"), blob((0, 0, 0, 1)), NOW),
            PatchItem(three.id, NOW, text="newer text"),
        ]
    )
    (found,) = store.batch([FindVectors(SPACE.id, (sha256("new text"), sha256("newer text")))])
    assert found == {sha256("newer text")}
    assert vector_count(db_path) == 1


def _stored(store: SqliteStore, texts: list[str]) -> BM25Index:
    """Put ``texts`` in Sam's scope; return a BM25Index of the same items."""
    index = BM25Index()
    records = [record(number, text) for number, text in enumerate(texts)]
    for rec in records:
        index.add(rec.id, rec.text)
    store.batch([PutItem(rec, NOW) for rec in records])
    return index


def test_sql_bm25_equals_the_pure_python_bm25index(store: SqliteStore) -> None:
    """The SQL stores' BM25 (over the full-text index's term occurrences) and BM25Index
    give the same order and the same scores for a scope's items."""
    corpus = [
        "The quick brown fox jumps over the lazy dog",
        "A fox and a dog became friends",
        "Running shoes for trail running",
        "She runs every morning before work",
        "Café crème and croissants in Paris",
        "The dog sleeps; the fox runs away",
        "Nothing here matches",
    ]
    index = _stored(store, corpus)
    for query in ("fox dog", "running run", "cafe creme", "the", "zebra", "fox!"):
        (got,) = store.batch([SearchLexical(ScopeSet.of(SAM), query, 10, NOW)])
        expected = index.search(query, 10)
        assert [h.record.id for h in got.hits] == [i for i, _ in expected], query
        assert [h.score for h in got.hits] == pytest.approx([s for _, s in expected], rel=1e-9)
    assert index.search("fox dog", 10)  # the comparison is not between two empty lists


HOSTILE = [
    'say "hello',
    '"" OR ""',
    "a AND b OR NOT c",
    "NEAR(a b, 2)",
    "near/3",
    "pre* *",
    "^start",
    "-minus +plus",
    "body: injected",
    "{text} : x",
    "(unbalanced",
    "a) OR (b",
    "'single' \"double\" `back`",
    "col:name rowid:5",
    "日本語 AND 東京",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_query_text_is_never_read_as_fts5_syntax(store: SqliteStore, text: str) -> None:
    """Query terms travel as one bound JSON value, so FTS5 operators, quotes and column
    filters in a query are words: the search answers as BM25Index does."""
    corpus = ["and or not near start minus body x", "text injected single double back name"]
    index = _stored(store, corpus)
    (got,) = store.batch([SearchLexical(ScopeSet.of(SAM), text, 10, NOW)])
    assert [h.record.id for h in got.hits] == [i for i, _ in index.search(text, 10)]


# --- plans a D1 driver can run -----------------------------------------------------------


def test_long_id_lists_and_many_scopes_answer_completely_within_d1_limits(
    recorders: Callable[..., Recorder],
) -> None:
    """150 scopes and 250 ids travel as JSON: every op answers completely, no statement
    binds more than MAX_PARAMS parameters or a None, and every write of a batch is in
    ONE yielded list (one D1 ``batch()``)."""
    recorder = recorders()
    scopes = tuple(("tenant", str(n)) for n in range(150))
    everything = ScopeSet(exact=scopes)
    ops: list[Op] = [RegisterSpace(SPACE, NOW)]
    for number, scope in enumerate(scopes):
        rec = record(number, f"note number {number} about apples", scope=scope)
        ops += put(rec, (1, number / 150, 0, 0))
    recorder.run(ops)
    assert len(write_lists(recorder.yields)) == 1

    ids = tuple(record(n, "").id for n in range(250))
    hashes = tuple(sha256(f"note number {n} about apples") for n in range(250))
    query = unit((1, 0, 0, 0))
    got, found, vector, lexical, filtered, listed, prefixed, scope_counts = recorder.run(
        [
            GetItems(ids, NOW, SPACE.id),
            FindVectors(SPACE.id, hashes),
            SearchVectors(everything, SPACE.id, query, 200, NOW, exact=True),
            SearchLexical(everything, "apples", 200, NOW, space_id=SPACE.id),
            SearchVectors(
                everything, SPACE.id, query, 5, NOW, filter=parse_filter({"metadata": {"x": 1}})
            ),
            ListItems(everything, 1000, NOW),
            ListItems(ScopeSet(prefixes=(("tenant",),)), 1000, NOW),
            ListScopes((), 1000, NOW),
        ]
    )
    assert [g is not None for g in got] == [True] * 150 + [False] * 100
    assert all(g.embedded_at == NOW for g in got if g is not None)
    assert found == frozenset(hashes[:150])
    assert len(vector.hits) == 150 and vector.hits[0].record.id == ids[0]
    assert len(lexical.hits) == 150 and all(h.embedded_at == NOW for h in lexical.hits)
    assert filtered.hits == ()
    assert len(listed) == len(prefixed) == 150
    assert [c.scope for c in scope_counts] == sorted(scopes)

    writes: list[Op] = [
        *put(record(500, "one more note about apples", scope=scopes[7]), (0, 1, 0, 0)),
        PatchItem(ids[3], NOW, text="note three, rewritten"),
        PatchItem(ids[4], NOW, metadata={"n": 4}),
        DeleteItem(ids[5]),
        DeleteItems(ScopeSet(exact=scopes[100:])),
        DeleteItems(ScopeSet(prefixes=(("tenant", "9"),))),
    ]
    before = len(recorder.yields)
    *_, deleted, deleted_by_prefix = recorder.run(writes)
    assert (deleted, deleted_by_prefix) == (50, 1)
    assert len(write_lists(recorder.yields[before:])) == 1

    statements = recorder.statements()
    assert max(len(s.params) for s in statements) <= MAX_PARAMS
    assert not any(p is None for s in statements for p in s.params)
    assert all(
        isinstance(p, str | bytes | float) or (isinstance(p, int) and abs(p) < 2**53)
        for s in statements
        for p in s.params
    )


def test_find_vectors_sends_hashes_in_json_chunks(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hashes go 10,000 to a statement as JSON; with a chunk of 7 all 30 are still found."""
    monkeypatch.setattr(reads, "_HASHES_PER_STATEMENT", 7)
    records = [record(n, f"text {n}") for n in range(30)]
    store.batch([op for r in records for op in put(r, (1, 0, 0, 0))])
    asked = (*[r.content_sha256 for r in records], sha256("absent"), records[0].content_sha256)
    (found,) = store.batch([FindVectors(SPACE.id, asked)])
    assert found == frozenset(r.content_sha256 for r in records)


_AWKWARD = [
    'say "hi"',
    "back\\slash \\u0041",
    "tab\tnew\nline",
    "emoji 😀 é",
    '{"k": [1]}',
    "\u2028",
]


def test_puts_travel_as_json_payloads_of_bounded_size_and_every_field_comes_back(
    store: SqliteStore, recorders: Callable[..., Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consecutive PutItems share JSON payloads of at most ``_PUT_BYTES`` bytes; every
    field of every record comes back unaltered."""
    limit = 800
    monkeypatch.setattr(writes, "_PUT_BYTES", limit)
    records = [
        record(
            n,
            f"{text} {n}",
            metadata={"q": text, "n": n, "f": n / 7, "nested": {"l": [text, None, True]}},
            labels={"t": [text]},
            importance=n / 30,
            expires_at=NOW + timedelta(days=n + 1) if n % 2 else None,
            revision=n + 1,
        )
        for n, text in enumerate(_AWKWARD * 4)
    ]
    recorder = recorders()
    stored = recorder.run([PutItem(r, NOW) for r in records])
    assert stored == records
    payloads = [
        s.params[0] for s in recorder.statements() if s.sql.startswith("INSERT INTO items ")
    ]
    sizes = [len(p.encode("utf-8")) for p in payloads]
    assert 3 < len(payloads) < len(records) and max(sizes) <= limit, sizes
    assert len(write_lists(recorder.yields)) == 1

    store.batch([PutItem(r, NOW) for r in records])
    (items,) = store.batch([GetItems(tuple(r.id for r in records), NOW)])
    assert [item.record for item in items] == records


def test_a_scope_is_loaded_in_pages_and_restarts_if_it_changes_meanwhile(
    recorders: Callable[..., Recorder],
) -> None:
    """Pages bound memory and D1's response size; a write between two pages (seen as a
    new generation) starts the scope's load over, so the entry is one snapshot."""
    recorder = recorders(SqliteVectorCache(page_bytes=2 * 5 * SPACE.dimensions))  # 2 a page
    records = [record(n, f"text {n}") for n in range(5)]
    recorder.run([RegisterSpace(SPACE, NOW), *(op for r in records for op in put(r, (1, 0, 0, 0)))])
    late = record(9, "late text")

    pages: list[str] = []

    def write_from_elsewhere(statements: list[Any]) -> None:
        page = statements[-1]
        if "items.id > ?" in page.sql:
            pages.append(page.params[2])
            if len(pages) == 2:  # between the first and the second page
                Recorder(conn=recorder.conn).run(put(late, (1, 0, 0, 0)))

    (result,) = recorder.run(
        [SearchVectors(ScopeSet.of(SAM), SPACE.id, unit((1, 0, 0, 0)), 10, NOW, exact=True)],
        write_from_elsewhere,
    )
    # pages: "", then after the 2nd id; the generation moved, so it restarted from "".
    assert pages[:3] == ["", records[1].id, ""]
    assert sorted(h.record.id for h in result.hits) == sorted([r.id for r in records] + [late.id])
    (generation,) = recorder.conn.execute("SELECT generation FROM scope_generations").fetchone()
    assert recorder.cache.generation(scope_key(SAM), SPACE.id) == generation


def test_a_failed_batch_changes_nothing(store: SqliteStore) -> None:
    """A batch is atomic: a NOT NULL failure inside SQLite, after good ops, rolls back the
    vector, the item and its new revision written before it."""
    good = record(1, "kept only if all succeed")
    store.batch(put(good, (1, 0, 0, 0)))
    bad = replace(record(2, "NOT NULL fails inside SQLite"), content_sha256=None)
    newer = record(1, "a second revision")
    with pytest.raises(StoreError):
        store.batch([*put(newer, (0, 1, 0, 0)), PutItem(bad, NOW)])
    items, stats = store.batch([GetItems((good.id, bad.id), NOW), Stats(SPACE.id, NOW)])
    assert [i.record if i else None for i in items] == [good, None]
    assert (stats.items, stats.vectors) == (1, 1)


def test_a_revision_beyond_64_bits_is_refused_not_rounded(store: SqliteStore) -> None:
    """SQLite would read 2**70 from JSON as a float; the plan refuses it instead."""
    with pytest.raises(ValidationError, match="revision=1180591620717411303424"):
        store.batch([PutItem(record(2, "too big", revision=2**70), NOW)])
    (items,) = store.batch([GetItems((record(2, "too big").id,), NOW)])
    assert items == [None]


def test_a_put_text_with_nul_is_refused_not_cut(store: SqliteStore) -> None:
    """json_extract would end a text at U+0000: the plan refuses it, naming the item."""
    bad = record(9, "a\x00b")
    with pytest.raises(ValidationError, match=r"U\+0000"):
        store.batch([PutItem(record(8, "fine"), NOW), PutItem(bad, NOW)])
    (items,) = store.batch([GetItems((record(8, "").id, bad.id), NOW)])
    assert items == [None, None]


def test_a_metadata_update_keeps_a_stored_nul_text_whole(db_path: Path) -> None:
    """A text holding U+0000 (written by another tool with plain sqlite3) does not block
    a metadata update: only the metadata is patched, in SQL, so the text stays whole in
    the item and in the revision the update kept."""
    with Memory(SqliteStore(db_path), HashEmbedder()) as memory:
        kept = memory.remember("keep this part", scope=SAM)
    with plain(db_path) as conn:
        conn.execute("UPDATE items SET text = ? WHERE id = ?", ("keep\x00this part", kept.id))
    with Memory(SqliteStore(db_path), HashEmbedder()) as memory:
        updated = memory.update(kept.id, metadata={"note": "x"})
        assert (updated.text, updated.revision, updated.metadata) == (
            "keep\x00this part",
            2,
            {"note": "x"},
        )
        assert memory.get(kept.id) == updated
        assert [r.text for r in memory.history(kept.id)] == ["keep\x00this part"]


async def test_abatch_runs_the_same_code_and_a_closed_store_raises(store: SqliteStore) -> None:
    """abatch answers as batch; after (a second) close every call raises StoreError."""
    rec = record(1, "Sam is vegetarian")
    assert await store.abatch(put(rec, (1, 0, 0, 0))) == [None, rec]
    (items,) = await store.abatch([GetItems((rec.id,), NOW)])
    assert items[0].record == rec
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.abatch([Stats(SPACE.id, NOW)])
    with pytest.raises(StoreError, match="closed"):
        store.batch([Stats(SPACE.id, NOW)])


# --- filters -----------------------------------------------------------------------------


def _largest_filter() -> dict[str, Any]:
    """A filter at the default limits, shaped for the longest SQL: 256 ``$ne`` conditions
    (the size limit; each is a whole CASE expression under a NOT) whose keys are padded
    with quotes (doubled in SQL, and written twice per condition) as far as the 8 KiB
    JSON limit allows."""
    validator = Validator()
    best: dict[str, Any] = {}
    for pad in range(64):
        spec = {"metadata": {f"k{n:03d}" + "'" * pad: {"$ne": ""} for n in range(256)}}
        try:
            validator.filter(spec)
        except ValidationError:
            break
        best = spec
    return best


def test_the_largest_filter_binds_no_parameter_and_answers_like_the_in_memory_store(
    store: SqliteStore, recorders: Callable[..., Recorder]
) -> None:
    """The biggest filter ``Memory`` accepts is SQL literals only, well under
    MAX_FILTER_SQL_BYTES, and selects what ``Filter.matches`` selects."""
    spec = _largest_filter()
    checked = Validator().filter(spec)
    assert checked is not None
    size = len(filter_sql(checked).encode("utf-8"))
    assert 50_000 < size < MAX_FILTER_SQL_BYTES
    keys = sorted(spec["metadata"])

    corpus: list[Op] = [RegisterSpace(SPACE, NOW)]
    for n in range(30):
        metadata = {keys[n * 7 % 256]: "" if n % 3 == 0 else "w", "n": n}
        corpus += put(record(n, f"apples and pears {n}", metadata=metadata), (1, n, 0, 0))
    reference = InMemoryStore()
    reference.batch(corpus)
    store.batch(corpus)

    def reads(spec_: Any) -> list[Op]:
        return [
            ListItems(ScopeSet.of(SAM), 100, NOW, filter=spec_),
            SearchLexical(ScopeSet.of(SAM), "apples", 100, NOW, spec_),
            SearchVectors(ScopeSet.of(SAM), SPACE.id, unit((1, 1, 0, 0)), 100, NOW, True, spec_),
        ]

    mine, theirs = store.batch(reads(checked)), reference.batch(reads(checked))
    assert len(mine[0]) == 20 and mine[0] == theirs[0]
    for got, expected in zip(mine[1:], theirs[1:], strict=True):
        assert [h.record for h in got.hits] == [h.record for h in expected.hits]
        assert [h.score for h in got.hits] == pytest.approx([h.score for h in expected.hits])
    forget = [DeleteItems(ScopeSet.of(SAM), checked), ListItems(ScopeSet.of(SAM), 100, NOW)]
    mine, theirs = store.batch(forget), reference.batch(forget)
    assert mine == theirs and mine[0] == 20 and len(mine[1]) == 10

    filtered, unfiltered = recorders(), recorders()
    for recorder, spec_ in ((filtered, checked), (unfiltered, None)):
        for ops in (corpus, reads(spec_), [DeleteItems(ScopeSet.of(SAM), spec_)]):
            recorder.run(ops)
    pairs = list(zip(filtered.statements(), unfiltered.statements(), strict=True))
    assert any(a.sql != b.sql for a, b in pairs)  # the filter is in the SQL ...
    assert [len(a.params) for a, _ in pairs] == [len(b.params) for _, b in pairs]  # ... only
    with_filter = [a for a, b in pairs if a.sql != b.sql]
    assert not any(isinstance(p, str) and "k000" in p for a in with_filter for p in a.params)


def _too_big_filter() -> Any:
    """A filter whose SQL is over MAX_FILTER_SQL_BYTES (past ``Memory``'s limits)."""
    spec = {"metadata": {f"key{n:04d}": {"$ne": "x" * 40} for n in range(600)}}
    checked = parse_filter(spec, max_size=10_000)
    assert checked is not None and len(filter_sql(checked).encode()) > MAX_FILTER_SQL_BYTES
    return checked


@pytest.mark.parametrize("kind", ["list", "lexical", "vector", "delete", "read-after-search"])
def test_a_filter_over_the_sql_limit_is_refused_before_anything_runs(
    store: SqliteStore, recorders: Callable[..., Recorder], kind: str
) -> None:
    """D1 refuses statements over 100,000 bytes: a longer filter anywhere in a batch is a
    ValidationError raised before the batch yields its first statement list, so the put
    before it (in a batch that may hold writes: one without a vector search) never runs,
    not even on D1 (where each yielded list commits on its own)."""
    huge = _too_big_filter()
    query = unit((1, 0, 0, 0))
    tail: list[Op] = {
        "list": [ListItems(ScopeSet.of(SAM), 10, NOW, filter=huge)],
        "lexical": [SearchLexical(ScopeSet.of(SAM), "text", 5, NOW, huge)],
        "vector": [SearchVectors(ScopeSet.of(SAM), SPACE.id, query, 5, NOW, filter=huge)],
        "delete": [DeleteItems(ScopeSet.of(SAM), huge)],
        "read-after-search": [
            SearchVectors(ScopeSet.of(SAM), SPACE.id, query, 5, NOW),
            ListItems(ScopeSet.of(SAM), 10, NOW, filter=huge),
        ],
    }[kind]
    first = record(1, "written only if the batch is")
    writes: list[Op] = [RegisterSpace(SPACE, NOW), *put(first, (1, 0, 0, 0))]
    ops = tail if any(isinstance(op, SearchVectors) for op in tail) else [*writes, *tail]
    recorder = recorders()
    with pytest.raises(ValidationError, match=f"over the limit of {MAX_FILTER_SQL_BYTES}"):
        recorder.run(ops)
    assert recorder.conn.execute("SELECT count(*) FROM items").fetchone() == (0,)  # on D1 too
    assert recorder.yields == []
    with pytest.raises(ValidationError, match=f"over the limit of {MAX_FILTER_SQL_BYTES}"):
        store.batch(ops)
    (items,) = store.batch([GetItems((first.id,), NOW)])
    assert items == [None]


# --- the vector cache --------------------------------------------------------------------


def test_own_writes_patch_the_cache_and_foreign_writes_reload_it(db_path: Path) -> None:
    """remember/update/forget then recall reuse the cached scopes (no reload), answering
    as a fresh store does; another process's write still forces a reload."""
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
        memory.update(added[1].id, metadata={"checked": True})
        memory.forget(gone.id)
        memory.forget_scope(KIM)
        hits = memory.recall("Sam likes tofu", scopes=[SAM, KIM], mode="vector", top_k=10)
        assert store._cache.loads == loads  # nothing reloaded
        assert hits[0].memory.id == added[0].id
        assert {h.memory.id for h in hits} == {added[0].id, added[1].id, kept.id}
        with Memory(SqliteStore(db_path), HashEmbedder(dimensions=64)) as fresh:
            again = fresh.recall("Sam likes tofu", scopes=[SAM, KIM], mode="vector", top_k=10)
        assert [(h.memory, h.similarity) for h in again] == [(h.memory, h.similarity) for h in hits]

        new_id = other_process(
            db_path, f"print(memory.remember('Sam cooks tofu', scope={SAM!r}).id)"
        )
        after = memory.recall("Sam cooks tofu", scopes=[SAM], mode="vector")
        assert after[0].memory.id == new_id
        assert store._cache.loads == loads + 1  # the foreign write reloaded SAM


def _entry_state(cache: SqliteVectorCache) -> dict[tuple[str, str], Any]:
    """Every cached entry as (generation, corrupt ids, key -> (float32 bytes, uint8 copy,
    sign code)): independent of the order the index holds its vectors in."""
    state = {}
    for key, space in cache.cached():
        entry = cache.entry(key, space)
        assert entry is not None
        index, d = entry.index, entry.index.dimensions
        vectors = {
            k: (
                index._flat[p * d : (p + 1) * d].tobytes(),
                bytes(index._four[p]),
                index._codes[p],
            )
            for k, p in index._positions.items()
        }
        state[(key, space)] = (entry.generation, dict(entry.corrupt), vectors)
    return state


_SCOPES = [SAM, KIM, ("acme", "team", "lee")]
_TEXTS = [f"text {n}" for n in range(12)]


def _random_writes(rng: random.Random, items: dict[str, tuple[str, bool]], serial: int) -> list[Op]:
    """One random write batch over ``items`` (id -> (scope key, live)): puts (new ids,
    next revisions, expired ids reused in another scope), patches with and without a
    text, lone vectors, deletes by id and by selection (with and without a filter)."""
    items = dict(items)
    ops: list[Op] = []
    scope_of = {scope_key(s): s for s in _SCOPES}
    for _ in range(rng.randint(1, 8)):
        choice = rng.random()
        text = rng.choice(_TEXTS)
        vector = tuple(rng.uniform(-1, 1) for _ in range(4))
        live = sorted(i for i, (_, alive) in items.items() if alive)
        expired = sorted(i for i, (_, alive) in items.items() if not alive)
        if choice < 0.55:
            if live and rng.random() < 0.35:  # the next revision of a live item
                target = rng.choice(live)
                number, scope = int(target[3:]), scope_of[items[target][0]]
            elif expired and rng.random() < 0.3:  # an expired id, free for any scope
                number, scope = int(rng.choice(expired)[3:]), rng.choice(_SCOPES)
            else:
                number, scope = serial + len(ops), rng.choice(_SCOPES)
            ending = rng.choice([None, None, NOW + timedelta(days=1), NOW - timedelta(minutes=1)])
            rec = record(number, text, scope, expires_at=ending, metadata={"n": number % 3})
            items[rec.id] = (scope_key(scope), ending is None or ending > NOW)
            if rng.random() < 0.7:
                ops.append(PutVector(SPACE.id, rec.content_sha256, blob(vector), NOW))
            ops.append(PutItem(rec, NOW))
        elif choice < 0.7 and live:
            target = rng.choice(live)
            if rng.random() < 0.6:
                if rng.random() < 0.5:
                    ops.append(PutVector(SPACE.id, sha256(text), blob(vector), NOW))
                ops.append(PatchItem(target, NOW, text=text))
            else:
                ops.append(PatchItem(target, NOW, metadata={"n": rng.randint(0, 2)}))
        elif choice < 0.85:  # a vector alone: pending items of that text gain it
            ops.append(PutVector(SPACE.id, sha256(text), blob(vector), NOW))
        elif choice < 0.95 and items:
            target = rng.choice(sorted(items))
            del items[target]
            ops.append(DeleteItem(target))
        else:  # a selection: the batch ends here (the model cannot follow a filter)
            selection = rng.choice(
                [ScopeSet.of(rng.choice(_SCOPES)), ScopeSet(prefixes=(("acme", "user"),))]
            )
            spec = rng.choice([None, *[parse_filter({"metadata": {"n": rng.randint(0, 2)}})] * 2])
            ops.append(DeleteItems(selection, spec))
            break
    return ops


def test_patched_cache_entries_equal_freshly_loaded_ones(
    recorders: Callable[..., Recorder],
) -> None:
    """Over random write batches, the cache a batch patched (without reloading) holds
    exactly the vectors, uint8 copies and generations a cache rebuilt from the database
    holds."""
    rng = random.Random(11)
    recorder = recorders()
    recorder.run([RegisterSpace(SPACE, NOW)])
    search = [SearchVectors(ScopeSet.of(s), SPACE.id, unit((1, 0, 0, 0)), 50, NOW) for s in _SCOPES]
    reused = 0
    for round_ in range(60):
        rows = recorder.conn.execute("SELECT id, scope_key, expires_at FROM items").fetchall()
        items = {
            str(i): (str(key), expires is None or expires > NOW.timestamp() * 1000)
            for i, key, expires in rows
        }
        ops = _random_writes(rng, items, 100 * (round_ + 1))
        loads = recorder.cache.loads
        recorder.run(ops)
        patched = _entry_state(recorder.cache)
        recorder.run(search)
        assert recorder.cache.loads - loads <= len(_SCOPES) - len(patched), round_  # no reload
        reused += len(patched)
        fresh = Recorder(conn=recorder.conn)
        fresh.run(search)
        rebuilt = _entry_state(fresh.cache)
        for key in patched:
            assert patched[key] == rebuilt[key], (round_, key, ops)
    assert reused > 80


@pytest.mark.parametrize(
    ("change", "reindexes"),
    [
        ({"metadata": {"diet": "vegan"}}, False),
        ({"labels": {"topic": ["food"]}}, False),
        ({"importance": 0.9}, False),
        ({"expires_at": NOW + timedelta(days=3650)}, False),
        ({"text": "Sam is vegan now"}, True),
    ],
    ids=["metadata", "labels", "importance", "expires_at", "text"],
)
def test_only_a_text_update_touches_the_full_text_index_and_the_vector_generation(
    db_path: Path, change: dict[str, Any], reindexes: bool
) -> None:
    """An update of metadata, labels, importance or expiry leaves the FTS5 shadow tables
    and the scopes' generations byte-identical, so another store object's cached scope
    is not reloaded (and still answers with the new record); a text update changes both
    and forces the reload."""

    def snapshot() -> list[Any]:
        with plain(db_path) as conn:
            return [
                conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
                for table in (
                    "items_fts_data",
                    "items_fts_idx",
                    "items_fts_docsize",
                    "scope_generations",
                )
            ]

    with (
        Memory(SqliteStore(db_path), HashEmbedder(dimensions=64)) as writer,
        Memory(SqliteStore(db_path), HashEmbedder(dimensions=64)) as reader,
    ):
        target = writer.remember("Sam is vegetarian", scope=SAM)
        writer.remember("Sam rides a bike", scope=SAM)
        reader.recall("vegetarian", scopes=[SAM], mode="vector")
        loads = reader.store._cache.loads
        before = snapshot()

        updated = writer.update(target.id, **change)
        after = snapshot()
        hits = reader.recall(updated.text, scopes=[SAM], mode="vector")

        assert (after[:3] != before[:3], after[3] != before[3]) == (reindexes, reindexes)
        assert reader.store._cache.loads == loads + reindexes
        assert hits[0].memory == updated


# --- what leaves the file ----------------------------------------------------------------


@pytest.mark.parametrize("secure_delete", [True, False], ids=["secure_delete", "plain_delete"])
def test_forget_leaves_no_revisions_text_in_the_file(db_path: Path, secure_delete: bool) -> None:
    """With secure_delete (the default) the full text of every revision of a forgotten
    memory is gone from the database file (and its WAL) after a checkpoint; without it,
    the same scan finds them. FTS5 keeps a text's *tokens* in its index segments until
    they are merged, so the scan looks for each full text, not for its words."""
    texts = [
        "Quixotic zebras pirouette beneath violet aurora",
        "Quixotic zebras now tango beneath crimson aurora",
    ]
    with Memory(SqliteStore(db_path, secure_delete=secure_delete), HashEmbedder()) as memory:
        for n in range(20):
            memory.remember(f"filler memory number {n}", scope=SAM)
        secret = memory.remember(texts[0], scope=SAM)
        memory.update(secret.id, text=texts[1])
        assert [r.text for r in memory.history(secret.id)] == [texts[0]]
        for n in range(20):
            memory.remember(f"later memory number {n}", scope=SAM)
        assert memory.forget(secret.id)
    with plain(db_path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    data = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    found = [text for text in texts if text.encode("utf-8") in data]
    assert found == ([] if secure_delete else texts)
    assert b"filler memory number 7" in data  # the scan reads the texts that remain


# --- corrupt and derived vector data -----------------------------------------------------

_D = 256  # HashEmbedder's default dimensions


@pytest.mark.parametrize(
    "bad_blob",
    [
        b"\x00\x00\x80",
        struct.pack(f"<{_D}f", math.nan, *[0.0] * (_D - 1)),
        blob((1, 0, 0, 0)),
        struct.pack(f"<{_D}f", 2.0, *[0.0] * (_D - 1)),
    ],
    ids=["odd-length", "nan", "wrong-dimensions", "not-unit"],
)
def test_a_corrupt_vector_degrades_vector_recall_until_reindex_repairs_it(
    db_path: Path, bad_blob: bytes
) -> None:
    """A stored vector that does not decode no longer blocks its scope: vector recall
    returns the other items with status "degraded" and error "CorruptDataError";
    ``reindex()`` embeds that text again, and the item is found as before."""
    with Memory(SqliteStore(db_path), HashEmbedder()) as memory:
        broken = memory.remember("Sam is vegetarian", scope=SAM)
        other = memory.remember("Sam likes tofu", scope=SAM)
        assert memory.recall("Sam is vegetarian", scopes=[SAM], mode="vector")[0].memory == broken
        with plain(db_path) as conn:
            conn.execute(
                "UPDATE vectors SET vector = ? WHERE content_sha256 = ?",
                (bad_blob, broken.content_sha256),
            )

        hits = memory.recall("Sam is vegetarian", scopes=[SAM], mode="vector")
        assert [h.memory for h in hits] == [other]
        assert (hits.status, hits.error) == ("degraded", "CorruptDataError")

        assert memory.reindex() == 1
        hits = memory.recall("Sam is vegetarian", scopes=[SAM], mode="vector")
        assert [h.memory for h in hits] == [broken, other]
        assert hits[0].similarity == pytest.approx(1.0)
        assert (hits.status, hits.error) == ("used", None)


def test_vectors_carry_index_data_and_reindex_fills_in_what_is_missing(db_path: Path) -> None:
    """Vectors are written with their derived index data (a version byte first); a
    database without it (as after the upgrade from schema 1) recalls the same, and
    ``reindex()`` (RepairVectors) writes the same data back."""

    def index_data() -> dict[str, bytes | None]:
        with plain(db_path) as conn:
            return dict(conn.execute("SELECT content_sha256, index_data FROM vectors"))

    def recall(memory: Memory) -> list[tuple[str, float | None]]:
        return [(h.memory.id, h.similarity) for h in memory.recall("tofu", [SAM], mode="vector")]

    with Memory(SqliteStore(db_path), HashEmbedder()) as memory:
        for n in range(12):
            memory.remember(f"Sam likes tofu dish number {n}", scope=SAM)
        expected = recall(memory)
    written = index_data()
    assert len(written) == 12
    assert {None if data is None else data[:1] for data in written.values()} == {
        bytes([INDEX_DATA_VERSION])
    }

    with plain(db_path) as conn:
        conn.execute("UPDATE vectors SET index_data = NULL")
    with Memory(SqliteStore(db_path), HashEmbedder()) as memory:
        assert recall(memory) == expected
        assert memory.reindex() == 0  # nothing needed embedding
        assert index_data() == written
        assert recall(memory) == expected
    with Memory(SqliteStore(db_path), HashEmbedder()) as memory:
        assert recall(memory) == expected


def test_stats_pending_counts_the_live_items_without_a_vector_in_the_space(
    db_path: Path,
) -> None:
    """Stats.pending (derived from the live-item count less the live items with a vector
    in the space) equals counting those items directly: two items sharing a text count
    twice, an expired item not at all, a vector of another space does not help."""
    import sqlite3
    from datetime import UTC, datetime

    from engramdb.store import Stats

    texts = ["alpha note", "beta note", "gamma note", "alpha note"]
    with Memory(SqliteStore(db_path), HashEmbedder()) as memory:
        memory.remember_many(
            [{"text": t, "scope": ("a",)} for t in texts[:2]], defer_embedding=False
        )
        memory.remember_many(
            [{"text": t, "scope": ("b",)} for t in texts], defer_embedding=True, dedupe=False
        )
        memory.remember("delta note", ("a",), ttl=1, defer_embedding=True)
        space = memory.status().active_space
    with sqlite3.connect(db_path) as conn:  # a vector of another space for gamma
        conn.execute(
            "INSERT INTO spaces (id, provider, model, dimensions, created_at) "
            "VALUES ('other/m@2', 'other', 'm', 2, 0)"
        )
        conn.execute(
            "INSERT INTO vectors (space_id, content_sha256, dimensions, embedded_at, vector) "
            "SELECT 'other/m@2', content_sha256, 2, 0, x'0000803f00000000' FROM items "
            "WHERE text = 'gamma note'"
        )
    conn.close()
    later = datetime.now(UTC) + timedelta(seconds=5)
    store = SqliteStore(db_path)
    try:
        for space_id in (space, "other/m@2", ""):
            (stats,) = store.batch([Stats(space_id, later)])
            with sqlite3.connect(db_path) as conn:
                (direct,) = conn.execute(
                    "SELECT count(*) FROM items WHERE (expires_at IS NULL OR expires_at > ?) "
                    "AND NOT EXISTS (SELECT 1 FROM vectors WHERE vectors.space_id = ? "
                    "AND vectors.content_sha256 = items.content_sha256)",
                    (int(later.timestamp() * 1000), space_id),
                ).fetchone()
            conn.close()
            assert stats.pending == direct
        assert [store.batch([Stats(s, later)])[0].pending for s in (space, "other/m@2", "")] == [
            1,
            5,
            6,
        ]
    finally:
        store.close()
