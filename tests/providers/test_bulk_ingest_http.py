"""Acceptance: remember_many through a real HTTP embedding server on 127.0.0.1 that
fails at the 5th batch. The first four batches stay stored and are reported; the
IngestError says what was stored and where it stopped; running the same import again
against a healthy server completes it without storing anything twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from loopback_server import serve
from provider_fakes import FAKE_KEY, Sleeps

from engramdb import IngestError, Memory, ProviderHTTPError
from engramdb.providers import OpenAIEmbedder, RetryPolicy
from engramdb.sqlite import SqliteStore

BATCH = 8
BATCHES = 7
SCOPE = ("acme", "imports", "wiki")
RETRY = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.004)
ITEMS = [{"text": f"wiki page {n}: the {n}th fact", "scope": SCOPE} for n in range(BATCH * BATCHES)]


@pytest.mark.parametrize(
    ("failure", "status"),
    [(["400"], 400), (["500"] * (RETRY.max_retries + 1), 500)],
    ids=["not-retryable", "retries-exhausted"],
)
def test_a_failure_at_the_fifth_batch_keeps_four_and_a_rerun_completes_without_duplicates(
    tmp_path: Path, sleeps: Sleeps, failure: list[str], status: int
) -> None:
    store = SqliteStore(str(tmp_path / "memory.db"))
    # four healthy batches and the call that confirms the size the first one taught (the
    # database is fresh), then the failure
    with serve(faults=[""] * 5 + failure, dimensions=32) as server:
        embedder = OpenAIEmbedder(
            "hash-bow", base_url=server.base_url, api_key=FAKE_KEY, retry=RETRY, sleep=sleeps.sleep
        )
        memory = Memory(store, embedder)
        progress: list[tuple[int, int]] = []
        with pytest.raises(IngestError) as info:
            memory.remember_many(
                ITEMS, batch_size=BATCH, progress=lambda done, total: progress.append((done, total))
            )
        error = info.value
        assert progress == [(BATCH * n, len(ITEMS)) for n in (1, 2, 3, 4)]
        assert [r.text for r in error.committed] == [i["text"] for i in ITEMS[: 4 * BATCH]]
        assert error.index == 4 * BATCH  # the first item of batch 5
        assert isinstance(error.__cause__, ProviderHTTPError)
        assert error.__cause__.status == status
        assert len(server.seen) == 5 + len(failure)  # one per batch, the size check, retries
        stored = memory.list(SCOPE, limit=1000)
        assert sorted(r.id for r in stored) == sorted(r.id for r in error.committed)
        assert memory.status().pending == 0  # what was stored has its vectors

        rerun: list[tuple[int, int]] = []
        records = memory.remember_many(
            ITEMS, batch_size=BATCH, progress=lambda done, total: rerun.append((done, total))
        )
        assert rerun == [(BATCH * n, len(ITEMS)) for n in range(1, BATCHES + 1)]
        assert [r.text for r in records] == [i["text"] for i in ITEMS]
        assert records[: 4 * BATCH] == error.committed  # the same records, not copies
        assert len(server.seen) == 5 + len(failure) + BATCHES - 4  # batches 1-4: no request
        stored = memory.list(SCOPE, limit=1000)
        assert len(stored) == len(ITEMS) == len({r.text for r in stored})
        status_after = memory.status()
        assert (status_after.items, status_after.pending) == (len(ITEMS), 0)
        embedder.close()
    store.close()
