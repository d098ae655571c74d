"""Ranking: the two legs' search results fused into the hits a recall returns.

Both legs come from one store batch, so their records are of one snapshot: a hit's text,
revision and scores always belong together. In hybrid mode each leg contributes its best
``depth`` candidates (:attr:`Ranking.depth`: 100, or ``top_k`` when that is larger; a
recall in one mode asks its leg for ``top_k``, its first hits in the same order), but
only its first :data:`DEPTH` (100) score in fusion; a candidate deeper in every leg
comes after them all (``_fusion``). So the first k hits are the same for every ``top_k
>= k``: a larger ``top_k`` only appends. The vector leg's cosine floor
(``min_similarity``) applies before fusion.

**Scores on one absolute scale** (:func:`scaled`). The vector leg's score is its cosine
(below 0 counts as 0); the lexical leg's is its BM25 relevance over the query's
*ceiling*, the relevance a memory holding every query term at saturation would score
(``engramdb.store.bm25_ceiling``, from the statistics the store scored with): a word
every memory holds (a person's name in each of their facts) has an idf of almost 0, so
it weighs almost nothing, however the memories' lengths differ. Fusion is the weighted
sum of those scores by default (``convex``), or reciprocal-rank fusion (``rrf``). A
hit's ``score`` is the fused score in hybrid mode, the cosine in vector mode and the
scaled BM25 in lexical mode (or when the vector leg is missing): from 0 to 1, and
comparable between the queries of one store, so it can be thresholded; its evidence
holds each leg's share of it (``vector_share``, ``lexical_share``). In hybrid mode
(``convex``, both legs run) the lexical leg counts above its own floor
(:data:`LEXICAL_FLOOR`), and a lexical hit that holds a name of the question (a word it
capitalises) gains that name's idf again (``_names``: the ceiling grows by as much); a
query that names a date favours the candidates whose text names a day of that period
(:func:`dated`, ``_dates``). Equal scores come newest first: each store ranks its leg so
(by ``created_at``, then id, both descending), and fusion breaks its own ties by the
legs' ranks, then the same way (``_ties``).

The default weights (:func:`default_weights`) were measured on LoCoMo's development
split and on name-sharing facts (``docs/quality.md``): 0.35 on the vector leg and 0.65 on
the lexical leg for a semantic embedder; an embedder that declares ``semantic = False``
(``HashEmbedder``: a bag of words, not meaning) adds nothing the lexical leg lacks, so
its leg weighs 0 and only orders the memories that share no word with the query.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final, Literal

from engramdb._base.types import Evidence, Hit, RecallMode
from engramdb.ranking._dates import BONUS, matches, query_period
from engramdb.ranking._fusion import Fused, convex, rrf
from engramdb.ranking._names import Named, named
from engramdb.ranking._ties import best_first, quantised
from engramdb.store import SearchHit, SearchResult, bm25_ceiling

__all__ = [
    "DEPTH",
    "FUSIONS",
    "LEXICAL_FLOOR",
    "MIN_SIMILARITY",
    "Candidates",
    "Fusion",
    "Ranking",
    "candidates",
    "dated",
    "default_weights",
    "hits",
    "noise_floor",
    "rank",
    "scaled",
]

Fusion = Literal["convex", "rrf"]
FUSIONS: Final = ("convex", "rrf")
DEPTH: Final = 100
"""Candidates per leg that score in fusion; also how many a leg contributes when
``top_k`` is at most this."""
MIN_SIMILARITY: Final = 0.01
"""The vector leg's default cosine floor: a candidate below it shows no evidence of
relevance (``docs/policy.md``, "Relevance floor")."""
LEXICAL_FLOOR: Final = 0.08
"""The lexical leg's noise floor in fusion with a vector leg that weighs more than 0, a
share of the query's ceiling: a memory whose BM25 is below it (one minor word of a
longer question, a stem in a long memory) gets no lexical vote, one above it the part
above, rescaled (:func:`scaled`), so that such a match does not tip the vector leg's
close calls. Measured on LoCoMo and the probes of name-sharing facts
(``docs/quality.md``, "The lexical leg's floor")."""


def default_weights(fusion: Fusion, semantic: bool) -> dict[str, float]:
    """The leg weights a recall uses unless it is given some."""
    if fusion == "rrf":
        return {"vector": 1.0, "lexical": 1.0}
    if semantic:
        return {"vector": 0.35, "lexical": 0.65}
    return {"vector": 0.0, "lexical": 1.0}


@dataclass(frozen=True, slots=True)
class Ranking:
    """How to turn the legs into hits (validated by the flow)."""

    mode: RecallMode
    top_k: int
    weights: Mapping[str, float]
    fusion: Fusion = "convex"
    rrf_k: int = 60
    min_similarity: float = MIN_SIMILARITY
    shards: int = 1
    """Of how many stores this one holds a part (``engramdb.shards``): its noise floor
    estimates the whole tenant's from its part (:func:`noise_floor`)."""

    @property
    def depth(self) -> int:
        """How many candidates each leg of a hybrid recall contributes."""
        return max(DEPTH, self.top_k)


