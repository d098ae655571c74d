"""``bench.restore``: run where psycopg and a PostgreSQL with pgvector are found (``PG_DSN``
or ``.ci/setup-postgres``'s server), skipped elsewhere. Checks the report's shape and
arithmetic, never timings."""

from __future__ import annotations

import io
import statistics
from pathlib import Path

import pytest

pytest.importorskip("psycopg")

from bench import restore as bench_restore
from engramdb.backup import read_backup


def test_the_backup_holds_every_memory_with_its_vector(tmp_path: Path) -> None:
    text = bench_restore.backup_text(30, tmp_path)
    data = read_backup(io.StringIO(text, newline=""))
    assert len(data.items) == 30
    assert all(len(item.vectors) == 1 for item in data.items)


def test_restore_times_reports_medians_the_ratio_and_the_goal() -> None:
    """Two rounds of a 40-memory restore into each store: the medians are those of the
    rounds' figures, the ratio is theirs, and the goal is 10 s per 10,000 memories."""
    try:
        result = bench_restore.restore_times(40, 2)
    except RuntimeError as exc:  # no PostgreSQL with pgvector on this machine
        pytest.skip(str(exc))
    runs = result["runs"]
    assert (result["n"], result["rounds"]) == (40, 2)
    for key in ("pg_wall_s", "pg_cpu_s", "sqlite_wall_s", "sqlite_cpu_s"):
        assert len(runs[key]) == 2 and result[key] == statistics.median(runs[key])
    assert result["ratio_pg_sqlite"] == result["pg_wall_s"] / result["sqlite_wall_s"]
    assert result["goal_s"] == 10.0 * 40 / 10_000
    assert result["goal_met"] == (result["pg_wall_s"] <= result["goal_s"])
