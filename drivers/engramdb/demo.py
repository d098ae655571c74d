"""A small real job: remember a few facts in a SQLite file and recall them.

Run ``python -m engramdb.demo [PATH]`` (default ``engramdb-demo.db``; ``:memory:`` keeps
nothing). Running it twice shows durability: the second run finds the first run's facts
and does not store them again.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from engramdb import HashEmbedder, Memory
from engramdb.sqlite import SqliteStore

SCOPE = ("demo", "user", "sam")
FACTS = [
    "Sam is vegetarian and loves mushroom risotto",
    "Sam's daughter Mia starts school in September",
    "Sam prefers meetings after 10am",
    "The team's deploy window is Tuesday afternoon",
]
# HashEmbedder matches words, not meaning: these queries share words with the facts.
# With a real model (embedder_from_url), paraphrases such as "what does Sam eat" work too.
QUERIES = ["vegetarian food for Sam", "deploy window", "meetings before 10am"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engramdb.demo", description=__doc__)
    parser.add_argument("path", nargs="?", default="engramdb-demo.db", help="SQLite file")
    args = parser.parse_args(argv)
    with Memory(SqliteStore(args.path), HashEmbedder()) as memory:
        known = {record.text for record in memory.list(SCOPE, limit=100)}
        new = [{"text": text, "scope": SCOPE} for text in FACTS if text not in known]
        memory.remember_many(new)
        status = memory.status()
        print(f"{args.path}: {status.items} memories, {len(new)} new, space {status.active_space}")
        for query in QUERIES:
            hits = memory.recall(query, scopes=[SCOPE], top_k=2)
            print(f"\n? {query}  [{hits.status}]")
            for hit in hits:
                similarity = "-" if hit.similarity is None else f"{hit.similarity:.2f}"
                print(
                    f"  {hit.score:.4f}  {hit.memory.text!r}  "
                    f"(cosine {similarity}, vector rank {hit.vector_rank}, "
                    f"lexical rank {hit.lexical_rank}, id {hit.memory.id})"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
