"""What memory policy costs a recall: bound views, receipts, evidence and re-ranking.

Run from the repository root::

    PYTHONPATH=core:drivers python -m bench.policy            # 10k items, 5 runs
    PYTHONPATH=core:drivers python -m bench.policy --quick    # smoke run (2k items, 2 runs)

One scope of ``--items`` memories (``bench.memory``'s synthetic corpus and its dense
``ProjectionEmbedder``, d=384), in ``InMemoryStore`` and in a SQLite file. Per store and
per run, the p50 of ``--queries`` hybrid recalls (after one warm-up) for:

* ``memory.recall``: the unbound recall (no receipt), the baseline;
* ``bound``: ``memory.bind(scope).recall``: the same search plus one write batch (the
  selection receipt and one exposure per hit);
* ``policy``: a view with reinforcement and forgetting on: every candidate (100 per leg)
  ranked, their evidence read (one more read batch), then the receipt;
* ``complete``: ``view.complete(selection_id, 0.5)`` of a fresh selection.

The four are interleaved within a run (a query at a time, in rotating order) so that
the machine's load shifts them alike; the table gives the median over runs of each p50
and its ratio to the baseline's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.memory import SCOPE, ProjectionEmbedder, corpus, queries_for
from engramdb import Forgetting, InMemoryStore, Memory, Policy
from engramdb.sqlite import SqliteStore

CASES = ("memory.recall", "bound", "policy", "complete")


def _timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def one_run(memory: Memory, queries: Sequence[str]) -> dict[str, float]:
    """p50 in ms of each case over ``queries``, interleaved."""
    bound = memory.bind(SCOPE)
    policy = memory.bind(
        SCOPE, policy=Policy(reinforcement=True, forgetting=Forgetting(timedelta(days=30)))
    )
    calls: dict[str, Callable[[str], Any]] = {
        "memory.recall": lambda q: memory.recall(q, scopes=[SCOPE], top_k=5),
        "bound": lambda q: bound.recall(q, top_k=5),
        "policy": lambda q: policy.recall(q, top_k=5),
    }
    for call in calls.values():
        call(queries[0])  # warm-up: the vector cache is loaded
    times: dict[str, list[float]] = {case: [] for case in CASES}
    for position, query in enumerate(queries):
        order = list(calls)[position % 3 :] + list(calls)[: position % 3]
        for case in order:
            times[case].append(_timed(lambda: calls[case](query)))  # noqa: B023
        selection = bound.recall(query, top_k=5).selection_id
        times["complete"].append(_timed(lambda: bound.complete(selection, 0.5)))  # noqa: B023
    return {case: statistics.median(values) for case, values in times.items()}


def rows(items: int, queries: int, runs: int) -> list[dict[str, Any]]:
    texts = corpus(items)
    asked = queries_for(texts, queries)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        stores: dict[str, Callable[[], Any]] = {
            "InMemoryStore": InMemoryStore,
            "SqliteStore (file)": lambda: SqliteStore(Path(tmp) / "policy.db"),
        }
        for name, make in stores.items():
            with Memory(make(), ProjectionEmbedder()) as memory:
                memory.remember_many({"text": t, "scope": SCOPE} for t in texts)
                results = [one_run(memory, asked) for _ in range(runs)]
            medians = {case: statistics.median(r[case] for r in results) for case in CASES}
            base = medians["memory.recall"]
            out.append(
                {"store": name, **medians, **{f"{c}/base": medians[c] / base for c in CASES}}
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.items, args.queries, args.runs = 2000, 20, 2
    print(
        f"# {args.items} items, {args.queries} queries x {args.runs} runs, "
        f"Python {sys.version.split()[0]}"
    )
    print("| store | " + " | ".join(f"{c} p50 ms (x base)" for c in CASES) + " |")
    print("|---|" + "---|" * len(CASES))
    for row in rows(args.items, args.queries, args.runs):
        cells = [f"{row[c]:.2f} ({row[f'{c}/base']:.2f}x)" for c in CASES]
        print(f"| {row['store']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
