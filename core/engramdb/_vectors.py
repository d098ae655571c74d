"""Vector maths and the in-process vector index.

Everything here is the standard library only, so it runs unchanged in CPython and in
Pyodide. Vectors are L2-normalised once on write and once per query, so cosine
similarity is a dot product (see ``docs/performance.md``, section "Vectors", for the
measurements behind every choice below).

:class:`VectorIndex` keeps all vectors of one embedding space in one flat
``array('f')`` (4 bytes per dimension) plus one sign-bit code (a Python ``int``) per
vector and one ``uint8`` copy of its components (1 byte per dimension). A search either
scores every eligible vector exactly, or runs the *approximate* path: the Hamming
distance between sign-bit codes picks ``C`` candidates (:func:`candidates_for`), the
``uint8`` copies re-score those cheaply and keep the best :func:`rerank_for`, and only
those are scored exactly from the float32 array. For 64 <= d <= 384 the Hamming stage
first narrows all vectors to about 3C by the distance of their codes' first 192 bits
(all of them below d = 192), computed a byte column at a time in C (``bytes.translate``
and big-integer sums).
"""

from __future__ import annotations

import functools
import heapq
import math
import operator
import struct
import sys
from array import array
from bisect import bisect_left
from collections.abc import Callable, Collection, Container, Iterable, Iterator, Sequence
from itertools import repeat

from ._codec import _SIGN_TABLE, decode_f32, encode_f32, sign_code
from ._errors import CorruptDataError, DimensionMismatchError, ValidationError

__all__ = [
    "VectorIndex",
    "candidates_for",
    "cosine",
    "dot",
    "normalize",
    "rerank_for",
    "top_k_exact",
    "unit_f32",
    "use_exact",
]

# normalize() returns a vector this close to unit length as it is: dividing by the norm
# would change it by less than float32 (the storage format) can represent.
_ALREADY_UNIT = 1e-12
# A stored vector whose norm is further than this from 1 was not normalised.
_UNIT_TOLERANCE = 1e-3
# The approximate path samples one code in this many to estimate the Hamming threshold.
_SAMPLE_STRIDE = 32
# Its prefilter reads the first _PREFIX_BYTES bytes (192 dimensions) of each sign code
# (at most 31: the byte lanes of the column sums must not carry) and keeps about
# _PREFIX_POOL * C codes for the full Hamming distance. It is used from d = 64
# (_PREFIX_MIN bytes) to d = 384, where the prefix is at least half the code; outside
# that every full code is scanned instead (at d = 768 a quarter-code prefix lost much
# of the recall on unclustered data, docs/performance.md).
_PREFIX_BYTES = 24
_PREFIX_MIN = 8
_PREFIX_POOL = 3
# The uint8 copy clips a component at this many standard deviations of a random unit
# vector's component (1 / sqrt(d)): scale S = 127 * sqrt(d) / _CLIP_SIGMAS.
_CLIP_SIGMAS = 4.0
# add_many quantises through a 2**24-entry lookup table (16 MB, built once per dimension
# count, in about 0.3 s) once the index reaches this many components; below, per component.
_BULK_TABLE_MIN = 1 << 21
_BIG_ENDIAN = sys.byteorder == "big"
_bulk_tables: dict[int, bytes] = {}


def normalize(vector: Iterable[float]) -> list[float]:
    """Return ``vector`` scaled to unit L2 length, as a list of floats.

    Raises ``ValidationError`` for an empty, all-zero or non-finite vector.
    """
    return list(map(float, _unit(vector)))


def unit_f32(vector: Iterable[float]) -> bytes:
    """``encode_f32(normalize(vector))`` (the same bytes) in one cheaper pass.

    Unit components lie in [-1, 1], so the float32 conversion needs no overflow check.
    """
    values = _unit(vector)
    return _f32_struct(len(values)).pack(*values)  # 2x array("f", ...) for lists


@functools.lru_cache(maxsize=16)
def _f32_struct(dimensions: int) -> struct.Struct:
    """Little-endian float32 x ``dimensions``, whatever the host's byte order."""
    return struct.Struct(f"<{dimensions}f")


