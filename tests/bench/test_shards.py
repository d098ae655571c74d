"""``bench.shards`` (a tenant split over shards, recall fanned out and merged): a small
run on made-up conversations reports every merge and the costs; the vector leg merged
by score answers as one store does. Checks the report, never timings
(``tests/core/test_sharding.py`` holds ``engramdb.shards`` itself)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import shards
from eval.synthetic import conversations


def _row(out: str, mode: str, merge: str, count: int, fetch: int) -> tuple[float, float]:
    match = re.search(
        rf"^\| {mode} \| {merge} \| {count} \| {fetch} \| ([\d.]+) \| ([\d.]+) \|$", out, re.M
    )
    assert match, f"no row {mode} {merge} {count} {fetch} in:\n{out}"
    return float(match[1]), float(match[2])


def test_a_small_run_reports_each_merge_and_the_costs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "synthetic.json"
    data.write_text(json.dumps(conversations(count=3)), encoding="utf-8")
    arguments = ["--data", str(data), "--shards", "2,4", "--fetch", "10,30"]
    assert shards.main([*arguments, "--sizes", "150,300", "--runs", "1", "--queries", "3"]) == 0
    out = capsys.readouterr().out
    single = _row(out, "vector", "one store", 1, 10)
    assert single[0] > 0  # the questions find their evidence at all
    for count in (2, 4):
        # cosines compare across shards: the merged list is the one store's
        assert _row(out, "vector", "score", count, 10) == single
        _row(out, "vector", "rank", count, 10)
        for mode in ("lexical", "hybrid"):
            _row(out, mode, "rank", count, 10)
            for fetch in (10, 30):
                _row(out, mode, "score", count, fetch)
    # the merge of one shard's answer is that answer
    for mode in ("lexical", "hybrid"):
        assert _row(out, mode, "score", 1, 10) == _row(out, mode, "one store", 1, 10)
    for size in ("150", "300"):
        for what in ("lexical, top_k 10", "vector, top_k 10", "hybrid, top_k 10"):
            assert re.search(rf"^\| {size} \| {what} \| [\d.]+ \|$", out, re.M)
    for name in shards.MERGES:
        assert re.search(
            rf"^\| 300 \| merge {name}: 8 shards, 30 hits each \| [\d.]+ \|$", out, re.M
        )


def test_the_pooled_run_asks_every_question_in_one_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--pooled`` puts every conversation in one scope: a question then competes with
    the other conversations' turns, and the vector merge still equals one store."""
    data = tmp_path / "synthetic.json"
    data.write_text(json.dumps(conversations(count=3)), encoding="utf-8")
    arguments = ["--data", str(data), "--shards", "3", "--fetch", "10", "--only", "quality"]
    assert shards.main([*arguments, "--pooled"]) == 0
    pooled = capsys.readouterr().out
    assert "one scope" in pooled and "CPU ms" not in pooled
    assert _row(pooled, "vector", "score", 3, 10) == _row(pooled, "vector", "one store", 1, 10)
    assert shards.main(arguments) == 0
    apart = capsys.readouterr().out
    assert _row(pooled, "vector", "one store", 1, 10) != _row(apart, "vector", "one store", 1, 10)
