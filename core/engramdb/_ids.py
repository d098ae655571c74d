"""Sortable unique ids, generated at call time (never at import).

An id is 26 characters of Crockford base32: 48 bits of milliseconds since the epoch,
then 80 random bits (the ULID layout), so ids sort by creation time.
"""

from __future__ import annotations

import base64
import os

__all__ = ["new_id"]

# base64.b32encode speaks RFC 4648's alphabet; map it onto Crockford's.
_TO_CROCKFORD = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)


def new_id(now_ms: int) -> str:
    """A new id for something created at ``now_ms``."""
    value = (now_ms & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    # 20 bytes are exactly 32 base32 digits; the 128-bit value fills the last 26.
    digits = base64.b32encode(value.to_bytes(20, "big"))[-26:]
    return digits.translate(_TO_CROCKFORD).decode("ascii")
