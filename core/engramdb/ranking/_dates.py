"""Dates named in English text: the period a query asks about, the days a memory names.

A recall whose query names a date (``"what did Mel paint on 8 May, 2023?"``, ``"in July
2023"``, ``"in June"``, ``"in 2022"``) favours the memories whose text names a day in
that period or up to :data:`WINDOW` days after it (what happened is often written down
a few days later): ``_hits`` adds :data:`BONUS` of the best possible fused score to
theirs. Measured on LoCoMo's development split, leave-one-conversation-out
(``docs/quality.md``, "Weak categories").

What is read, and nothing else (no relative dates, no other languages, no times):

* in a query: ``8 May, 2023`` / ``May 8, 2023`` / ``May 8th 2023`` / ``2023-05-08`` (a
  day), ``May 2023`` (a month), ``in|during|of May`` (that month of any year), ``in|
  during|of 2023`` (a year); the first form found in that order wins;
* in a memory's text: the full days it names (the first three forms above), such as a
  date written at its start (``[1:56 pm on 8 May, 2023] Caroline: ...``).

Month names are English and written out (``Sept`` or ``5/8/2023`` are not read). A date
that does not exist (``31 June, 2023``) is not a date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

__all__ = ["BONUS", "WINDOW", "Period", "matches", "query_period", "text_days"]

BONUS = 0.3
"""What a memory naming a day of the query's period adds, as a share of the best
possible fused score (a hybrid recall's fused scores lie in [0, 1])."""
WINDOW = 7
"""How many days after the query's period a memory's day still matches."""

_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTH = "|".join(_MONTHS)
_ORDINAL = r"(?:st|nd|rd|th)?"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}}){_ORDINAL} ({_MONTH}),? (\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH}) (\d{{1,2}}){_ORDINAL},? (\d{{4}})\b", re.I)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH}),? (\d{{4}})\b", re.I)
_MONTH_ONLY = re.compile(rf"\b(?:in|during|of) ({_MONTH})\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of) (\d{4})\b", re.I)


@dataclass(frozen=True, slots=True)
class Period:
    """A day, a month (of one year, or of any year when ``year`` is None) or a year."""

    year: int | None
    month: int | None = None
    day: int | None = None

    def days_after(self, when: date) -> int:
        """How many days ``when`` lies after this period: 0 inside it, negative before."""
        year = when.year if self.year is None else self.year
        if self.month is None:
            first, last = date(year, 1, 1), date(year, 12, 31)
        elif self.day is None:
            first = date(year, self.month, 1)
            last = (
                date(year, 12, 31)
                if self.month == 12
                else date(year, self.month + 1, 1) - timedelta(days=1)
            )
        else:
            first = last = date(year, self.month, self.day)
        if when > last:
            return (when - last).days
        return 0 if when >= first else (when - first).days


def _month(name: str) -> int:
    return _MONTHS.index(name.lower()) + 1


def _day(year: str, month: int, day: str) -> date | None:
    try:
        return date(int(year), month, int(day))
    except ValueError:
        return None


def _full_days(text: str) -> list[date]:
    found: list[tuple[int, date | None]] = []
    for match in _DAY_MONTH_YEAR.finditer(text):
        found.append((match.start(), _day(match[3], _month(match[2]), match[1])))
    for match in _MONTH_DAY_YEAR.finditer(text):
        found.append((match.start(), _day(match[3], _month(match[1]), match[2])))
    for match in _ISO.finditer(text):
        month = int(match[2])
        found.append((match.start(), _day(match[1], month, match[3]) if 1 <= month <= 12 else None))
    return [day for _, day in sorted(found, key=lambda pair: pair[0]) if day is not None]


def query_period(text: str) -> Period | None:
    """The period ``text`` names (see the module's docstring), None when it names none."""
    days = _full_days(text)
    if days:
        return Period(days[0].year, days[0].month, days[0].day)
    if (match := _MONTH_YEAR.search(text)) and int(match[2]) >= 1:
        return Period(int(match[2]), _month(match[1]))
    if match := _MONTH_ONLY.search(text):
        return Period(None, _month(match[1]))
    if (match := _YEAR.search(text)) and int(match[1]) >= 1:
        return Period(int(match[1]))
    return None


def text_days(text: str) -> tuple[date, ...]:
    """The full days ``text`` names, in the order written (read anew each time: no
    memory's text is kept beyond the recall that reads it)."""
    return tuple(_full_days(text))


def matches(period: Period, text: str, window: int = WINDOW) -> bool:
    """Whether ``text`` names a day in ``period`` or up to ``window`` days after it."""
    return any(0 <= period.days_after(day) <= window for day in text_days(text))