def rank(
    ranking: Ranking,
    vector: SearchResult | None,
    lexical: SearchResult | None,
    space_id: str | None,
    query: str | None = None,
) -> list[Hit]:
    """The best ``top_k`` hits of the legs; ``vector`` is None when that leg did not run:
    the :func:`candidates` with evidence, fused (``_fuse``), in hybrid mode favouring
    the memories that name a day of the period ``query`` names (:func:`dated`), made
    :func:`hits`."""
    found = candidates(ranking, vector, lexical, query)
    fused = _fuse(ranking, found)
    if ranking.mode == "hybrid" and query is not None:
        fused = dated(ranking, found, fused, query)
    best = [entry for entry in fused if entry.id in found.evident][: ranking.top_k]
    return hits(ranking, found, best, space_id)


def dated(ranking: Ranking, found: Candidates, fused: list[Fused], query: str) -> list[Fused]:
    """Date-aware matching: when ``query`` names a date (``_dates.query_period``), each
    candidate whose text names a day of that period, or up to ``_dates.WINDOW`` days
    after it, gains ``_dates.BONUS`` of the best fused score a candidate can have (the
    sum of the weights of the legs that ran, over ``k + 1`` with ``rrf``), rounded to
    9 decimals as fusion rounds; then score descending, equal scores in fused order.
    Only a candidate that scores in fusion (within the first ``DEPTH`` of a leg that
    weighs more than 0) gains: one deeper is there only because a larger ``top_k``
    asked for more, and stays after the others, so the first hits do not depend on
    ``top_k``. Every input is a candidate's text, ranks and fused score, so every store
    ranks alike."""
    period = query_period(query)
    if period is None or not fused:
        return fused
    texts = {hit.record.id: hit.record.text for hit in (*found.vector, *found.lexical)}
    ran = ("vector", "lexical") if found.vector_ran else ("lexical",)
    best = math.fsum(ranking.weights.get(leg, 1.0) for leg in ran)
    weighing = {leg for leg in ran if ranking.weights.get(leg, 1.0) > 0}
    if ranking.fusion == "rrf":
        best /= ranking.rrf_k + 1
    bonus = BONUS * best
    if bonus <= 0.0:
        return fused
    moved = [
        replace(entry, score=round(entry.score + bonus, 9))
        if _scores(entry, weighing) and matches(period, texts[entry.id])
        else entry
        for entry in fused
    ]
    order = {entry.id: position for position, entry in enumerate(fused)}
    return sorted(moved, key=lambda entry: (-entry.score, order[entry.id]))


