"""How much work a vector search does: how many candidates the approximate path keeps,
how many of them it scores exactly, and when to score every vector exactly instead.

The numbers were chosen by measurement on CPython and inside Pyodide
(docs/performance-history.md); :class:`~engramdb._vectors.index.VectorIndex` asks these functions.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = [
    "ALL_CANDIDATES",
    "CHEAP_EXACT",
    "FEWEST",
    "candidates_for",
    "extend_head",
    "rerank_for",
    "search_with_head",
    "searches_for",
    "use_exact",
]

# Up to this many eligible vectors every one is a candidate (no Hamming stage).
ALL_CANDIDATES = 1000
# A store's vector leg asks its approximate index for this many (its head:
# search_with_head) whatever k, so that the first hits never depend on k: a recall in
# one mode asks its leg for top_k, a hybrid one for its fusion depth (ranking._hits.DEPTH),
# this many.
FEWEST = 100
# Whether an exact float32 score is cheap enough to read from the float32 array each
# time: not in Pyodide (WASM), where it costs 3-5x more than on CPython, so there an
# index of up to ALL_CANDIDATES vectors keeps the floats it scored (docs/performance-history.md).
# Read once; tests patch it.
CHEAP_EXACT = sys.platform != "emscripten"


def candidates_for(n: int, k: int) -> int:
    """How many candidates the approximate search re-scores from their 4-bit copies.

    Every one of ``n <= 1000`` eligible vectors (``C = n``); above,
    ``C = max(10 * k, ceil(n / 100))`` Hamming candidates, at most ``n``. The ``C``
    candidates are scored from their 4-bit copies and the best :func:`rerank_for` of them
    exactly, so above 1,000 recall is bounded by the Hamming stage (and, for
    64 <= d <= 384, by its prefix pool of about 3C). Measured on clustered data
    (docs/performance-history.md): n=10k gives C=100 (recall@10 ≈ 0.998), n=100k gives C=1000
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
    order and the similarities. Measured (docs/performance-history.md): recall@10 0.990-0.995
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
    candidates and ``k`` results: when ``n`` is at most :func:`rerank_for` (k, n), which
    the approximate path would score exactly anyway; above that, up to 1,000 vectors
    every one is a 4-bit candidate (:func:`candidates_for`) and the best ``rerank_for``
    of them are scored exactly. ``c`` does not change the answer.

    An exact score turns a vector's float32 components into Python floats: about 9 µs at
    d=384 and 18 µs at d=768 on CPython, 3-5x more in Pyodide, against 1-3 µs for a
    4-bit score, so at 1,000 vectors the approximate path costs a third to a sixth of an
    exact scan at recall@10 1.000 (``python -m bench.exact_rule``; docs/performance-history.md,
    "Small scopes without numpy"). CPython scanned exactly up to 1,000 vectors until
    2026-12-04 (a larger ``top_k`` then changed the first hits; :func:`search_with_head`
    keeps them).
    """
    return n <= rerank_for(k, n)


def search_with_head(
    search: Callable[[int], list[tuple[str, float]]], k: int, exact: bool
) -> list[tuple[str, float]]:
    """A store leg's best ``k`` ``(id, similarity)`` pairs from ``search(n)``, one index's
    search for ``n``, best first.

    An exact search asks for ``k``. An approximate one asks for ``FEWEST`` (its head)
    and keeps the first ``k``; asked for more, it extends the head by the hits of a
    search for ``k + FEWEST`` (room for the head's hits in it) that are not in the head
    and score no higher than its last hit. So the first hits never depend on ``k`` (a
    hybrid recall fuses its legs' first ``FEWEST``), the similarities never rise, and a
    vector the head missed above its last hit stays missed whatever ``k``; a hit past
    the head has the whole head at or above it, so hits ranked again by score (scopes
    merged, equal scores newest first) keep the head first, but for vectors tied with
    its last hit that are newer than those it kept, which an approximate search does not
    guarantee to keep (docs/performance-history.md, "Ties"; an exact one keeps the newest).
    Only ``k`` above ``FEWEST`` costs a second search.
    """
    first, *deeper = searches_for(k, exact)
    head = search(first)
    if not deeper or len(head) < first:
        return head[:k]
    return extend_head(head, search(deeper[0]), k)


def extend_head(
    head: list[tuple[str, float]], deeper: list[tuple[str, float]], k: int
) -> list[tuple[str, float]]:
    """A full head (the hits of a search for the first of :func:`searches_for`, best
    first) extended to ``k`` by the hits of the deeper search that are not in it and
    score no higher than its last: :func:`search_with_head`'s answer, for a store whose
    searches are steps of a flow (PostgreSQL's)."""
    held = {key for key, _ in head}
    last = head[-1][1]
    tail = [hit for hit in deeper if hit[1] <= last and hit[0] not in held]
    return head + tail[: k - len(head)]


def searches_for(k: int, exact: bool) -> tuple[int, ...]:
    """How many hits each index search of :func:`search_with_head` asks for, in order:
    ``(k,)`` exact, ``(FEWEST,)`` for ``k`` up to ``FEWEST``, else ``(FEWEST, k +
    FEWEST)`` (the second only when the head is full: as many hits as the first asked
    for). A store that reads rows for each search's candidates (a codes-only index)
    reads those of every one."""
    if exact:
        return (k,)
    if k <= FEWEST:
        return (FEWEST,)
    return (FEWEST, k + FEWEST)
