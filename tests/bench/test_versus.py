"""``bench.versus`` (engramdb against a plain FTS5 + numpy build) and its peer,
``bench.peer``: run where numpy is importable, skipped elsewhere. Checks the report's
shape and the peer's answers, never timings."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from bench import versus
from bench.memory import ProjectionEmbedder, corpus, queries_for
from bench.peer import Peer


def test_peer_finds_the_memory_each_query_was_drawn_from(tmp_path: Path) -> None:
    """Both legs and their fusion work: a query made of words of one stored text ranks
    that text first, and each leg alone finds it too."""
    texts = corpus(500)
    peer = Peer(str(tmp_path / "peer.db"), ProjectionEmbedder())
    try:
        peer.remember_many(texts[:300], "a/b")
        peer.remember_many(texts[300:], "a/b")  # a second batch: the matrix is reloaded
        peer.remember_many(["elsewhere only"], "other")
        for query, text in zip(queries_for(texts, 10), _sources(texts, 10), strict=True):
            hits = peer.search(query, "a/b", top_k=10)
            assert len(hits) == 10
            assert hits[0][2] == text
            assert [score for _, score, _ in hits] == sorted(
                (score for _, score, _ in hits), reverse=True
            )
            assert texts[peer.vector_leg(query, "a/b", 1)[0][0] - 1] == text
            assert texts[peer.lexical_leg(query, "a/b", 1)[0][0] - 1] == text
        assert peer.search("elsewhere", "other")[0][2] == "elsewhere only"
        assert peer.search("elsewhere", "a/b", top_k=3)[0][2] != "elsewhere only"
    finally:
        peer.close()


def _sources(texts: list[str], count: int) -> list[str]:
    """The texts ``queries_for(texts, count)`` drew its queries from (its seed, its order)."""
    return random.Random(2).sample(texts, count)


@pytest.mark.slow
def test_quick_run_reports_every_ratio_with_its_goal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--quick`` runs every part in one go and reports each ratio of issues 50 and 28
    beside its goal, in the printed table and in ``--json``; ``--keep`` leaves its files, on which
    ``--vector-only`` runs the vector comparison alone."""
    out, kept = tmp_path / "versus.json", tmp_path / "kept"
    assert versus.main(["--quick", "--restore", "0", "--json", str(out), "--keep", str(kept)]) == 0
    report = json.loads(out.read_text())
    assert report["sizes"] == [1_000, 10_000]
    assert report["queries"] == 5
    assert [row["n"] for row in report["warm"]] == [1_000, 10_000]
    for part in ("cold_unmaintained", "cold"):  # the file as written, then maintained
        assert report[part]["n"] == 10_000 and report[part]["runs"] == 2
        assert report[part]["engramdb_warm_ms"] > 0 and report[part]["peer_warm_ms"] > 0
    assert report["vector"]["n"] == 10_000
    measures = [row["measure"] for row in report["verdicts"]]
    assert measures == [
        "cold start CPU at 10,000, never maintained, x the peer",
        "cold start RssAnon at 10,000, never maintained, MB",
        "warm hybrid at 1,000, x the peer",
        "warm hybrid at 10,000, x the peer",
        "ingest items per CPU-s, x the peer",
        "cold start at 10,000, packed by maintain(), x the peer",
        "cold start CPU at 10,000, packed by maintain(), x the peer",
        "cold start RssAnon at 10,000, packed, MB",
        "warm hybrid at 10,000 after a cold load, x the peer",
        "vector recall at 10,000, x the peer",
        "vector recall@10 at 10,000",
        "VectorIndex / numpy at 10,000, projection",
        "VectorIndex recall@10 at 10,000, projection",
        "first search / warm at 10,000, projection",
        "first search / warm at 10,000, projection, paired",
        "VectorIndex / numpy at 10,000, clustered",
        "VectorIndex recall@10 at 10,000, clustered",
        "first search / warm at 10,000, clustered",
        "first search / warm at 10,000, clustered, paired",
        "deferred + maintain() / direct, CPU",
        "deferred + maintain() / direct + maintain(), CPU",
    ]
    assert [row["issue"] for row in report["verdicts"]] == ["50"] * 5 + ["28"] * 16
    for row in report["verdicts"]:
        assert math.isfinite(row["value"]) and row["value"] > 0, row
        assert row["goal"].startswith(("<=", ">=")), row
        assert isinstance(row["holds"], bool), row
    for row in report["warm"]:
        assert 0.5 <= row["overlap_at_10"] <= 1.0  # both sides rank the same data alike
    printed = capsys.readouterr().out
    assert "| measure | value | goal | issue | holds |" in printed
    assert printed.count("| <= ") + printed.count("| >= ") == len(measures)
    assert sorted(path.name for path in kept.iterdir() if path.suffix == ".db") == [
        "engramdb.db",
        "peer.db",
    ]
    assert versus.main(["--vector-only", str(kept), "--queries", "3"]) == 0
    rounds = [line for line in capsys.readouterr().out.splitlines() if "round" in line]
    assert len(rounds) == 3 and all("recall@10" in line for line in rounds)
