"""How much work a vector search does: how many candidates the approximate path keeps,
how many of them it scores exactly, and when to score every vector exactly instead.

The numbers were chosen by measurement on CPython and inside Pyodide
(docs/performance.md); :class:`~engramdb._vectors.VectorIndex` asks these functions.
"""

from __future__ import annotations

import sys

__all__ = [
    "ALL_CANDIDATES",
    "CHEAP_EXACT",
    "FEWEST",
    "candidates_for",
    "rerank_for",
    "use_exact",
]

# Up to this many eligible vectors every one is a candidate (no Hamming stage), and on
# CPython every one is scored exactly (use_exact).
ALL_CANDIDATES = 1000
# A store's vector leg asks its approximate index for at least this many (its
# candidates, its exact scores) and keeps the first k, so that the first k hits are the
# same for every k up to it: a recall in one mode asks its leg for top_k, a hybrid one
# for its fusion depth (_ranking.DEPTH), this many.
FEWEST = 100
# Whether an exact float32 score is cheap next to a 4-bit one: not in Pyodide (WASM),
# where it costs 3-5x more than on CPython (docs/performance.md). Read once; tests patch it.
CHEAP_EXACT = sys.platform != "emscripten"


def candidates_for(n: int, k: int) -> int:
    """How many candidates the approximate search re-scores from their 4-bit copies.

    Every one of ``n <= 1000`` eligible vectors (``C = n``); above,
    ``C = max(10 * k, ceil(n / 100))`` Hamming candidates, at most ``n``. The ``C``
    candidates are scored from their 4-bit copies and the best :func:`rerank_for` of them
    exactly, so above 1,000 recall is bounded by the Hamming stage (and, for
    64 <= d <= 384, by its prefix pool of about 3C). Measured on clustered data
    (docs/performance.md): n=10k gives C=100 (recall@10 ≈ 0.998), n=100k gives C=1000
    (1.000 over 50 queries at d=384; C=800 gave 0.998, C=600 0.976). Sign-bit codes carry
    little signal on unstructured data (recall@10 ≈ 0.4 for iid Gaussian vectors at
    n=100k); validate on your own embeddings.
    """
    if n <= ALL_CANDIDATES:
        return n
    return min(n, max(10 * k, -(-n // 100)))


def rerank_for(k: int, n: int | None = None) -> int:
    """How many candidates are re-scored exactly, the best by their 4-bit copies:
    ``max(2k, 50)``, or ``max(k + k // 2, 50)`` when ``n`` (the eligible vectors) is at
    most 1,000.

    The 4-bit copy ranks well enough that the exact top 10 is almost always among its
    best 50, and the exact top ``k`` among its best ``2k``; the float32 rerank fixes the
    order and the similarities. Measured (docs/performance.md): recall@10 0.990-0.995
    at n=100k, d=384 and 768, with 50 (below 0.99 with 30). Up to 1,000 vectors (all of
    them 4-bit candidates) the best ``1.5k`` hold the exact top 100 at recall 0.99 on
    clustered data and 0.97-0.98 on random data; above, at 10k clustered vectors,
    ``1.5k`` lost recall@50 and @100 (0.92 and 0.97, against 0.98 and 1.00 with ``2k``).
    """
    if n is not None and n <= ALL_CANDIDATES:
        return max(k + k // 2, 50)
    return max(2 * k, 50)


def use_exact(n: int, c: int, k: int) -> bool:
    """Whether every one of ``n`` eligible vectors is scored exactly, given ``c``
    candidates and ``k`` results.

    On CPython: when ``n`` is at most ``max(c, 1000)``. Up to 1,000 vectors an exact
    scan is cheap (about 3.5-7 ms at d=384-768) and loses no recall; above, the
    approximate path is several times faster (``python -m bench.exact_rule``).

    In Pyodide (``sys.platform == "emscripten"``) an exact score costs about 3-5x more
    (about 18 µs at d=384, against about 2.6 µs for a 4-bit score; docs/performance.md,
    "Vectors inside Pyodide"), so only when ``n`` is at most :func:`rerank_for` (k, n),
    which the approximate path would score exactly anyway; up to 1,000 vectors every one
    is then a 4-bit candidate (:func:`candidates_for`).
    """
    if CHEAP_EXACT:
        return n <= max(c, ALL_CANDIDATES)
    return n <= rerank_for(k, n)
