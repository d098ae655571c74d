"""A small real job: remember a few facts of two people in a SQLite file and recall them.

Run ``engramdb demo`` or ``python -m engramdb.demo [PATH]`` (default ``engramdb-demo.db``;
``:memory:`` keeps nothing). It shows a recall by meaning (with a semantic embedder), a
recall by words, scope isolation (a recall bound to Sam never shows Ana's facts) and one
hit's evidence. Running it twice shows durability: the second run finds the first run's
facts and stores none again. It is offline: the embedder is the configured one
(``--embedder`` / ``ENGRAMDB_EMBEDDER``), else ``static:``, the token table that ships
with engramdb.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from engramdb import Hits
from engramdb.settings import Settings, format_scope, resolve

SAM = ("demo", "user", "sam")
ANA = ("demo", "user", "ana")
FACTS = {
    SAM: [
        "Sam is vegetarian and loves mushroom risotto",
        "Sam's daughter Mia starts school in September",
        "Sam prefers meetings after 10am",
    ],
    ANA: [
        "Ana is allergic to peanuts",
        "Ana's flight to Lisbon leaves on Friday",
        "Ana prefers meetings before 9am",
    ],
}
BY_MEANING = "what does Sam like to eat?"  # shares no content word with the fact
BY_WORDS = "mushroom risotto"
ISOLATION = "meetings"  # both people have a meetings fact
STATUS_NOTE = (
    "[used] after a question is its recall's status: both legs searched every memory "
    '("partial" or "degraded" would say what they could not do: docs/concepts.md, '
    '"Recall status")'
)


def _show(title: str, query: str, hits: Hits) -> None:
    print(f"\n{title}: ? {query}  [{hits.status}]")
    for hit in hits:
        print(f"  {hit.score:.4f}  {hit.memory.text}  ({format_scope(hit.memory.scope)})")
    if not hits:
        print("  (no hit)")


def run_demo(settings: Settings) -> int:
    """Remember the facts (once), run the recalls, print what they show; return 0."""
    memory = settings.open()
    with memory:
        semantic = getattr(memory.embedder, "semantic", True)
        print(f"database {settings.db}, embedder {memory.embedder.space.id}")
        new = 0
        for scope, facts in FACTS.items():
            before = memory.status().items
            memory.remember_many({"text": text, "scope": scope} for text in facts)
            new += memory.status().items - before
        print(f"{memory.status().items} memories, {new} new (a rerun adds none)")

        sam = memory.bind(SAM)
        hits = sam.recall(BY_MEANING, top_k=2, mode="vector")  # the meaning leg alone
        _show("by meaning (vector leg)", BY_MEANING, hits)
        if not semantic:
            print(
                "  this embedder matches words, not meaning: a recall by meaning needs a "
                "semantic one (the default static:, or --embedder openai:...)"
            )
        _show("by words", BY_WORDS, sam.recall(BY_WORDS, top_k=2))
        isolated = sam.recall(ISOLATION, top_k=5)
        _show("scope isolation (bound to Sam)", ISOLATION, isolated)
        leaked = [hit for hit in isolated if hit.memory.scope != SAM]
        print(f"  {len(leaked)} of Ana's facts in Sam's recall")
        print(f"\n{STATUS_NOTE}")
        best = sam.recall(BY_WORDS, top_k=1)
        if best:
            evidence = best[0].evidence
            print(
                f"\nevidence of the best hit: id {evidence['id']}, scope "
                f"{format_scope(evidence['scope'])}, revision {evidence['revision']}, space "
                f"{evidence['space_id']}, embedded at {evidence['embedded_at']}"
            )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engramdb.demo", description=__doc__)
    parser.add_argument("path", nargs="?", default="engramdb-demo.db", help="SQLite file")
    args = parser.parse_args(argv)
    return run_demo(resolve(db=args.path))


if __name__ == "__main__":
    sys.exit(main())
