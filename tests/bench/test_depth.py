"""``bench.depth``: the ranking's ``DEPTH`` cut for a measurement reaches every recall
made inside the cut, and only those; the report has a row per size and round. Never
timings."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("numpy")

from bench import depth
from bench.memory import ProjectionEmbedder, corpus
from engramdb import Memory
from engramdb.ranking import _hits
from engramdb.sqlite import SqliteStore
from engramdb.store import SearchLexical, SearchVectors


def test_the_cut_reaches_the_legs_and_is_undone(tmp_path: Path) -> None:
    """Inside ``depth(10)`` both legs of a hybrid recall are asked for 10 candidates;
    after it (even when the block raises) for ``DEPTH`` again."""
    store = SqliteStore(tmp_path / "e.db")
    memory = Memory(store, ProjectionEmbedder())
    memory.remember_many({"text": t, "scope": ("a",)} for t in corpus(50))
    asked: list[int] = []
    batch = store.batch

    def spy(ops):  # type: ignore[no-untyped-def]
        asked.extend(op.k for op in ops if isinstance(op, SearchVectors | SearchLexical))
        return batch(ops)

    store.batch = spy  # type: ignore[method-assign]
    with depth.depth(10):
        memory.recall("word", scopes=[("a",)], top_k=5)
    assert asked == [10, 10]
    with pytest.raises(RuntimeError), depth.depth(10):
        raise RuntimeError("the block fails")
    assert _hits.DEPTH == depth.SHIPPED == 100
    asked.clear()
    memory.recall("word", scopes=[("a",)], top_k=5)
    assert asked == [100, 100]
    memory.close()


def test_a_replay_answers_as_the_store_did_without_it(tmp_path: Path) -> None:
    """The replayed recall returns what the recall returned, and reads nothing from the
    store while it runs (the store's batch is not called)."""
    store = SqliteStore(tmp_path / "e.db")
    memory = Memory(store, ProjectionEmbedder())
    texts = corpus(80)
    memory.remember_many({"text": t, "scope": ("a",)} for t in texts)
    asked = [" ".join(t.split()[1:5]) for t in texts[:4]]

    def recall(query: str) -> list[str]:
        return [hit.memory.id for hit in memory.recall(query, scopes=[("a",)], top_k=5)]

    expected = [recall(q) for q in asked]
    replayed = depth.replaying(store, recall, asked)
    calls = 0
    batch = store.batch

    def counted(ops):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        return batch(ops)

    store.batch = counted  # type: ignore[method-assign]
    assert [replayed(q) for q in asked] == expected
    assert calls == 0
    store.batch = batch  # type: ignore[method-assign]
    memory.close()


def test_a_small_run_reports_each_size_and_round(capsys: pytest.CaptureFixture[str]) -> None:
    rows = depth.measure([60, 120], queries=3, rounds=2)
    assert [(row["n"], row["round"]) for row in rows] == [(60, 1), (60, 2), (120, 1), (120, 2)]
    for row in rows:
        assert row["shipped_ratio"] == row["shipped_ms"] / row["peer_ms"]
        assert row["cut_ratio"] == row["cut_ms"] / row["peer_ms"]
        assert row["shipped_flow_ms"] > 0 and row["cut_flow_ms"] > 0
    assert depth.main(["--sizes", "60", "--queries", "2", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "the recall at DEPTH 10 costs" in out
    assert "of which the ranking's" in out
    assert _hits.DEPTH == 100
