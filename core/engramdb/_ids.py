"""Sortable unique ids, generated at call time (never at import).

An id is 26 characters of Crockford base32: 48 bits of milliseconds since the epoch,
then 80 bits (the ULID layout), so ids sort by creation time. The 80 bits are a count
of the id sequences this process has started (31 bits) and 48 bits that start random:
within one process, a sequence started after another in the same millisecond has
greater ids, so memories written one call after another list newest first even within
one millisecond. The ids of one batch (:class:`IdSequence`) count up from their random
start, so they also sort in the order the batch gave its items: ties that fall back to
the id keep that order, run after run. No lock is taken (the core uses no threads):
``next()`` of an :func:`itertools.count` is atomic.
"""

from __future__ import annotations

import itertools
import os

__all__ = ["IdSequence", "new_id"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every pair of digits, indexed by the 10 bits they spell: 13 pairs spell 130 bits, the
# 128-bit value with two leading zero bits.
_PAIRS = tuple(high + low for high in _CROCKFORD for low in _CROCKFORD)
_SHIFTS = tuple(range(120, -1, -10))
_SEQUENCES = itertools.count()  # sequences started in this process (no clock, no random)


class IdSequence:
    """Ids for things created together at ``now_ms``, ascending in the order taken.

    Bits 48-78 count the sequences of this process; the 48 low bits start at a random
    value below 2**47, so counting up never carries into the count or the time.
    """

    __slots__ = ("_next",)

    def __init__(self, now_ms: int) -> None:
        order = next(_SEQUENCES) & ((1 << 31) - 1)
        start = int.from_bytes(os.urandom(6), "big") >> 1
        self._next = (now_ms & ((1 << 48) - 1)) << 80 | order << 48 | start

    def __call__(self) -> str:
        value = self._next
        self._next += 1
        return "".join([_PAIRS[value >> shift & 1023] for shift in _SHIFTS])


def new_id(now_ms: int) -> str:
    """A new id for something created at ``now_ms``."""
    return IdSequence(now_ms)()
