"""A tenant split over shards: recall quality and per-shard cost of a fanned-out recall.

Run from the repository root (the dataset is not in the repository: pass its path)::

    PYTHONPATH=core:drivers nice -n 10 python -m bench.shards --data PATH/locomo_dev.json
    PYTHONPATH=core:drivers python -m bench.shards --data PATH --shards 1,4 --sizes 2000

A shard is a store of its own (a ``SqliteStore`` file, as a Durable Object holds one
SQLite database) with its own ``Memory``; a memory lives in the shard that a hash of its
id names (:func:`shard_of`), so the same memory always lands in the same shard and
shards fill evenly. A recall asks every shard the same query with the same ``top_k``
and merges their hits into one list (:data:`MERGES`).

* Quality: LoCoMo's conversations (``eval.locomo``: each turn one memory, date in its
  text, each conversation its scope, questions of categories 1-4) remembered in one
  store (the baseline) and split over each ``--shards`` count, with the shipped static
  embedder (``static:``). Every question is asked in each mode; each merge is scored
  by recall@10 and MRR over its first 10 hits, as ``eval.locomo`` scores them.
  ``--fetch`` is how many hits each shard is asked for before the merge keeps 10
  (a larger ``top_k`` only appends, so one recall answers every depth). ``--pooled``
  puts every conversation in one scope (each shard then holds a larger part of it).
* Cost: one scope grown to each of ``--sizes`` memories (texts made of two LoCoMo
  turns each), in the pure-Python vector kernel a Worker's object runs
  (``--kernel``), where the CPU time of a warm recall is measured per mode: each of
  ``--queries`` questions' median over ``--runs`` interleaved runs, averaged. A tenant
  of S memories over N shards costs each shard a recall at S/N (they run in parallel,
  one object each) plus the merge, whose CPU time is measured too.

``--only quality`` or ``--only cost`` runs one part. The figures and what they mean are
in ``docs/workers.md``, "A tenant larger than one object".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engramdb import Hit, Hits, Memory
from engramdb.providers import embedder_from_url
from engramdb.shards import merge_hits, shard_of
from engramdb.sqlite import SqliteStore
from eval.locomo import Conversation, load, memory_text, metrics, scope_of

TOP_K = 10
FETCH = 30  # hits asked of each shard by the merge the docs recommend
MODES = ("vector", "lexical", "hybrid")
SCOPE = ("tenant",)
POOLED = ("locomo", "every conversation")

Merge = Callable[[str, Sequence[Sequence[Hit]], int], list[Hit]]


def by_score(query: str, per_shard: Sequence[Sequence[Hit]], top_k: int) -> list[Hit]:
    """What a sharded tenant answers (:func:`engramdb.shards.merge_hits`): every shard's
    hits by score, best first, equal scores newest first."""
    answers = [Hits(hits, status="used", selection_id="-", mode="hybrid") for hits in per_shard]
    return list(merge_hits(answers, top_k))


def by_rank(query: str, per_shard: Sequence[Sequence[Hit]], top_k: int) -> list[Hit]:
    """Reciprocal-rank fusion over the shards, for comparison: each hit scores
    1 / (60 + its position in its shard's list) (an id is in one shard only), equal ones
    by their own score."""
    ranked = [
        (1.0 / (60 + position), hit.score, hit)
        for hits in per_shard
        for position, hit in enumerate(hits, start=1)
    ]
    ranked.sort(key=lambda entry: (-entry[0], -entry[1]))
    return [hit for _, _, hit in ranked[:top_k]]


MERGES: dict[str, Merge] = {"score": by_score, "rank": by_rank}


class Shards:
    """``count`` SQLite files under ``folder``, each with its own ``Memory``."""

    def __init__(self, folder: Path, count: int, embedder: Any) -> None:
        self.memories = [
            Memory(SqliteStore(folder / f"shard-{count}-{n}.db"), embedder, shards=count)
            for n in range(count)
        ]

    def remember(self, items: Sequence[dict[str, Any]]) -> None:
        """Each item (with its ``id``) into the shard its id names."""
        routed: list[list[dict[str, Any]]] = [[] for _ in self.memories]
        for item in items:
            routed[shard_of(item["id"], len(self.memories))].append(item)
        for memory, batch in zip(self.memories, routed, strict=True):
            if batch:
                memory.remember_many(batch)

    def recall(self, query: str, scope: tuple[str, ...], mode: str, top_k: int) -> list[Any]:
        """Every shard's hits for the same recall, in shard order."""
        return [m.recall(query, [scope], top_k=top_k, mode=mode) for m in self.memories]  # type: ignore[arg-type]

    def close(self) -> None:
        for memory in self.memories:
            memory.close()


def items_of(conversation: Conversation, pooled: bool = False) -> list[dict[str, Any]]:
    """A conversation's turns as ``remember_many`` items, each with an id of its own, in
    the conversation's scope (in :data:`POOLED` when ``pooled``)."""
    return [
        {
            "id": f"{conversation.sample_id}-{turn.dia_id}",
            "text": memory_text(turn, date_in_text=True),
            "scope": POOLED if pooled else scope_of(conversation),
            "metadata": {"dia_id": turn.dia_id},
        }
        for turn in conversation.turns
    ]


def quality(
    conversations: Sequence[Conversation],
    counts: Sequence[int],
    fetches: Sequence[int],
    folder: Path,
    embedder: Any,
    *,
    pooled: bool = False,
    every: int = 1,
) -> list[tuple[str, str, int, int, dict[str, float]]]:
    """``(mode, merge, shards, fetch, metrics)`` rows; the baseline is ``("one store", 1)``.
    ``pooled``: every conversation in one scope (:data:`POOLED`), each question asked
    there; every ``every``-th question is asked."""
    asked = [
        (conversation, question)
        for conversation in conversations
        for question in conversation.questions
        if question.evidence and question.category != 5
    ][::every]
    gold = [question.evidence for _, question in asked]
    rows = []
    deepest = max(max(fetches), TOP_K)
    for count in sorted({1, *counts}):
        shards = Shards(folder, count, embedder)
        for conversation in conversations:
            shards.remember(items_of(conversation, pooled))
        for mode in MODES:
            answers = [
                shards.recall(q.text, POOLED if pooled else scope_of(c), mode, deepest)
                for c, q in asked
            ]
            if count == 1:  # the baseline; and what fusing the legs again costs alone
                ranked = [_dia_ids(per_shard[0][:TOP_K]) for per_shard in answers]
                rows.append((mode, "one store", 1, TOP_K, metrics(ranked, gold)))
            merges = ("score",) if count == 1 else tuple(MERGES)
            if count == 1 and mode == "vector":
                merges = ()
            for merge in merges:
                for fetch in fetches if merge == "score" and mode != "vector" else (TOP_K,):
                    ranked = [
                        _dia_ids(MERGES[merge](q.text, [hits[:fetch] for hits in per_shard], TOP_K))
                        for (_, q), per_shard in zip(asked, answers, strict=True)
                    ]
                    rows.append((mode, merge, count, fetch, metrics(ranked, gold)))
        shards.close()
    return rows


def paired_turns(conversations: Sequence[Conversation], start: int, stop: int) -> list[str]:
    """Texts ``start`` to ``stop`` of a made-up tenant: each two LoCoMo turns, the i-th
    and the (7919 i + 13)-th (modulo their number), so they read like the turns."""
    turns = [memory_text(turn) for c in conversations for turn in c.turns]
    return [
        f"{turns[i % len(turns)]} {turns[(i * 7919 + 13) % len(turns)]}" for i in range(start, stop)
    ]


def _dia_ids(hits: Sequence[Hit]) -> list[str]:
    return [str(hit.memory.metadata["dia_id"]) for hit in hits]


def cost(
    conversations: Sequence[Conversation],
    sizes: Sequence[int],
    queries: int,
    runs: int,
    folder: Path,
    embedder: Any,
    kernel: str,
) -> list[tuple[int, str, float]]:
    """``(size, what, CPU ms)``: for each size and kind of recall, the CPU time of one
    warm recall (each question's median over the runs, averaged over the questions;
    the kinds interleaved); and the merges' own CPU time over 8 lists of ``FETCH`` hits
    (the median of the runs)."""
    questions = [q.text for c in conversations for q in c.questions if q.category != 5]
    step = max(1, len(questions) // max(1, queries))
    chosen = questions[::step][:queries]
    memory = Memory(SqliteStore(folder / "cost.db", vector_kernel=kernel), embedder)
    rows: list[tuple[int, str, float]] = []
    stored = 0
    for size in sorted(sizes):
        texts = paired_turns(conversations, stored, size)
        for start in range(0, len(texts), 5000):
            memory.remember_many(
                [{"text": text, "scope": SCOPE} for text in texts[start : start + 5000]],
                dedupe=False,
            )
        stored = size
        shapes = (("lexical", TOP_K), ("vector", TOP_K), ("hybrid", TOP_K), ("hybrid", FETCH))
        for mode, top_k in shapes:
            for query in chosen[:2]:  # warm-up: the vector cache is loaded
                memory.recall(query, [SCOPE], top_k=top_k, mode=mode)  # type: ignore[arg-type]
        taken: dict[tuple[str, int], list[list[float]]] = {
            shape: [[] for _ in chosen] for shape in shapes
        }
        for _ in range(runs):  # interleaved: a burst of load hits every shape alike
            for n, query in enumerate(chosen):
                for mode, top_k in shapes:
                    taken[mode, top_k][n].append(
                        _cpu_ms(
                            lambda q=query, m=mode, k=top_k: memory.recall(
                                q, [SCOPE], top_k=k, mode=m
                            )
                        )
                    )
        for (mode, top_k), per_query in taken.items():
            typical = statistics.mean(statistics.median(ms) for ms in per_query)
            rows.append((size, f"{mode}, top_k {top_k}", typical))
    shards = [list(memory.recall(q, [SCOPE], top_k=FETCH)) for q in chosen[:8]]
    for name, merge in MERGES.items():
        per_run = [
            _cpu_ms(lambda merge=merge: [merge(q, shards, TOP_K) for q in chosen]) / len(chosen)
            for _ in range(runs)
        ]
        what = f"merge {name}: 8 shards, {FETCH} hits each"
        rows.append((max(sizes), what, statistics.median(per_run)))
    memory.close()
    return rows


def _cpu_ms(action: Callable[[], object]) -> float:
    started = time.process_time()
    action()
    return 1000 * (time.process_time() - started)


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shards", description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo JSON file")
    parser.add_argument("--shards", type=_ints, default=[2, 4, 8], help="shard counts")
    parser.add_argument("--fetch", type=_ints, default=[10, 30, 50], help="hits asked per shard")
    parser.add_argument(
        "--pooled", action="store_true", help="every conversation in one scope (quality)"
    )
    parser.add_argument("--only", choices=("quality", "cost"), help="run one part (default: both)")
    parser.add_argument("--every", type=int, default=1, help="ask every n-th question")
    parser.add_argument("--sizes", type=_ints, default=[4000, 8000, 16000, 32000])
    parser.add_argument("--queries", type=int, default=20, help="questions per cost run")
    parser.add_argument("--runs", type=int, default=5, help="cost runs (median)")
    parser.add_argument("--embedder", default="static:", help="an embedder string")
    parser.add_argument(
        "--kernel",
        default="python",
        help="the cost runs' vector kernel (python: what a Worker's object runs; or numpy)",
    )
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"no LoCoMo file at {args.data}; pass --data PATH", file=sys.stderr)
        return 2
    conversations = load(args.data)
    embedder = embedder_from_url(args.embedder)
    turns = sum(len(c.turns) for c in conversations)
    print(
        f"# {args.data.name}: {len(conversations)} conversations, {turns} turns; "
        f"embedder {embedder.space.id}; Python {sys.version.split()[0]}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        if args.only != "cost":
            rows = quality(
                conversations,
                args.shards,
                args.fetch,
                Path(scratch),
                embedder,
                pooled=args.pooled,
                every=args.every,
            )
            print(
                f"\nrecall@{TOP_K} / MRR@{TOP_K} (merged first {TOP_K} hits); "
                f"{'one scope' if args.pooled else 'a scope per conversation'}, "
                f"every {args.every} question(s)\n"
            )
            print("| mode | merge | shards | hits per shard | recall@10 | MRR |")
            print("|---|---|---|---|---|---|")
            for mode, merge, count, fetch, found in rows:
                print(
                    f"| {mode} | {merge} | {count} | {fetch} | "
                    f"{found['recall@10']:.4f} | {found['mrr']:.4f} |"
                )
        if args.sizes and args.only != "quality":
            costs = cost(
                conversations,
                args.sizes,
                args.queries,
                args.runs,
                Path(scratch),
                embedder,
                args.kernel,
            )
            print(
                f"\nCPU ms of one warm recall ({args.kernel} vector kernel; "
                f"{args.queries} questions, {args.runs} runs)\n"
            )
            print("| memories in the store | what | CPU ms |")
            print("|---|---|---|")
            for size, what, ms in costs:
                print(f"| {size:,} | {what} | {ms:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
