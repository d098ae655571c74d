"""Provider faults: remember, update and recall through a real HTTP embeddings server on
127.0.0.1 (tests/providers/loopback_server.py) that fails in every way it knows, on
three clients of two wire formats (OpenAI with base64 vectors, Voyage with float lists,
both on the OpenAI wire; Ollama's own wire).

Before each operation the test queues the faults the server answers its requests with,
so it knows what each operation must do: send exactly the requests the retry policy
allows (never more than ``1 + max_retries``, no retry after an unusable answer, no
wait on a ``Retry-After`` above ``max_retry_after``), back off once per retry (a fake
sleep records the waits), and then store fully or raise the documented
``ProviderError`` subclass (docs/providers.md), with no key in its message. A failed
write changes nothing; a failed query embedding degrades a recall to the lexical leg.
Afterwards the store holds exactly what the calls that returned stored, each with its
vector unless it deferred embedding, in one embedding space.

The counts of each fault served and each outcome are printed for docs/reliability.md;
run with ``-s`` to see them.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from loopback_server import FAULTS, LONG_RETRY_AFTER, Loopback, serve
from provider_fakes import FAKE_KEY, Sleeps, texts_of

from engramdb import (
    EngramError,
    Memory,
    MemoryRecord,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
)
from engramdb.providers import (
    HTTPEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    RetryPolicy,
    VoyageEmbedder,
)
from engramdb.sqlite import SqliteStore
from engramdb.store import FindVectors, Stats

OPERATIONS_PER_WIRE = 400  # x3 clients: 1,200 operations at CI size
DIMENSIONS = 64
SCOPE = ("acme", "user", "sam")
RETRY = RetryPolicy(max_retries=3, initial_delay=0.001, max_delay=0.004, max_retry_after=5)
TIMEOUT = 0.25  # the server's "timeout" fault hangs for 0.6 s

# What the caller gets when a fault is the last answer: after the retries are used up
# for a retried fault, at once for the others.
RETRIED: dict[str, type[ProviderError]] = {
    "500": ProviderHTTPError,
    "503": ProviderHTTPError,
    "429": ProviderHTTPError,
    "429-retry-after": ProviderHTTPError,
    "echo-503": ProviderHTTPError,
    "echo-masked-503": ProviderHTTPError,
    "timeout": ProviderTimeoutError,
    "reset": ProviderError,
    "truncated": ProviderError,
    "bad-gzip": ProviderError,
    "huge": ProviderError,
}
AT_ONCE: dict[str, type[ProviderError]] = {
    "400": ProviderHTTPError,
    "429-retry-after-long": ProviderHTTPError,
    "not-json": ProviderError,
    "no-field": ProviderError,
    "count": ProviderError,
    "dimensions": ProviderError,
    "nan": ProviderError,
    "zero": ProviderError,
}
SUCCEEDS = frozenset({"echo-header"})  # a healthy answer with the key echoed in a header
HEALTHY = ("", "", "", *sorted(SUCCEEDS))  # the healthy answers a plan draws from


def client(wire: str, server: Loopback, sleeps: Sleeps) -> HTTPEmbedder:
    options: dict[str, Any] = {
        "api_key": FAKE_KEY,
        "timeout": TIMEOUT,
        "retry": RETRY,
        "sleep": sleeps.sleep,  # the back-off waits are recorded, not slept
    }
    if wire == "openai":
        return OpenAIEmbedder("hash-bow", base_url=server.base_url, **options)
    if wire == "voyage":
        return VoyageEmbedder("hash-bow", base_url=server.base_url, **options)
    return OllamaEmbedder("hash-bow", host=server.base_url.removesuffix("/v1"), **options)


def plan(draw: random.Random) -> list[str]:
    """The answers to one operation's requests: healthy 45% of the time; otherwise 0 to
    ``max_retries + 1`` retried faults (all of them: the retries are used up), then a
    healthy answer or, half the time, a fault that is not retried. Timeouts cost real
    seconds: a quarter of the timeouts drawn are kept, the others become 503s."""
    if draw.random() < 0.45:
        return [draw.choice(HEALTHY)]
    retried = [draw.choice(sorted(RETRIED)) for _ in range(draw.randint(0, RETRY.max_retries + 1))]
    answers = [f if f != "timeout" or draw.random() < 0.25 else "503" for f in retried]
    if len(answers) <= RETRY.max_retries:
        answers.append(
            draw.choice(sorted(AT_ONCE)) if draw.random() < 0.5 else draw.choice(HEALTHY)
        )
    return answers


def expected_error(answers: list[str]) -> type[ProviderError] | None:
    """The error an operation answered ``answers`` must raise (None: it succeeds)."""
    last = answers[-1]
    return None if last in HEALTHY else (AT_ONCE | RETRIED)[last]


def test_the_fault_tables_cover_every_fault_the_server_knows() -> None:
    """Every fault of the server is classed as retried, not retried or a success (a new
    one must be)."""
    assert set(RETRIED) | set(AT_ONCE) | SUCCEEDS == set(FAULTS)
    assert not set(RETRIED) & set(AT_ONCE) and not SUCCEEDS & (set(RETRIED) | set(AT_ONCE))


@pytest.mark.parametrize("wire", ["openai", "voyage", "ollama"])
def test_every_operation_stores_fully_or_raises_within_the_retry_budget(
    wire: str, tmp_path: Path, long_factor: int
) -> None:
    """Over 400 operations (x10 with --long) on a faulty server: each sends exactly the
    requests its answers allow, waits once per retry (1 s for ``Retry-After: 1``, never
    the 3600 s of a ``Retry-After`` above the policy's max), and stores fully or raises
    the documented error; the store ends exactly as the calls that returned left it."""
    draw, sleeps = random.Random(f"faults/{wire}"), Sleeps()
    served: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    kept: dict[str, MemoryRecord] = {}  # id -> the record its last successful call returned
    deferred: set[str] = set()  # ids whose text is stored pending
    store = SqliteStore(tmp_path / "memory.db")
    with serve(dimensions=DIMENSIONS) as server, client(wire, server, sleeps) as embedder:
        memory = Memory(store, embedder)
        for n in range(OPERATIONS_PER_WIRE * long_factor):
            # the first answer teaches the size; on the fresh database a second call
            # confirms it before the space is registered
            answers = ["", ""] if n == 0 else plan(draw)
            roll = draw.random()
            operation = "remember" if n == 0 or roll < 0.65 or not kept else "update"
            operation = "recall" if roll >= 0.85 and kept else operation
            defer = operation == "remember" and draw.random() < 0.06 and n > 0
            if defer:
                answers = []  # a deferred remember sends nothing
            server.faults[:] = answers
            requests, waits = len(server.seen), len(sleeps.waits)
            error: EngramError | None = None
            degraded: str | None = None  # the error a recall fell back to lexical on
            try:
                if operation == "remember":
                    text = f"memory {n}: Sam's fact number {n * 7919 % 1000}"
                    record = memory.remember(text, SCOPE, defer_embedding=defer)
                    kept[record.id] = record
                    deferred.discard(record.id)
                    if defer:
                        deferred.add(record.id)
                elif operation == "update":
                    item_id = draw.choice(sorted(kept))
                    text = f"memory {item_id} rewritten at {n}"
                    record = memory.update(item_id, text=text)
                    assert record.revision == kept[item_id].revision + 1
                    kept[item_id] = record
                    deferred.discard(item_id)
                else:
                    hits = memory.recall(f"Sam's fact number {n % 1000}", [SCOPE])
                    degraded = hits.error if hits.status == "degraded" else None
            except EngramError as exc:
                error = exc
            server.faults.clear()

            got = [request["fault"] for request in server.seen[requests:]]
            assert got == answers, (n, operation)  # the retry budget, exactly as planned
            assert len(got) <= 1 + RETRY.max_retries
            retried = got[:-1] if n else []  # operation 0: two healthy calls, no retry
            expected_waits = [1.0 if a == "429-retry-after" else "backoff" for a in retried]
            slept = sleeps.waits[waits:]
            assert [w if w == 1.0 else "backoff" for w in slept] == expected_waits, slept
            assert all(w == 1.0 or 0 < w <= RETRY.max_delay for w in slept), slept
            expected = None if defer else expected_error(answers)
            if operation == "recall":
                assert error is None, (n, answers, error)
                assert degraded == (expected and expected.__name__), (n, answers, degraded)
            elif expected is not None:
                assert type(error) is expected, (n, answers, error)
                assert not any(FAKE_KEY in text for text in texts_of(error)), error
                if operation == "update":  # nothing changed
                    assert memory.get(item_id) == kept[item_id]
            else:
                assert error is None, (n, answers, error)
            served.update(got)
            result = "deferred" if defer else type(error).__name__ if error else "ok"
            outcomes[f"{operation} {f'degraded by {degraded}' if degraded else result}"] += 1

        print(f"\n{wire} faults served: {json.dumps(dict(sorted(served.items())))}")
        print(f"{wire} outcomes: {json.dumps(dict(sorted(outcomes.items())))}")
        print(f"{wire} requests: {len(server.seen)}, waits: {len(sleeps.waits)}")
        assert set(served) == {"", *FAULTS}  # every fault was served
        assert LONG_RETRY_AFTER not in sleeps.waits
        assert max(sleeps.waits) <= RETRY.max_retry_after

        # Nothing partial: the store holds exactly the records the calls returned, each
        # with the vector of its text unless it was stored pending; one space only.
        listed = {r.id: r for r in memory.list(SCOPE, limit=10_000)}
        assert listed == kept
        hashes = {r.content_sha256: item_id for item_id, r in kept.items()}
        embedder.embed(["a healthy answer teaches the size again"])
        space = embedder.space.id
        assert space.endswith(f"hash-bow@{DIMENSIONS}")
        (stats,) = store.batch([Stats(space, datetime.now(UTC))])
        assert stats.spaces == (space,)
        (with_vectors,) = store.batch([FindVectors(space, tuple(hashes))])
        assert {item for sha, item in hashes.items() if sha not in with_vectors} == deferred
        assert (stats.items, stats.pending) == (len(kept), len(deferred))

        report = memory.maintain()  # the server is healthy now: nothing stays pending
        assert (report.embedded, report.pending) == (len(deferred), 0)
    store.close()