def _unit(vector: Iterable[float]) -> Sequence[float]:
    """``vector`` itself when its L2 norm is 1 (to float64 precision), else it scaled."""
    values = vector if isinstance(vector, (list, tuple, array)) else list(vector)
    if not values:
        raise ValidationError("the vector is empty; pass at least one finite number")
    try:
        norm = math.hypot(*values)
    except TypeError as exc:
        raise ValidationError(
            f"cannot read the vector as floats ({exc}); pass a sequence of finite numbers"
        ) from exc
    if not math.isfinite(norm):
        raise ValidationError(
            "the vector has a NaN or infinite component; pass finite numbers only"
        )
    if norm == 0.0:
        raise ValidationError(
            "the vector is all zeros and has no direction; check the embedder's output"
        )
    if abs(norm - 1.0) <= _ALREADY_UNIT:  # most embedders normalise already
        return values
    return [x / norm for x in values]


# --- kernels ------------------------------------------------------------------------
#
# The kernel is chosen when it is first needed (never timed, never at import): on
# Python 3.12+ ``math.sumprod`` is a single C loop; on 3.11 ``sum(map(mul))`` is the
# only exact general dot product. For *unit* vectors read from the flat float32 array
# the index uses ``math.dist`` on 3.11 and ``math.sumprod`` on 3.12+ (measured fastest
# on memoryview slices in each version).

_DotFn = Callable[[Sequence[float], Sequence[float]], float]
_dot_kernel: _DotFn | None = None


def _sum_map_mul(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum(map(operator.mul, a, b)))


def _choose_dot() -> _DotFn:
    global _dot_kernel
    sumprod: _DotFn | None = getattr(math, "sumprod", None)
    _dot_kernel = sumprod if sumprod is not None else _sum_map_mul
    return _dot_kernel


