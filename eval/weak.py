"""The weak categories (multi-hop, open-domain): ranking stages that need no language
model at query time, each judged by leave-one-conversation-out on LoCoMo's development
split.

Run from the repository root (standard library only; no numpy, no torch)::

    PYTHONPATH=core:drivers python -m eval.weak --data PATH/locomo_dev.json \\
        [--embedder static|hash:256|...] [--folds loco] [--out weak.json] \\
        [--cache .cache/eval-embeddings.sqlite|none]

The vector leg is the product's own (``Memory.recall(mode="vector")`` on an
``InMemoryStore``, its 100 best with their cosines); the lexical leg is recomputed here
with core's tokenizer, stemmer and stop words and BM25 with the statistics of the
conversation's scope, exactly as the stores rank it (ties newest first, scores on the
2**-30 grid), so that a variant of it can be scored without touching the stores; fusion
is core's (``engramdb.ranking._fusion.convex``, the default weights, depth 100, the relevance
floor) and the date-aware stage as ``ranking._hits.dated`` applies it. With the shipped
parameters it ranks every question as ``Memory.recall`` does
(``tests/eval/test_weak.py``), so its figures are ``eval.locomo``'s.

The stages, each a family of variants (a grid of parameters):

* ``bm25``: BM25's k1 and b;
* ``prf``: pseudo-relevance feedback, RM3-style: the first ``m`` hits of the lexical leg
  weigh their terms (each hit's term distribution, weighted by its share of the m
  scores); the ``t`` heaviest terms that are not stop words join the query, which
  keeps weight ``lam`` (the original terms) against ``1 - lam`` (the expansion), and
  the lexical leg is searched again with those weights;
* ``qtw``: query-term weighting: a term's BM25 contribution times ``caps`` when the
  question writes it capitalised past its first word (a name or a title), its idf
  raised to the power ``p``;
* ``date``: date-aware matching, adopted (``engramdb.ranking._dates``, ``ranking._hits.dated``): a
  question that names a date (``on 8 May, 2023``, ``in July 2023``, ``in June``, ``in
  2022``) adds ``beta`` times the best possible fused score to every hybrid candidate
  whose text names a day of that period, or up to ``window`` days later (what happened
  is often told a few days after). Its baseline is the ranking without it (``beta`` 0);
  every other stage is measured on top of it, as shipped.

A hit's neighbouring turns in its session, returned as *context* beside the first 10
hits, move no hit; the product gives them (``recall(..., context=N)``), and
``eval.locomo --context N`` measures context-recall@10 through it.

``--folds loco``: for each of the seven conversations, each stage's parameters are chosen
on the other six (the best hybrid recall@10, then MRR; for the lexical mode, the
lexical figures) and the choice is scored on the held-out one, beside the unchanged
pipeline on the same conversation. Reported per stage and mode: the held-out rankings
pooled (overall and per category), each fold's figures and gain, the mean gain and its
spread (standard deviation over folds) and in how many folds recall@10 and MRR rose.
The ``adopt`` flag of a mode says whether the mean held-out gain is above 0 for both
recall@10 and MRR and both rise in a majority of folds; a stage is adopted only when
that holds in every mode it would change (``docs/quality.md``, "Weak categories").
``--folds none`` gives only the whole-split figures of every variant. The vectors are
kept in ``eval.locomo``'s embedding cache (``--cache``), so a model run by one is not
run again by the other.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engramdb import InMemoryStore, Memory
from engramdb._lexical.bm25 import STOP_WORDS, query_tokens, stem, terms, tokenize
from engramdb.ranking import _dates as dates
from engramdb.ranking._fusion import convex
from engramdb.ranking._hits import DEPTH as LEG_DEPTH
from engramdb.ranking._hits import (
    LEXICAL_FLOOR,
    MIN_SIMILARITY,
    default_weights,
    noise_floor,
    scaled,
)
from engramdb.ranking._names import Named, named
from engramdb.ranking._ties import quantised, ranked_pairs
from engramdb.store import bm25_ceiling

from .embedders import CachedEmbedder, make_embedder
from .locomo import CATEGORIES, Conversation, load, memory_text

__all__ = ["Corpus", "Lexicon", "main"]

K1, B = 1.2, 0.75  # the shipped BM25 (FTS5's bm25())
CUT = 50  # hits per question kept for the metrics (as eval.locomo's DEPTH)
MODES = ("lexical", "hybrid")  # the vector leg has no stage here: it is reported as is


# -- one conversation's lexical index -----------------------------------------------------


@dataclass(slots=True)
class Lexicon:
    """BM25 over one conversation's turns, with any k1, b and per-term query weights.

    A text already seen is not indexed again (``Memory.remember_many`` stores it once:
    a turn repeated word for word in a session, date and speaker included)."""

    texts: list[str]
    postings: dict[str, dict[int, int]] = field(default_factory=dict)
    lengths: list[int] = field(default_factory=list)
    counts: list[dict[str, int]] = field(default_factory=list)
    documents: int = 0

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for index, text in enumerate(self.texts):
            if text in seen:
                self.lengths.append(0)
                self.counts.append({})
                continue
            seen.add(text)
            self.documents += 1
            doc = terms(text)
            self.lengths.append(len(doc))
            counts: dict[str, int] = {}
            for term in doc:
                counts[term] = counts.get(term, 0) + 1
            self.counts.append(counts)
            for term, tf in counts.items():
                self.postings.setdefault(term, {})[index] = tf

    @property
    def avgdl(self) -> float:
        return sum(self.lengths) / self.documents

    def ceiling(self, weighted: Mapping[str, float]) -> float:
        """The query's BM25 ceiling, as ``engramdb.ranking`` computes it from the statistics a
        store reports (``engramdb.store.bm25_ceiling``); 1.0 when it is 0."""
        found = [len(self.postings.get(term, ())) for term in weighted]
        value = bm25_ceiling(self.documents, found)
        return value if value > 0.0 else 1.0

    def names(self, question: str) -> Named:
        """The names of ``question`` with their parts, from these statistics as a store
        reports them (``engramdb.ranking._names``)."""
        found = [len(self.postings.get(term, ())) for _token, term in query_tokens(question)]
        return named(question, self.documents, found)

    def idf(self, term: str) -> float:
        found = len(self.postings.get(term, ()))
        if not found:
            return 0.0
        value = math.log((self.documents - found + 0.5) / (found + 0.5))
        return value if value > 0.0 else 1e-6

    def search(
        self,
        weighted: Mapping[str, float],
        *,
        k1: float = K1,
        b: float = B,
        idf_power: float = 1.0,
        depth: int = LEG_DEPTH,
    ) -> list[tuple[str, float]]:
        """``(turn index as str, score)`` best first, as a store ranks its lexical leg."""
        avgdl = self.avgdl
        scores: dict[str, float] = {}
        for term, weight in weighted.items():
            posting = self.postings.get(term)
            if not posting or weight <= 0:
                continue
            idf = self.idf(term) ** idf_power * weight
            for index, tf in posting.items():
                part = (
                    idf * (tf * (k1 + 1.0)) / (tf + k1 * (1 - b + b * self.lengths[index] / avgdl))
                )
                key = str(index)
                scores[key] = scores.get(key, 0.0) + part
        return ranked_pairs(scores.items(), depth, int)


def query_weights(question: str) -> dict[str, float]:
    """The shipped lexical query: each distinct non-stop-word term, weight 1."""
    return {term: 1.0 for _token, term in query_tokens(question)}


# -- the corpus ---------------------------------------------------------------------------


@dataclass(slots=True)
class Item:
    """One scored question, with its conversation's legs and statistics."""

    conversation: str
    category: int
    text: str
    gold: frozenset[str]  # turn indexes as str
    vector: list[tuple[str, float]]


