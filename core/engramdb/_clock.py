"""Time as engramdb stores it: integer milliseconds since the Unix epoch, UTC.

Stores keep times as integers (D1 binds every number as a JavaScript double, so values
stay far below 2**53). Records expose timezone-aware ``datetime`` objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from ._errors import ValidationError

__all__ = ["Clock", "from_ms", "system_clock", "to_ms"]

Clock = Callable[[], datetime]


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
    return round(moment.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    """The aware UTC ``datetime`` of ``ms`` milliseconds since the epoch."""
    return datetime.fromtimestamp(ms / 1000, UTC)
