"""From the legs' search results to a recall's hits: fusion on an absolute scale, ties, the
date stage, and the rerank stage with its guard.

Public: the two fusions a recall can use (:func:`convex`, the default, over the legs'
scores on their absolute scales; :func:`rrf`, over their ranks), the :class:`Fused` hit
they return, and the rerank stage's :class:`Reranker` protocol and :class:`RerankGuard`
(also exported from ``engramdb``). How ``Memory`` ranks is in ``docs/lexical.md``.
"""

from engramdb.ranking._fusion import Fused, convex, rrf
from engramdb.ranking._rerank_guard import RerankGuard
from engramdb.ranking._reranker import Reranker

__all__ = ["Fused", "RerankGuard", "Reranker", "convex", "rrf"]
