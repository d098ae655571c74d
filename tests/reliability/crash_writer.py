"""The writer process of the crash tests (``test_crash.py`` starts it and SIGKILLs it).

``python crash_writer.py DB DIMENSIONS SEED LIVE_JSON`` prints ``opening``, opens
``Memory(SqliteStore(DB), HashEmbedder(dimensions=DIMENSIONS))`` (creating or migrating
the file), prints ``ready``, then loops seeded random ``remember``, ``remember_many``,
``update`` and ``forget`` calls until it is killed. Before each call it prints
``begin <json>`` (what it is about to do) and after the call returns ``ack <json>``
(what the store acknowledged), each line flushed at once, so the parent knows every
acknowledged operation and the one in flight. ``LIVE_JSON`` names a file holding the
``[id, scope]`` pairs of the live memories the parent knows, for updates and forgets.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from engramdb import HashEmbedder, Memory, MemoryRecord
from engramdb.sqlite import SqliteStore

SCOPES = (("acme", "user", "sam"), ("acme", "user", "kim"), ("acme", "shared"))
WORDS = ("tofu", "cello", "lisbon", "tea", "office", "wifi", "garden", "train", "piano")
MOST_LIVE = 60  # above this many live memories the writer mostly forgets


def say(kind: str, payload: object = None) -> None:
    print(kind if payload is None else f"{kind} {json.dumps(payload)}", flush=True)


def described(record: MemoryRecord, deferred: bool | None) -> dict[str, Any]:
    return {
        "id": record.id,
        "scope": list(record.scope),
        "text": record.text,
        "revision": record.revision,
        "deferred": deferred,
    }


def main() -> None:
    db, dimensions, seed, live_path = sys.argv[1:5]
    rng = random.Random(int(seed))
    with open(live_path, encoding="utf-8") as file:
        live: dict[str, list[str]] = dict(json.load(file))
    say("opening")
    memory = Memory(SqliteStore(db), HashEmbedder(dimensions=int(dimensions)))
    say("ready")
    n = 0

    def text() -> str:
        nonlocal n
        n += 1  # a unique token per text, so no remember is answered by dedupe
        return f"note w{seed}x{n} about {rng.choice(WORDS)} and {rng.choice(WORDS)}"

    while True:
        choice = rng.random()
        if len(live) > MOST_LIVE:
            choice = 0.9 + choice / 10
        if choice < 0.3 or not live:
            scope = rng.choice(SCOPES)
            intent: dict[str, Any] = {"scope": list(scope), "texts": [text()]}
            defer = rng.random() < 0.15
            intent["defer"] = defer
            if rng.random() < 0.3:
                intent["id"] = f"w{seed}-{n}"
            say("begin", {"op": "remember", **intent})
            record = memory.remember(
                intent["texts"][0],
                scope=scope,
                id=intent.get("id"),
                metadata={"n": n},
                defer_embedding=defer,
            )
            records = [described(record, defer)]
        elif choice < 0.45:
            scope = rng.choice(SCOPES)
            texts = [text() for _ in range(rng.randint(2, 4))]
            say("begin", {"op": "remember_many", "scope": list(scope), "texts": texts})
            many = memory.remember_many([{"text": t, "scope": scope} for t in texts])
            records = [described(record, False) for record in many]
        elif choice < 0.75:
            item_id = rng.choice(sorted(live))
            new_text = text() if rng.random() < 0.5 else ""
            if new_text:
                say("begin", {"op": "update", "id": item_id, "text": new_text})
                record = memory.update(item_id, text=new_text)
            else:
                say("begin", {"op": "update", "id": item_id, "text": None})
                record = memory.update(item_id, metadata={"n": n})
            # a new text is embedded; new metadata leaves the item as it was (None)
            records = [described(record, False if new_text else None)]
        else:
            item_id = rng.choice(sorted(live))
            say("begin", {"op": "forget", "id": item_id})
            existed = memory.forget(item_id)
            say("ack", {"op": "forget", "id": item_id, "existed": existed})
            del live[item_id]
            continue
        say("ack", {"op": "stored", "records": records})
        for record_info in records:
            live[record_info["id"]] = record_info["scope"]


if __name__ == "__main__":
    main()
