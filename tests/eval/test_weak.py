"""The weak-category experiments (``eval.weak``): the offline pipeline is the product's,
and the stages and the leave-one-conversation-out choice do what they say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engramdb import InMemoryStore, Memory
from eval import locomo, weak
from eval.embedders import make_embedder
from eval.synthetic import conversations


def _corpus(tmp_path: Path, embedder: str, count: int = 2) -> weak.Corpus:
    data = tmp_path / "synthetic.json"
    data.write_text(json.dumps(conversations(count=count)), encoding="utf-8")
    return weak.build(locomo.load(data), make_embedder(embedder))


@pytest.mark.parametrize("embedder", ["hash:64", "static"])
def test_the_unchanged_pipeline_ranks_as_memory_recall(tmp_path: Path, embedder: str) -> None:
    """The lexical leg recomputed here and core's fusion give, question by question, the
    order Memory.recall returns (so a stage's gain is measured against the product)."""
    corpus = _corpus(tmp_path, embedder)
    memory = Memory(InMemoryStore(), make_embedder(embedder))
    for conversation in corpus.conversations:
        memory.remember_many(
            {
                "text": locomo.memory_text(turn, date_in_text=True),
                "scope": ("locomo", conversation.sample_id),
                "metadata": {"turn": index},
            }
            for index, turn in enumerate(conversation.turns)
        )
    shipped = weak.shipped()
    for item in corpus.items:
        ranked = shipped(corpus, item)
        for mode in weak.MODES:
            hits = memory.recall(
                item.text, [("locomo", item.conversation)], top_k=weak.CUT, mode=mode
            )
            assert ranked[mode] == [str(hit.memory.metadata["turn"]) for hit in hits], mode
    assert weak.bm25(weak.K1, weak.B)(corpus, corpus.items[0]) == shipped(corpus, corpus.items[0])


def test_other_bm25_parameters_change_the_lexical_scores() -> None:
    lexicon = weak.Lexicon(["the cat sat", "a cat and a cat and a dog ran far away today"])
    query = weak.query_weights("cat")
    shipped = dict(lexicon.search(query))
    flat = dict(lexicon.search(query, b=0.0))
    assert shipped["0"] > shipped["1"]  # the short document wins with length normalisation
    assert flat["1"] > flat["0"]  # without it, two occurrences beat one


def test_feedback_expands_the_query_with_the_heaviest_content_terms() -> None:
    lexicon = weak.Lexicon(
        ["Mel: pottery class with clay", "Mel: my pottery bowl of clay", "Sam: a dog"]
    )
    query = weak.query_weights("What about pottery?")
    first = lexicon.search(query)
    expanded = weak.expanded(lexicon, query, first, m=2, t=3, lam=0.5)
    assert max(expanded.values()) == 1.0
    assert "clai" in expanded  # "clay" stemmed, in both feedback turns
    assert "dog" not in expanded  # not in the feedback
    assert not set(expanded) & weak._STOP_TERMS
    assert weak.expanded(lexicon, query, [], m=2, t=3, lam=0.5) == query


def test_capitalised_terms_leave_the_first_word_out() -> None:
    assert weak.capitalised_terms("What did Caroline paint in Paris?") == {"carolin", "pari"}


def _fake(owners: list[str]) -> weak.Corpus:
    items = [weak.Item(o, 4, "q", frozenset({"0"}), []) for o in owners]
    return weak.Corpus([], {}, items, True, "fake")


def test_loco_chooses_on_the_other_conversations_and_scores_the_held_out_one() -> None:
    """Variant 'a' is best on conversation x only, 'b' on y and z: holding out x picks
    'b' (trained on y, z) and scores it on x, and so on."""
    owners = ["x", "y", "z"]
    corpus = _fake(owners)
    base = {mode: [(0.5, 0.5)] * 3 for mode in weak.MODES}
    a = {mode: [(1.0, 1.0), (0.0, 0.0), (0.0, 0.0)] for mode in weak.MODES}
    b = {mode: [(0.25, 0.25), (1.0, 1.0), (1.0, 1.0)] for mode in weak.MODES}
    result = weak.loco(corpus, base, {"a": a, "b": b})["hybrid"]
    chosen = {fold["held_out"]: fold["chosen"] for fold in result["folds"]}
    assert chosen == {"x": "b", "y": "b", "z": "b"}
    assert result["pooled"]["all"] == {"recall@10": 0.75, "mrr": 0.75}
    assert result["folds_improved"] == {"recall@10": 2, "mrr": 2}
    assert result["mean_gain"]["recall@10"] == round((-0.25 + 0.5 + 0.5) / 3, 4)
    assert result["adopt"] is True
    worse = {mode: [(0.0, 0.0)] * 3 for mode in weak.MODES}
    assert weak.loco(corpus, base, {"w": worse})["hybrid"]["adopt"] is False


def test_the_report_has_every_stage_per_mode_and_category(tmp_path: Path) -> None:
    data = tmp_path / "synthetic.json"
    data.write_text(json.dumps(conversations(count=2)), encoding="utf-8")
    out = tmp_path / "weak.json"
    arguments = ["--data", str(data), "--embedder", "hash:64", "--stages", "bm25,date"]
    code = weak.main([*arguments, "--cache", "none", "--out", str(out)])
    assert code == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report["stages"]) == {"bm25", "date"}
    for mode in weak.MODES:
        result = report["stages"]["bm25"]["loco"][mode]
        assert len(result["folds"]) == 2
        assert {"all", "temporal", "single-hop"} <= set(result["pooled"])
        assert set(report["shipped"][mode]) == set(result["pooled"])
    assert set(report["without_date"]) == set(report["vector"]) == set(report["shipped"]["hybrid"])


