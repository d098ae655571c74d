"""Ranking: the two legs' search results fused into the hits a recall returns.

Both legs come from one store batch, so their records are of one snapshot: a hit's text,
revision and scores always belong together. The vector leg's cosine floor
(``min_similarity``) applies before fusion; fusion is reciprocal-rank fusion
(``_fusion.rrf``); the final score is the fused score in hybrid mode, the cosine in
vector mode and the BM25 relevance in lexical mode (or when the vector leg is missing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ._fusion import rrf
from ._store import SearchHit, SearchResult
from ._types import Evidence, Hit, RecallMode

__all__ = ["Ranking", "rank"]


@dataclass(frozen=True, slots=True)
class Ranking:
    """How to turn the legs into hits (validated by the flow)."""

    mode: RecallMode
    top_k: int
    rrf_k: int = 60
    weights: Mapping[str, float] | None = None
    min_similarity: float | None = None


def rank(
    ranking: Ranking,
    vector: SearchResult | None,
    lexical: SearchResult | None,
    space_id: str | None,
) -> list[Hit]:
    """The best ``top_k`` hits of the legs; ``vector`` is None when that leg did not run."""
    vector_hits = list(vector.hits) if vector is not None else []
    if ranking.min_similarity is not None:
        floor = ranking.min_similarity
        vector_hits = [hit for hit in vector_hits if hit.score >= floor]
    lexical_hits = list(lexical.hits) if lexical is not None else []
    found: dict[str, SearchHit] = {hit.record.id: hit for hit in lexical_hits}
    found.update((hit.record.id, hit) for hit in vector_hits)
    similarity = {hit.record.id: hit.score for hit in vector_hits}
    relevance = {hit.record.id: hit.score for hit in lexical_hits}
    fused = rrf(
        {
            "vector": [hit.record.id for hit in vector_hits],
            "lexical": [hit.record.id for hit in lexical_hits],
        },
        k=ranking.rrf_k,
        weights=ranking.weights,
    )
    vector_used = vector is not None
    hits = []
    for entry in fused[: ranking.top_k]:
        item = found[entry.id]
        sim = similarity.get(entry.id)
        bm25 = relevance.get(entry.id)
        if ranking.mode == "vector" and vector_used:
            score = sim if sim is not None else 0.0
        elif ranking.mode == "lexical" or not vector_used:
            score = bm25 if bm25 is not None else 0.0
        else:
            score = entry.score
        record = item.record
        evidence: Evidence = {
            "id": record.id,
            "scope": record.scope,
            "revision": record.revision,
            "content_sha256": record.content_sha256,
            "space_id": space_id if item.embedded_at is not None else None,
            "embedded_at": item.embedded_at,
        }
        hits.append(
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
    return hits
