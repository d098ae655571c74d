"""StaticEmbedder throughput on one CPython thread, and the table's load time.

Run from the repository root::

    PYTHONPATH=core:drivers:. python -m bench.static_embedder        # 5 runs, medians
    PYTHONPATH=core:drivers:. python -m bench.static_embedder --table PATH --runs 7

The texts are the distinct dialogue turns of LoCoMo's development split
(``../shared/data/locomo/locomo_dev.json`` or ``$ENGRAMDB_LOCOMO``; each as the eval
remembers it, with the date and speaker) and, separately, its questions (short texts);
or, when it is absent, 4,000 made-up sentences. Each run builds a fresh embedder from
the table's bytes (the load time) and embeds every text once, in batches of 256 (cold
caches: the word and row caches start empty), then once more (warm caches). Prints the
medians as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from engramdb import StaticEmbedder

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "core/engramdb" / StaticEmbedder.SHIPPED_FILE
LOCOMO = Path(os.environ.get("ENGRAMDB_LOCOMO", ROOT.parent / "shared/data/locomo/locomo_dev.json"))


def corpora() -> dict[str, list[str]]:
    """LoCoMo's distinct turns (as remembered) and questions, or made-up sentences."""
    if LOCOMO.exists():
        from eval.locomo import load, memory_text

        conversations = load(LOCOMO)
        turns = (memory_text(t, date_in_text=True) for c in conversations for t in c.turns)
        questions = (q.text for c in conversations for q in c.questions)
        return {"turns": list(dict.fromkeys(turns)), "questions": list(dict.fromkeys(questions))}
    words = "sam likes mushroom risotto and meetings after ten in the morning".split()  # noqa: SIM905
    made_up = [" ".join(words[(i + j) % 11] for j in range(4 + i % 12)) for i in range(4000)]
    return {"made-up": made_up}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    data = args.table.read_bytes()
    report: dict[str, object] = {"table": args.table.name, "table_bytes": len(data)}
    loads: list[float] = []
    for name, corpus in corpora().items():
        cold: list[float] = []
        warm: list[float] = []
        for _ in range(args.runs):
            started = time.perf_counter()
            name = StaticEmbedder.SHIPPED_NAME if args.table == TABLE else args.table.stem
            embedder = StaticEmbedder.from_bytes(data, name=name)
            loads.append(time.perf_counter() - started)
            for timings in (cold, warm):
                started = time.perf_counter()
                for start in range(0, len(corpus), 256):
                    embedder.embed(corpus[start : start + 256])
                timings.append(len(corpus) / (time.perf_counter() - started))
        report[name] = {
            "texts": len(corpus),
            "mean_chars": round(sum(map(len, corpus)) / len(corpus), 1),
            "texts_per_second_cold": round(statistics.median(cold)),
            "texts_per_second_warm": round(statistics.median(warm)),
        }
    report["space"] = embedder.space.id
    report["runs"] = args.runs
    report["load_seconds"] = round(statistics.median(loads), 3)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
