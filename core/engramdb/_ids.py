"""Sortable unique ids, generated at call time (never at import).

An id is 26 characters of Crockford base32: 48 bits of milliseconds since the epoch,
then 80 random bits (the ULID layout), so ids sort by creation time.
"""

from __future__ import annotations

import os

__all__ = ["new_id"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every pair of digits, indexed by the 10 bits they spell: 13 pairs spell 130 bits, the
# 128-bit value with two leading zero bits.
_PAIRS = tuple(high + low for high in _CROCKFORD for low in _CROCKFORD)
_SHIFTS = tuple(range(120, -1, -10))


def new_id(now_ms: int) -> str:
    """A new id for something created at ``now_ms``."""
    value = (now_ms & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    return "".join([_PAIRS[value >> shift & 1023] for shift in _SHIFTS])
