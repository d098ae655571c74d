"""Whether vectors belong to their texts: embed the texts again with the active embedder
and compare. A vector that comes from outside (a backup's, an import file's) decides
rankings only once checked this way (:func:`engramdb.backup.restore`, ``engramdb
import``), and ``engramdb doctor --verify-vectors`` checks the database's."""

from __future__ import annotations

import math
from collections.abc import Sequence

from engramdb import ConfigurationError, Embedder, ValidationError
from engramdb.store import decode_f32, unit_f32

__all__ = ["TOLERANCE", "active_space", "cosines"]

_PHRASE = "engramdb: a short fixed phrase to learn the embedder's space"

# The same model gives the same text vectors at a cosine above 0.999 on other hardware,
# library versions or provider calls (float rounding); a vector of another text or
# another model is far below 0.99 in every model we measured. A vector it lets through
# moves any similarity by at most sqrt(2 * (1 - 0.99)) = 0.14.
TOLERANCE = 0.99


def active_space(embedder: Embedder) -> str:
    """The embedder's space id; one that learns its dimensions embeds a fixed phrase
    first (the one call that teaches it)."""
    try:
        return embedder.space.id
    except ConfigurationError:
        embedder.embed([_PHRASE], "document")
        return embedder.space.id


def cosines(
    embedder: Embedder, pairs: Sequence[tuple[str, bytes]]
) -> tuple[str, list[tuple[float, bytes]]]:
    """The active space's id, and for each (text, stored unit float32 bytes) of ``pairs``
    the cosine of the stored vector to the text embedded now as a document (-1.0 when
    their sizes differ or the fresh vector has no direction), with that fresh vector as a
    write stores it (``unit_f32``'s bytes; ``b""`` when it has no direction). The texts
    are sent in batches of the embedder's ``max_batch``."""
    fresh: list[Sequence[float]] = []
    step = max(1, int(embedder.max_batch))
    for start in range(0, len(pairs), step):
        fresh += embedder.embed([text for text, _ in pairs[start : start + step]], "document")
    blobs = [_stored_form(vector) for vector in fresh]
    return embedder.space.id, [
        (_cosine(decode_f32(raw), decode_f32(blob)) if blob else -1.0, blob)
        for (_, raw), blob in zip(pairs, blobs, strict=True)
    ]


def _stored_form(vector: Sequence[float]) -> bytes:
    try:
        return unit_f32(vector)
    except (ValidationError, TypeError, ValueError, OverflowError):
        return b""


def _cosine(stored: Sequence[float], unit: Sequence[float]) -> float:
    """The cosine of a stored vector to a fresh unit one; -1.0 when no cosine exists."""
    norm = math.sqrt(math.fsum(x * x for x in stored))
    if len(stored) != len(unit) or not norm or not math.isfinite(norm):
        return -1.0
    return math.fsum(a * b for a, b in zip(stored, unit, strict=True)) / norm
