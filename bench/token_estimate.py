"""How close ``estimate_tokens`` (WordPiece) is to OpenAI's ``cl100k_base`` on LoCoMo.

Run from the repository root (neither the dataset nor the BPE file is in the
repository; ``pip install tiktoken``)::

    PYTHONPATH=core:drivers python -m bench.token_estimate --data PATH/locomo_dev.json \\
        [--bpe PATH/cl100k_base.tiktoken]

Without ``--bpe``, tiktoken loads ``cl100k_base`` itself (downloading its BPE file once);
with it, the file given, checked against the SHA-256 tiktoken expects of it.

* **texts**: every turn as a memory holds it (``speaker: text``), counted both ways: the
  ratio of the totals, and the quantiles of the ratio turn by turn;
* **blocks**: each question of categories 1-4 recalls its 10 best turns (shipped static
  embedder, hybrid), and ``format_context(hits, budget_tokens=N)`` cuts the block by the
  estimate: the ratio of the block's two counts, and how many blocks are longer than
  ``N`` in ``cl100k_base`` tokens.

The figures are deterministic (``docs/agents.md`` quotes them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from engramdb import InMemoryStore, Memory
from engramdb.agents import estimate_tokens, format_context
from engramdb.providers import embedder_from_url, tiktoken_counter
from eval.locomo import load, memory_text

BUDGETS = (100, 250, 500, 1000)
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
    r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


def cl100k(bpe: Path | None) -> Callable[[str], int]:
    """The exact count: tiktoken's own cl100k_base, or one built from its BPE file."""
    if bpe is None:
        return tiktoken_counter("cl100k_base")
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(bpe), expected_hash=CL100K_SHA256)
    encoding = tiktoken.Encoding(
        name="cl100k_base", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={}
    )
    return tiktoken_counter(encoding)


def quantiles(values: Sequence[float]) -> str:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return (
        f"min {min(values):.2f}  p5 {cuts[4]:.2f}  median {statistics.median(values):.2f}  "
        f"mean {statistics.fmean(values):.2f}  p95 {cuts[94]:.2f}  max {max(values):.2f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", required=True, type=Path, help="locomo_dev.json (or locomo10)")
    parser.add_argument("--bpe", type=Path, help="cl100k_base.tiktoken, to work offline")
    args = parser.parse_args(argv)
    exact = cl100k(args.bpe)
    conversations = load(args.data)
    texts = [memory_text(turn) for c in conversations for turn in c.turns]
    estimated = [estimate_tokens(text) for text in texts]
    counted = [exact(text) for text in texts]
    print(f"texts: {len(texts)} turns of {len(conversations)} conversations")
    print(f"  estimate {sum(estimated):,} tokens, cl100k_base {sum(counted):,}")
    print(f"  totals: cl100k_base / estimate = {sum(counted) / sum(estimated):.3f}")
    per_turn = [c / e for c, e in zip(counted, estimated, strict=True) if e]
    print(f"  per turn, cl100k_base / estimate: {quantiles(per_turn)}")

    ratios: dict[int, list[float]] = {budget: [] for budget in BUDGETS}
    over: dict[int, int] = dict.fromkeys(BUDGETS, 0)
    embedder = embedder_from_url("static:")
    for conversation in conversations:
        with Memory(InMemoryStore(), embedder) as memory:
            view = memory.bind(("locomo", conversation.sample_id))
            view.remember_many([{"text": memory_text(t)} for t in conversation.turns])
            for question in conversation.questions:
                if question.category == 5:
                    continue
                hits = view.recall(question.text, top_k=10)
                for budget in BUDGETS:
                    block = format_context(hits, budget_tokens=budget)
                    if block:
                        ratios[budget].append(exact(block) / estimate_tokens(block))
                        over[budget] += exact(block) > budget
    print("blocks: format_context(top 10 hits, budget_tokens=N), cl100k_base / estimate")
    for budget, shares in ratios.items():
        print(f"  N={budget:>4}: {quantiles(shares)}; {over[budget]} of {len(shares)} over N")
    return 0


if __name__ == "__main__":
    sys.exit(main())
