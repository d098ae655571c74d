"""The retry policy: back-off schedule, Retry-After parsing, what is retried."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from engramdb import ConfigurationError
from engramdb.providers import RetryPolicy
from engramdb.providers._retry import RETRY_STATUSES, parse_retry_after


def test_default_backoff_doubles_from_half_a_second_and_is_capped_at_20_seconds() -> None:
    policy = RetryPolicy()
    full = [policy.backoff(n, jitter=0.999999) for n in range(8)]
    assert [round(d, 3) for d in full] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 20.0, 20.0]


def test_jitter_scales_the_wait_between_half_and_all_of_it() -> None:
    policy = RetryPolicy()
    assert policy.backoff(2, jitter=0.0) == 1.0
    assert policy.backoff(2, jitter=0.5) == 1.5


def test_defaults_are_documented_values() -> None:
    policy = RetryPolicy()
    assert (policy.max_retries, policy.initial_delay, policy.max_delay) == (4, 0.5, 20.0)
    assert {408, 425, 429, 500, 502, 503, 504} == RETRY_STATUSES


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("0", 0.0),
        ("-4", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
        ("nan", None),
    ],
)
def test_retry_after_in_seconds(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header, now=1_000.0) == expected


def test_retry_after_as_an_http_date_is_relative_to_now() -> None:
    now = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    later = format_datetime(datetime(2026, 5, 1, 12, 0, 42, tzinfo=UTC), usegmt=True)
    earlier = format_datetime(datetime(2026, 5, 1, 11, 0, 0, tzinfo=UTC), usegmt=True)
    assert parse_retry_after(later, now) == 42.0
    assert parse_retry_after(earlier, now) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_retries": -1},
        {"max_retries": 1.5},
        {"initial_delay": float("nan")},
        {"max_delay": -1.0},
    ],
)
def test_a_bad_policy_is_a_configuration_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
