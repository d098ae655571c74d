"""A static (token-table) embedder: recall by meaning with no model runtime and no service.

A static table holds one vector per token of a WordPiece vocabulary, distilled from a
sentence-transformer (the model2vec recipe; ``eval/distill_static.py`` makes the table
shipped with engramdb from all-MiniLM-L6-v2). A text's vector is the weighted mean of its
tokens' rows, L2-normalised. It runs in the standard library, so also in Pyodide.

The table format (version 1), all numbers little-endian::

    offset  size       field
    0       8          magic b"EGSTATIC"
    8       2          format version, uint16 (1)
    10      1          quantisation, uint8: 1 = int8 rows, one float32 scale per row
    11      1          reserved, 0
    12      4          vocabulary size N, uint32
    16      4          dimensions D, uint32
    20      4          vocabulary byte length L, uint32
    24      L          the vocabulary: N tokens, UTF-8, joined by "\\n"; id = position
    24+L    4N         token weights, float32 (0 = the token is ignored)
    24+L+4N 4N         row scales, float32
    24+L+8N N*D        rows, int8, token by token
    end-32  32         SHA-256 of every byte before it

Token ``i``'s vector is ``weight[i] * scale[i] * row[i]``. The vocabulary must hold
``[UNK]``; tokenisation is BERT's uncased basic tokenizer + WordPiece
(:mod:`engramdb._embedders.wordpiece`). A table may leave out tokens that no text can produce
(BERT's ``[unused*]``): WordPiece never matches them anyway.
"""

from __future__ import annotations

import hashlib
import math
import struct
import sys
from array import array
from collections.abc import Sequence
from operator import mul
from typing import Any

from engramdb._base.errors import ConfigurationError, ValidationError
from engramdb._base.types import EmbeddingSpace
from engramdb._embedders.embedder import InProcessEmbedder
from engramdb._embedders.wordpiece import WordPieceTokenizer

__all__ = ["StaticEmbedder", "build_static_table"]

MAGIC = b"EGSTATIC"
FORMAT_VERSION = 1
QUANT_INT8 = 1
_HEADER = struct.Struct("<8sHBBIII")
_DIGEST = 32
_MULTIPLIER_BITS = float(1 << 24)
_FIX = "rebuild the table with eval/distill_static.py or pass the bytes of an intact file"


