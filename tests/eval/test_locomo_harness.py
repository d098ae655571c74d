"""The LoCoMo harness (``eval/``): evidence ids, metrics and the report it writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engramdb import HashEmbedder, InMemoryStore, Memory
from eval import locomo
from eval.synthetic import conversations


@pytest.mark.parametrize(
    ("raw", "kept", "dropped"),
    [
        (["D1:3"], ("D1:3",), []),
        (["D8:6; D9:17"], ("D8:6", "D9:17"), []),  # two ids in one string
        (["D:11:26"], ("D11:26",), []),  # a stray colon
        (["D30:05"], ("D30:5",), []),  # a leading zero
        (["D", "D99:1", "D1:3", "D1:3"], ("D1:3",), ["D", "D99:1"]),  # junk, no such turn
    ],
)
def test_evidence_ids_are_normalised_and_the_rest_reported(
    raw: list[str], kept: tuple[str, ...], dropped: list[str]
) -> None:
    known = {"D1:3", "D8:6", "D9:17", "D11:26", "D30:5"}
    assert locomo.evidence_ids(raw, known) == (kept, dropped)


def test_metrics_of_hand_ranked_lists() -> None:
    """recall@k is the share of a question's evidence among the first k; hit@10 whether
    any is in the first 10; MRR the reciprocal rank of the first, averaged."""
    ranked = [["a", "x", "b"], ["y", "z"], ["x"] * 10 + ["c"]]
    relevant = [("a", "b"), ("z",), ("c",)]
    result = locomo.metrics(ranked, relevant)
    assert result["recall@1"] == round((1 / 2 + 0 + 0) / 3, 4)
    assert result["recall@5"] == round((1 + 1 + 0) / 3, 4)
    assert result["recall@20"] == 1.0
    assert result["hit@10"] == round(2 / 3, 4)
    assert result["mrr"] == round((1 + 1 / 2 + 1 / 11) / 3, 4)


def test_a_turn_is_remembered_as_speaker_text_caption_and_date() -> None:
    turn = locomo.Turn("D1:2", "Mel", "Look!", "a photo of a dog", "1:56 pm on 8 May, 2023")
    assert locomo.memory_text(turn) == "Mel: Look! [image: a photo of a dog]"
    assert locomo.memory_text(turn, date_in_text=True) == (
        "[1:56 pm on 8 May, 2023] Mel: Look! [image: a photo of a dog]"
    )


def test_the_report_has_the_documented_shape(tmp_path: Path) -> None:
    """--out writes each mode's overall metrics at the top level, the per-category ones
    under by_category (category 5 only there), and how the run was made under meta."""
    data = tmp_path / "synthetic.json"
    data.write_text(json.dumps(conversations(count=2)), encoding="utf-8")
    out = tmp_path / "results.json"
    code = locomo.main(
        ["--data", str(data), "--embedder", "hash:64", "--cache", "none", "--out", str(out)]
    )
    assert code == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    names = {"recall@1", "recall@5", "recall@10", "recall@20", "hit@10", "mrr"}
    for mode in ("lexical", "vector", "hybrid"):
        assert set(report[mode]) == names
        assert all(0.0 <= value <= 1.0 for value in report[mode].values())
    assert sorted(report["by_category"]) == ["1", "2", "4", "5"]
    assert report["by_category"]["5"]["name"] == "adversarial"
    meta = report["meta"]
    assert (
        meta["questions_scored"]
        == sum(q["category"] != 5 for c in conversations(count=2) for q in c["qa"]) - 2
    )  # the two questions whose only evidence names no turn
    assert meta["evidence_dropped"] == ["D99:1", "D99:1"]
    assert len(meta["curves"]["hybrid"]) == locomo.DEPTH
    # The made-up facts are found by their words: a floor, not a tuned figure.
    assert report["lexical"]["recall@10"] >= 0.9


def test_floors_that_do_not_hold_fail_the_run(tmp_path: Path) -> None:
    data = tmp_path / "synthetic.json"
    data.write_text(json.dumps(conversations(count=1)), encoding="utf-8")
    floors = tmp_path / "floors.json"
    floors.write_text(json.dumps({"lexical": {"recall@10": 1.01}}), encoding="utf-8")
    arguments = ["--data", str(data), "--embedder", "hash:64", "--cache", "none"]
    assert locomo.main([*arguments, "--floors", str(floors)]) == 1
    floors.write_text(json.dumps({"lexical": {"recall@10": 0.5}}), encoding="utf-8")
    assert locomo.main([*arguments, "--floors", str(floors)]) == 0


def _dated_conversation() -> list[dict[str, object]]:
    """A question that names a month: a turn of May that says "paint" three times and
    "June" once outranks the turn of a June session lexically, so only the date-aware
    stage ranks the latter first."""

    def turn(dia_id: str, speaker: str, text: str) -> dict[str, str]:
        return {"dia_id": dia_id, "speaker": speaker, "text": text}

    question = {"question": "What did Mel paint in June?", "category": 2, "evidence": ["D2:1"]}
    return [
        {
            "sample_id": "conv-dated",
            "conversation": {
                "session_1": [
                    turn("D1:1", "Mel", "I paint and paint, painting in June!"),
                    turn("D1:2", "Sam", "Nice weather for a walk."),
                ],
                "session_1_date_time": "1:00 pm on 8 May, 2023",
                "session_2": [
                    turn("D2:1", "Mel", "I went to paint a lake."),
                    turn("D2:2", "Sam", "Which one?"),
                ],
                "session_2_date_time": "2:00 pm on 20 June, 2023",
            },
            "qa": [question],
        }
    ]


def test_no_date_stage_ranks_hybrid_without_the_date_bonus(tmp_path: Path) -> None:
    """--no-date-stage: the June turn is no longer lifted above the May one in hybrid
    mode; lexical and vector recall are the same with and without it."""
    data = tmp_path / "dated.json"
    data.write_text(json.dumps(_dated_conversation()), encoding="utf-8")
    arguments = ["--data", str(data), "--embedder", "hash:64", "--cache", "none"]
    reports = []
    for extra in ([], ["--no-date-stage"]):
        out = tmp_path / f"results{len(extra)}.json"
        assert locomo.main([*arguments, *extra, "--out", str(out)]) == 0
        reports.append(json.loads(out.read_text(encoding="utf-8")))
    with_stage, without = reports
    assert with_stage["hybrid"]["mrr"] == 1.0
    assert without["hybrid"]["mrr"] == 0.5
    assert (with_stage["meta"]["date_stage"], without["meta"]["date_stage"]) == (True, False)
    for mode in ("lexical", "vector"):
        assert with_stage[mode] == without[mode]
    again = tmp_path / "again.json"
    assert locomo.main([*arguments, "--out", str(again)]) == 0  # the stage is back
    assert json.loads(again.read_text(encoding="utf-8"))["hybrid"]["mrr"] == 1.0


def test_a_reranker_reorders_every_mode_and_its_failures_are_counted(tmp_path: Path) -> None:
    """--reranker: each memory gets the reranker and --rerank says how deep; a real
    TEI-shaped server on 127.0.0.1 scores by shared words, which here lifts the May turn
    (it holds "paint" and "in") above the June one the date stage put first. Its failures
    (a 503 on every request, past the retries) leave the fused order and are counted as
    degraded recalls, never an error of the run."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/rerank_server.py
    from rerank_server import tei

    data = tmp_path / "dated.json"
    data.write_text(json.dumps(_dated_conversation()), encoding="utf-8")
    arguments = ["--data", str(data), "--embedder", "hash:64", "--cache", "none"]
    plain = tmp_path / "plain.json"
    assert locomo.main([*arguments, "--out", str(plain)]) == 0
    with tei() as server:
        url = f"tei:{server.url}?max_retries=0"
        reranked = tmp_path / "reranked.json"
        assert (
            locomo.main([*arguments, "--reranker", url, "--rerank", "5", "--out", str(reranked)])
            == 0
        )
        asked = len(server.bodies)
        server.faults.extend(["503"] * 100)
        failing = tmp_path / "failing.json"
        assert locomo.main([*arguments, "--reranker", url, "--out", str(failing)]) == 0
    before, after, failed = (
        json.loads(f.read_text(encoding="utf-8")) for f in (plain, reranked, failing)
    )
    # one question, three modes and the hybrid recall with context (--context 1): one
    # request each (5 hits fit a batch)
    assert asked == 4
    assert after["meta"]["reranker"] == "tei/reranker" and after["meta"]["rerank"] == 5
    assert after["meta"]["degraded"] == {}
    assert (before["hybrid"]["mrr"], after["hybrid"]["mrr"]) == (1.0, 0.5)
    assert failed["meta"]["degraded"] == {"lexical": 1, "vector": 1, "hybrid": 1}
    assert all(failed[mode] == before[mode] for mode in ("lexical", "vector", "hybrid"))