@dataclass(slots=True)
class Corpus:
    conversations: list[Conversation]
    lexicons: dict[str, Lexicon]
    items: list[Item]
    semantic: bool
    embedder: str

    @property
    def weights(self) -> dict[str, float]:
        return default_weights("convex", self.semantic)


def build(conversations: list[Conversation], embedder: Any) -> Corpus:
    """Index every conversation and take each question's vector leg from ``Memory``."""
    memory = Memory(InMemoryStore(), embedder)
    lexicons = {}
    items = []
    for conversation in conversations:
        texts = [memory_text(turn, date_in_text=True) for turn in conversation.turns]
        lexicons[conversation.sample_id] = Lexicon(texts)
        scope = ("locomo", conversation.sample_id)
        memory.remember_many(
            {"text": text, "scope": scope, "metadata": {"turn": index}}
            for index, text in enumerate(texts)
        )
        where = {turn.dia_id: str(index) for index, turn in enumerate(conversation.turns)}
        for question in conversation.questions:
            if not question.evidence or question.category == 5:
                continue
            hits = memory.recall(question.text, [scope], top_k=LEG_DEPTH, mode="vector")
            vector = [(str(hit.memory.metadata["turn"]), hit.score) for hit in hits]
            gold = frozenset(where[dia_id] for dia_id in question.evidence)
            items.append(
                Item(conversation.sample_id, question.category, question.text, gold, vector)
            )
    memory.close()
    semantic = bool(getattr(embedder, "semantic", True))
    return Corpus(conversations, lexicons, items, semantic, embedder.space.id)


