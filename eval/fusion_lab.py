"""Fusion variants scored offline on each question's legs, computed once: the record of
what was tried before fusion moved to an absolute scale (``docs/quality.md``, "Fusion on
an absolute scale").

    PYTHONPATH=core:drivers python -m eval.fusion_lab --data PATH/locomo_dev.json --embedder E
    PYTHONPATH=core:drivers python -m eval.fusion_lab --probe people|projects --embedder E

The vector leg is the product's (``Memory.recall(mode="vector")``, its first 100 with
their cosines), the lexical leg ``eval.weak``'s BM25 (the product's, statistics of the
scope) with the query's ceiling (``attainable``: every term's idf times k1 + 1). Each
variant (:data:`VARIANTS`) turns the two legs into one ranking; LoCoMo is scored by
recall@10, MRR and top-1 over categories 1-4 (no date stage, so a little below
``eval.locomo``'s hybrid), a probe by each set's top-1. ``names+floor0.08 0.35/0.65`` is
what ``Memory.recall`` ships (``shrunk 0.35/0.65`` with the names of the question,
``engramdb.ranking._names``, and the lexical leg's floor, ``LEXICAL_FLOOR``): on the
probes it ranks every question as the product does (``tests/eval/test_fusion_lab.py``).
``--only a,b`` keeps the variants whose name holds one of the words; ``--cache none``
embeds without the cache.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engramdb.ranking._hits import MIN_SIMILARITY, scaled
from engramdb.ranking._ties import quantised

from .embedders import CachedEmbedder, make_embedder
from .locomo import load
from .weak import K1, Corpus, Lexicon, build, query_weights

Pairs = list[tuple[str, float]]


@dataclass
class Legs:
    vector: Pairs  # (key, cosine) best first, above the floor
    lexical: Pairs  # (key, bm25) best first
    attainable: float  # sum over query terms of idf * (k1 + 1) (absent term: the top idf)
    gold: frozenset[str]
    category: int
    anchor: float = 0.0  # the query's mean cosine to a few unrelated sentences
    named: dict[str, float] = field(default_factory=dict)  # key -> its gain for names
    named_ceiling: float = 0.0  # what the names add to the ceiling
    conversation: str = ""  # LoCoMo's conversation of the question


def with_names(legs: Legs, lexicon: Lexicon, question: str) -> Legs:
    """``legs`` with what each lexical hit gains for the names of ``question``
    (``engramdb.ranking._names``), from the lexicon's statistics as a store reports them."""
    names = lexicon.names(question)
    if names.parts:
        legs.named = {k: names.gain(lexicon.texts[int(k)]) for k, _ in legs.lexical}
        legs.named_ceiling = names.ceiling
    return legs


def attainable(lexicon: Lexicon, weighted: dict[str, float]) -> float:
    n = lexicon.documents
    total = 0.0
    for term, weight in weighted.items():
        df = len(lexicon.postings.get(term, ()))
        idf = math.log((n - df + 0.5) / (df + 0.5))
        total += weight * (idf if idf > 0 else 1e-6) * (K1 + 1.0)
    return total


ANCHORS = [
    "The train to the airport leaves every twenty minutes.",
    "Add two cups of flour and a pinch of salt to the bowl.",
    "The committee will vote on the budget next Tuesday.",
    "Our cat likes to sleep on the warm windowsill.",
    "Please restart the router if the connection drops.",
    "The museum is closed on public holidays.",
    "She finished the marathon in under four hours.",
    "The invoice must be paid within thirty days.",
    "Rain is expected over the weekend in the north.",
    "He bought a second-hand guitar at the market.",
    "The new library opens at nine in the morning.",
    "Remember to water the tomatoes twice a week.",
]


