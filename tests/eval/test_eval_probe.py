"""The probe of name-sharing memories (``eval.probe``): its data's rules, its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engramdb.store import query_tokens, terms
from eval import probe
from eval.probe import Fact, Probe

SMALL = ["--embedder", "hash:64", "--cache", "none", "--holders", "2", "--facts", "4"]


def _run(tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / f"probe{len(list(tmp_path.iterdir()))}.json"
    assert probe.main([*SMALL, *extra, "--out", str(out)]) == 0
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return report


@pytest.mark.parametrize("name", sorted(probe.PROBES))
def test_every_question_shares_no_word_with_its_memory_but_the_name(name: str) -> None:
    """Every probe's data keeps its rules (the lexical leg's terms: stop words out, words
    stemmed): a question shares nothing with its memory but the holder's name, the
    pronoun question nothing at all, a reworded memory nothing but the name with its
    original; every memory names its holder in 5-23 words."""
    loaded = probe.load(name)  # refuses data that breaks a rule
    assert probe.problems(loaded) == []
    for fact in loaded.facts:
        name_terms = set(terms(fact.holder))
        asked = {term for _, term in query_tokens(fact.question())}
        assert asked & set(terms(fact.text)) == name_terms, fact.id


def test_the_probes_have_the_documented_size() -> None:
    """People: 12 x 12 facts with near-miss pairs, reworded duplicates and pronoun
    questions; projects: at least 100 memories of another shape."""
    people, projects = probe.load("people"), probe.load("projects")
    assert len(people.holders) >= 12
    assert all(sum(f.holder == h for f in people.facts) == 12 for h in people.holders)
    assert len(people.near_miss) >= 20 and len(people.reworded) >= 40
    assert len(projects.facts) >= 100 and len(projects.near_miss) >= 10
    assert {f.topic for f in people.facts} >= {"food", "family", "work", "health", "money"}


def _probe(question: str, reworded: str = "Ana eats seafood only on Sundays") -> Probe:
    fact = Fact("Ana/fish", "Ana", "food", "Ana loves grilled fish with lemon", question)
    return Probe("t", "t", (fact,), {"Ana": "she"}, (), {"Ana/fish": reworded})


@pytest.mark.parametrize(
    ("question", "reworded", "complaint"),
    [
        ("What fish does {subj} like?", "Ana eats seafood only on Sundays", "['fish']"),
        ("Which dish does {subj} enjoy most?", "Ana loves seafood", "['love']"),
        ("What does the woman eat?", "Ana eats seafood only on Sundays", "names the holder 0"),
        ("What dish goes with {subj}?", "Ana eats seafood only on Sundays", "{subj} after"),
        ("What does {subj} eat?", "Ana likes fish", "['fish']"),
    ],
)
def test_data_that_breaks_a_rule_is_refused(question: str, reworded: str, complaint: str) -> None:
    """A shared word (after stemming: "loves"/"love"), a question without the name, a
    pronoun where an object belongs, a reworded memory that repeats a word: each is
    named in the problems, so the data cannot rot unnoticed."""
    found = probe.problems(_probe(question, reworded))
    assert any(complaint in line for line in found), found


def test_the_report_has_the_documented_shape(tmp_path: Path) -> None:
    """--out writes every set's figures per mode, the hybrid deltas with McNemar's p,
    the misses, every query's rank per mode, and how the run was made."""
    report = _run(tmp_path)
    assert list(report["sets"]) == list(probe.SETS)
    names = {"recall@1", "recall@5", "recall@10", "recall@20", "hit@10", "mrr"}
    for name, row in report["sets"].items():
        assert row["n"] > 0, name
        for mode in probe.MODES:
            extra = {"above_twin"} if name.startswith("near-miss") else set()
            assert set(row[mode]) == names | extra
            assert all(0.0 <= value <= 1.0 for value in row[mode].values())
        assert set(report["deltas"][name]) == {
            "hybrid - vector", "hybrid - best leg", "hybrid only", "vector only", "p"
        }  # fmt: skip
        assert set(report["misses"][name]) == set(probe.MODES)
        assert set(report["misses"][name]["hybrid"]["right_in"]) == {"vector", "lexical"}
    assert report["sets"]["scoped"]["n"] == report["sets"]["pooled"]["n"] == 8
    assert report["sets"]["reworded scoped"]["n"] == 4  # of the 8 facts kept
    assert len(report["asked"]["pronoun"]) == 8
    assert report["meta"]["memories"] == 8 and report["meta"]["embedder"] == "hash/bow@64"
    # Scoped, a holder's four facts are all found by the name: lexical recall@5 is 1.
    assert report["sets"]["scoped"]["lexical"]["recall@5"] == 1.0
    # A pronoun question has no word of its memory: the lexical leg finds nothing.
    assert report["sets"]["pronoun"]["lexical"]["recall@20"] == 0.0


