"""Bit-level kernels of the vector index: Hamming distances between sign-bit codes (with
byte-wise popcount tables) and the 4-bit copies' bit planes.

Each works on whole ``bytes``/``int`` values at C speed; :mod:`engramdb._vectors.index` calls
them. Nothing is built at import time but one small translation table (``_TOP_HALF``).
"""

from __future__ import annotations

import functools
import heapq
from bisect import bisect_left
from itertools import repeat

__all__ = [
    "at_most_table",
    "diagonals",
    "four_bits",
    "nearest_by_prefix",
    "nearest_codes",
    "nibble_planes",
    "xor_popcount_tables",
]

# The approximate path samples one code in this many to estimate the Hamming threshold.
SAMPLE_STRIDE = 32

# Maps a uint8 copy's byte to its top half (its 4-bit value, 0..15).
_TOP_HALF = bytes(b >> 4 for b in range(256))


def four_bits(copies: bytes, d: int) -> bytes:
    """The 4-bit copies of joined ``uint8`` copies of ``d`` bytes each: the top half of
    each byte, two components to a byte (the first in the high half), ``(d + 1) // 2``
    bytes a vector (an odd ``d`` ends each with a zero half). What an index keeps of a
    vector for :func:`nibble_planes`: half the bytes of its ``uint8`` copy. C-level
    passes: one ``translate``, two stepped slices, one shift and one ``or`` of two
    integers (each half byte is at most 15, so the shift carries nothing across bytes)."""
    top = copies.translate(_TOP_HALF)
    if d % 2:  # an odd d (tests use some) pads each vector to whole bytes
        top = b"".join(top[i : i + d] + b"\0" for i in range(0, len(top), d))
    high, low = top[0::2], top[1::2]
    joined = (int.from_bytes(high, "big") << 4) | int.from_bytes(low, "big")
    return joined.to_bytes(len(high), "big")


@functools.lru_cache(maxsize=16)
def plane_masks(d: int) -> tuple[int, int, int, int]:
    """Mask i has bit i of each of ``d`` nibbles set: plane i of a :func:`nibble_planes`
    integer."""
    ones = int("1" * d, 16)
    return ones, ones << 1, ones << 2, ones << 3