def test_context_recall_comes_from_recall_with_context(tmp_path: Path) -> None:
    """Each session is remembered as a conversation (its turns' places, speakers and
    times in their metadata), and ``--context N`` reports context-recall@10 from
    ``recall(top_k=10, context=N)``: with 0 it is hybrid recall@10 (no hit moves), with
    1 at least that, over more turns; the ranked figures do not change."""
    data = tmp_path / "synthetic.json"
    data.write_text(json.dumps(conversations(count=2)), encoding="utf-8")
    reports = {}
    for width in (0, 1):
        out = tmp_path / f"context-{width}.json"
        arguments = ["--data", str(data), "--embedder", "hash:64", "--cache", "none"]
        assert locomo.main([*arguments, "--context", str(width), "--out", str(out)]) == 0
        reports[width] = json.loads(out.read_text(encoding="utf-8"))
    assert "context" not in reports[0]  # 0: not measured
    with_context = reports[1]["context"]
    assert with_context["width"] == 1
    assert with_context["context_recall@10"] >= reports[1]["hybrid"]["recall@10"]
    assert with_context["turns_shown"] > 10
    assert reports[0]["hybrid"] == reports[1]["hybrid"]
    (conversation, *_) = locomo.load(data)
    memory = Memory(InMemoryStore(), HashEmbedder(64))
    run = locomo.evaluate([conversation], lambda _n: memory, ("hybrid",), context=0)
    assert run.shown == []
    turns = memory.list(locomo.scope_of(conversation), limit=1000)
    assert {r.metadata["conversation"] for r in turns} == {"D1", "D2", "D3", "D4"}
    first = next(r for r in turns if r.metadata["dia_id"] == "D1:1")
    assert first.metadata["turn"] == 0 and first.metadata["at"].endswith("Z")
    locomo.evaluate([conversation], lambda _n: memory, ("hybrid",))  # sent again: no copy
    assert len(memory.list(locomo.scope_of(conversation), limit=1000)) == len(turns)