# -- the stages ---------------------------------------------------------------------------

Stage = Callable[[Corpus, Item], dict[str, list[str]]]  # mode -> ranked turn indexes


def fuse(corpus: Corpus, item: Item, lexical: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The product's hybrid: convex fusion of the legs on their scales (the cosine above
    the leg's noise floor; BM25, with the gain for the question's names, over the query's
    ceiling, above the lexical floor), only candidates with evidence."""
    weights = corpus.weights
    vector = [(key, quantised(score)) for key, score in item.vector if score >= MIN_SIMILARITY]
    lexicon = corpus.lexicons[item.conversation]
    names = lexicon.names(item.text)
    ceiling = lexicon.ceiling(query_weights(item.text)) + names.ceiling
    gain = {key: names.gain(lexicon.texts[int(key)]) for key, _ in lexical} if names.parts else {}
    floor = noise_floor([score for _, score in vector])
    lf = LEXICAL_FLOOR if weights["vector"] > 0 else 0.0
    fused = convex(
        {
            "vector": [(key, scaled("vector", score, floor=floor)) for key, score in vector],
            "lexical": [
                (key, scaled("lexical", s + gain.get(key, 0.0), ceiling=ceiling, lexical_floor=lf))
                for key, s in lexical
            ],
        },
        weights=weights,
        newer=int,
        depth=LEG_DEPTH,
    )
    evident = {key for key, _ in lexical}
    if weights["vector"] > 0:
        evident.update(key for key, _ in vector)
    return [(entry.id, entry.score) for entry in fused if entry.id in evident]


def dated(
    corpus: Corpus,
    item: Item,
    fused: list[tuple[str, float]],
    beta: float = dates.BONUS,
    window: int = dates.WINDOW,
) -> list[tuple[str, float]]:
    """The date-aware stage of ``ranking._hits.dated`` with any bonus and window: the fused
    score of each candidate whose text names a day of the question's period (or up to
    ``window`` days after) gains ``beta`` times the best possible fused score."""
    period = dates.query_period(item.text)
    if period is None or beta <= 0:
        return fused
    texts = corpus.lexicons[item.conversation].texts
    weights = corpus.weights
    bonus = beta * math.fsum(weights.values())
    moved = [
        (key, round(score + bonus, 9) if dates.matches(period, texts[int(key)], window) else score)
        for key, score in fused
    ]
    order = {key: position for position, (key, _) in enumerate(fused)}
    return sorted(moved, key=lambda pair: (-pair[1], order[pair[0]]))


def _both(
    corpus: Corpus,
    item: Item,
    lexical: list[tuple[str, float]],
    beta: float = dates.BONUS,
    window: int = dates.WINDOW,
) -> dict[str, list[str]]:
    hybrid = dated(corpus, item, fuse(corpus, item, lexical), beta, window)
    return {
        "lexical": [key for key, _ in lexical[:CUT]],
        "hybrid": [key for key, _ in hybrid[:CUT]],
    }


def shipped(beta: float = dates.BONUS, window: int = dates.WINDOW) -> Stage:
    """The product's ranking (with ``beta=0``: without the date-aware stage)."""

    def run(corpus: Corpus, item: Item) -> dict[str, list[str]]:
        lexicon = corpus.lexicons[item.conversation]
        return _both(corpus, item, lexicon.search(query_weights(item.text)), beta, window)

    return run


def bm25(k1: float, b: float) -> Stage:
    def run(corpus: Corpus, item: Item) -> dict[str, list[str]]:
        lexicon = corpus.lexicons[item.conversation]
        return _both(corpus, item, lexicon.search(query_weights(item.text), k1=k1, b=b))

    return run


def prf(m: int, t: int, lam: float) -> Stage:
    def run(corpus: Corpus, item: Item) -> dict[str, list[str]]:
        lexicon = corpus.lexicons[item.conversation]
        original = query_weights(item.text)
        first = lexicon.search(original)
        return _both(corpus, item, lexicon.search(expanded(lexicon, original, first, m, t, lam)))

    return run


_STOP_TERMS = frozenset(stem(word) for word in STOP_WORDS)


