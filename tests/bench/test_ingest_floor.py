"""``bench.ingest_floor``: the ingest's timers see the SQL and the embedder, are undone
after each run, and the bound with the SQL free is the peer's time over the rest.
Never timings."""

from __future__ import annotations

import pytest

pytest.importorskip("numpy")

import engramdb.sqlite as sqlite_driver
from bench import ingest_floor
from engramdb import HashEmbedder


def test_a_small_run_times_each_part_and_undoes_its_timers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    execute, embed = sqlite_driver._execute, HashEmbedder.embed
    rows = ingest_floor.measure(200, rounds=2)
    assert len(rows) == 2
    for row in rows:
        assert 0 < row["sql"] < row["total"]
        assert 0 < row["embedder"] < row["total"]
        assert row["ratio"] == row["peer"] / row["total"]
        assert row["bound"] == row["peer"] / (row["total"] - row["sql"])
    assert sqlite_driver._execute is execute
    assert HashEmbedder.embed is embed
    assert ingest_floor.main(["--texts", "100", "--rounds", "1"]) == 0
    assert "with the SQL free" in capsys.readouterr().out


def test_a_timer_is_undone_when_the_block_fails() -> None:
    class Owner:
        @staticmethod
        def work() -> int:
            return 1

    spent = [0.0]
    with pytest.raises(RuntimeError), ingest_floor.timed(Owner, "work", spent):
        assert Owner.work.__name__ == "timer"  # the timer answers in the block
        assert Owner.work() == 1
        raise RuntimeError("the block fails")
    assert Owner.work.__name__ == "work"