def _check_lengths(a: Sequence[float], b: Sequence[float]) -> None:
    if len(a) != len(b):
        raise DimensionMismatchError(
            f"the vectors have {len(a)} and {len(b)} dimensions; compare vectors of one "
            "embedding space only",
            expected=len(a),
            actual=len(b),
        )


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """Return the dot product of two vectors of equal length."""
    _check_lengths(a, b)
    kernel = _dot_kernel or _choose_dot()
    return float(kernel(a, b))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Return the cosine similarity of two non-zero vectors (in [-1, 1])."""
    _check_lengths(a, b)
    return max(-1.0, min(1.0, dot(normalize(a), normalize(b))))


def top_k_exact(
    query: Sequence[float], vectors: Sequence[Sequence[float]], k: int
) -> list[tuple[int, float]]:
    """Return the ``k`` best ``(index, dot product)`` pairs, best first.

    Ties are broken by index, ascending. For unit vectors the dot product is the cosine
    similarity. Every vector must have the query's length.
    """
    _check_k(k)
    if k == 0 or not vectors:
        return []
    kernel = _dot_kernel or _choose_dot()
    size = len(query)
    for vector in vectors:
        if len(vector) != size:
            _check_lengths(query, vector)
    scores = [-kernel(vector, query) for vector in vectors]
    chosen = _smallest(scores, k)
    return [(i, float(-scores[i])) for i in chosen]


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValidationError(f"k={k!r} must be an int >= 0; pass e.g. k=10")


def _smallest(scores: list[float], k: int, tie: Sequence[str] | None = None) -> list[int]:
    """Indices of the ``k`` smallest ``scores``; ties by ``tie[i]`` (or by index)."""
    n = len(scores)
    if k >= n:
        chosen = list(range(n))
    else:
        threshold = heapq.nsmallest(k, scores)[-1]
        chosen = [i for i, s in enumerate(scores) if s <= threshold]
    if tie is None:
        chosen.sort(key=lambda i: (scores[i], i))
    else:
        chosen.sort(key=lambda i: (scores[i], tie[i]))
    return chosen[:k]


# --- candidate rule ------------------------------------------------------------------


def candidates_for(n: int, k: int) -> int:
    """How many Hamming candidates the approximate search re-scores.

    ``C = max(10 * k, ceil(n / 100))``, at most ``n``. The ``C`` candidates are scored
    from their ``uint8`` copies and the best :func:`rerank_for` of them exactly, so recall
    is bounded by the Hamming stage (and, for 64 <= d <= 384, by its prefix pool of
    about 3C). Measured on clustered data (docs/performance.md): n=10k gives C=100
    (recall@10 ≈ 0.998), n=100k gives C=1000 (1.000 over 50 queries at d=384; C=800
    gave 0.998, C=600 0.976). Sign-bit codes carry little signal on unstructured data
    (recall@10 ≈ 0.4 for iid Gaussian vectors at n=100k); validate on your own embeddings.
    """
    return min(n, max(10 * k, -(-n // 100)))


def rerank_for(k: int) -> int:
    """How many ``uint8``-scored candidates are re-scored exactly: ``max(3k, 30)``.

    The ``uint8`` copy resolves about 1/32 of a component's standard deviation, so its
    ranking of the Hamming candidates is nearly exact; the float32 rerank only fixes the
    order at the margin (docs/performance.md measured no recall change from 20 to 1000).
    """
    return max(3 * k, 30)


def use_exact(n: int, c: int) -> bool:
    """Whether exact scoring is used: when ``n`` is at most 10 times ``c``.

    Below that the Hamming pass saves too little to be worth any recall loss.
    """
    return n <= 10 * c


# --- the index -----------------------------------------------------------------------


class VectorIndex:
    """A compact, in-process index of unit vectors of one dimension, keyed by string.

    Vectors live in one flat ``array('f')`` next to one flat ``bytearray`` of their
    ``uint8`` quantised components and a list of sign-bit codes (removal swaps the last
    vector into the hole of all three), so 100k vectors at d=384 take about 200 MB.
    The index is not thread-safe; it does no I/O.
    """

    __slots__ = (
        "_bias",
        "_codes",
        "_columns",
        "_dimensions",
        "_flat",
        "_keys",
        "_positions",
        "_scale",
        "_table",
        "_u8",
    )

    def __init__(self, dimensions: int) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int):
            raise ValidationError(
                f"dimensions={dimensions!r} must be an int; pass e.g. VectorIndex(384)"
            )
        if not 1 <= dimensions <= 65_536:
            raise ValidationError(f"dimensions={dimensions} is out of range; use 1..65536")
        self._dimensions = dimensions
        self._flat: array[float] = array("f")
        # uint8 copy: clamp(round(x * S), -127, 127) + 128 per component (rounding half
        # up). ``_table[int(x * S + _bias)]`` is that byte; ``_bias`` keeps the index >= 0
        # for |x| <= 1.01 (stored vectors are unit length within 1e-3).
        self._u8 = bytearray()
        self._scale = 127.0 * math.sqrt(dimensions) / _CLIP_SIGMAS
        top = math.ceil(self._scale * 1.01) + 1
        self._bias = top + 0.5
        self._table = bytes(min(127, max(-127, i - top)) + 128 for i in range(2 * top + 1))
        self._codes: list[int] = []
        # The first bytes of every sign code, one bytearray per byte position (byte j of
        # vector i at self._columns[j][i]): the prefix prefilter of _nearest_by_prefix.
        width = min(_PREFIX_BYTES, dimensions // 8)
        used = width >= _PREFIX_MIN and 16 * width >= dimensions  # 64 <= d <= 384
        self._columns = [bytearray() for _ in range(width if used else 0)]
        self._keys: list[str] = []
        self._positions: dict[str, int] = {}

    @property
    def dimensions(self) -> int:
        """The number of dimensions of every vector in the index."""
        return self._dimensions

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._positions

    def keys(self) -> Iterator[str]:
        """Iterate over the keys, in no particular order."""
        return iter(list(self._keys))

    def add(self, key: str, blob: bytes) -> None:
        """Add (or replace) the vector under ``key``.

        ``blob`` holds the little-endian float32 bytes of a unit vector, as made by
        ``encode_f32(normalize(v))``. Raises ``CorruptDataError`` for bad bytes,
        ``DimensionMismatchError`` for a wrong length and ``ValidationError`` for a
        vector that is not unit length. A failed add changes nothing.
        """
        if not isinstance(key, str):
            raise ValidationError(f"key={key!r} must be a str")
        d = self._dimensions
        values = decode_f32(blob, d)
        norm = math.hypot(*values)
        if abs(norm - 1.0) > _UNIT_TOLERANCE:
            raise ValidationError(
                f"the vector for {key!r} has norm {norm:.6g}, not 1; store "
                "encode_f32(normalize(vector))"
            )
        code = sign_code(bytes(blob))
        quantised = self._quantise(values)
        position = self._positions.get(key)
        if position is None:
            self._flat.extend(values)
            self._u8 += quantised
            self._codes.append(code)
            self._append_prefixes(self._prefix(code))
            self._keys.append(key)
            self._positions[key] = len(self._keys) - 1
        else:
            self._flat[position * d : (position + 1) * d] = values
            self._u8[position * d : (position + 1) * d] = quantised
            self._codes[position] = code
            self._set_prefix(position, self._prefix(code))

    def add_many(self, pairs: Iterable[tuple[str, bytes]]) -> None:
        """Add (or replace) many ``(key, blob)`` pairs; the same as :meth:`add` for each.

        The blobs are decoded, checked, sign-coded and quantised in bulk, which is several
        times faster than repeated :meth:`add`. Raises what :meth:`add` raises for the
        first bad pair; a failed call changes nothing. A key given twice keeps its last
        vector.
        """
        d = self._dimensions
        size = 4 * d
        keys: list[str] = []
        blobs: list[bytes] = []
        for key, blob in pairs:
            if not isinstance(key, str):
                raise ValidationError(f"key={key!r} must be a str")
            if len(blob) != size:
                decode_f32(blob, d)  # raises CorruptDataError / DimensionMismatchError
            keys.append(key)
            blobs.append(blob)
        if not keys:
            return
        joined = b"".join(blobs)
        del blobs
        values = array("f")
        values.frombytes(joined)
        if _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
            values.byteswap()
        if not math.isfinite(sum(values)):
            for o in range(0, len(values), d):
                if not math.isfinite(sum(values[o : o + d])):
                    decode_f32(joined[4 * o : 4 * o + size], d)  # raises CorruptDataError
            raise CorruptDataError("a stored float32 vector is not finite")  # pragma: no cover
        hypot = math.hypot
        with memoryview(values) as view:
            for i, o in enumerate(range(0, len(values), d)):
                norm = hypot(*view[o : o + d])
                if abs(norm - 1.0) > _UNIT_TOLERANCE:
                    raise ValidationError(
                        f"the vector for {keys[i]!r} has norm {norm:.6g}, not 1; store "
                        "encode_f32(normalize(vector))"
                    )
        signs = joined[3::4].translate(_SIGN_TABLE)
        codes = [int(signs[o : o + d], 2) for o in range(0, len(signs), d)]
        del signs
        quantised = self._quantise_many(values, joined)
        del joined
        positions = self._positions
        if len(set(keys)) == len(keys) and not any(key in positions for key in keys):
            start = len(self._keys)
            self._flat.extend(values)
            self._u8 += quantised
            self._codes += codes
            self._append_prefixes(b"".join(map(self._prefix, codes)))
            self._keys += keys
            positions.update(zip(keys, range(start, start + len(keys)), strict=True))
            return
        for i, key in enumerate(keys):
            o = i * d
            position = positions.get(key)
            if position is None:
                self._flat.extend(values[o : o + d])
                self._u8 += quantised[o : o + d]
                self._codes.append(codes[i])
                self._append_prefixes(self._prefix(codes[i]))
                self._keys.append(key)
                positions[key] = len(self._keys) - 1
            else:
                self._flat[position * d : (position + 1) * d] = values[o : o + d]
                self._u8[position * d : (position + 1) * d] = quantised[o : o + d]
                self._codes[position] = codes[i]
                self._set_prefix(position, self._prefix(codes[i]))

    def remove(self, key: str) -> bool:
        """Remove ``key``; return whether it was present."""
        position = self._positions.pop(key, None)
        if position is None:
            return False
        d = self._dimensions
        last = len(self._keys) - 1
        if position != last:
            moved = self._keys[last]
            self._flat[position * d : (position + 1) * d] = self._flat[last * d :]
            self._u8[position * d : (position + 1) * d] = self._u8[last * d :]
            self._codes[position] = self._codes[last]
            self._set_prefix(position, self._prefix(self._codes[last]))
            self._keys[position] = moved
            self._positions[moved] = position
        del self._flat[last * d :]
        del self._u8[last * d :]
        self._codes.pop()
        for column in self._columns:
            column.pop()
        self._keys.pop()
        return True

    def search(
        self,
        query: Sequence[float],
        k: int,
        *,
        exact: bool = False,
        allowed: Container[str] | None = None,
        candidates: int | None = None,
    ) -> list[tuple[str, float]]:
        """Return up to ``k`` ``(key, cosine similarity)`` pairs, best first.

        Ties are broken by key, ascending. ``allowed`` restricts the eligible keys.
        ``exact=True`` scores every eligible vector; otherwise large sets use the
        approximate path: ``candidates`` (default :func:`candidates_for`) Hamming
        candidates are re-scored from their ``uint8`` copies and the best
        :func:`rerank_for` of those exactly. The query need not be normalised.
        """
        _check_k(k)
        d = self._dimensions
        if len(query) != d:
            raise DimensionMismatchError(
                f"the query has {len(query)} dimensions but the index has {d}; embed "
                "the query with the same embedding space",
                expected=d,
                actual=len(query),
            )
        q = normalize(query)
        if candidates is not None and (
            isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1
        ):
            raise ValidationError(
                f"candidates={candidates!r} must be an int >= 1; pass e.g. 800 or None"
            )
        if k == 0 or not self._keys:
            return []
        positions = self._eligible(allowed)
        n = len(self._keys) if positions is None else len(positions)
        if n == 0:
            return []
        c = candidates_for(n, k) if candidates is None else max(candidates, k)
        if exact or use_exact(n, c):
            return self._score(q, positions, k)
        return self._approximate(q, positions, k, c)

    # -- internals -------------------------------------------------------------------

    def _prefix(self, code: int) -> bytes:
        """The first ``len(self._columns)`` bytes of a sign code (its leading dimensions)."""
        width = len(self._columns)
        return (code >> (self._dimensions - 8 * width)).to_bytes(width, "big")

    def _append_prefixes(self, prefixes: bytes) -> None:
        """Append the concatenated prefixes of new vectors to the columns."""
        width = len(self._columns)
        for j, column in enumerate(self._columns):
            column += prefixes[j::width]

    def _set_prefix(self, position: int, prefix: bytes) -> None:
        for column, byte in zip(self._columns, prefix, strict=True):
            column[position] = byte

    def _quantise(self, values: Iterable[float]) -> bytes:
        """The ``uint8`` copy of a unit vector's components (see ``_table``)."""
        # A list comprehension measured fastest here (faster than chained C-level maps).
        table = self._table
        scale = self._scale
        bias = self._bias
        return bytes([table[int(x * scale + bias)] for x in values])

    def _quantise_many(self, values: array[float], blob: bytes) -> bytes:
        """:meth:`_quantise` of many unit vectors: ``values`` decoded from ``blob``.

        Large inputs go through a table indexed by the top 24 bits of each float32 (sign,
        exponent, 15 mantissa bits): one C-level ``map`` instead of Python arithmetic per
        component. A table entry is set only where every float32 with those top bits
        quantises to the same byte; the rest (0, never a valid byte) are computed exactly.
        """
        table = _bulk_tables.get(self._dimensions)
        if table is None and len(self._flat) + len(values) < _BULK_TABLE_MIN:
            return self._quantise(values)
        if table is None:
            table = _bulk_tables[self._dimensions] = self._bulk_table()
        top = bytearray(len(blob))  # little-endian uint32 (b1, b2, b3, 0) = bits >> 8
        top[0::4] = blob[1::4]
        top[1::4] = blob[2::4]
        top[2::4] = blob[3::4]
        indexes = array("I")
        indexes.frombytes(top)
        del top
        if _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
            indexes.byteswap()
        out = bytearray(map(table.__getitem__, indexes))
        del indexes
        exact, scale, bias = self._table, self._scale, self._bias
        at = out.find(0)
        while at != -1:
            out[at] = exact[int(values[at] * scale + bias)]
            at = out.find(0, at + 1)
        return bytes(out)

    def _bulk_table(self) -> bytes:
        """The 2**24-entry table of :meth:`_quantise_many` (0 where not exact)."""
        exact, scale, bias = self._table, self._scale, self._bias

        def quantise(x: float) -> int:
            return exact[int(x * scale + bias)]

        def floats(bits: list[int]) -> array[float]:
            out = array("f")
            out.frombytes(struct.pack(f"<{len(bits)}I", *bits))
            return out

        ends = range(65_536)
        lows = floats([h << 16 for h in ends])
        highs = floats([h << 16 | 0xFFFF for h in ends])
        parts: list[bytes] = []
        for h in ends:
            low, high = lows[h], highs[h]
            if not (abs(low) <= 1.01 and abs(high) <= 1.01):  # also NaN: never used
                parts.append(bytes(256))
                continue
            byte = quantise(low)
            if byte == quantise(high):  # quantisation is monotonic in x
                parts.append(bytes((byte,)) * 256)
                continue
            sub_lows = floats([h << 16 | s << 8 for s in range(256)])
            sub_highs = floats([h << 16 | s << 8 | 0xFF for s in range(256)])
            parts.append(
                bytes(
                    a if a == quantise(b) else 0
                    for a, b in zip(map(quantise, sub_lows), sub_highs, strict=True)
                )
            )
        return b"".join(parts)

    def _eligible(self, allowed: Container[str] | None) -> list[int] | None:
        if allowed is None:
            return None
        if isinstance(allowed, str):
            raise ValidationError(
                f"allowed={allowed!r} is a str; pass a set of keys, e.g. {{{allowed!r}}}"
            )
        get = self._positions.get
        if isinstance(allowed, Collection) and len(allowed) < len(self._keys):
            found = {get(key) for key in allowed}
            found.discard(None)
            return sorted(p for p in found if p is not None)
        return [p for p, key in enumerate(self._keys) if key in allowed]

    def _score(
        self, q: list[float], positions: list[int] | None, k: int
    ) -> list[tuple[str, float]]:
        """Score ``positions`` (None: all) exactly; return the best ``k`` (key, similarity)."""
        d = self._dimensions
        if positions is None:
            offsets: Iterable[int] = range(0, len(self._keys) * d, d)
            keys = self._keys
        else:
            offsets = [p * d for p in positions]
            keys = [self._keys[p] for p in positions]
        sumprod: _DotFn | None = getattr(math, "sumprod", None)
        with memoryview(self._flat) as view:
            if sumprod is not None:
                scores = [-sumprod(view[o : o + d], q) for o in offsets]
            else:
                qt = tuple(q)
                dist = math.dist
                scores = [dist(qt, view[o : o + d]) for o in offsets]
        best = _smallest(scores, k, keys)
        if sumprod is not None:
            return [(keys[i], _clamp(-scores[i])) for i in best]
        # For unit vectors |q - v|^2 = 2 - 2 cos, so cos = 1 - dist^2 / 2.
        return [(keys[i], _clamp(1.0 - scores[i] * scores[i] / 2.0)) for i in best]

    def _approximate(
        self, q: list[float], positions: list[int] | None, k: int, c: int
    ) -> list[tuple[str, float]]:
        qcode = sign_code(encode_f32(q))
        picked = self._nearest_by_prefix(qcode, c, positions)
        if picked is None:
            codes = self._codes if positions is None else [self._codes[p] for p in positions]
            picked = _nearest_codes(qcode, codes, c)
            if positions is not None:
                picked = [positions[i] for i in picked]
        keep = rerank_for(k)
        if len(picked) > keep:
            # Rank the candidates by Euclidean distance between their uint8 copies and
            # the (unrounded) scaled query, shifted by the same +128: the shift cancels.
            # Iterating a bytes slice yields cached small ints, so this is ~2-4x cheaper
            # per candidate than scoring the float32 slice.
            d = self._dimensions
            u8 = self._u8
            qs = tuple(map(float.__add__, map(self._scale.__mul__, q), repeat(128.0)))
            dist = math.dist
            scores = [dist(qs, u8[o : o + d]) for o in [p * d for p in picked]]
            best = heapq.nsmallest(keep, range(len(picked)), key=scores.__getitem__)
            picked = [picked[i] for i in best]
        return self._score(q, picked, k)

    def _nearest_by_prefix(
        self, qcode: int, c: int, positions: list[int] | None
    ) -> list[int] | None:
        """The ``c`` nearest eligible codes by Hamming distance among about
        ``_PREFIX_POOL * c`` eligible ones nearest by the distance of their prefixes, or
        None when there are no columns. ``positions`` (ascending) are the eligible ones;
        None means all, and all listed gives the same answer as None.

        The prefix distances of all vectors are computed a byte column at a time in C:
        ``bytes.translate`` maps each byte to its popcount after XOR with the query's
        byte, and the columns are added as big integers whose byte lanes cannot carry (a
        prefix has at most 192 bits). The pool is cut with a threshold estimated from a
        strided sample, scaled by the eligible share; if it holds fewer than ``c``
        eligible codes, the caller scans every eligible code.
        """
        columns = self._columns
        n = len(self._codes)
        eligible = n if positions is None else len(positions)
        if not columns or eligible == 0:
            return None
        tables = _xor_popcount_tables()
        total = 0
        for column, byte in zip(columns, self._prefix(qcode), strict=True):
            total += int.from_bytes(column.translate(tables[byte]), "little")
        distances = total.to_bytes(n, "little")  # byte i: the prefix distance of vector i
        sample = sorted(distances[::_SAMPLE_STRIDE])
        rank = (_PREFIX_POOL * c * len(sample)) // eligible + 2
        kept = distances.translate(_at_most_table(sample[min(len(sample) - 1, rank)]))
        pool: list[int] = []
        at = kept.find(1)  # 1 where within the threshold
        while at != -1:  # C-speed scans between the few kept positions
            pool.append(at)
            at = kept.find(1, at + 1)
        if positions is not None:
            pool = [i for i in pool if _holds(positions, i)]
        if len(pool) < c:
            return None
        codes = self._codes
        full = [(codes[i] ^ qcode).bit_count() for i in pool]
        order = sorted(range(len(pool)), key=full.__getitem__)
        return [pool[i] for i in order[:c]]