def test_the_vectors_come_from_the_embedding_cache_on_a_second_run(tmp_path: Path) -> None:
    """eval.weak keeps vectors where eval.locomo does: a second run embeds nothing and
    gives the same figures."""
    data = tmp_path / "synthetic.json"
    data.write_text(json.dumps(conversations(count=2)), encoding="utf-8")
    cache = tmp_path / "cache.sqlite"
    arguments = ["--data", str(data), "--embedder", "hash:64", "--stages", "date"]
    reports = []
    for number in range(2):
        out = tmp_path / f"weak-{number}.json"
        assert weak.main([*arguments, "--cache", str(cache), "--out", str(out)]) == 0
        reports.append(json.loads(out.read_text(encoding="utf-8")))
    first, second = (report.pop("embedding") for report in reports)
    assert first["embedded"] > 0
    assert second["embedded"] == 0
    assert second["from_cache"] == first["embedded"] + first["from_cache"]
    for report in reports:
        report.pop("seconds")
    assert reports[0] == reports[1]


def test_locomo_reports_each_conversation_held_out(tmp_path: Path) -> None:
    data = tmp_path / "synthetic.json"
    data.write_text(json.dumps(conversations(count=3)), encoding="utf-8")
    out = tmp_path / "results.json"
    arguments = ["--data", str(data), "--embedder", "hash:64", "--cache", "none"]
    assert locomo.main([*arguments, "--folds", "loco", "--out", str(out)]) == 0
    folds = json.loads(out.read_text(encoding="utf-8"))["folds"]
    assert len(folds["conversations"]) == 3
    lexical = folds["lexical"]
    values = [v["recall@10"] for v in lexical["per_conversation"].values()]
    assert lexical["min"]["recall@10"] == min(values)
    assert lexical["mean"]["recall@10"] == round(sum(values) / 3, 4)
    assert lexical["std"]["recall@10"] >= 0.0
    assert lexical["floor"]["recall@10"] == locomo.floor_of(values)


def test_a_floor_is_the_held_out_mean_less_one_standard_error() -> None:
    """mean 0.6, sample standard deviation 0.1291 over 4 conversations: 0.6 - 0.0645,
    rounded down to 0.001."""
    assert locomo.floor_of([0.45, 0.55, 0.65, 0.75]) == 0.535
    assert locomo.floor_of([0.7, 0.7]) == 0.7  # no spread: the mean, not 0.699
