"""The experiments behind recall's defaults, on the LoCoMo development split only.

Run from the repository root (numpy needed; the ``eval`` extra has it)::

    PYTHONPATH=core:drivers python -m eval.tune --data PATH/locomo_dev.json \\
        --embedder minilm [--out tune.json]

It computes each leg once per variant and fuses offline, so a grid of fusion
parameters costs seconds:

* the lexical leg with core's ``BM25Index`` (the in-memory twin of FTS5's ``bm25()``):
  query-side stop words (``STOP_WORDS``) or not, index-side stop words or not,
  Porter stemming or not, statistics over the whole store or per scope (conversation),
  the session date in the text or in metadata only, the speaker in the text or not;
* the vector leg by exact cosine (numpy) over the cached embeddings;
* fusion: reciprocal-rank fusion with a lexical weight and ``k``, and a convex
  combination of normalised scores (min-max over each leg's candidates, or the scores'
  own scales) with weight ``alpha`` on the vector leg, each leg cut at ``depth``;
* leave-one-conversation-out: parameters chosen on six conversations, scored on the
  seventh, to show how much the grid's best overfits.

Figures are recall@10 and MRR over categories 1-4, as ``eval.locomo`` reports them.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engramdb._lexical.bm25 import STOP_WORDS, BM25Index, tokenize

from .embedders import CachedEmbedder, make_embedder
from .locomo import Conversation, Turn, load, memory_text, metrics

Ranked = list[tuple[str, float]]  # (dia_id, score), best first


@dataclass(frozen=True)
class Lexical:
    """One variant of the lexical leg."""

    stop_query: bool = True
    stop_index: bool = False
    stemming: bool = True
    per_scope: bool = True
    date: bool = True
    speaker: bool = True

    def text(self, turn: Turn) -> str:
        text = memory_text(turn, date_in_text=self.date, speaker=self.speaker)
        if self.stop_index:
            text = " ".join(t for t in tokenize(text) if t not in STOP_WORDS)
        return text

    def index(self) -> BM25Index:
        """An index that leaves the query's stop words out, or (0.1.0) keeps them."""
        return BM25Index(
            stemming=self.stemming, stop_words=STOP_WORDS if self.stop_query else frozenset()
        )


def lexical_leg(
    conversations: Sequence[Conversation], variant: Lexical, depth: int
) -> list[Ranked]:
    """The lexical leg of every question (categories 1-4, with evidence), in order."""
    indexes: dict[str, BM25Index] = {}
    shared = variant.index()
    for conversation in conversations:
        index = variant.index() if variant.per_scope else shared
        indexes[conversation.sample_id] = index
        for turn in conversation.turns:
            index.add(f"{conversation.sample_id}|{turn.dia_id}", variant.text(turn))
    out = []
    for conversation, question in _questions(conversations):
        mine = {f"{conversation.sample_id}|{t.dia_id}" for t in conversation.turns}
        found = indexes[conversation.sample_id].search(question.text, depth, allowed=mine)
        out.append([(key.split("|", 1)[1], score) for key, score in found])
    return out


def vector_leg(
    conversations: Sequence[Conversation], embedder: Any, depth: int, *, date: bool = True
) -> list[Ranked]:
    """The exact cosine leg of every question."""
    import numpy as np

    variant = Lexical(stop_query=False, date=date)
    out = []
    matrices: dict[str, Any] = {}
    for conversation in conversations:
        texts = [variant.text(turn) for turn in conversation.turns]
        vectors = np.asarray(embedder.embed(texts, "document"), dtype=np.float64)
        matrices[conversation.sample_id] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    pairs = list(_questions(conversations))
    queries = np.asarray(embedder.embed([q.text for _, q in pairs], "query"), dtype=np.float64)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    for (conversation, _question), query in zip(pairs, queries, strict=True):
        scores = matrices[conversation.sample_id] @ query
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:depth]
        out.append([(conversation.turns[i].dia_id, float(scores[i])) for i in order])
    return out


