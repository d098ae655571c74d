"""``engramdb.client`` against the Worker, over real HTTP: plain CPython on the host.

workers/tests/test_client_worker.py starts a Node HTTP server in front of the Worker
(inside Pyodide) and runs this script on the host with PYTHONPATH=<repo>/core:<repo>/drivers
and one argument, a JSON object: ``url`` (the Worker), ``limited`` (the same Worker
behind a rate limiter of ``budget`` requests per token), ``token``, ``bad_token``. It
prints one JSON report of what the client answered; the test asserts on it. An exception
is reported as ``{"error": <class name>, "message": ...}``, never raised.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx

import engramdb
from engramdb.client import AsyncRemoteMemory, RemoteMemory
from engramdb.driver import RetryPolicy

NO_WAIT = RetryPolicy(initial_delay=0.0, max_delay=0.0)
WINDOW = 60.0  # the harness limiter's period, seconds (workers/tests/harness_bindings.mjs)
MARGIN = 20.0  # room the limited calls need before the window turns, seconds


def fresh_window() -> None:
    """Wait, if need be, for a window of the limiter with MARGIN seconds left.

    miniflare's limiter counts in windows aligned to the wall clock (``Date.now() //
    period``); a window that turns between the budget's calls and the next one gives a
    fresh budget, and the call past it passes. This waits for a window with room.
    """
    left = WINDOW - time.time() % WINDOW
    if left < MARGIN:
        time.sleep(left + 0.5)


def outcome(call: Callable[[], Any]) -> Any:
    """What ``call`` answers, or the engramdb error it raises (class name and message)."""
    try:
        return call()
    except engramdb.EngramError as exc:
        return {"error": type(exc).__name__, "message": str(exc)}


def round_trip(url: str, token: str) -> dict[str, Any]:
    """Every method of the bound view the HTTP API offers, once."""
    out: dict[str, Any] = {}
    with RemoteMemory(url, token, retry=NO_WAIT) as sam:
        tea = sam.remember("Sam drinks green tea", labels={"topic": ["drinks"]})
        out["remembered"] = [list(tea.scope), tea.text, tea.revision, dict(tea.labels)]
        out["remembered_again_is_same"] = sam.remember("Sam drinks green tea").id == tea.id
        out["get_is_record"] = sam.get(tea.id) == tea
        hits = sam.recall("green tea")
        top = hits[0]
        out["recall"] = {
            "status": hits.status,
            "mode": hits.mode,
            "has_selection": bool(hits.selection_id),
            "top_is_record": top.memory == tea,
            "evidence_id": top.evidence["id"],
            "evidence_revision": top.evidence["revision"],
            "evidence_sha_is_record": top.evidence["content_sha256"] == tea.content_sha256,
            "space": top.evidence["space_id"],
        }
        changed = sam.update(tea.id, text="Sam drinks black tea", expected_revision=1)
        out["updated"] = None if changed is None else [changed.revision, changed.text]
        out["conflict"] = outcome(lambda: sam.update(tea.id, importance=0.9, expected_revision=1))
        out["unchanged_after_conflict"] = sam.get(tea.id) == changed
        out["history"] = [r.text for r in sam.history(tea.id) or []]
        out["listed"] = [r.id for r in sam.list(limit=10)] == [tea.id]
        out["scopes"] = [[list(s.scope), s.items] for s in sam.list_scopes()]
        valued = sam.feedback(tea.id, -0.5)
        out["feedback_id_is_record"] = valued is not None and valued.id == tea.id
        out["completed"] = [sam.complete(hits.selection_id, 1.0) for _ in range(2)]
        status = sam.status()
        out["status"] = [status.engramdb, list(status.scope), status.items]
        out["forgot"] = [sam.forget(tea.id), sam.forget(tea.id)]
        out["after_forget"] = [
            sam.get(tea.id),
            sam.history(tea.id),
            sam.update(tea.id, text="x"),
            sam.feedback(tea.id, 1.0),
        ]
        out["id"] = tea.id
    return out


def errors(url: str, token: str, bad_token: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with RemoteMemory(url, bad_token, retry=NO_WAIT) as nobody:
        out["bad_token"] = outcome(lambda: nobody.recall("anything"))
        out["bad_token_repr"] = repr(nobody)
    with RemoteMemory(url, token, retry=NO_WAIT) as sam:
        out["top_k"] = outcome(lambda: sam.recall("tea", top_k=0))
        out["empty_text"] = outcome(lambda: sam.remember(""))
        out["too_long"] = outcome(lambda: sam.remember("x" * 40_000))
    return out


def retries(limited: str, token: str, budget: int) -> dict[str, Any]:
    """Behind the rate limiter (Retry-After: its period): the token's budget spent, a
    client retries twice, waiting as Retry-After says, then raises a StoreError; then,
    once the waiting client tells the harness the period is over, the next try passes."""
    out: dict[str, Any] = {}
    waits: list[float] = []
    policy = RetryPolicy(max_retries=2, initial_delay=0.5, multiplier=2.0)
    fresh_window()
    with RemoteMemory(limited, token, retry=policy, sleep=waits.append) as sam:
        out["within_budget"] = [list(sam.status().scope) for _ in range(budget)]
        out["past_budget"] = outcome(lambda: list(sam.status().scope))
        out["past_budget_waits"] = list(waits)

    patient: list[float] = []

    def period_over(seconds: float) -> None:  # the harness's limiter cannot be moved in time
        patient.append(seconds)
        httpx.post(limited + "/__harness/period-over").raise_for_status()

    with RemoteMemory(limited, token, retry=policy, sleep=period_over) as sam:
        out["after_wait"] = outcome(lambda: list(sam.status().scope))
        out["after_wait_waits"] = patient
    return out


async def async_client(url: str, token: str) -> list[Any]:
    async with AsyncRemoteMemory(url, token, retry=NO_WAIT) as sam:
        kept = await sam.remember("Sam's train leaves at 7")
        hits = await sam.recall("train")
        gone = [await sam.forget(kept.id), await sam.forget(kept.id)]
        return [kept.text, hits[0].memory == kept, gone, await sam.get(kept.id)]


def main() -> None:
    config = json.loads(sys.argv[1])
    url, token = config["url"], config["token"]
    report = {
        "round_trip": round_trip(url, token),
        "errors": errors(url, token, config["bad_token"]),
        "async": asyncio.run(async_client(url, token)),
        "retries": retries(config["limited"], token, int(config["budget"])),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
