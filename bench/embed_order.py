"""Ingest with a local model: batches cut in content-hash order against length order.

Run from the repository root, in an environment with sentence-transformers, torch and
the offline all-MiniLM-L6-v2 package (the ``eval-local`` tox environment has them)::

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH=core:drivers:. \\
        python -m bench.embed_order                 # 1,758 texts, 3 runs

The texts are the first 1,758 distinct turns of LoCoMo's development split
(``../shared/data/locomo/locomo_dev.json`` or ``$ENGRAMDB_LOCOMO``), or made-up ones of
the same length spread when it is absent. Each run embeds all of them with the
``minilm`` embedder of ``eval.embedders`` (one torch thread, batches of 64), once in
batches cut in content-hash order (how engramdb cut them before) and once cut in length
order (how ``flows.context.embed`` cuts them now), alternating which goes first; then one
``remember_many`` into an ``InMemoryStore`` with the current code. Medians of the runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engramdb import InMemoryStore, Memory
from eval.embedders import make_embedder


def locomo_turns(count: int) -> list[str]:
    path = Path(os.environ.get("ENGRAMDB_LOCOMO", "../shared/data/locomo/locomo_dev.json"))
    if path.exists():
        seen: dict[str, None] = {}
        for sample in json.loads(path.read_text()):
            conversation = sample["conversation"]
            for key, turns in conversation.items():
                if key.startswith("session_") and isinstance(turns, list):
                    for turn in turns:
                        seen.setdefault(turn["text"], None)
        texts = list(seen)[:count]
        if len(texts) == count:
            return texts
    rng = random.Random(7)
    words = ["deploy", "window", "Tuesday", "garden", "holiday", "cello", "lunch", "team"]
    return [
        f"{n} " + " ".join(rng.choice(words) for _ in range(int(rng.lognormvariate(2.6, 0.6))))
        for n in range(count)
    ]


def embed_in(embedder: Any, texts: Sequence[str], order: Sequence[int]) -> float:
    step = embedder.max_batch
    start = time.perf_counter()
    for first in range(0, len(order), step):
        embedder.embed([texts[i] for i in order[first : first + step]])
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=1758)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    texts = locomo_turns(args.texts)
    embedder = make_embedder("minilm")
    embedder.embed(texts[:64])  # warm-up: the model is loaded
    by_hash = sorted(range(len(texts)), key=lambda i: hashlib.sha256(texts[i].encode()).digest())
    by_length = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
    times: dict[str, list[float]] = {"hash order": [], "length order": [], "remember_many": []}
    for run in range(args.runs):
        pairs = [("hash order", by_hash), ("length order", by_length)]
        for name, order in pairs if run % 2 == 0 else pairs[::-1]:
            times[name].append(embed_in(embedder, texts, order))
        memory = Memory(InMemoryStore(), embedder)
        start = time.perf_counter()
        memory.remember_many({"text": t, "scope": ("bench",)} for t in texts)
        times["remember_many"].append(time.perf_counter() - start)
    lengths = sorted(len(t) for t in texts)
    print(
        f"# {len(texts)} texts (characters: median {lengths[len(lengths) // 2]}, "
        f"max {lengths[-1]}), batches of {embedder.max_batch}, {args.runs} runs"
    )
    base = statistics.median(times["hash order"])
    print("| batches cut in | seconds (median) | x hash order |")
    print("|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.2f} | {median / base:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
