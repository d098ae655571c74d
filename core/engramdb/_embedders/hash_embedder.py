"""A deterministic, offline, word-hashing embedder for tests and demos."""

from __future__ import annotations

import functools
import hashlib
import math

from engramdb._base.types import EmbeddingSpace
from engramdb._embedders.embedder import InProcessEmbedder
from engramdb._lexical.bm25 import stem, tokenize

__all__ = ["HashEmbedder"]


class HashEmbedder(InProcessEmbedder):
    """Embeds text as a hashed bag of words: deterministic, offline, and NOT semantic.

    It matches *words*, like a lexical search in vector form: "vegetarian" is close to
    "vegetarian food" but not to "salad", and synonyms, paraphrases and other languages
    are unrelated. Use it for tests, examples and offline demos; use a real model
    (``engramdb.providers``) for meaning.

    How a vector is made (the same bytes on every platform, CPython and Pyodide):

    1. the text's terms: :func:`engramdb._lexical.bm25.terms` (FTS5-compatible tokens,
       lower-cased, diacritics removed, Porter-stemmed);
    2. each distinct term gets weight ``1 + ln(tf)`` (tf = occurrences in the text);
    3. ``h = blake2b(term as UTF-8, digest_size=8)`` read as a little-endian integer;
       the term adds its weight at index ``h % dimensions``, negated when bit 63 of
       ``h`` is set (signed feature hashing, so collisions tend to cancel out);
    4. the vector is L2-normalised. A text without terms (empty, punctuation only), or
       whose weights cancel out exactly, gets the fixed unit vector ``[1, 0, 0, ...]``,
       so embedding never fails.

    ``kind`` ("document" or "query") does not change the vector. The space is
    ``EmbeddingSpace("hash", "bow", dimensions)``, id ``hash/bow@256`` by default.
    ``semantic`` is False: hybrid recall weighs its vector leg 0 by default.
    """

    semantic = False

    __slots__ = ("_features",)

    def __init__(self, dimensions: int = 256, *, max_batch: int = 256) -> None:
        # EmbeddingSpace validates dimensions, the base max_batch
        super().__init__(EmbeddingSpace("hash", "bow", dimensions), max_batch)
        self._features: dict[str, tuple[str, int, float]] = {}

    def __repr__(self) -> str:
        return f"HashEmbedder(dimensions={self._space.dimensions}, max_batch={self._max_batch})"

    def embed_one(self, text: str) -> list[float]:
        """Return the unit vector of one text (see the class docstring)."""
        dimensions = self._space.dimensions
        features = self._features  # token -> (term, slot, sign), so a token is stemmed once
        if len(features) > _MAX_FEATURES:
            features.clear()
        counts: dict[tuple[str, int, float], int] = {}
        for token in tokenize(text):
            feature = features.get(token)
            if feature is None:
                term = stem(token)
                h = _term_hash(term)
                feature = features[token] = (term, h % dimensions, -1.0 if h >> 63 else 1.0)
            counts[feature] = counts.get(feature, 0) + 1  # tokens of one term share a key
        sparse: dict[int, float] = {}
        for feature in sorted(counts):  # in term order: the term comes first in the key
            _, slot, sign = feature
            tf = counts[feature]
            weight = sign if tf == 1 else sign * (1.0 + math.log(tf))  # exact: sign is +-1
            sparse[slot] = sparse.get(slot, 0.0) + weight
        vector = [0.0] * dimensions
        norm = math.sqrt(math.fsum([x * x for x in sparse.values()]))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        for slot, value in sparse.items():
            vector[slot] = value / norm
        return vector


_MAX_FEATURES = 65_536  # cached token features per embedder; cleared when over


@functools.lru_cache(maxsize=65_536)
def _term_hash(term: str) -> int:
    """The 64-bit feature hash of one term (cached: vocabularies repeat)."""
    digest = hashlib.blake2b(term.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return int.from_bytes(digest, "little")