def _questions(conversations: Sequence[Conversation]) -> Any:
    for conversation in conversations:
        for question in conversation.questions:
            if question.evidence and question.category != 5:
                yield conversation, question


# -- fusion ------------------------------------------------------------------------------

Fusion = Callable[[Ranked, Ranked], list[str]]


def rrf(k: int, lexical_weight: float, depth: int) -> Fusion:
    def fuse(vector: Ranked, lexical: Ranked) -> list[str]:
        scores: dict[str, float] = {}
        for weight, leg in ((1.0, vector[:depth]), (lexical_weight, lexical[:depth])):
            for rank, (key, _) in enumerate(leg, start=1):
                scores[key] = scores.get(key, 0.0) + weight / (k + rank)
        return _order(scores)

    return fuse


def convex(alpha: float, depth: int, norm: str = "minmax") -> Fusion:
    """``alpha`` * vector + (1 - alpha) * lexical, each normalised over its candidates."""

    def scaled(leg: Ranked) -> dict[str, float]:
        if not leg:
            return {}
        values = [score for _, score in leg]
        if norm == "minmax":
            low, high = min(values), max(values)
            span = high - low
            return {key: (score - low) / span if span > 0 else 1.0 for key, score in leg}
        if norm == "max":
            high = max(values)
            return {key: score / high if high > 0 else 0.0 for key, score in leg}
        raise ValueError(norm)

    def fuse(vector: Ranked, lexical: Ranked) -> list[str]:
        vec, lex = scaled(vector[:depth]), scaled(lexical[:depth])
        scores = {
            key: alpha * vec.get(key, 0.0) + (1 - alpha) * lex.get(key, 0.0)
            for key in vec.keys() | lex.keys()
        }
        return _order(scores)

    return fuse


def _order(scores: dict[str, float]) -> list[str]:
    return [key for key, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]


def score(
    fusion: Fusion, vector: Sequence[Ranked], lexical: Sequence[Ranked], gold: Sequence[Any]
) -> dict[str, float]:
    ranked = [fusion(v, x) for v, x in zip(vector, lexical, strict=True)]
    return metrics(ranked, gold)


def leg_only(leg: Sequence[Ranked]) -> list[list[str]]:
    return [[key for key, _ in ranked] for ranked in leg]