class StaticEmbedder(InProcessEmbedder):
    """Embeds a text as the weighted mean of its tokens' vectors from a static table.

    Build one from a table's bytes with :meth:`from_bytes` (the host reads the file; the
    core never opens one). How a vector is made (integer arithmetic, so the same bytes on
    every platform, CPython and Pyodide):

    1. the text's token ids: BERT's uncased tokenizer and WordPiece
       (:mod:`engramdb._embedders.wordpiece`), with no ``[CLS]``/``[SEP]``;
    2. every token's multiplier ``weight * scale`` becomes an integer
       ``m = round(weight * scale * 2**24 / max over the table of weight * scale)``
       (a token whose ``m`` is 0 is ignored); the text's vector is the exact integer sum
       of ``m * row`` over its tokens (a token that occurs twice adds twice);
    3. that sum is divided by its L2 norm. A text with no weighted token (empty, only
       unknown words), or whose sum is 0, gets the fixed unit vector ``[1, 0, 0, ...]``,
       so embedding never fails.

    For speed, each row is packed into one Python int (64 bits per dimension, offset by
    128 so that every field is positive) and the sum is a sum of big ints. A field adds
    at most ``255 * 2**24`` per token, so no text short of 2**32 tokens can overflow it.

    ``kind`` does not change the vector. The space is
    ``EmbeddingSpace("static", name, D, variant=<first 12 hex digits of the SHA-256 the
    table carries>)``, e.g. ``static/minilm-l6-256@256#0123456789ab``: two different
    tables never share a space (the same bytes under another ``name`` are another space
    too). ``semantic`` is True.
    """

    semantic = True
    SHIPPED_FILE = "data/static-minilm-256.bin"
    """Where the table that ships with engramdb lies, relative to the ``engramdb``
    package (hosts read it: ``Path(engramdb.__file__).parent / SHIPPED_FILE``)."""
    SHIPPED_NAME = "minilm-l6-256"
    """The ``name`` its space carries: ``static/minilm-l6-256@256#<sha256[:12]>``."""

    __slots__ = (
        "_cache_rows",
        "_dims",
        "_multipliers",
        "_packed",
        "_tokenizer",
        "_vectors",
        "sha256",
    )

    def __init__(
        self,
        *,
        tokenizer: WordPieceTokenizer,
        multipliers: Sequence[int],
        vectors: array[int],
        dims: int,
        space: EmbeddingSpace,
        sha256: str,
        max_batch: int = 256,
        cache_rows: int = 8192,
    ) -> None:
        super().__init__(space, max_batch)
        self._tokenizer = tokenizer
        self._multipliers = multipliers  # step 2 of the class docstring
        self._vectors = vectors
        self._dims = dims
        self.sha256 = sha256
        self._cache_rows = cache_rows
        self._packed: dict[int, int] = {}

    @classmethod
    def from_bytes(
        cls, data: bytes, *, name: str = "table", max_batch: int = 256
    ) -> StaticEmbedder:
        """The embedder of a table in the format of the module docstring.

        ``name`` becomes the space's model (e.g. ``"minilm-l6-256"``). Raises
        ``ConfigurationError`` when the bytes are not an intact table of a known version.
        """
        view = memoryview(data)
        if len(view) < _HEADER.size + _DIGEST:
            raise ConfigurationError(
                f"the static table is {len(view)} bytes, too short to be a table; {_FIX}"
            )
        digest = hashlib.sha256(view[:-_DIGEST]).digest()
        magic, version, quant, _, n, dims, vocab_len = _HEADER.unpack_from(view)
        if magic != MAGIC:
            raise ConfigurationError(
                f"the static table starts with {bytes(magic)!r}, not {MAGIC!r}: it is not "
                f"an engramdb static table; {_FIX}"
            )
        if version != FORMAT_VERSION or quant != QUANT_INT8:
            raise ConfigurationError(
                f"the static table has format version {version}, quantisation {quant}; this "
                f"engramdb reads version {FORMAT_VERSION}, quantisation {QUANT_INT8} "
                "(upgrade engramdb or rebuild the table)"
            )
        expected = _HEADER.size + vocab_len + 8 * n + n * dims + _DIGEST
        if len(view) != expected:
            raise ConfigurationError(
                f"the static table is {len(view)} bytes but its header announces {expected} "
                f"(vocabulary {n}, dimensions {dims}): it is truncated or padded; {_FIX}"
            )
        if digest != bytes(view[-_DIGEST:]):
            raise ConfigurationError(
                f"the static table's SHA-256 {digest.hex()[:12]}... does not match the one "
                f"it carries: the bytes are corrupt; {_FIX}"
            )
        at = _HEADER.size
        try:
            vocabulary = str(view[at : at + vocab_len], "utf-8").split("\n")
        except UnicodeDecodeError as exc:
            raise ConfigurationError(
                f"the static table's vocabulary is not UTF-8 ({exc}); {_FIX}"
            ) from exc
        if len(vocabulary) != n or not 1 <= dims <= 65_536:
            raise ConfigurationError(
                f"the static table lists {len(vocabulary)} tokens for a vocabulary of {n} "
                f"and {dims} dimensions; {_FIX}"
            )
        at += vocab_len
        weights = _array("f", view[at : at + 4 * n])
        scales = _array("f", view[at + 4 * n : at + 8 * n])
        if sys.byteorder == "big":  # pragma: no cover - every supported host is little-endian
            weights.byteswap()
            scales.byteswap()
        vectors = _array("b", view[at + 8 * n : at + 8 * n + n * dims])
        try:
            tokenizer = WordPieceTokenizer(vocabulary)
        except ValueError as exc:
            raise ConfigurationError(f"the static table is unusable: {exc}; {_FIX}") from exc
        sha256 = digest.hex()
        space = EmbeddingSpace("static", name, dims, variant=sha256[:12])
        products = list(map(mul, weights, scales))
        peak = max(map(abs, products))
        if not all(map(math.isfinite, products)) or min(products) < 0:
            raise ConfigurationError(
                f"the static table has a negative or non-finite weight or scale; {_FIX}"
            )
        unit = peak / _MULTIPLIER_BITS if peak else 1.0
        return cls(
            tokenizer=tokenizer,
            multipliers=array("q", (round(x / unit) for x in products)),
            vectors=vectors,
            dims=dims,
            space=space,
            sha256=sha256,
            max_batch=max_batch,
        )

    def __repr__(self) -> str:
        return f"StaticEmbedder(space={self._space.id!r})"

    def token_ids(self, text: str) -> list[int]:
        """The token ids of ``text`` (step 1 of the class docstring)."""
        return self._tokenizer.ids(text)

    def _pack(self, token: int) -> int:
        """Token ``token``'s row as one int: 64-bit fields, each ``row[d] + 128``."""
        start = token * self._dims
        fields = array("Q", [q + 128 for q in self._vectors[start : start + self._dims]])
        if sys.byteorder == "big":  # pragma: no cover - every supported host is little-endian
            fields.byteswap()
        packed = int.from_bytes(fields.tobytes(), "little")
        if len(self._packed) >= self._cache_rows:
            self._packed.clear()
        self._packed[token] = packed
        return packed

    def embed_one(self, text: str) -> list[float]:
        """Return the unit vector of one text (see the class docstring)."""
        multipliers = self._multipliers
        counts: dict[int, int] = {}
        for token in self._tokenizer.ids(text):
            if multipliers[token]:
                counts[token] = counts.get(token, 0) + 1
        dims = self._dims
        if counts:
            packed = self._packed
            total = 0
            weight = 0
            for token, count in counts.items():
                m = multipliers[token] * count
                row = packed.get(token)
                total += m * (self._pack(token) if row is None else row)
                weight += m
            fields = array("Q")
            fields.frombytes(total.to_bytes(8 * dims, "little"))
            if sys.byteorder == "big":  # pragma: no cover
                fields.byteswap()
            values = list(map((128 * weight).__rsub__, fields))  # field - 128 * weight
            square = sum(map(mul, values, values))  # exact: Python ints
            if square:
                return list(map(math.sqrt(square).__rtruediv__, values))  # value / norm
        vector = [0.0] * dims
        vector[0] = 1.0
        return vector


