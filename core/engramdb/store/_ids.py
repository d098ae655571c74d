"""Sortable unique ids, generated at call time (never at import).

An id is 26 characters of Crockford base32: 48 bits of milliseconds since the epoch,
then 80 bits (the ULID layout), so ids sort by creation time. The 80 bits are a count
of the id sequences this process has started (31 bits), 42 bits that start random and
count up, and 6 bits of *place*: a memory's id carries the place of its text among 64
shards (``engramdb.shards.placement``), so that the store of a tenant over several
finds any memory from its id alone and a memory moves with its text when a tenant grows
(``engramdb.shards.shard_of``). Within one process, a sequence started after another in
the same millisecond has greater ids, so memories written one call after another list
newest first even within one millisecond. The ids of one batch (:class:`IdSequence`)
count up from their random start, whatever their places, so they also sort in the order
the batch gave its items: ties that fall back to the id keep that order, run after run.
No lock is taken (the core uses no threads): ``next()`` of an :func:`itertools.count` is
atomic.
"""

from __future__ import annotations

import itertools
import os

__all__ = ["PLACE_BITS", "IdSequence", "new_id", "place_of"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every pair of digits, indexed by the 10 bits they spell: 13 pairs spell 130 bits, the
# 128-bit value with two leading zero bits.
_PAIRS = tuple(high + low for high in _CROCKFORD for low in _CROCKFORD)
_SHIFTS = tuple(range(120, -1, -10))
_SEQUENCES = itertools.count()  # sequences started in this process (no clock, no random)
_DIGITS = {char: value for value, char in enumerate(_CROCKFORD)}
PLACE_BITS = 6
"""The low bits of an id that carry its place (64 places)."""
_PLACES = (1 << PLACE_BITS) - 1


class IdSequence:
    """Ids for things created together at ``now_ms``, ascending in the order taken.

    Bits 48-78 count the sequences of this process; bits 6-47 start at a random value
    below 2**41 and count up, so counting never carries into the count or the time;
    bits 0-5 are the place the caller gives (0 to 63).
    """

    __slots__ = ("_next", "_prefix")

    def __init__(self, now_ms: int) -> None:
        order = next(_SEQUENCES) & ((1 << 31) - 1)
        start = int.from_bytes(os.urandom(6), "big") >> 7
        self._next = (now_ms & ((1 << 48) - 1)) << 80 | order << 48 | start << PLACE_BITS
        # The first 18 characters (bits 40 and up) and the bits they spell: the ids of a
        # sequence share them until the count carries into bit 40 (one id in 2**34).
        self._prefix: tuple[int, str] = (-1, "")

    def __call__(self, place: int = 0) -> str:
        value = self._next | (place & _PLACES)
        self._next += 1 << PLACE_BITS
        high, prefix = self._prefix
        if value >> 40 != high:
            prefix = "".join([_PAIRS[value >> shift & 1023] for shift in _SHIFTS[:9]])
            self._prefix = (value >> 40, prefix)
        pairs = _PAIRS
        return (
            f"{prefix}{pairs[value >> 30 & 1023]}{pairs[value >> 20 & 1023]}"
            f"{pairs[value >> 10 & 1023]}{pairs[value & 1023]}"
        )


def new_id(now_ms: int) -> str:
    """A new id for something created at ``now_ms``."""
    return IdSequence(now_ms)()


def place_of(ident: str) -> int | None:
    """The place an id of this layout carries (its low 6 bits, 0 to 63); None for a
    string that is not 26 Crockford characters (an id a caller chose)."""
    if len(ident) != 26 or not _DIGITS.keys() >= set(ident):
        return None
    return (_DIGITS[ident[-2]] << 5 | _DIGITS[ident[-1]]) & _PLACES