def nibble_planes(copies: bytes, d: int) -> list[tuple[int, int]]:
    """For each vector in ``copies`` (:func:`four_bits` copies, joined): one integer
    holding component j's 4-bit value in nibble ``d - 1 - j``, so that bit i of every
    nibble is the copy's bit plane i (:func:`plane_masks`), and the sum of its 4-bit
    values. One C-level ``hex`` of all of ``copies`` (a digit per component), then one
    ``int(text, 16)`` per vector (4 bits per digit: a quarter of the digits of four
    ``int(text, 2)`` planes, about 3x cheaper)."""
    text = copies.hex()
    step = 2 * ((d + 1) // 2)  # digits per vector, an odd d's zero half included
    rows = map(slice, range(0, len(text), step), range(d, len(text) + d, step))
    m0, m1, m2, m3 = plane_masks(d)
    return [
        (
            w,
            (w & m0).bit_count()
            + ((w & m1).bit_count() << 1)
            + ((w & m2).bit_count() << 2)
            + ((w & m3).bit_count() << 3),
        )
        for w in map(int, map(text.__getitem__, rows), repeat(16))
    ]


def diagonals(copy: bytes, d: int) -> tuple[int, int, int, int, int, int, int]:
    """The query side of :meth:`VectorIndex._nibble_scores` for the query's ``uint8``
    copy: for t = 0..6, ``y_t`` holds the query's plane ``t - i`` at bit i of every
    nibble, for every i in 0..3 with ``0 <= t - i <= 3`` (so ``v & y_t`` pairs the
    vector's plane i with the query's plane ``t - i``, component by component)."""
    w = nibble_planes(four_bits(copy, d), d)[0][0]
    q = [w & mask for mask in plane_masks(d)]  # plane j at bit j of every nibble
    y0, y1, y2, y3, y4, y5, y6 = (
        functools.reduce(
            int.__or__,
            (_moved(q[t - i], i - (t - i)) for i in range(4) if 0 <= t - i <= 3),
        )
        for t in range(7)
    )
    return y0, y1, y2, y3, y4, y5, y6


def _moved(value: int, shift: int) -> int:
    """``value`` shifted left by ``shift`` bits (right when negative)."""
    return value << shift if shift >= 0 else value >> -shift


_xor_popcounts: tuple[bytes, ...] = ()


def xor_popcount_tables() -> tuple[bytes, ...]:
    """Table ``v`` maps a byte ``b`` to ``popcount(b ^ v)`` (built on first use, 64 KB).

    Built whole, then published in one assignment: a thread never sees a partial list.
    """
    global _xor_popcounts
    if not _xor_popcounts:
        counts = [b.bit_count() for b in range(256)]
        _xor_popcounts = tuple(bytes(counts[b ^ v] for b in range(256)) for v in range(256))
    return _xor_popcounts


@functools.lru_cache(maxsize=256)
def at_most_table(threshold: int) -> bytes:
    """Maps a byte to 1 if it is at most ``threshold``, else to 0."""
    return bytes(v <= threshold for v in range(256))


def nearest_codes(qcode: int, codes: list[int], c: int) -> list[int]:
    """Indices of the ``c`` codes nearest to ``qcode`` in Hamming distance (ties: any)."""
    n = len(codes)
    # Estimate the Hamming distance of the C-th nearest code from a strided sample,
    # with a margin, then keep every code within it in one pass (about 1.5C codes).
    sample = sorted([(x ^ qcode).bit_count() for x in codes[::SAMPLE_STRIDE]])
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


def nearest_by_prefix(
    columns: list[bytearray],
    codes: list[int],
    prefix: bytes,
    qcode: int,
    c: int,
    positions: list[int] | None,
    pool_factor: int,
) -> list[int] | None:
    """The ``c`` nearest eligible ``codes`` to ``qcode`` by Hamming distance among about
    ``pool_factor * c`` eligible ones nearest by the distance of their prefixes, or None
    when there is nothing to pick from. ``columns[j][i]`` is byte ``j`` of code ``i``'s
    prefix and ``prefix`` the query code's. ``positions`` (ascending) are the eligible
    ones; None means all, and all listed gives the same answer as None.

    The prefix distances of all vectors are computed a byte column at a time in C:
    ``bytes.translate`` maps each byte to its popcount after XOR with the query's byte,
    and the columns are added as big integers whose byte lanes cannot carry (a prefix has
    at most 192 bits). The pool is cut with a threshold estimated from a strided sample,
    scaled by the eligible share; if it holds fewer than ``c`` eligible codes, the caller
    scans every eligible code.
    """
    n = len(codes)
    eligible = n if positions is None else len(positions)
    if not columns or eligible == 0:
        return None
    tables = xor_popcount_tables()
    total = 0
    for column, byte in zip(columns, prefix, strict=True):
        total += int.from_bytes(column.translate(tables[byte]), "little")
    distances = total.to_bytes(n, "little")  # byte i: the prefix distance of vector i
    sample = sorted(distances[::SAMPLE_STRIDE])
    rank = (pool_factor * c * len(sample)) // eligible + 2
    kept = distances.translate(at_most_table(sample[min(len(sample) - 1, rank)]))
    pool: list[int] = []
    at = kept.find(1)  # 1 where within the threshold
    while at != -1:  # C-speed scans between the few kept positions
        pool.append(at)
        at = kept.find(1, at + 1)
    if positions is not None:
        pool = [i for i in pool if _holds(positions, i)]
    if len(pool) < c:
        return None
    full = [(codes[i] ^ qcode).bit_count() for i in pool]
    order = sorted(range(len(pool)), key=full.__getitem__)
    return [pool[i] for i in order[:c]]


def _holds(ascending: list[int], value: int) -> bool:
    """Whether the ascending list holds ``value`` (binary search)."""
    at = bisect_left(ascending, value)
    return at < len(ascending) and ascending[at] == value