def test_the_run_is_deterministic_and_alike_in_sqlite(tmp_path: Path) -> None:
    """Two runs rank every query alike, and SQLite ranks as the in-memory store does."""
    first, second = _run(tmp_path), _run(tmp_path)
    on_disk = _run(tmp_path, "--store", "sqlite")
    for report in (first, second, on_disk):
        del report["meta"]
    assert first == second == on_disk


def test_two_runs_are_compared_question_by_question(tmp_path: Path) -> None:
    """--compare pairs two reports by question: a run against itself differs nowhere."""
    report = _run(tmp_path)
    rows = probe.compare(report, report)
    assert {(row["set"], row["mode"]) for row in rows} == {
        (name, mode) for name in probe.SETS for mode in probe.MODES
    }
    assert all(row["only a"] == row["only b"] == 0 and row["p"] == 1.0 for row in rows)
    paths = sorted(tmp_path.iterdir())
    assert probe.main(["--compare", str(paths[0]), str(paths[0])]) == 0


def test_reports_are_tabulated_side_by_side(tmp_path: Path) -> None:
    """--summary: a column per report, a row per set (top-1 of vector / hybrid beside
    the lexical leg's), then recall@5 / @10 / MRR per mode, scoped and pooled."""
    reports = [_run(tmp_path), _run(tmp_path, "--embedder", "static")]
    lines = probe.summary(reports)
    assert lines[0] == "| set | n | lexical | hash:64 | static |"
    rows = {line.split(" | ")[0][2:]: line for line in lines[2 : 2 + len(probe.SETS)]}
    assert list(rows) == list(probe.SETS)
    scoped = reports[1]["sets"]["scoped"]
    assert (
        f"{scoped['vector']['recall@1']:.3f} / {scoped['hybrid']['recall@1']:.3f}" in rows["scoped"]
    )
    assert len(lines) == 2 + len(probe.SETS) + 1 + 2 + 2 * len(probe.MODES)


@pytest.mark.parametrize(
    ("floors", "code"),
    [
        ({"scoped": {"vector": {"recall@5": 0.0}, "deltas": {"hybrid - vector": -1.0}}}, 0),
        ({"scoped": {"lexical": {"recall@5": 1.01}}}, 1),
        ({"pooled": {"deltas": {"hybrid - best leg": 1.0}}}, 1),
    ],
)
def test_floors_on_a_set_or_on_its_hybrid_deltas(
    tmp_path: Path, floors: dict[str, Any], code: int
) -> None:
    """--floors asserts minimums per set and mode, and on hybrid - vector / best leg."""
    path = tmp_path / "floors.json"
    path.write_text(json.dumps(floors), encoding="utf-8")
    assert probe.main([*SMALL, "--floors", str(path)]) == code


def test_mcnemar_is_the_exact_two_sided_sign_test() -> None:
    assert probe.mcnemar(0, 0) == 1.0
    assert probe.mcnemar(5, 0) == 0.0625  # 2 / 2**5
    assert probe.mcnemar(2, 10) == probe.mcnemar(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)
    assert probe.mcnemar(3, 3) == 1.0  # capped: the two tails overlap


def test_check_passes_on_the_shipped_data(capsys: pytest.CaptureFixture[str]) -> None:
    assert probe.main(["--check"]) == 0
    assert "every rule holds" in capsys.readouterr().out
