"""Restoring a backup of 10,000 memories: into PostgreSQL and into SQLite.

Run from the repository root (needs the postgres extra, and the PostgreSQL + pgvector of
``bash .ci/setup-postgres`` unless ``PG_DSN`` names a server whose role may CREATE
DATABASE)::

    PYTHONPATH=core:drivers:. python -m bench.restore                 # 10,000, 3 rounds
    PYTHONPATH=core:drivers:. python -m bench.restore --against /work/main --against-rounds 1

* The backup: ``remember_many`` of ``--n`` texts of ``bench.memory``'s corpus with
  ``HashEmbedder()`` (d=256, every memory with its vector) into a SQLite file, then
  ``engramdb.backup.backup`` of it (the text is held in memory).
* Each round: ``engramdb.backup.restore`` of that backup (``trust_vectors=True``: the
  vectors come along, as when you restore your own backup) into a fresh PostgreSQL
  database (``PostgresStore`` on a DSN, the store opened and migrated before the clock
  starts) and into a fresh SQLite file; wall time (``perf_counter``) and this process's
  CPU time (``process_time``: the server's work is not in it). Medians over the rounds.
* ``--against TREE``: the same rounds, on the same server, with another checkout's
  ``core`` and ``drivers`` (a child process), e.g. main as the baseline.

:func:`restore_times` is the measurement alone, for ``bench.versus``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engramdb import HashEmbedder, Memory
from engramdb.backup import backup, restore
from engramdb.sqlite import SqliteStore

from .memory import child_json, corpus

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "postgres"))
import pg_server  # tests/postgres, on the path above

GOAL_S = 10.0  # issue 50: 10,000 memories restored into PostgreSQL in at most 10 s
SCOPES = [("bench", "user", f"u{n}") for n in range(10)]


def backup_text(n: int, directory: Path) -> str:
    """A backup of ``n`` memories (with their vectors) written into a SQLite file."""
    path = directory / "source.db"
    with Memory(SqliteStore(path), HashEmbedder()) as memory:
        memory.remember_many(
            {"text": text, "scope": SCOPES[i % len(SCOPES)]} for i, text in enumerate(corpus(n))
        )
    out = io.StringIO()
    store = SqliteStore(path)
    try:
        backup(store, out)
    finally:
        store.close()
    return out.getvalue()


def _timed(make: Callable[[], Any], text: str) -> tuple[float, float]:
    """Wall and CPU seconds of restoring ``text`` into the store ``make`` opens."""
    store = make()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        restore(store, text.split("\n"), trust_vectors=True)
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        store.close()


@contextmanager
def _admin(dsn: str | None) -> Iterator[str]:
    if dsn is not None:
        yield dsn
    else:
        with pg_server.admin_dsn() as admin:
            yield admin


def restore_times(n: int, rounds: int, dsn: str | None = None) -> dict[str, Any]:
    """Median wall and CPU seconds of restoring a backup of ``n`` memories into a fresh
    PostgreSQL database and into a fresh SQLite file, over ``rounds`` rounds. ``dsn``: a
    server whose role may CREATE DATABASE (None: ``PG_DSN``, else a throwaway one)."""
    from engramdb.postgres import PostgresStore

    times: dict[str, list[float]] = {
        key: [] for key in ("pg_wall_s", "pg_cpu_s", "sqlite_wall_s", "sqlite_cpu_s")
    }
    with tempfile.TemporaryDirectory() as tmp, _admin(dsn) as admin:
        text = backup_text(n, Path(tmp))
        for number in range(rounds):
            name = f"engramdb_bench_restore_{os.getpid()}"
            target = pg_server.create_database(admin, name)
            try:
                wall, cpu = _timed(lambda: PostgresStore(target), text)  # noqa: B023
            finally:
                pg_server.drop_database(admin, name)
            times["pg_wall_s"].append(wall)
            times["pg_cpu_s"].append(cpu)
            path = Path(tmp) / f"target-{number}.db"
            wall, cpu = _timed(lambda: SqliteStore(path), text)  # noqa: B023
            times["sqlite_wall_s"].append(wall)
            times["sqlite_cpu_s"].append(cpu)
    medians = {key: statistics.median(values) for key, values in times.items()}
    return {
        "n": n,
        "rounds": rounds,
        **medians,
        "runs": times,
        "ratio_pg_sqlite": medians["pg_wall_s"] / medians["sqlite_wall_s"],
        "goal_s": GOAL_S * n / 10_000,
        "goal_met": medians["pg_wall_s"] <= GOAL_S * n / 10_000,
    }


def _line(label: str, result: dict[str, Any]) -> str:
    runs = ", ".join(f"{t:.2f}" for t in result["runs"]["pg_wall_s"])
    return (
        f"{label}: {result['n']:,} memories, median of {result['rounds']}: PostgreSQL "
        f"{result['pg_wall_s']:.2f} s wall ({runs}), {result['pg_cpu_s']:.2f} s CPU; SQLite "
        f"{result['sqlite_wall_s']:.2f} s wall, {result['sqlite_cpu_s']:.2f} s CPU; "
        f"PG/SQLite {result['ratio_pg_sqlite']:.1f}x; goal <= {result['goal_s']:.0f} s: "
        f"{'met' if result['goal_met'] else 'NOT met'}"
    )


def _against(tree: Path, n: int, rounds: int, admin: str) -> dict[str, Any]:
    """:func:`restore_times` with ``tree``'s engramdb, in a child process."""
    here = Path(__file__).resolve().parent.parent
    path = os.pathsep.join(
        [str(tree / "core"), str(tree / "drivers"), str(here), os.environ.get("PYTHONPATH", "")]
    )
    return child_json(
        [sys.executable, "-m", "bench.restore", "--json", f"--n={n}", f"--rounds={rounds}"],
        env={**os.environ, "PYTHONPATH": path, "PG_DSN": admin},
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.restore", description=__doc__)
    parser.add_argument("--n", type=int, default=10_000, help="memories in the backup")
    parser.add_argument("--rounds", type=int, default=3, help="restores of each (median)")
    parser.add_argument("--against", type=Path, help="another checkout to measure too")
    parser.add_argument("--against-rounds", type=int, help="its rounds (default: --rounds)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(restore_times(args.n, args.rounds)))
        return 0
    with _admin(None) as admin:
        if args.against is not None:
            rounds = args.against_rounds or args.rounds
            base = _against(args.against.resolve(), args.n, rounds, admin)
            print(_line(f"against {args.against}", base))
        mine = restore_times(args.n, args.rounds, admin)
        print(_line("this tree", mine))
        if args.against is not None:
            print(
                f"PostgreSQL restore: {base['pg_wall_s'] / mine['pg_wall_s']:.1f}x faster "
                f"than {args.against} ({base['pg_wall_s']:.2f} s -> {mine['pg_wall_s']:.2f} s)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
