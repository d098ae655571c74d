"""Leave-one-conversation-out estimate of choosing a static table on LoCoMo's dev split.

Run from the repository root (numpy needed; the ``eval`` extra has it)::

    PYTHONPATH=core:drivers python -m eval.static_loco --data PATH/locomo_dev.json \\
        --tables T1.bin T2.bin ... [--out loco.json]

The tables are variants made by ``eval/distill_static.py`` (``eval/distill_static.md``
lists them with their options). Choosing the shipped table among them looked at every
conversation of the development split; this says how much of its figure survives when
the choice cannot see the conversation it is scored on. For each table it ranks every
question once by the vector leg (exact cosine, as ``eval.tune``) and by hybrid recall
(the shipped fusion: convex, alpha 0.4 on the vector leg, depth 100, with the shipped
lexical leg). Then, for each of the seven conversations, it picks the table with the
best vector recall@10 (then MRR) on the other six and scores that table on the held-out
one; the held-out rankings of the seven folds are pooled into one recall@10 and MRR.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engramdb import StaticEmbedder

from .locomo import load, metrics
from .tune import Lexical, Ranked, _questions, convex, leg_only, lexical_leg, vector_leg

DEPTH = 100
MODES = ("vector", "hybrid")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.static_loco")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--tables", type=Path, nargs="+", required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    conversations = load(args.data)
    pairs = list(_questions(conversations))
    gold = [question.evidence for _, question in pairs]
    owner = [conversation.sample_id for conversation, _ in pairs]
    lexical = lexical_leg(conversations, Lexical(), DEPTH)
    fuse = convex(0.4, DEPTH)
    ranked: dict[str, dict[str, list[list[str]]]] = {}
    for table in args.tables:
        embedder = StaticEmbedder.from_bytes(table.read_bytes(), name=table.stem, max_batch=10**6)
        vector: list[Ranked] = vector_leg(conversations, embedder, DEPTH)
        ranked[table.name] = {
            "vector": leg_only(vector),
            "hybrid": [fuse(v, lx) for v, lx in zip(vector, lexical, strict=True)],
        }
        print(table.name, {mode: _score(r, gold) for mode, r in ranked[table.name].items()})

    folds: list[dict[str, Any]] = []
    held_out: dict[str, list[list[str]]] = {
        "vector": [[] for _ in gold],
        "hybrid": [[] for _ in gold],
    }
    for held in sorted(set(owner)):
        train = [i for i, o in enumerate(owner) if o != held]
        test = [i for i, o in enumerate(owner) if o == held]

        def on_train(name: str, train: list[int] = train) -> tuple[float, float]:
            result = metrics([ranked[name]["vector"][i] for i in train], [gold[i] for i in train])
            return result["recall@10"], result["mrr"]

        chosen = max(ranked, key=on_train)
        for mode in held_out:
            for i in test:
                held_out[mode][i] = ranked[chosen][mode][i]
        folds.append({"held_out": held, "chosen": chosen, "questions": len(test)})
        print(f"held out {held}: chosen {chosen}")
    report = {
        "tables": {
            name: {m: _score(r, gold) for m, r in modes.items()} for name, modes in ranked.items()
        },
        "folds": folds,
        "leave_one_conversation_out": {m: _score(r, gold) for m, r in held_out.items()},
        "lexical": _score(leg_only(lexical), gold),
    }
    print(json.dumps(report["leave_one_conversation_out"]), "lexical", report["lexical"])
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _score(ranked: Sequence[list[str]], gold: Sequence[Any]) -> dict[str, float]:
    result = metrics(ranked, gold)
    return {"recall@10": round(result["recall@10"], 4), "mrr": round(result["mrr"], 4)}


if __name__ == "__main__":
    raise SystemExit(main())