def _array(typecode: str, data: memoryview) -> array[Any]:
    """``data`` read as an array of ``typecode`` (iterating a memoryview gives bytes)."""
    out = array(typecode)
    out.frombytes(data)
    return out


def build_static_table(
    vocabulary: Sequence[str],
    weights: Sequence[float],
    rows: Sequence[Sequence[float]],
) -> bytes:
    """The bytes of a version-1 table (module docstring) for float ``rows``.

    Each row is quantised to int8 with scale ``max(|x|) / 127`` (a zero row gets scale
    0). Used by the distillation script and by tests that need a small table.
    """
    n = len(vocabulary)
    if len(weights) != n or len(rows) != n or n == 0:
        raise ValidationError(
            f"build_static_table needs one weight and one row per token: got {n} tokens, "
            f"{len(weights)} weights and {len(rows)} rows"
        )
    dims = len(rows[0])
    if any("\n" in token for token in vocabulary):
        raise ValidationError("build_static_table: a token contains a newline")
    scales = array("f")
    quantised = array("b")
    for row in rows:
        if len(row) != dims:
            raise ValidationError(
                f"build_static_table: rows have {dims} and {len(row)} dimensions; "
                "give every row the same"
            )
        peak = max(abs(x) for x in row)
        scale = peak / 127.0 if peak else 0.0
        scales.append(scale)
        scale = scales[-1]  # the float32 actually stored
        quantised.extend(max(-127, min(127, round(x / scale))) if scale else 0 for x in row)
    weight_array = array("f", weights)
    if sys.byteorder == "big":  # pragma: no cover - every supported host is little-endian
        weight_array.byteswap()
        scales.byteswap()
    vocab = "\n".join(vocabulary).encode("utf-8")
    body = b"".join(
        [
            _HEADER.pack(MAGIC, FORMAT_VERSION, QUANT_INT8, 0, n, dims, len(vocab)),
            vocab,
            weight_array.tobytes(),
            scales.tobytes(),
            quantised.tobytes(),
        ]
    )
    return body + hashlib.sha256(body).digest()
