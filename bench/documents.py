"""Recall of a passage inside a long document: chunks against whole-document memories.

Run from the repository root (the dataset is not in the repository: pass its path)::

    PYTHONPATH=core:drivers python -m bench.documents --data PATH/locomo_dev.json

The corpus: LoCoMo's conversations (``eval.locomo``), each session written out as one
long document (a paragraph per turn, ``speaker: text``, its date on top; a few thousand
characters), the questions of categories 1-4 and their evidence turns. Each
conversation is its own scope, remembered three ways with the shipped static embedder
(``static:``), in hybrid recall:

* ``whole``: each session one memory (the document as a note: what a user without
  ``remember_document`` stores);
* ``chunks``: each session through ``remember_document(max_chars=...)`` for every
  ``--max-chars``;
* ``turns``: each turn one memory (the reference: ``eval.locomo``'s own setting).

A question's recall@k is the share of its evidence turns inside its first k hits (a
whole document holds every turn of its session; a chunk, the turns its span overlaps).
``chars@k`` is how many characters those k hits hold: what a model reads to find the
passage. At the same reading cost, ``recall in N chars`` reads the hits in order until
N characters (the last one cut there, as ``format_context(budget_chars=N)`` would): a
turn counts when it ends within the characters read. The figures are deterministic.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from engramdb import InMemoryStore, Memory
from engramdb.documents import span_of
from engramdb.providers import embedder_from_url
from eval.locomo import Conversation, load, memory_text

KS = (1, 5, 10)
BUDGETS = (1000, 2000, 5000)


def sessions(conversation: Conversation) -> dict[str, tuple[str, dict[str, tuple[int, int]]]]:
    """Each session's document text and where each of its turns is in it."""
    out: dict[str, tuple[str, dict[str, tuple[int, int]]]] = {}
    for turn in conversation.turns:
        number = turn.dia_id.split(":")[0]
        text, spans = out.get(number, (f"{turn.date}", {}))
        text += "\n\n"
        line = memory_text(turn)
        spans[turn.dia_id] = (len(text), len(text) + len(line))
        out[number] = (text + line, spans)
    return out


def evaluate(conversations: Sequence[Conversation], way: str, max_chars: int) -> dict[str, float]:
    embedder = embedder_from_url("static:")
    recalls: dict[int, list[float]] = {k: [] for k in KS}
    chars: dict[int, list[int]] = {k: [] for k in KS}
    read: dict[int, list[float]] = {n: [] for n in BUDGETS}
    memories = 0
    for conversation in conversations:
        memory = Memory(InMemoryStore(), embedder)
        view = memory.bind(("locomo", conversation.sample_id))
        docs = sessions(conversation)
        holds: dict[str, dict[str, int]] = {}  # memory id -> evidence turn -> where it ends
        if way == "turns":
            records = view.remember_many([{"text": memory_text(t)} for t in conversation.turns])
            for record, turn in zip(records, conversation.turns, strict=True):
                holds[record.id] = {turn.dia_id: len(record.text)}
        for number, (text, spans) in docs.items() if way != "turns" else ():
            if way == "whole":
                holds[view.remember(text).id] = {d: e for d, (_, e) in spans.items()}
                continue
            doc = view.remember_document(text, source=number, max_chars=max_chars)
            for chunk in doc.chunks:
                _, start, end = span_of(chunk) or ("", 0, 0)
                holds[chunk.id] = {
                    d: min(e, end) - start for d, (s, e) in spans.items() if s < end and start < e
                }
        memories += len(holds)
        for question in conversation.questions:
            if question.category == 5 or not question.evidence:
                continue
            hits = view.recall(question.text, top_k=max(KS))
            gold = set(question.evidence)
            for k in KS:
                found = {d for h in hits[:k] for d in holds[h.memory.id]}
                recalls[k].append(len(found & gold) / len(gold))
                chars[k].append(sum(len(h.memory.text) for h in hits[:k]))
            for budget in BUDGETS:
                found, left = set(), budget
                for hit in hits:
                    found |= {d for d, end in holds[hit.memory.id].items() if end <= left}
                    left -= len(hit.memory.text) + 2  # a blank line between two hits
                    if left <= 0:
                        break
                read[budget].append(len(found & gold) / len(gold))
        memory.close()
    row: dict[str, float] = {"memories": memories, "questions": len(recalls[KS[0]])}
    for k in KS:
        row[f"recall@{k}"] = statistics.fmean(recalls[k])
        row[f"chars@{k}"] = statistics.fmean(chars[k])
    for budget in BUDGETS:
        row[f"in {budget}"] = statistics.fmean(read[budget])
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", required=True, type=Path, help="locomo_dev.json (or locomo10)")
    parser.add_argument("--max-chars", default="600,1200", help="chunk sizes to measure")
    args = parser.parse_args(argv)
    conversations = load(args.data)
    ways = [("whole", 0), *(("chunks", int(n)) for n in args.max_chars.split(",")), ("turns", 0)]
    print(f"{len(conversations)} conversations; hybrid recall, static: embedder")
    columns = [
        *(f"recall@{k}" for k in KS),
        *(f"chars@{k}" for k in KS),
        *(f"recall in {n:,} chars" for n in BUDGETS),
    ]
    print("| memories as | memories | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for way, size in ways:
        row = evaluate(conversations, way, size or 1200)
        name = f"chunks of <= {size} chars" if way == "chunks" else way
        print(
            f"| {name} | {row['memories']:,.0f} | "
            + " | ".join(f"{row[f'recall@{k}']:.3f}" for k in KS)
            + " | "
            + " | ".join(f"{row[f'chars@{k}']:,.0f}" for k in KS)
            + " | "
            + " | ".join(f"{row[f'in {n}']:.3f}" for n in BUDGETS)
            + " |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
