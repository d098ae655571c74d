"""Acceptance: remember() through a real HTTP embedding server on 127.0.0.1 that fails in
every way we know (loopback_server.FAULTS), 500+ times over.

Every call either stores fully (the record, and its vector unless the call deferred
embedding) or raises a ProviderError of the documented tree; no item is left without its
vector, no second space appears (the "dimensions" fault answers valid vectors of the
wrong size to an embedder that learns its size), and once the server is healthy one
maintain() pass leaves nothing pending.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from loopback_server import FAULTS, serve
from provider_fakes import FAKE_KEY, Sleeps

from engramdb import EngramError, Memory, ProviderError
from engramdb.providers import OpenAIEmbedder, RetryPolicy
from engramdb.sqlite import SqliteStore
from engramdb.store import FindVectors, Stats

CALLS = 520
DIMENSIONS = 64
SPACE = f"openai-compatible/hash-bow@{DIMENSIONS}"
SCOPES = [("acme", "user", name) for name in ("sam", "kim", "ada", "lee")]
RETRY = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.004, max_retry_after=5)


def schedule(seed: int, length: int) -> list[str]:
    """One fault per request: healthy 55% of the time; otherwise a fault, a third of the
    time repeated past the retries, so every kind of failure reaches the caller."""
    draw = random.Random(seed)
    kinds = sorted(FAULTS)
    faults: list[str] = [""] * 3  # the first call is healthy: it teaches the real size
    while len(faults) < length:
        if draw.random() < 0.55:
            faults.append("")
            continue
        kind = draw.choice(kinds)
        if kind == "timeout" and draw.random() < 0.6:
            kind = "500"  # timeouts cost real seconds; keep them rare
        faults += [kind] * (RETRY.max_retries + 1 if draw.random() < 0.33 else 1)
    return faults


def test_every_remember_stores_fully_or_raises_a_provider_error(
    tmp_path: Path, sleeps: Sleeps
) -> None:
    store = SqliteStore(str(tmp_path / "memory.db"))
    with serve(faults=schedule(seed=13, length=4 * CALLS), dimensions=DIMENSIONS) as server:
        embedder = OpenAIEmbedder(
            "hash-bow",
            base_url=server.base_url,
            api_key=FAKE_KEY,
            timeout=0.25,  # the server's "timeout" fault hangs for 0.6 s
            retry=RETRY,
            sleep=sleeps.sleep,  # the back-off waits are recorded, not slept
        )
        memory = Memory(store, embedder)
        stored: dict[str, tuple[str, ...]] = {}  # text -> scope, for calls that returned
        deferred: set[str] = set()
        errors: Counter[str] = Counter()
        for n in range(CALLS):
            text, scope = f"memory {n}: Sam's fact number {n * 7919 % 1000}", SCOPES[n % 4]
            defer = n % 13 == 0
            try:
                record = memory.remember(text, scope, defer_embedding=defer)
            except EngramError as exc:  # anything else fails the test as it is
                assert isinstance(exc, ProviderError), repr(exc)
                errors[type(exc).__name__] += 1
                continue
            assert (record.text, record.scope) == (text, scope)
            stored[text] = scope
            if defer:
                deferred.add(text)

        served = Counter(request["fault"] for request in server.seen)
        assert set(served) == {"", *FAULTS}  # every fault was served at least once
        assert set(errors) == {"ProviderError", "ProviderHTTPError", "ProviderTimeoutError"}
        assert len(stored) > CALLS / 2 and sum(errors.values()) > CALLS / 10

        # Nothing partial: exactly the texts of the calls that returned are stored, and
        # each has its vector unless its call deferred embedding; one space only.
        records = [r for scope in SCOPES for r in memory.list(scope, limit=1000)]
        assert {r.text: r.scope for r in records} == stored
        assert len(records) == len(stored)
        hashes = {r.text: r.content_sha256 for r in records}
        (with_vectors,) = store.batch([FindVectors(SPACE, tuple(hashes.values()))])
        assert {text for text, sha in hashes.items() if sha not in with_vectors} == deferred
        (stats,) = store.batch([Stats(SPACE, datetime.now(UTC))])
        assert stats.spaces == (SPACE,)
        assert (stats.items, stats.pending) == (len(stored), len(deferred))

        server.faults.clear()  # healthy from now on
        report = memory.maintain()
        assert (report.embedded, report.pending) == (len(deferred), 0)
        assert memory.status().pending == 0
        embedder.close()
    store.close()