def _scores(entry: Fused, weighing: set[str]) -> bool:
    """Whether fusion scored ``entry``: it is within the first ``DEPTH`` of a leg in
    ``weighing`` (those that weigh more than 0)."""
    return any(rank <= DEPTH for leg, rank in entry.ranks.items() if leg in weighing)


@dataclass(frozen=True, slots=True)
class Candidates:
    """The legs' candidates above the floor, the ids with evidence of relevance, the
    two legs' scales (:func:`scaled`): the vector leg's noise floor and the lexical
    leg's ceiling, and when two legs are fused (``convex``) the lexical leg's floor and
    what each lexical hit gains for the names of the question it holds (``gains``,
    already in the ceiling: ``_names``)."""

    vector: list[SearchHit]
    lexical: list[SearchHit]
    evident: frozenset[str]
    vector_ran: bool
    floor: float = 0.0
    ceiling: float = 1.0
    gains: Mapping[str, float] = field(default_factory=dict)
    lexical_floor: float = 0.0

    def scaled(self, leg: str, score: float, id: str | None = None) -> float:
        """``score`` of ``leg`` (of the hit ``id``) on its scale in this recall
        (:func:`scaled`); a lexical hit's with what it gains for names."""
        if leg == "lexical" and id is not None:
            score += self.gains.get(id, 0.0)
        return scaled(
            leg,
            score,
            floor=self.floor,
            ceiling=self.ceiling,
            lexical_floor=self.lexical_floor,
        )

    def scaled_leg(self, leg: str, hits: Sequence[SearchHit]) -> list[tuple[str, float]]:
        """``(id, score on its scale)`` of each of ``hits`` of ``leg``: what
        :meth:`scaled` gives each, the same operations in the same order, in one loop
        (fusion scales every candidate of both legs)."""
        out: list[tuple[str, float]] = []
        if leg == "vector":
            floor = self.floor
            span = 1.0 - floor
            for hit in hits:
                value = min(1.0, max(0.0, (hit.score - floor) / span)) if span > 0 else 1.0
                out.append((hit.record.id, value))
            return out
        if leg != "lexical":
            return [(hit.record.id, self.scaled(leg, hit.score, hit.record.id)) for hit in hits]
        gains, ceiling, lexical_floor = self.gains, self.ceiling, self.lexical_floor
        for hit in hits:
            item = hit.record.id
            score = hit.score + gains.get(item, 0.0) if gains else hit.score
            share = min(1.0, score / ceiling) if ceiling > 0 else 1.0
            out.append((item, max(0.0, (share - lexical_floor) / (1.0 - lexical_floor))))
        return out


def candidates(
    ranking: Ranking,
    vector: SearchResult | None,
    lexical: SearchResult | None,
    query: str | None = None,
) -> Candidates:
    """Each leg's candidates, which count, and the legs' scales (in hybrid mode the lexical one
    with the names of ``query``: :func:`_named`). The relevance floor: a hit needs evidence
    from a leg that counts. The lexical leg only finds memories that share a query term; the
    vector leg's candidates count from ``min_similarity`` up, and only when the leg weighs
    more than 0 (a non-semantic embedder's cosine is a word overlap that the lexical leg
    already judged). A candidate without such evidence never fills a slot, whatever
    ``top_k``. Scores are taken on the grid of ``quantised`` (as every store ranks) and the
    hits in that order, equal ones newest first, whatever the store.
    """
    floor = ranking.min_similarity
    vector_hits = [hit for hit in _graded(vector) if hit.score >= floor]
    lexical_hits = _graded(lexical)
    counted = {leg for leg, weight in ranking.weights.items() if weight > 0}
    if ranking.mode != "hybrid" or vector is None or lexical is None:
        counted = {"vector", "lexical"}  # one leg ran: its hits are its evidence
    evident = {hit.record.id for hit in vector_hits} if "vector" in counted else set()
    if "lexical" in counted:
        evident.update(hit.record.id for hit in lexical_hits)
    fusing = ranking.mode == "hybrid" and ranking.fusion == "convex" and vector is not None
    names = _named(lexical, query) if fusing else Named()
    return Candidates(
        vector_hits,
        lexical_hits,
        frozenset(evident),
        vector is not None,
        noise_floor([hit.score for hit in vector_hits], ranking.shards),
        _ceiling(lexical) + names.ceiling,
        {hit.record.id: names.gain(hit.record.text) for hit in lexical_hits} if names.parts else {},
        LEXICAL_FLOOR if fusing and ranking.weights.get("vector", 1.0) > 0 else 0.0,
    )


