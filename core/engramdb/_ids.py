"""Sortable unique ids, generated at call time (never at import).

An id is 26 characters of Crockford base32: 48 bits of milliseconds since the epoch,
then 80 bits that start random (the ULID layout), so ids sort by creation time. The
ids of one batch (:class:`IdSequence`) count up from one random start, so they also
sort in the order the batch gave its items: ties that fall back to the id keep that
order, run after run. Within one process ids are monotonic across calls too (ULID's
monotonic mode): an id taken in the same millisecond as the one before it is greater
than it, so memories written within one millisecond list newest first in the order
they were written.
"""

from __future__ import annotations

import os
import threading

__all__ = ["IdSequence", "new_id"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every pair of digits, indexed by the 10 bits they spell: 13 pairs spell 130 bits, the
# 128-bit value with two leading zero bits.
_PAIRS = tuple(high + low for high in _CROCKFORD for low in _CROCKFORD)
_SHIFTS = tuple(range(120, -1, -10))
_LOCK = threading.Lock()
_last = 0  # the last id value taken in this process (0: none yet)


def _take(value: int) -> int:
    """``value``, or just above the last id taken when that is of the same millisecond
    and not below it: ids of one millisecond ascend in the order taken."""
    global _last
    with _LOCK:
        if value >> 80 == _last >> 80 and value <= _last:
            value = _last + 1
        _last = value
        return value


class IdSequence:
    """Ids for things created together at ``now_ms``, ascending in the order taken.

    The 80 low bits start at a random value below 2**79, so counting up never carries
    into the time.
    """

    __slots__ = ("_next",)

    def __init__(self, now_ms: int) -> None:
        start = int.from_bytes(os.urandom(10), "big") >> 1
        self._next = (now_ms & ((1 << 48) - 1)) << 80 | start

    def __call__(self) -> str:
        value = _take(self._next)
        self._next = value + 1
        return "".join([_PAIRS[value >> shift & 1023] for shift in _SHIFTS])


def new_id(now_ms: int) -> str:
    """A new id for something created at ``now_ms``."""
    return IdSequence(now_ms)()