# -- the experiments ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.tune")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--cache", type=Path, default=Path(".cache/eval-embeddings.sqlite"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    conversations = load(args.data)
    embedder = CachedEmbedder(make_embedder(args.embedder), args.cache)
    pairs = list(_questions(conversations))
    gold = [question.evidence for _, question in pairs]
    owner = [conversation.sample_id for conversation, _ in pairs]
    report: dict[str, Any] = {"embedder": embedder.space.id, "questions": len(pairs)}
    depth = 200

    print(f"# {len(pairs)} questions (categories 1-4); embedder {embedder.space.id}\n")
    print("## The lexical leg alone\n")
    print("| variant | recall@10 | MRR |\n|---|---|---|")
    variants = {
        "as in 0.1.0: no stop words, whole-store statistics, date in metadata only": Lexical(
            stop_query=False, per_scope=False, date=False
        ),
        "stop words, whole-store statistics, date in metadata only": Lexical(
            per_scope=False, date=False
        ),
        "stop words, whole-store statistics, date in the text": Lexical(per_scope=False),
        "no stop words, per-scope statistics, date in the text": Lexical(stop_query=False),
        "stop words, per-scope statistics, date in the text (shipped)": Lexical(),
        "the same, stop words also left out of the memories": Lexical(stop_index=True),
        "the same, no stemming": Lexical(stemming=False),
        "the same, no speaker in the text": Lexical(speaker=False),
    }
    legs: dict[str, list[Ranked]] = {}
    report["lexical"] = {}
    for name, variant in variants.items():
        legs[name] = lexical_leg(conversations, variant, depth)
        result = metrics(leg_only(legs[name]), gold)
        report["lexical"][name] = result
        print(f"| {name} | {result['recall@10']:.3f} | {result['mrr']:.3f} |")

    vector = vector_leg(conversations, embedder, depth)
    undated = vector_leg(conversations, embedder, depth, date=False)
    embedder.close()
    report["vector"] = {
        "date in metadata only": metrics(leg_only(undated), gold),
        "date in the text (shipped)": metrics(leg_only(vector), gold),
    }
    print("\n## The vector leg alone\n")
    for name, result in report["vector"].items():
        print(f"- {name}: recall@10 {result['recall@10']:.3f}, MRR {result['mrr']:.3f}")

    lexical = legs["stop words, per-scope statistics, date in the text (shipped)"]
    whole_store = legs["stop words, whole-store statistics, date in the text"]
    grids: dict[str, dict[str, Fusion]] = {
        "rrf": {
            f"k={k}, lexical weight {w}, depth {d}": rrf(k, w, d)
            for k, w, d in itertools.product((5, 10, 20, 60), (1.0, 1.5, 2.0, 3.0), (50, 100, 200))
        },
        "convex-minmax": {
            f"alpha={a}, depth {d}": convex(a, d)
            for a, d in itertools.product((0.2, 0.3, 0.4, 0.5, 0.6), (20, 50, 100, 200))
        },
        "convex-max": {
            f"alpha={a}, depth {d}": convex(a, d, "max")
            for a, d in itertools.product((0.2, 0.3, 0.4, 0.5, 0.6), (20, 50, 100, 200))
        },
    }
    print("\n## Fusion (the shipped lexical leg)\n")
    report["fusion"] = {}
    for family, grid in grids.items():
        results = {name: score(fusion, vector, lexical, gold) for name, fusion in grid.items()}
        report["fusion"][family] = results
        best = sorted(results.items(), key=lambda item: (-item[1]["recall@10"], -item[1]["mrr"]))
        print(f"### {family}: the five best of {len(results)}\n")
        print("| parameters | recall@10 | MRR |\n|---|---|---|")
        for name, result in best[:5]:
            print(f"| {name} | {result['recall@10']:.3f} | {result['mrr']:.3f} |")
        held_out = _leave_one_out(grid, vector, lexical, gold, owner)
        report["fusion"][family + " (leave one conversation out)"] = held_out
        print(
            f"\nleave one conversation out: recall@10 {held_out['recall@10']:.3f}, "
            f"MRR {held_out['mrr']:.3f} (parameters chosen on the other six each time: "
            f"{held_out['chosen']})\n"
        )
    print("### The shipped fusion (convex, alpha=0.4, depth 100) by lexical statistics\n")
    print("| statistics | recall@10 | MRR |\n|---|---|---|")
    for name, leg in (("per scope (shipped)", lexical), ("whole store", whole_store)):
        result = score(convex(0.4, 100), vector, leg, gold)
        report["fusion"][f"shipped, statistics {name}"] = result
        print(f"| {name} | {result['recall@10']:.3f} | {result['mrr']:.3f} |")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _leave_one_out(
    grid: dict[str, Fusion],
    vector: Sequence[Ranked],
    lexical: Sequence[Ranked],
    gold: Sequence[Any],
    owner: Sequence[str],
) -> dict[str, Any]:
    """Choose the best parameters on six conversations, score them on the seventh."""
    ranked: list[list[str]] = [[] for _ in gold]
    chosen = []
    for held in sorted(set(owner)):
        train = [i for i, o in enumerate(owner) if o != held]

        def train_score(name: str, train: list[int] = train) -> tuple[float, float]:
            result = score(
                grid[name],
                [vector[i] for i in train],
                [lexical[i] for i in train],
                [gold[i] for i in train],
            )
            return result["recall@10"], result["mrr"]

        best = max(grid, key=train_score)
        chosen.append(best)
        for i, o in enumerate(owner):
            if o == held:
                ranked[i] = grid[best](vector[i], lexical[i])
    result: dict[str, Any] = dict(metrics(ranked, gold))
    result["chosen"] = sorted(set(chosen))
    return result


if __name__ == "__main__":
    raise SystemExit(main())
