"""``eval.fusion_lab`` (docs/quality.md, "Fusion on an absolute scale") measures what the
product ships: its ``names+floor0.08 0.35/0.65`` variant, fed the legs the harness computes, ranks
every question of a probe as ``Memory.recall`` does in hybrid mode, so its figures for
the other variants are comparable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engramdb import InMemoryStore, Memory
from eval import probe
from eval.embedders import make_embedder
from eval.fusion_lab import VARIANTS, main, probe_sets
from eval.synthetic import conversations


def test_the_shipped_variant_ranks_every_probe_question_as_recall_does() -> None:
    """On the people probe with the static table, scoped and pooled: the variant's
    first hit is hybrid recall's, question by question."""
    embedder = make_embedder("static")
    sets = probe_sets("people", embedder)
    data = probe.load("people")
    stores = {pooled: Memory(InMemoryStore(), embedder) for pooled in (False, True)}
    run = probe.evaluate(data, stores.__getitem__, modes=("hybrid",))
    shipped = VARIANTS["names+floor0.08 0.35/0.65"]
    for name in ("scoped", "pooled"):
        asked = run.sets[name]
        for query, legs, ranked in zip(asked, sets[name], run.ranked[name]["hybrid"], strict=True):
            holder = None if query.pooled else query.expected.split("/")[0]
            ids = [f.id for f in data.facts if query.pooled or f.holder == holder]
            first = ids[int(shipped(legs)[0])]
            assert first == ranked[0], (name, query.text)


def test_the_lab_prints_every_variant_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    """``--probe`` prints one row per variant asked for, a top-1 per set."""
    assert main(["--probe", "projects", "--embedder", "hash:256", "--only", "names+floor0.08 0.35",
                 "--cache", "none"]) == 0  # fmt: skip
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].split()[0] == "variant" and len(rows) == 2
    assert rows[1].startswith("names+floor0.08 0.35/0.65") and len(rows[1].split()) == 7


def test_the_lab_needs_one_source(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--embedder", "hash:256"])


def test_the_misses_agree_with_the_top1_table(capsys: pytest.CaptureFixture[str]) -> None:
    """``--misses``: the questions a variant loses to the vector leg, less those it wins,
    are the two rows' top-1 difference on that set."""
    assert main(["--probe", "projects", "--embedder", "hash:256", "--only", "vector,names 0.35",
                 "--cache", "none", "--misses", "scoped"]) == 0  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    vector, shrunk = (float(line[36:].split()[0]) for line in out[1:3])
    tally = [line.split() for line in out if line.strip().startswith("lost ")]
    lost, won, total = int(tally[-1][1].rstrip(",")), int(tally[-1][3]), int(tally[-1][5])
    assert total == 120 and lost - won == round((vector - shrunk) * total)


def test_choose_scores_each_conversation_with_what_the_others_chose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--choose``: one line per conversation naming a variant asked for, and the
    held-out mean of the choice is the mean of those lines' figures."""
    data = tmp_path / "synthetic.json"
    data.write_text(json.dumps(conversations()), encoding="utf-8")
    asked = ["names 0.35/0.65", "names+floor0.08 0.35/0.65"]
    assert main(["--data", str(data), "--embedder", "hash:256", "--cache", "none",
                 "--choose", "--only", ",".join(asked)]) == 0  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    folds = [line for line in lines if not line.startswith("held-out mean")]
    assert len(folds) == len(conversations()) and all(
        line.split(": ", 1)[1].rsplit(" r@10 ", 1)[0] in asked for line in folds
    )
    figures = [float(line.rsplit(" ", 1)[1]) for line in folds]
    chosen = next(line for line in lines if line.startswith("held-out mean, chosen:"))
    assert float(chosen.rsplit(" ", 1)[1]) == pytest.approx(sum(figures) / len(figures), abs=2e-3)
