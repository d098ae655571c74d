"""Time as engramdb stores it: integer milliseconds since the Unix epoch, UTC.

Stores keep times as integers (D1 binds every number as a JavaScript double, so values
stay far below 2**53). Records expose timezone-aware ``datetime`` objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from engramdb._base.errors import ValidationError

__all__ = ["Clock", "from_ms", "system_clock", "to_ms"]

Clock = Callable[[], datetime]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def system_clock() -> datetime:
    """The current time, UTC, read at call time."""
    return datetime.fromtimestamp(time.time(), UTC)


def to_ms(moment: datetime) -> int:
    """Milliseconds since the epoch of an aware ``datetime``."""
    if moment.tzinfo is None:
        raise ValidationError(
            f"datetime {moment.isoformat()} has no timezone; pass an aware datetime, "
            "e.g. datetime.now(timezone.utc)"
        )
    # Integer arithmetic: a float timestamp is off by up to half a millisecond far from 1970.
    whole, rest = divmod(moment - _EPOCH, _MS)
    return whole + (rest * 2 > _MS or (rest * 2 == _MS and whole % 2 == 1))  # half to even


def from_ms(ms: int) -> datetime:
    """The aware UTC ``datetime`` of ``ms`` milliseconds since the epoch."""
    return _EPOCH + ms * _MS
