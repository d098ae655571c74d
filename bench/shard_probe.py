"""The short-facts probes (``eval.probe``) over a tenant split into shards.

Each probe's memories are placed as a sharded Worker places them (``engramdb.shards.
placement`` of scope and text), each shard an ``InMemoryStore`` with the shipped static
table, and every recall merged by ``merge_hits``: top-1 of vector and hybrid recall per
set, in one store, over ``--shards`` stores that measure their own noise floor
(``shards=1``) and over the same stores estimating the tenant's (``shards=N``)::

    PYTHONPATH=core:drivers python -m bench.shard_probe --shards 4

The figures and what they mean: ``docs/workers.md``, "A tenant larger than one object".
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engramdb import Hits, InMemoryStore, Memory
from engramdb.providers import embedder_from_url
from engramdb.shards import merge_hits, placement
from eval import probe as probes

SETS = ("scoped", "pooled", "name-only pooled", "reworded pooled")


class Sharded:
    """``count`` memories that hold one tenant's memories by placement, recalled as one."""

    def __init__(self, count: int, floor_over: int, embedder: Any) -> None:
        self.parts = [Memory(InMemoryStore(), embedder, shards=floor_over) for _ in range(count)]

    def remember_many(self, items: Iterable[Mapping[str, Any]]) -> None:
        placed: list[list[Mapping[str, Any]]] = [[] for _ in self.parts]
        for item in items:
            placed[placement(item["scope"], item["text"], len(self.parts))].append(item)
        for memory, mine in zip(self.parts, placed, strict=True):
            if mine:
                memory.remember_many(mine)

    def recall(self, query: str, scopes: Sequence[Any], **options: Any) -> Hits:
        answers = [memory.recall(query, scopes, **options) for memory in self.parts]
        return merge_hits(answers, options["top_k"])


def top1(
    name: str, count: int, floor_over: int, probe: Any = None
) -> dict[str, tuple[float, float]]:
    """Each set's (vector, hybrid) top-1 of probe ``name`` over ``count`` shards."""
    probe = probe or probes.load(name)
    embedder = embedder_from_url("static:")
    memories = {pooled: Sharded(count, floor_over, embedder) for pooled in (False, True)}
    run = probes.evaluate(probe, lambda pooled: memories[pooled], ("vector", "hybrid"))  # type: ignore[arg-type,return-value]
    figures = probes.report(run)["sets"]
    return {s: (figures[s]["vector"]["recall@1"], figures[s]["hybrid"]["recall@1"]) for s in SETS}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shard_probe", description=__doc__)
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args(argv)
    print(
        "| probe | stores | noise floor | "
        + " | ".join(f"{s} (vector / hybrid)" for s in SETS)
        + " |"
    )
    print("|---" * (3 + len(SETS)) + "|")
    for name in ("people", "projects"):
        for count, floor_over, what in (
            (1, 1, "its own"),
            (args.shards, 1, "each shard's own"),
            (args.shards, args.shards, "the tenant's (shards=N)"),
        ):
            cells = [f"{v:.3f} / {h:.3f}" for v, h in top1(name, count, floor_over).values()]
            print(f"| {name} | {count} | {what} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