def _named(lexical: SearchResult | None, query: str | None) -> Named:
    """The names of a fused recall's query (``_names``), from the statistics the lexical
    leg scored with; none from a store that reports no statistics. Only ``convex``
    fusion of two legs uses them (``rrf`` adds ranks, not scales; a recall whose vector
    leg did not run answers as the lexical mode does)."""
    if lexical is None or lexical.statistics is None or not lexical.hits:
        return Named()
    return named(query, lexical.statistics.items, lexical.statistics.found)


def noise_floor(cosines: Sequence[float], shards: int = 1) -> float:
    """The vector leg's noise floor, from its candidates' cosines (best first): the
    weakest of the first ``DEPTH``, shrunk toward 0 by the share of ``DEPTH`` they fill
    (a scope of 10 memories: a tenth of its weakest), so that a small scope's hits keep
    their cosine's height and a large one's are measured from what its unrelated
    memories score. A store that holds one of ``shards`` parts of its tenant's memories
    (spread by a hash) takes its first ``DEPTH / shards``: the tenant's ``DEPTH``-th
    cosine, estimated from its part, so that every shard scales its hits as one store
    of them all would (``docs/workers.md``, "A tenant larger than one object")."""
    depth = max(1, DEPTH // shards)
    head = cosines[:depth]
    return min(head) * len(head) / depth if head else 0.0


def _ceiling(lexical: SearchResult | None) -> float:
    """The lexical leg's ceiling: from the statistics its store scored with; a store
    that reports none (a third party's) gets its best hit's score, so its best hit
    scales to 1."""
    if lexical is None or not lexical.hits:
        return 1.0
    if lexical.statistics is not None:
        ceiling = bm25_ceiling(lexical.statistics.items, lexical.statistics.found)
    else:
        ceiling = max(hit.score for hit in lexical.hits)
    return ceiling if ceiling > 0.0 else 1.0


def scaled(
    leg: str,
    score: float,
    *,
    floor: float = 0.0,
    ceiling: float = 1.0,
    lexical_floor: float = 0.0,
) -> float:
    """A leg's score on the scale from 0 to 1 that fusion adds up: for the vector leg the
    cosine's height above the leg's noise ``floor`` (:func:`noise_floor`) over a perfect
    match's, ``(cos - floor) / (1 - floor)``; for the lexical leg BM25 over the query's
    ``ceiling`` (``engramdb.store.bm25_ceiling``), in fusion its height above the
    ``lexical_floor`` (:data:`LEXICAL_FLOOR`) the same way."""
    if leg == "vector":
        span = 1.0 - floor
        return min(1.0, max(0.0, (score - floor) / span)) if span > 0 else 1.0
    share = min(1.0, score / ceiling) if ceiling > 0 else 1.0
    return max(0.0, (share - lexical_floor) / (1.0 - lexical_floor))


def _graded(result: SearchResult | None) -> list[SearchHit]:
    """A leg's hits with :func:`quantised` scores, best first, equal ones newest first
    (as a conforming store answers them already)."""
    if result is None:
        return []
    graded = []
    for hit in result.hits:
        score = quantised(hit.score)
        graded.append(hit if score == hit.score else replace(hit, score=score))
    return best_first(graded)


def hits(
    ranking: Ranking, found: Candidates, fused: Sequence[Fused], space_id: str | None
) -> list[Hit]:
    """The hits of the ``fused`` entries, each with its legs' scores and ranks and its
    provenance; its score is the fused one in hybrid mode, the cosine in vector mode and
    the BM25 relevance in lexical mode (or when the vector leg did not run)."""
    items: dict[str, SearchHit] = {hit.record.id: hit for hit in found.lexical}
    items.update((hit.record.id, hit) for hit in found.vector)
    similarity = {hit.record.id: hit.score for hit in found.vector}
    relevance = {hit.record.id: hit.score for hit in found.lexical}
    out = []
    for entry in fused:
        item = items[entry.id]
        sim = similarity.get(entry.id)
        bm25 = relevance.get(entry.id)
        shares = _shares(ranking, found, entry, sim, bm25)
        if ranking.mode == "vector" and found.vector_ran:
            score = sim if sim is not None else 0.0
        elif ranking.mode == "lexical" or not found.vector_ran:
            score = found.scaled("lexical", bm25) if bm25 is not None else 0.0
        else:
            score = entry.score
        record = item.record
        evidence: Evidence = {
            "id": record.id,
            "scope": record.scope,
            "revision": record.revision,
            "content_sha256": record.content_sha256,
            "space_id": space_id if item.embedded_at is not None else None,
            "embedded_at": _embedded_at(item),
            "vector_share": shares.get("vector"),
            "lexical_share": shares.get("lexical"),
            "rerank_score": None,
        }
        out.append(
            Hit(
                memory=record,
                score=score,
                similarity=sim,
                vector_rank=entry.ranks.get("vector"),
                lexical_rank=entry.ranks.get("lexical"),
                bm25=bm25,
                evidence=evidence,
            )
        )
    return out


def _shares(
    ranking: Ranking, found: Candidates, entry: Fused, sim: float | None, bm25: float | None
) -> dict[str, float | None]:
    """Each leg's part of a hybrid hit's fused score (``convex``): its weight times its
    scaled score, None for a leg that did not score the hit (or in another mode)."""
    if ranking.mode != "hybrid" or ranking.fusion != "convex" or not found.vector_ran:
        return {}
    out: dict[str, float | None] = {}
    for leg, raw in (("vector", sim), ("lexical", bm25)):
        rank = entry.ranks.get(leg)
        if raw is None or rank is None or rank > DEPTH:
            out[leg] = None
            continue
        scale = found.scaled(leg, raw, entry.id)
        out[leg] = round(ranking.weights.get(leg, 1.0) * scale, 9)
    return out


def _fuse(ranking: Ranking, found: Candidates) -> list[Fused]:
    """The legs fused; what ties comes newest first (by created_at, then id)."""
    legs = {"vector": found.vector, "lexical": found.lexical}
    depth = ranking.depth
    newer = {  # newest(record), inline
        (record := hit.record).id: (record.created_at, record.id)
        for hits in legs.values()
        for hit in hits
    }.__getitem__

    if ranking.fusion == "rrf":
        return rrf(
            {leg: [hit.record.id for hit in hits[:depth]] for leg, hits in legs.items()},
            k=ranking.rrf_k,
            weights=ranking.weights,
            newer=newer,
            depth=DEPTH,
        )
    return convex(
        {leg: found.scaled_leg(leg, hits[:depth]) for leg, hits in legs.items()},
        weights=ranking.weights,
        newer=newer,
        depth=DEPTH,
    )


def _embedded_at(item: SearchHit) -> datetime | None:
    """When the hit's vector was embedded, never before the hit's own record was last
    written (``updated_at``, its creation or the update that may have set its text): a
    vector is shared by every item of its space with the same text, and an earlier time
    would tell a reader when someone else stored that text (a scope oracle)."""
    if item.embedded_at is None:
        return None
    return max(item.embedded_at, item.record.updated_at)
