"""A tenant over several stores: which store holds a memory, and one recall over them all.

A store that outgrows its host (a Durable Object holds about 50,000 memories at d=768)
is split into ``N`` *shards*, each a store of its own with the same embedder. A memory
lives in the shard :func:`shard_of` names from its id, so any id finds its shard with no
lookup, and shards fill evenly: a new memory goes to the shard :func:`placement` names
from its scope and text (the same text in the same scope always reaches the same shard,
so ``remember`` deduplicates across them), and every id a store makes carries its text's
place among 64 (``engramdb.store._ids``), so the id names that same shard at every count up to
64 (a doubling moves a memory with its text). A recall asks every shard the
same question with the same ``top_k`` and :func:`merge_hits` keeps the best ``top_k``
of their answers.

**Why merging by score is right.** A hit's ``score`` is on an absolute scale
(``engramdb.ranking._hits``): the cosine in vector mode; BM25 over the query's ceiling
in lexical mode; in hybrid mode the legs' weighted sum of those, each above its noise
floor. So scores from two shards compare: vector recall merges to exactly one store's
ranking (a cosine does not depend on the other memories, and each shard's first
``top_k`` holds every one of the global first ``top_k`` that it stores); lexical and
hybrid recall differ only where a shard's statistics differ from the whole scope's (its
BM25 idf and ceiling; the vector leg's noise floor is the tenant's when each shard's
memory is made with ``shards=N``). Measured on LoCoMo's development split
(``bench/shards.py``, ``docs/workers.md``, "A tenant larger than one object"): hybrid
recall@10 within 0.009 of one store at 2, 4 and 8 shards, lexical within 0.005, and as
good as the older merge that fused each leg again.

**Ties** fall as in one store: equal scores on the ranking's grid, newest first (the
later ``created_at``, then the greater id), whatever the shard. A hit keeps its shard's
``vector_rank`` and ``lexical_rank`` (its ranks in that shard's legs).

**One selection per recall.** Each shard records its own selection (for ``complete``);
the merged answer's ``selection_id`` joins the shards' ids in shard order
(:func:`join_selection`) and :func:`split_selection` gives each shard its own back.

Pure functions of their arguments: no I/O, no clock, no randomness (a Worker runs them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from functools import lru_cache

from engramdb._base.errors import ValidationError
from engramdb._base.types import Hit, Hits, RecallStatus
from engramdb.ranking._ties import newest, quantised
from engramdb.store._ids import place_of

__all__ = [
    "MAX_SHARDS",
    "check_shards",
    "join_selection",
    "merge_hits",
    "placement",
    "shard_of",
    "split_selection",
]

MAX_SHARDS = 64
"""The most shards a tenant may have."""

_SEPARATOR = "."  # not a Crockford base32 digit: never inside a selection id
_WORST: tuple[RecallStatus, ...] = ("degraded", "partial")


def shard_of(memory_id: str, shards: int) -> int:
    """The shard of the memory ``memory_id`` among ``shards`` (1 to 64, a power of two
    for a tenant that grows): the place its id carries (``engramdb``'s ids carry their
    text's :func:`placement` among 64), modulo ``shards``; for an id of another form (a
    caller's), the first 8 bytes of its SHA-256. Doubling ``shards`` keeps every memory
    in its shard or moves it to ``shard + shards``, never elsewhere."""
    count = _count(shards)
    place = place_of(memory_id)
    return (place if place is not None else _hashed(memory_id, MAX_SHARDS)) % count


def placement(scope: Sequence[str], text: str, shards: int) -> int:
    """The shard a new memory of ``text`` in ``scope`` goes to: the same hash of the
    scope's parts and the text, modulo ``shards``; the id a store makes for it carries
    its place among 64 (so :func:`shard_of` agrees at every count up to 64). Give it the
    text as the store keeps it (checked and redacted as the store does it)."""
    # The key is json.dumps([list(scope), text], ensure_ascii=False), built from the
    # scope's JSON (computed once per scope) and the text's JSON string: the same bytes.
    return _hashed(f"[{_scope_json(tuple(scope))}, {_json_string(text)}]", _count(shards))


_json_string: Callable[[str], str] = json.encoder.encode_basestring
"""A str as ``json.dumps(..., ensure_ascii=False)`` writes it (quoted, escaped)."""


@lru_cache(maxsize=1024)
def _scope_json(scope: tuple[str, ...]) -> str:
    return json.dumps(list(scope), ensure_ascii=False)


def check_shards(shards: object) -> int:
    """``shards`` (1 to 64) as a count of shards, else ``ValidationError``."""
    return _count(shards)


def _count(shards: object) -> int:
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise ValidationError(f"shards must be an integer from 1 to {MAX_SHARDS}, not {shards!r}")
    return shards


def _hashed(key: str, shards: int) -> int:
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards


def merge_hits(per_shard: Sequence[Hits], top_k: int) -> Hits:
    """One recall's answer from its shards' answers (each asked the same question with
    the same ``top_k``, in shard order): their hits by score, best first, equal scores
    newest first, the first ``top_k`` (a memory two shards answer, as while it moves
    between them, once, at its better place).

    ``mode`` is the shards' mode; ``status`` the worst of theirs (``degraded``, then
    ``partial``), else theirs; ``coverage`` the smallest a shard reports (the share of
    the tenant's selected memories the vector leg scored is at least that); ``error``
    the first shard's that has one; ``selection_id`` the shards' ids joined
    (:func:`join_selection`; None when a shard's is None: it wrote no receipt)."""
    if not per_shard:
        raise ValidationError("merge_hits() needs the answer of at least one shard")
    pooled = sorted(
        (hit for hits in per_shard for hit in hits),
        key=lambda hit: (quantised(hit.score), newest(hit.memory)),
        reverse=True,
    )
    seen: set[str] = set()
    best: list[Hit] = []
    for hit in pooled:
        if len(best) == top_k:
            break
        if hit.memory.id not in seen:
            seen.add(hit.memory.id)
            best.append(hit)
    statuses = {hits.status for hits in per_shard}
    status = next((worst for worst in _WORST if worst in statuses), per_shard[0].status)
    coverages = [hits.coverage for hits in per_shard if hits.coverage is not None]
    return Hits(
        best,
        status=status,
        selection_id=join_selection([hits.selection_id for hits in per_shard]),
        mode=per_shard[0].mode,
        error=next((hits.error for hits in per_shard if hits.error is not None), None),
        coverage=min(coverages) if coverages else None,
    )


def join_selection(selection_ids: Sequence[str | None]) -> str | None:
    """The selection id of a recall over shards: the shards' ids, in shard order, joined
    by ``"."`` (one shard: its own id, unchanged); None when a shard's is None (a
    read-only shard wrote no receipt, so the recall cannot be scored)."""
    ids = [selection_id for selection_id in selection_ids if selection_id is not None]
    return _SEPARATOR.join(ids) if len(ids) == len(selection_ids) else None


def split_selection(selection_id: str, shards: int) -> list[str] | None:
    """Each shard's own selection id from a joined one, in shard order; None when
    ``selection_id`` does not join ``shards`` ids (no recall over these shards made it)."""
    parts = selection_id.split(_SEPARATOR)
    if len(parts) != shards or not all(parts):
        return None
    return parts
