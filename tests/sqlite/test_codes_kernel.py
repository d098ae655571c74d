"""``SqliteStore(vector_kernel="codes")``: the pure-Python index keeping only codes, which
reads its exact candidates' float32 rows in each search (its answers are pinned by the
conformance suites' ``sqlite-codes`` store)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engramdb import HashEmbedder, Memory
from engramdb.sqlite import SqliteStore
from engramdb.store import ScopeSet, SearchVectors
from engramdb.store._sqlite.cache import SqliteVectorCache
from engramdb.store._sqlite.search import VectorSearch

SCOPE = ("acme", "sam")


def test_the_codes_kernel_keeps_no_floats_and_names_itself(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", vector_kernel="codes")
    with Memory(store, HashEmbedder(dimensions=32)) as memory:
        memory.remember_many([{"text": f"note {i} tea", "scope": SCOPE} for i in range(20)])
        assert memory.recall("tea", [SCOPE], mode="vector")
        assert store.vector_kernel == "codes"
        (entry_key,) = store._cache.cached()
        entry = store._cache.entry(*entry_key)
        assert entry is not None and not entry.index.keeps_floats  # type: ignore[attr-defined]


def test_the_candidates_rows_are_read_by_primary_key_not_by_a_scan(tmp_path: Path) -> None:
    """The statement that reads the candidates' rows looks each id up (items by id, then
    its vector by (space, hash)); a plan that scanned the space's vectors made a search
    of 100k vectors 12x slower."""
    path = tmp_path / "m.db"
    with Memory(SqliteStore(path), HashEmbedder(dimensions=32)) as memory:
        memory.remember_many([{"text": f"note {i}", "scope": SCOPE} for i in range(300)])
    with contextlib.closing(sqlite3.connect(path)) as connection:
        space = connection.execute("SELECT id FROM spaces").fetchone()[0]
        ids = [row[0] for row in connection.execute("SELECT id FROM items LIMIT 50")]
        op = SearchVectors(ScopeSet(exact=(SCOPE,)), space, (1.0,) * 32, 10, datetime.now(UTC))
        statement = VectorSearch(op, SqliteVectorCache())._vectors_of(ids)
        plan = [
            str(row[3])
            for row in connection.execute(f"EXPLAIN QUERY PLAN {statement.sql}", statement.params)
        ]
    # SCAN only the ids; items by id, the vector by its whole primary key (the bad plan
    # searched vectors by space_id alone, every vector of the space, and items by hash)
    assert all("wanted" in step for step in plan if step.startswith("SCAN")), plan
    assert any(step.startswith("SEARCH items") and "(id=?)" in step for step in plan), plan
    assert any(
        step.startswith("SEARCH vectors") and "(space_id=? AND content_sha256=?)" in step
        for step in plan
    ), plan
    with contextlib.closing(sqlite3.connect(path)) as reader:
        rows = reader.execute(statement.sql, statement.params).fetchall()
    assert sorted(row[0] for row in rows) == sorted(ids)
    assert json.loads(statement.params[0]) == ids


def test_an_exact_search_names_its_rows_in_statements_of_bounded_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exact search of an entry that keeps only codes reads every eligible row: its
    ids go in several statements of ``IDS_PER_STATEMENT`` (a Durable Object refuses one
    SQL value above 2 MB, about 60,000 ids), and it answers what one statement did."""
    from engramdb.store._sqlite import search

    texts = [{"text": f"note {i} about tea and toast", "scope": SCOPE} for i in range(60)]
    answers = []
    sizes: list[int] = []
    real = VectorSearch._vectors_of

    def counted(self: VectorSearch, ids: list[str]) -> object:
        sizes.append(len(ids))
        return real(self, ids)

    monkeypatch.setattr(VectorSearch, "_vectors_of", counted)
    for per_statement in (10_000, 7):
        monkeypatch.setattr(search, "IDS_PER_STATEMENT", per_statement)
        store = SqliteStore(tmp_path / f"m{per_statement}.db", vector_kernel="codes")
        with Memory(store, HashEmbedder(dimensions=32)) as memory:
            memory.remember_many(texts)
            hits = memory.recall("tea", [SCOPE], mode="vector", exact=True, top_k=60)
            answers.append([(h.memory.text, h.score) for h in hits])
    assert len(answers[0]) == 60 and answers[0] == answers[1]
    assert max(sizes) == 60 and sizes.count(7) >= 8  # the second store: 9 statements