def expanded(
    lexicon: Lexicon,
    original: Mapping[str, float],
    first: Sequence[tuple[str, float]],
    m: int,
    t: int,
    lam: float,
) -> dict[str, float]:
    """RM3: ``lam`` * the query's term distribution + ``(1 - lam)`` * the relevance
    model of the first ``m`` hits (their term distributions weighted by their scores),
    cut to the ``t`` heaviest expansion terms that are not stop words or numbers."""
    feedback = first[:m]
    total = sum(score for _, score in feedback)
    if not feedback or total <= 0:
        return dict(original)
    model: dict[str, float] = {}
    for key, score in feedback:
        counts = lexicon.counts[int(key)]
        length = sum(counts.values())
        for term, tf in counts.items():
            if term in _STOP_TERMS or term.isdigit():
                continue
            model[term] = model.get(term, 0.0) + (score / total) * tf / length
    best = sorted(model.items(), key=lambda pair: (-pair[1], pair[0]))[:t]
    norm = sum(weight for _, weight in best) or 1.0
    weights = {term: lam * weight / len(original) for term, weight in original.items()}
    for term, weight in best:
        weights[term] = weights.get(term, 0.0) + (1 - lam) * weight / norm
    scale = max(weights.values())
    return {term: weight / scale for term, weight in weights.items()}  # the top term weighs 1


def qtw(caps: float, power: float) -> Stage:
    def run(corpus: Corpus, item: Item) -> dict[str, list[str]]:
        lexicon = corpus.lexicons[item.conversation]
        weights = query_weights(item.text)
        for term in capitalised_terms(item.text):
            if term in weights:
                weights[term] = caps
        return _both(corpus, item, lexicon.search(weights, idf_power=power))

    return run


def capitalised_terms(question: str) -> set[str]:
    """The terms the question writes capitalised, its first word aside."""
    words = re.findall(r"[^\W_]+", question)
    out = set()
    for word in words[1:]:
        if word[:1].isupper():
            out.update(stem(token) for token in tokenize(word) if token not in STOP_WORDS)
    return out


def families() -> dict[str, dict[str, Stage]]:
    """Every stage's grid of variants."""
    return {
        "bm25": {
            f"k1={k1}, b={b}": bm25(k1, b)
            for k1, b in itertools.product((0.6, 0.9, 1.2, 1.5, 2.0), (0.3, 0.5, 0.75, 0.9, 1.0))
        },
        "prf": {
            f"m={m}, t={t}, lam={lam}": prf(m, t, lam)
            for m, t, lam in itertools.product((3, 5, 10), (5, 10, 20), (0.5, 0.7, 0.85))
        },
        "qtw": {
            f"caps={caps}, p={power}": qtw(caps, power)
            for caps, power in itertools.product((1.0, 1.5, 2.0, 3.0), (1.0, 1.5, 2.0, 3.0))
            if (caps, power) != (1.0, 1.0)
        },
        "date": {
            f"beta={beta}, window={window}": shipped(beta, window)
            for beta, window in itertools.product((0.05, 0.1, 0.2, 0.3, 0.5, 1.0), (0, 7, 31))
        },
    }


# -- scoring ------------------------------------------------------------------------------

Scores = dict[str, list[tuple[float, float]]]  # mode -> per item (recall@10, reciprocal rank)


def per_item(ranked: Sequence[str], gold: frozenset[str]) -> tuple[float, float]:
    recall = len(set(ranked[:10]) & gold) / len(gold)
    rr = next((1.0 / rank for rank, key in enumerate(ranked, 1) if key in gold), 0.0)
    return recall, rr


def run_stage(corpus: Corpus, stage: Stage) -> Scores:
    out: Scores = {mode: [] for mode in MODES}
    for item in corpus.items:
        ranked = stage(corpus, item)
        for mode in MODES:
            out[mode].append(per_item(ranked[mode], item.gold))
    return out


def summary(values: Iterable[tuple[float, float]]) -> dict[str, float]:
    listed = list(values)
    if not listed:
        return {"recall@10": 0.0, "mrr": 0.0}
    return {
        "recall@10": round(sum(r for r, _ in listed) / len(listed), 4),
        "mrr": round(sum(rr for _, rr in listed) / len(listed), 4),
    }