def _unit(v: Sequence[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


def legs_of(corpus: Corpus, embedder: Any = None) -> list[Legs]:
    out = []
    anchors = (
        [_unit(v) for v in embedder.embed(ANCHORS, "document")] if embedder is not None else []
    )
    queries: dict[str, list[float]] = {}
    if embedder is not None:
        texts = list(dict.fromkeys(item.text for item in corpus.items))
        for start in range(0, len(texts), 64):
            chunk = texts[start : start + 64]
            for text, v in zip(chunk, embedder.embed(chunk, "query"), strict=True):
                queries[text] = _unit(v)
    for item in corpus.items:
        lexicon = corpus.lexicons[item.conversation]
        weighted = query_weights(item.text)
        lexical = lexicon.search(weighted)
        vector = [(k, quantised(s)) for k, s in item.vector if s >= MIN_SIMILARITY]
        anchor = 0.0
        if anchors:
            q = queries[item.text]
            anchor = sum(sum(a * b for a, b in zip(q, v, strict=True)) for v in anchors) / len(
                anchors
            )
        legs = Legs(
            vector, lexical, attainable(lexicon, weighted), item.gold, item.category, anchor
        )
        legs.conversation = item.conversation
        out.append(with_names(legs, lexicon, item.text))
    return out


Variant = Callable[[Legs], list[str]]


def minmax(pairs: Pairs) -> dict[str, float]:
    if not pairs:
        return {}
    high = pairs[0][1]
    low = min(s for _, s in pairs)
    span = high - low
    return {k: (1.0 - (high - s) / span) if span > 0 else 1.0 for k, s in pairs}


def fuse(parts: list[tuple[float, dict[str, float]]], order: dict[str, int]) -> list[str]:
    scores: dict[str, float] = {}
    for weight, leg in parts:
        for key, value in leg.items():
            scores[key] = scores.get(key, 0.0) + weight * value
    return sorted(scores, key=lambda k: (-round(scores[k], 9), order.get(k, 10**9), -int(k)))


def _order(legs: Legs) -> dict[str, int]:
    best: dict[str, int] = {}
    for pairs in (legs.vector, legs.lexical):
        for position, (key, _) in enumerate(pairs):
            best[key] = min(best.get(key, 10**9), position)
    return best


def shipped(wv: float = 0.4, wl: float = 0.6) -> Variant:
    def run(legs: Legs) -> list[str]:
        return fuse([(wv, minmax(legs.vector)), (wl, minmax(legs.lexical))], _order(legs))

    return run


def lex_absolute(wv: float, wl: float, vec: str = "minmax") -> Variant:
    def run(legs: Legs) -> list[str]:
        top = legs.attainable or 1.0
        lexical = {k: s / top for k, s in legs.lexical}
        if vec == "minmax":
            vector = minmax(legs.vector)
        elif vec == "cos":
            vector = {k: max(0.0, s) for k, s in legs.vector}
        else:  # relative to the best cosine
            best = legs.vector[0][1] if legs.vector else 1.0
            vector = {k: s / best for k, s in legs.vector}
        return fuse([(wv, vector), (wl, lexical)], _order(legs))

    return run


def confidence(wv: float, wl: float, power: float = 1.0) -> Variant:
    """min-max lexical leg scaled by its best score's share of the attainable maximum."""

    def run(legs: Legs) -> list[str]:
        top = legs.attainable or 1.0
        conf = (legs.lexical[0][1] / top) ** power if legs.lexical else 0.0
        return fuse([(wv, minmax(legs.vector)), (wl * conf, minmax(legs.lexical))], _order(legs))

    return run


def floored(wv: float, wl: float, alpha: float, vec: str = "minmax") -> Variant:
    """min-max lexical leg whose span is at least ``alpha`` of the query's ceiling."""

    def run(legs: Legs) -> list[str]:
        if legs.lexical:
            high = legs.lexical[0][1]
            low = min(s for _, s in legs.lexical)
            span = max(high - low, alpha * legs.attainable)
            lexical = {k: (s - low) / span if span > 0 else 1.0 for k, s in legs.lexical}
        else:
            lexical = {}
        if vec == "minmax":
            vector = minmax(legs.vector)
        else:
            vector = {k: max(0.0, s) for k, s in legs.vector}
        return fuse([(wv, vector), (wl, lexical)], _order(legs))

    return run


def above_floor(pairs: Pairs, low: float | None = None) -> dict[str, float]:
    """The cosine's distance above the candidates' weakest (or ``low``), over a perfect
    match's (below the floor: 0)."""
    if not pairs:
        return {}
    if low is None:
        low = min(s for _, s in pairs)
    span = 1.0 - low
    return {k: max(0.0, (s - low) / span) if span > 0 else 1.0 for k, s in pairs}


def shrunk_vector(legs: Legs, depth: int = 100) -> dict[str, float]:
    """The vector leg above its noise floor as ``Memory.recall`` takes it: the weakest
    of the first ``depth`` cosines, shrunk toward 0 by the share of ``depth`` they fill."""
    head = legs.vector[:depth]
    low = min(s for _, s in head) * min(1.0, len(head) / depth) if head else 0.0
    return above_floor(legs.vector, low)


def anchored(wv: float, wl: float, shift: float = 0.0) -> Variant:
    def run(legs: Legs) -> list[str]:
        top = legs.attainable or 1.0
        lexical = {k: s / top for k, s in legs.lexical}
        return fuse(
            [(wv, above_floor(legs.vector, legs.anchor + shift)), (wl, lexical)], _order(legs)
        )

    return run


def powered(wv: float, wl: float, power: float, shrink: bool = True, depth: int = 100) -> Variant:
    """The shrunk floor, and the lexical relevance raised to ``power`` (a partial match
    of the query's idf mass counts less than in proportion)."""

    def run(legs: Legs) -> list[str]:
        top = legs.attainable or 1.0
        lexical = {k: min(1.0, s / top) ** power for k, s in legs.lexical}
        head = legs.vector[:depth]
        share = min(1.0, len(head) / depth) if shrink else 1.0
        low = min(s for _, s in head) * share if head else 0.0
        return fuse([(wv, above_floor(legs.vector, low)), (wl, lexical)], _order(legs))

    return run


def gated(wv: float, wl: float, gamma: float, least: float, depth: int = 100) -> Variant:
    """The shipped scales; a memory's lexical share counts in proportion to how close the
    vector leg puts it to its best (its share over the best's, to ``gamma``, at least
    ``least``): a word shared with a memory the vector leg finds far weaker than its
    best counts little."""

    def run(legs: Legs) -> list[str]:
        top = legs.attainable or 1.0
        vector = shrunk_vector(legs, depth)
        best = max(vector.values(), default=0.0)
        lexical = {}
        for k, s in legs.lexical:
            gate = (vector.get(k, 0.0) / best) ** gamma if best > 0 else 1.0
            lexical[k] = min(1.0, s / top) * max(least, gate)
        return fuse([(wv, vector), (wl, lexical)], _order(legs))

    return run


def margin(wv: float, wl: float, beta: float, depth: int = 100) -> Variant:
    """The shrunk floor; the vector leg's first hit gains ``beta`` times its lead over
    the second (on the leg's scale): a confident vector leg keeps its first."""

    def run(legs: Legs) -> list[str]:
        top = legs.attainable or 1.0
        lexical = {k: min(1.0, s / top) for k, s in legs.lexical}
        vector = shrunk_vector(legs, depth)
        parts = [(wv, vector), (wl, lexical)]
        if len(legs.vector) >= 2:
            first, second = legs.vector[0][0], legs.vector[1][0]
            parts.append((beta, {first: vector[first] - vector[second]}))
        return fuse(parts, _order(legs))

    return run


def shrunk(
    wv: float, wl: float, depth: int = 100, names: bool = False, lexical_floor: float = 0.0
) -> Variant:
    """Floor: the weakest of the first ``depth`` candidates' cosines, times the share of
    ``depth`` they fill (a small scope's floor shrinks toward 0); with ``names`` a
    lexical hit gains for the names of the question it holds, and a lexical share counts
    above ``lexical_floor`` only (names and a floor of 0.08: what ships)."""

    def run(legs: Legs) -> list[str]:
        top = (legs.attainable or 1.0) + (legs.named_ceiling if names else 0.0)
        gain = legs.named if names else {}
        lexical = {
            k: scaled("lexical", s + gain.get(k, 0.0), ceiling=top, lexical_floor=lexical_floor)
            for k, s in legs.lexical
        }
        return fuse([(wv, shrunk_vector(legs, depth)), (wl, lexical)], _order(legs))

    return run


def capped(wv: float, wl: float, delta: float) -> Variant:
    """Floor: the weaker of the candidates' weakest cosine and the anchor + delta."""

    def run(legs: Legs) -> list[str]:
        top = legs.attainable or 1.0
        lexical = {k: s / top for k, s in legs.lexical}
        low = min(s for _, s in legs.vector) if legs.vector else 0.0
        floor = min(low, legs.anchor + delta)
        return fuse([(wv, above_floor(legs.vector, floor)), (wl, lexical)], _order(legs))

    return run


def absolute(wv: float, wl: float, lex: str = "abs", alpha: float = 0.1) -> Variant:
    def run(legs: Legs) -> list[str]:
        top = legs.attainable or 1.0
        if lex == "abs":
            lexical = {k: s / top for k, s in legs.lexical}
        else:
            if legs.lexical:
                high = legs.lexical[0][1]
                low = min(s for _, s in legs.lexical)
                span = max(high - low, alpha * top)
                lexical = {k: (s - low) / span for k, s in legs.lexical}
            else:
                lexical = {}
        return fuse([(wv, above_floor(legs.vector)), (wl, lexical)], _order(legs))

    return run


def score(variant: Variant, items: Sequence[Legs]) -> dict[str, float]:
    r10 = mrr = top1 = 0.0
    for legs in items:
        ranked = variant(legs)[:50]
        hits = [k in legs.gold for k in ranked]
        r10 += sum(1 for k in ranked[:10] if k in legs.gold) / len(legs.gold)
        first = next((i for i, h in enumerate(hits) if h), None)
        mrr += 0.0 if first is None else 1.0 / (first + 1)
        top1 += bool(hits and hits[0])
    n = len(items)
    return {"recall@10": r10 / n, "mrr": mrr / n, "top1": top1 / n}


def vector_only(legs: Legs) -> list[str]:
    return [k for k, _ in legs.vector]


def lexical_only(legs: Legs) -> list[str]:
    return [k for k, _ in legs.lexical]


VARIANTS: dict[str, Variant] = {
    "vector": vector_only,
    "lexical": lexical_only,
    "shipped 0.4/0.6": shipped(),
}
for wl in (0.5, 0.6, 0.7, 0.8):
    for vec in ("minmax", "cos", "rel"):
        VARIANTS[f"abs-lex {vec} {1 - wl:.1f}/{wl:.1f}"] = lex_absolute(1 - wl, wl, vec)
for wl in (0.85, 0.9, 0.95):
    VARIANTS[f"abs-lex cos {1 - wl:.2f}/{wl:.2f}"] = lex_absolute(1 - wl, wl, "cos")
for wl in (0.5, 0.6, 0.7):
    for alpha in (0.02, 0.05, 0.1, 0.2, 0.3):
        VARIANTS[f"floor{alpha} {1 - wl:.1f}/{wl:.1f}"] = floored(1 - wl, wl, alpha)
for wl in (0.3, 0.4, 0.5, 0.6, 0.7):
    VARIANTS[f"above-floor+abs {1 - wl:.1f}/{wl:.1f}"] = absolute(1 - wl, wl)
    VARIANTS[f"above-floor+fl0.1 {1 - wl:.1f}/{wl:.1f}"] = absolute(1 - wl, wl, "floor", 0.1)
for wl in (0.5, 0.6, 0.65, 0.7, 0.75, 0.8):
    VARIANTS[f"shrunk {1 - wl:.2f}/{wl:.2f}"] = shrunk(1 - wl, wl)
    VARIANTS[f"names {1 - wl:.2f}/{wl:.2f}"] = shrunk(1 - wl, wl, names=True)
    for lf in (0.05, 0.08, 0.1, 0.12, 0.15, 0.2):
        VARIANTS[f"names+floor{lf} {1 - wl:.2f}/{wl:.2f}"] = shrunk(
            1 - wl, wl, names=True, lexical_floor=lf
        )
for wl in (0.6, 0.7):
    for beta in (0.5, 1.0, 2.0, 4.0):
        VARIANTS[f"margin{beta} {1 - wl:.1f}/{wl:.1f}"] = margin(1 - wl, wl, beta)
for wl in (0.5, 0.6, 0.7, 0.8):
    for power in (1.5, 2.0, 3.0):
        VARIANTS[f"pow{power} {1 - wl:.1f}/{wl:.1f}"] = powered(1 - wl, wl, power)
        VARIANTS[f"pow{power}-noshrink {1 - wl:.1f}/{wl:.1f}"] = powered(1 - wl, wl, power, False)
for gamma in (1.0, 2.0, 4.0):
    for least in (0.0, 0.25, 0.5):
        VARIANTS[f"gated{gamma}/{least} 0.35/0.65"] = gated(0.35, 0.65, gamma, least)
for wl in (0.6, 0.7):
    for delta in (0.05, 0.1, 0.15, 0.2, 0.3):
        VARIANTS[f"capped+{delta} {1 - wl:.1f}/{wl:.1f}"] = capped(1 - wl, wl, delta)
for wl in (0.5, 0.6, 0.7):
    for shift in (0.0, 0.05, 0.1):
        VARIANTS[f"anchored+{shift} {1 - wl:.1f}/{wl:.1f}"] = anchored(1 - wl, wl, shift)
for wl in (0.6, 0.7, 0.8):
    for power in (0.5, 1.0):
        VARIANTS[f"conf^{power} {1 - wl:.1f}/{wl:.1f}"] = confidence(1 - wl, wl, power)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, help="LoCoMo's JSON (else --probe)")
    parser.add_argument("--probe", choices=("people", "projects"))
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--cache", type=Path, default=Path(".cache/eval-embeddings.sqlite"))
    parser.add_argument("--only", default="", help="comma-separated words of variant names")
    parser.add_argument(
        "--choose",
        action="store_true",
        help="with --data: for each conversation, the variant (of --only) with the best "
        "recall@10 on the other six, scored on it",
    )
    parser.add_argument(
        "--misses",
        metavar="SET",
        help="with --probe: each variant's questions of SET whose first hit the vector leg "
        "gets right and the variant wrong, with the two firsts",
    )
    args = parser.parse_args(argv)
    if (args.data is None) == (args.probe is None):
        parser.error("give --data (LoCoMo) or --probe")
    inner = make_embedder(args.embedder)
    embedder = inner if str(args.cache) == "none" else CachedEmbedder(inner, args.cache)
    try:
        return _run(args, embedder)
    finally:
        if isinstance(embedder, CachedEmbedder):
            embedder.close()


def _run(args: argparse.Namespace, embedder: Any) -> int:
    names = [n for n in VARIANTS if not args.only or any(o in n for o in args.only.split(","))]
    if args.probe is not None:
        sets = probe_sets(args.probe, embedder)
        print("variant".ljust(36), " ".join(name[:14].rjust(14) for name in sets))
        for name in names:
            row = [score(VARIANTS[name], items)["top1"] for items in sets.values()]
            print(name.ljust(36), " ".join(f"{value:14.3f}" for value in row))
        if args.misses:
            for name in names:
                _print_misses(args.probe, args.misses, name, sets[args.misses])
        return 0
    items = legs_of(build(load(args.data), embedder), embedder)
    if args.choose:
        choose(names, items)
        return 0
    for name in names:
        m = score(VARIANTS[name], items)
        print(f"{name:36s} r@10 {m['recall@10']:.3f} mrr {m['mrr']:.3f} top1 {m['top1']:.3f}")
    return 0


def choose(names: Sequence[str], items: Sequence[Legs]) -> dict[str, float]:
    """Leave-one-conversation-out choice among the variants ``names``: for each
    conversation the one with the best recall@10 over the other conversations' questions
    (the first of equals), scored on that conversation; printed per fold, then the held-out
    mean of the choice and of each variant kept fixed (means over conversations)."""
    asked = [legs for legs in items if legs.category in (1, 2, 3, 4)]
    conversations = sorted({legs.conversation for legs in asked})
    own = {
        name: {
            c: score(VARIANTS[name], [x for x in asked if x.conversation == c])["recall@10"]
            for c in conversations
        }
        for name in names
    }
    chosen = []
    for c in conversations:
        rest = [x for x in asked if x.conversation != c]
        best = max(names, key=lambda name: score(VARIANTS[name], rest)["recall@10"])
        chosen.append(own[best][c])
        print(f"{c}: {best} r@10 {own[best][c]:.3f}")
    out = {"chosen": sum(chosen) / len(chosen)}
    out.update({name: sum(own[name].values()) / len(conversations) for name in names})
    for name, value in out.items():
        print(f"held-out mean, {name}: {value:.3f}")
    return out


def _print_misses(probe: str, set_name: str, variant: str, items: list[Legs]) -> None:
    """The questions of ``set_name`` the vector leg ranks right first and ``variant`` not,
    each with both firsts, and how many the other way round."""
    from . import probe as P

    data = P.load(probe)
    queries = P.asked_sets(data)[set_name]
    holder_of = {f.id: f.holder for f in data.facts}
    text_of = {f.id: f.text for f in data.facts}
    in_scope: dict[tuple[str, ...], list[str]] = {}
    pooled = queries[0].pooled if queries else False
    for fact in data.facts:
        in_scope.setdefault(P.scope_of(data, None if pooled else fact.holder), []).append(fact.id)
    lost = won = 0
    print(f"\n{variant} on {set_name}:")
    for q, legs in zip(queries, items, strict=True):
        ids = in_scope[P.scope_of(data, None if q.pooled else holder_of[q.expected])]
        vector, fused = vector_only(legs)[:1], VARIANTS[variant](legs)[:1]
        right = bool(vector) and vector[0] in legs.gold
        if right == (bool(fused) and fused[0] in legs.gold):
            continue
        if not right:
            won += 1
            continue
        lost += 1
        print(f"  {q.text}\n    vector: {text_of[ids[int(vector[0])]]}")
        print(f"    {variant}: {text_of[ids[int(fused[0])]] if fused else '-'}")
        if fused:
            print(f"    {_close_call(legs, fused[0])}")
    print(f"  lost {lost}, won {won} of {len(queries)}")


def _close_call(legs: Legs, pick: str) -> str:
    """How close the vector leg's call was and what tipped it: its first's lead over its
    second on the leg's scale (the shrunk floor), where it ranked the variant's first,
    and that memory's lexical share of the ceiling with the names (before any floor)."""
    vector = shrunk_vector(legs)
    keys = [k for k, _ in legs.vector]
    lead = vector[keys[0]] - vector[keys[1]] if len(keys) > 1 else vector.get(keys[0], 0.0)
    top = (legs.attainable or 1.0) + legs.named_ceiling
    share = (dict(legs.lexical).get(pick, 0.0) + legs.named.get(pick, 0.0)) / top
    rank = keys.index(pick) + 1 if pick in keys else "-"
    return f"vector lead {lead:.3f}; vector rank of the pick {rank}; its lexical share {share:.3f}"


def probe_sets(name: str, embedder: Any) -> dict[str, list[Legs]]:
    """The probe's sets as cached legs (facts by index within their scope)."""
    from engramdb import InMemoryStore, Memory

    from . import probe as P

    data = P.load(name)
    memory = Memory(InMemoryStore(), embedder)
    holder_of = {f.id: f.holder for f in data.facts}
    scopes: dict[tuple[str, ...], list[str]] = {}
    for pooled in (False, True):
        for fact in data.facts:
            scope = P.scope_of(data, None if pooled else fact.holder)
            scopes.setdefault(scope, []).append(fact.id)
        memory.remember_many(
            {
                "text": f.text,
                "scope": P.scope_of(data, None if pooled else f.holder),
                "metadata": {"fact": f.id},
            }
            for f in data.facts
        )
    text_of = {f.id: f.text for f in data.facts}
    lexicons = {s: Lexicon([text_of[i] for i in ids]) for s, ids in scopes.items()}
    out: dict[str, list[Legs]] = {}
    for set_name, queries in P.asked_sets(data).items():
        items = []
        for q in queries:
            scope = P.scope_of(data, None if q.pooled else holder_of[q.expected])
            ids = scopes[scope]
            hits = memory.recall(q.text, [scope], top_k=100, mode="vector")
            vec = [
                (str(ids.index(h.memory.metadata["fact"])), quantised(h.score))
                for h in hits
                if h.score >= MIN_SIMILARITY
            ]
            lex = lexicons[scope]
            w = query_weights(q.text)
            legs = Legs(
                vec, lex.search(w), attainable(lex, w), frozenset({str(ids.index(q.expected))}), 0
            )
            items.append(with_names(legs, lex, q.text))
        out[set_name] = items
    return out


if __name__ == "__main__":
    raise SystemExit(main())
