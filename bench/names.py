"""What reading the names of a question costs a hybrid recall.

Run from the repository root::

    PYTHONPATH=core:drivers python -m bench.names            # 1k and 10k memories
    PYTHONPATH=core:drivers python -m bench.names --quick    # smoke run

One scope of ``bench.memory``'s synthetic texts, each prefixed with one of 20 made-up
names (so a name is in a twentieth of the memories), on ``InMemoryStore`` and on a
SQLite file, with ``bench.memory``'s dense ``ProjectionEmbedder``. Each query is asked
twice, interleaved: with its name capitalised ("Ilsa cedar harbor ..."), so the ranking
reads the name and tokenises the lexical hits that may hold it (``ranking._names``), and
in lower case, which has no name and ranks as before. The report gives the median over
``--rounds`` of each form's median per recall, and their ratio.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from engramdb import InMemoryStore, Memory
from engramdb.sqlite import SqliteStore

from .memory import ProjectionEmbedder, corpus

NAMES = [
    "Ilsa", "Bruno", "Keiko", "Tariq", "Nadia", "Oskar", "Priya", "Mateo", "Greta", "Kwame",
    "Leila", "Dmitri", "Aroha", "Hugo", "Ingrid", "Tomasz", "Amara", "Kenji", "Lena", "Omar",
]  # fmt: skip


def run(items: int, queries: int, rounds: int) -> dict[str, dict[str, float]]:
    rng = random.Random(5)
    texts = [f"{NAMES[i % len(NAMES)]} {text}" for i, text in enumerate(corpus(items, seed=3))]
    asked = []
    for text in rng.sample(texts, queries):
        name, *words = text.split()[:1] + text.split()[2:]
        asked.append(" ".join([name, *rng.sample(words, min(len(words), 4))]))
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("memory", "sqlite"):
            store = InMemoryStore() if kind == "memory" else SqliteStore(Path(tmp) / "n.db")
            with Memory(store, ProjectionEmbedder()) as memory:
                memory.remember_many({"text": t, "scope": ("s",)} for t in texts)
                for query in asked[:3]:
                    memory.recall(query, scopes=[("s",)])  # warm-up
                named: list[float] = []
                plain: list[float] = []
                for _ in range(rounds):
                    times: dict[str, list[float]] = {"named": [], "plain": []}
                    for query in asked:
                        for form, text in (("named", query), ("plain", query.lower())):
                            start = time.perf_counter()
                            memory.recall(text, scopes=[("s",)])
                            times[form].append(time.perf_counter() - start)
                    named.append(statistics.median(times["named"]) * 1000)
                    plain.append(statistics.median(times["plain"]) * 1000)
                n, p = statistics.median(named), statistics.median(plain)
                out[kind] = {"named ms": n, "plain ms": p, "ratio": n / p}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = (1_000,) if args.quick else (1_000, 10_000)
    rounds = 1 if args.quick else args.rounds
    print("| memories | store | named (ms) | lower case (ms) | named / lower case |")
    print("|---|---|---|---|---|")
    for items in sizes:
        for kind, row in run(items, 20 if args.quick else 50, rounds).items():
            print(
                f"| {items:,} | {kind} | {row['named ms']:.3f} | {row['plain ms']:.3f} "
                f"| {row['ratio']:.2f} |"
            )


if __name__ == "__main__":
    main()