def by_category(corpus: Corpus, values: Sequence[tuple[float, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"all": summary(values)}
    for category in sorted({item.category for item in corpus.items}):
        out[CATEGORIES[category]] = summary(
            v for v, item in zip(values, corpus.items, strict=True) if item.category == category
        )
    return out


def loco(corpus: Corpus, base: Scores, grid: Mapping[str, Scores]) -> dict[str, Any]:
    """Each fold: the variant with the best training figures, scored on the held-out
    conversation beside the unchanged pipeline."""
    owners = [item.conversation for item in corpus.items]
    out: dict[str, Any] = {}
    for mode in MODES:
        pooled: list[tuple[float, float]] = [(0.0, 0.0)] * len(owners)
        folds = []
        for held in sorted(set(owners)):
            train = [i for i, o in enumerate(owners) if o != held]
            test = [i for i, o in enumerate(owners) if o == held]

            def on_train(
                name: str, train: list[int] = train, mode: str = mode
            ) -> tuple[float, float]:
                figures = summary(grid[name][mode][i] for i in train)
                return figures["recall@10"], figures["mrr"]

            chosen = max(sorted(grid), key=on_train)
            for i in test:
                pooled[i] = grid[chosen][mode][i]
            got = summary(grid[chosen][mode][i] for i in test)
            was = summary(base[mode][i] for i in test)
            folds.append(
                {
                    "held_out": held,
                    "questions": len(test),
                    "chosen": chosen,
                    "shipped": was,
                    "stage": got,
                    "gain": {k: round(got[k] - was[k], 4) for k in got},
                }
            )
        gains = {k: [fold["gain"][k] for fold in folds] for k in ("recall@10", "mrr")}
        out[mode] = {
            "pooled": by_category(corpus, pooled),
            "shipped": by_category(corpus, base[mode]),
            "folds": folds,
            "mean_gain": {k: round(statistics.mean(v), 4) for k, v in gains.items()},
            "std_gain": {k: round(statistics.stdev(v), 4) for k, v in gains.items()},
            "folds_improved": {k: sum(g > 0 for g in v) for k, v in gains.items()},
        }
        out[mode]["adopt"] = all(
            out[mode]["mean_gain"][k] > 0 and out[mode]["folds_improved"][k] > len(folds) / 2
            for k in gains
        )
    return out


# -- the report ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.weak", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--folds", choices=("none", "loco"), default="loco")
    parser.add_argument("--stages", default="bm25,prf,qtw,date", help="comma-separated")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(".cache/eval-embeddings.sqlite"),
        help="embedding cache, eval.locomo's (by space and content hash); 'none' to disable",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    inner = make_embedder(args.embedder)
    embedder = inner if str(args.cache) == "none" else CachedEmbedder(inner, args.cache)
    corpus = build(load(args.data), embedder)
    if isinstance(embedder, CachedEmbedder):
        embedder.close()  # every text is embedded: what follows ranks the corpus
    base = run_stage(corpus, shipped())
    without = run_stage(corpus, shipped(beta=0.0))
    report: dict[str, Any] = {
        "embedder": corpus.embedder,
        "questions": len(corpus.items),
        "shipped": {mode: by_category(corpus, base[mode]) for mode in MODES},
        "without_date": by_category(corpus, without["hybrid"]),
        "vector": by_category(
            corpus,
            [per_item([k for k, _ in item.vector[:CUT]], item.gold) for item in corpus.items],
        ),
        "stages": {},
        "embedding": embedder.stats() if isinstance(embedder, CachedEmbedder) else None,
    }
    print(f"# {len(corpus.items)} questions; embedder {corpus.embedder}")
    _table("shipped", report["shipped"], report["vector"])
    print("  hybrid without the date-aware stage: ", end="")
    _categories(report["without_date"])
    grids = families()
    for name in [s for s in args.stages.split(",") if s]:
        grid = {variant: run_stage(corpus, stage) for variant, stage in grids[name].items()}
        full = {
            variant: {mode: summary(scores[mode])["recall@10"] for mode in MODES}
            for variant, scores in grid.items()
        }
        entry: dict[str, Any] = {"full_split": full}
        if args.folds == "loco":
            entry["loco"] = loco(corpus, without if name == "date" else base, grid)
            for mode in MODES:
                result = entry["loco"][mode]
                print(
                    f"{name} {mode}: held out {result['pooled']['all']} against "
                    f"{result['shipped']['all']}; mean gain {result['mean_gain']} "
                    f"(std {result['std_gain']}), folds improved {result['folds_improved']}, "
                    f"adopt {result['adopt']}; chosen "
                    f"{sorted({f['chosen'] for f in result['folds']})}"
                )
                _categories(result["pooled"])
        report["stages"][name] = entry
    report["seconds"] = round(time.perf_counter() - started, 1)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _table(name: str, figures: Mapping[str, Any], vector: Mapping[str, Any]) -> None:
    print(f"## {name}")
    for mode, by in (*figures.items(), ("vector", vector)):
        print(
            f"  {mode}: "
            + ", ".join(f"{c} {v['recall@10']:.3f}/{v['mrr']:.3f}" for c, v in by.items())
        )


def _categories(by: Mapping[str, Any]) -> None:
    print("    " + ", ".join(f"{c} {v['recall@10']:.3f}/{v['mrr']:.3f}" for c, v in by.items()))


if __name__ == "__main__":
    raise SystemExit(main())