def _holds(ascending: list[int], value: int) -> bool:
    """Whether the ascending list holds ``value`` (binary search)."""
    at = bisect_left(ascending, value)
    return at < len(ascending) and ascending[at] == value


_xor_popcounts: tuple[bytes, ...] = ()


def _xor_popcount_tables() -> tuple[bytes, ...]:
    """Table ``v`` maps a byte ``b`` to ``popcount(b ^ v)`` (built on first use, 64 KB).

    Built whole, then published in one assignment: a thread never sees a partial list.
    """
    global _xor_popcounts
    if not _xor_popcounts:
        counts = [b.bit_count() for b in range(256)]
        _xor_popcounts = tuple(bytes(counts[b ^ v] for b in range(256)) for v in range(256))
    return _xor_popcounts


@functools.lru_cache(maxsize=256)
def _at_most_table(threshold: int) -> bytes:
    """Maps a byte to 1 if it is at most ``threshold``, else to 0."""
    return bytes(v <= threshold for v in range(256))


def _nearest_codes(qcode: int, codes: list[int], c: int) -> list[int]:
    """Indices of the ``c`` codes nearest to ``qcode`` in Hamming distance (ties: any)."""
    n = len(codes)
    # Estimate the Hamming distance of the C-th nearest code from a strided sample,
    # with a margin, then keep every code within it in one pass (about 1.5C codes).
    sample = sorted([(x ^ qcode).bit_count() for x in codes[::_SAMPLE_STRIDE]])
    rank = min(len(sample) - 1, (c * len(sample) * 3) // (2 * n) + 2)
    threshold = sample[rank]
    picked = [i for i, x in enumerate(codes) if (x ^ qcode).bit_count() <= threshold]
    if len(picked) < c:  # the sample under-estimated: fall back to a full selection
        dists = [(x ^ qcode).bit_count() for x in codes]
        return heapq.nsmallest(c, range(n), key=dists.__getitem__)
    if len(picked) > c:  # trim to the c nearest: sort the few kept by distance
        kept = [(codes[i] ^ qcode).bit_count() for i in picked]
        order = sorted(range(len(picked)), key=kept.__getitem__)
        picked = [picked[i] for i in order[:c]]
    return picked


def _clamp(similarity: float) -> float:
    return max(-1.0, min(1.0, float(similarity)))
