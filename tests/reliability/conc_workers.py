"""Writers and readers for the concurrency suite (test_concurrency.py), run in threads of
this process or, through :data:`PROCESS_WORKER`, in processes of their own.

Every text says which item and revision it is: :func:`text_of` gives ``item ID rev N:``
and three words drawn from ``(ID, N)``. A writer owns its items: it remembers each with
its id and rewrites earlier ones to their next revision with ``expected_revision``, so
the text of revision N is known in advance. A reader recalls random words and checks
every hit with :func:`problems_of`: text, revision, evidence and similarity must belong
to one stored revision.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engramdb import HashEmbedder, Hit, Memory
from engramdb._base.types import content_sha256
from engramdb.sqlite import SqliteStore

SCOPE = ("acme", "team", "concurrency")
DIMENSIONS = 64
WORDS = [
    "tofu",
    "basil",
    "lentil",
    "miso",
    "ramen",
    "tempeh",
    "kale",
    "quinoa",
    "falafel",
    "hummus",
    "pesto",
    "sorrel",
    "fennel",
    "leek",
    "barley",
    "rye",
    "spelt",
    "okra",
    "yam",
    "taro",
    "millet",
    "sumac",
    "tahini",
    "wasabi",
]
TEXT = re.compile(r"item (\S+) rev (\d+): (\w+ \w+ \w+)")


def text_of(item_id: str, revision: int) -> str:
    """The text revision ``revision`` of item ``item_id`` holds, and no other does."""
    draw = random.Random(f"{item_id}/{revision}")
    return f"item {item_id} rev {revision}: {' '.join(draw.sample(WORDS, 3))}"


def embedder() -> HashEmbedder:
    return HashEmbedder(dimensions=DIMENSIONS)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def problems_of(hit: Hit, query: str, check: HashEmbedder) -> list[str]:
    """What does not belong together in ``hit`` (nothing, for a consistent hit)."""
    record, evidence = hit.memory, hit.evidence
    found = []
    parsed = TEXT.fullmatch(record.text)
    if parsed is None or record.text != text_of(parsed[1], int(parsed[2])):
        found.append(f"text {record.text!r} is no revision of any item")
    elif (parsed[1], int(parsed[2])) != (record.id, record.revision):
        found.append(f"text {record.text!r} on {record.id} revision {record.revision}")
    if (evidence["id"], evidence["revision"]) != (record.id, record.revision):
        found.append(f"evidence {evidence['id']}@{evidence['revision']} on {record.id}")
    if evidence["content_sha256"] != content_sha256(record.text):
        found.append(f"evidence sha256 does not match {record.text!r}")
    if record.content_sha256 != content_sha256(record.text):
        found.append(f"record sha256 does not match {record.text!r}")
    if hit.similarity is not None:
        query_vector, text_vector = check.embed([query, record.text])
        expected = cosine(query_vector, text_vector)
        if not math.isclose(hit.similarity, expected, abs_tol=1e-5):
            found.append(f"similarity {hit.similarity} of {record.text!r}, expected {expected}")
    return found


def write(memory: Memory, writer: str, count: int, seed: int) -> dict[str, Any]:
    """Remember ``count`` items ``{writer}-{n}`` and rewrite a random earlier one after
    every second; return each item's last revision, the operations done, any error and
    the longest a step (a remember and its update) took, in seconds."""
    draw = random.Random(seed)
    revisions: dict[str, int] = {}
    operations, errors, slowest = 0, [], 0.0
    for n in range(count):
        item_id = f"{writer}-{n}"
        started = time.monotonic()
        try:
            memory.remember(text_of(item_id, 1), SCOPE, id=item_id, expected_revision=0)
            revisions[item_id] = 1
            operations += 1
            if n % 2:
                earlier = draw.choice(sorted(revisions))
                revision = revisions[earlier] + 1
                memory.update(
                    earlier, text=text_of(earlier, revision), expected_revision=revision - 1
                )
                revisions[earlier] = revision
                operations += 1
        except Exception as exc:  # counted and reported; the test asserts there is none
            errors.append(repr(exc))
        slowest = max(slowest, time.monotonic() - started)
    return {"revisions": revisions, "operations": operations, "errors": errors, "slowest": slowest}


def read(memory: Memory, done: Callable[[], bool], seed: int) -> dict[str, Any]:
    """Recall random words until ``done()`` (at least once), checking every hit; return
    the recalls, hits checked (and how many had a similarity to check), errors and the
    first problems found."""
    draw, check = random.Random(seed), embedder()
    recalls, hits, scored, errors, problems = 0, 0, 0, [], []
    while True:
        finished = done()  # read once more after the writers are done
        query = " ".join(draw.sample(WORDS, draw.randint(1, 2)))
        try:
            found = memory.recall(query, [SCOPE], top_k=draw.choice((5, 20, 50)))
        except Exception as exc:  # counted and reported; the test asserts there is none
            errors.append(repr(exc))
        else:
            recalls += 1
            for hit in found:
                hits += 1
                scored += hit.similarity is not None
                problems += problems_of(hit, query, check)
        if finished:
            return {
                "recalls": recalls,
                "hits": hits,
                "similarities": scored,
                "errors": errors,
                "problems": problems[:20],
            }


def run_process(argv: Sequence[str]) -> None:
    """A worker process: ``db writers count ready go``; worker k < writers writes
    ``count`` items as ``p{k}``, the others read until every writer's done flag exists."""
    db, writers, count, ready, go = argv
    folder, number = Path(ready).parent, int(Path(ready).name.removeprefix("ready-"))
    flags = [folder / f"done-{k}" for k in range(int(writers))]
    memory = Memory(SqliteStore(db), embedder())
    Path(ready).touch()
    while not Path(go).exists():
        time.sleep(0.001)
    if number < int(writers):
        result = write(memory, f"p{number}", int(count), seed=number)
        flags[number].touch()
    else:
        result = read(memory, lambda: all(flag.exists() for flag in flags), seed=number)
    memory.close()
    print(json.dumps(result))


# The code each worker process runs (sqlite_helpers.race starts them together).
PROCESS_WORKER = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import conc_workers
conc_workers.run_process(sys.argv[1:])
"""
