"""Two source trees of engramdb, timed against each other on the central paths.

Run from the repository root::

    python -m bench.ab OLD_TREE NEW_TREE            # e.g. a worktree of the last release
    python -m bench.ab OLD_TREE NEW_TREE --quick    # smoke run

Each round starts one fresh process per tree (``PYTHONPATH=<tree>/core:<tree>/drivers``),
alternating which goes first, so both see the same machine load. A process times, on
``InMemoryStore`` and on a SQLite file, with the dense ``ProjectionEmbedder`` of
``bench.memory`` (d=384) over its synthetic corpus: ``remember`` one at a time,
``remember_many``, ``recall`` (hybrid, then ``mode="vector"`` and ``"lexical"``), a
bound view's ``recall`` (with its receipt), ``get``, ``update``, and a hybrid
``recall`` once one memory of the scope has expired (the child's clock moves on two
minutes; ``maintain()`` has not purged it); then the HTTP API as a host calls it
(``engramdb.http_api.handle``: remember, recall, get, list, update). The report gives,
per path, the median over rounds of each tree's median per call, and their ratio
(new / old: below 1 is faster). Only the public API is used, so any two trees of the
same API can be compared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, statistics, sys, tempfile, time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from engramdb import InMemoryStore, Memory
from engramdb.sqlite import SqliteStore
from bench.memory import ProjectionEmbedder, corpus

items, queries = int(sys.argv[1]), int(sys.argv[2])
texts = corpus(items, seed=7)
asked = [" ".join(t.split()[:5]) for t in texts[:: max(1, items // queries)]][:queries]
out = {}

def per_call(name, calls):
    times = []
    for call in calls:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    out[name] = statistics.median(times) * 1000

with tempfile.TemporaryDirectory() as tmp:
    for kind in ("memory", "sqlite"):
        store = InMemoryStore() if kind == "memory" else SqliteStore(Path(tmp) / "ab.db")
        ahead = [timedelta(0)]  # moved on at the end, so that one memory expires
        memory = Memory(store, ProjectionEmbedder(), clock=lambda: datetime.now(UTC) + ahead[0])
        start = time.perf_counter()
        memory.remember_many([{"text": t, "scope": ("s",)} for t in texts])
        out[f"{kind} remember_many per item"] = (time.perf_counter() - start) * 1000 / items
        notes = [f"note {i} {texts[i]}" for i in range(queries)]
        per_call(f"{kind} remember", [lambda n=n: memory.remember(n, ("t",)) for n in notes])
        memory.recall(asked[0], [("s",)])
        per_call(f"{kind} recall", [lambda q=q: memory.recall(q, [("s",)]) for q in asked])
        for mode in ("vector", "lexical"):
            calls = [lambda q=q, m=mode: memory.recall(q, [("s",)], mode=m) for q in asked]
            per_call(f"{kind} recall {mode}", calls)
        view = memory.bind(("s",))
        per_call(f"{kind} bound recall", [lambda q=q: view.recall(q) for q in asked])
        ids = [r.id for r in memory.list(("t",), limit=queries)]
        per_call(f"{kind} get", [lambda i=i: memory.get(i) for i in ids])
        per_call(f"{kind} update", [lambda i=i: memory.update(i, importance=0.7) for i in ids])
        # One memory of the scope expired, not yet purged by maintain(): every search
        # must leave it out.
        memory.remember("a note about to expire", ("s",), ttl=60)
        ahead[0] = timedelta(minutes=2)
        memory.recall(asked[0], [("s",)])
        calls = [lambda q=q: memory.recall(q, [("s",)]) for q in asked]
        per_call(f"{kind} recall, one memory expired", calls)
        memory.close()

# The HTTP API as a host calls it (engramdb.http_api.handle: routing, the token, the
# body's checks, the answer's JSON), over an AsyncMemory on InMemoryStore.
import asyncio
from engramdb import AsyncMemory
from engramdb.http_api import handle, parse_tokens

grants = parse_tokens(json.dumps({"bench-token": ["h"]}))
served = AsyncMemory(InMemoryStore(), ProjectionEmbedder())
loop = asyncio.new_event_loop()
headers = {"authorization": "Bearer bench-token", "content-type": "application/json"}

def http(method, url, body=None):
    async def read():
        return "" if body is None else json.dumps(body)
    reply = loop.run_until_complete(
        handle(method, "http://bench" + url, headers, read, grants=lambda: grants,
               memory=lambda grant: served)
    )
    assert reply.status < 300, (url, reply.body)
    return reply.body

for start in range(0, min(items, 2000), 100):
    batch = [{"text": t} for t in texts[start:start + 100]]
    http("POST", "/v1/memories/batch", {"memories": batch})
notes = [f"http note {i} {texts[i]}" for i in range(queries)]
per_call("http remember", [lambda n=n: http("POST", "/v1/memories", {"text": n}) for n in notes])
recalls = [{"query": q, "top_k": 5} for q in asked]
per_call("http recall", [lambda b=b: http("POST", "/v1/recall", b) for b in recalls])
ids = [m["id"] for m in http("GET", f"/v1/memories?limit={queries}")["memories"]]
per_call("http get", [lambda i=i: http("GET", f"/v1/memories/{i}") for i in ids])
per_call("http list", [lambda: http("GET", "/v1/memories?limit=20") for _ in ids])
change = {"importance": 0.7}
per_call("http update", [lambda i=i: http("PATCH", f"/v1/memories/{i}", change) for i in ids])
loop.close()
print(json.dumps(out))
"""


def _run(tree: Path, items: int, queries: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{tree}/core{os.pathsep}{tree}/drivers{os.pathsep}."}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(items), str(queries)],
        env=env,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    if done.returncode:
        raise SystemExit(f"{tree}: the timing process failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.items, args.queries, args.rounds = 500, 10, 2
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for round_ in range(args.rounds):
        order = ["old", "new"] if round_ % 2 == 0 else ["new", "old"]
        for which in order:
            runs[which].append(_run(getattr(args, which), args.items, args.queries))
    print(f"{args.items} items, {args.queries} calls per path, {args.rounds} rounds")
    print("| path | old (ms) | new (ms) | new / old |")
    print("|---|---|---|---|")
    for name in runs["old"][0]:
        old = statistics.median(run[name] for run in runs["old"])
        new = statistics.median(run[name] for run in runs["new"])
        print(f"| {name} | {old:.3f} | {new:.3f} | {new / old:.2f}x |")


if __name__ == "__main__":
    main()
