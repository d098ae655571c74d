"""``engramdb.client`` against the Worker over real HTTP, errors and retries included.

httpx cannot run in this Pyodide (no network, no ``ssl``), so the client runs where it
runs in production, in CPython on the host: a Node HTTP server on 127.0.0.1
(``engramdb_http``, workers/tests/http_bridge.mjs) hands each request it receives to the
Worker's ``fetch`` here, as a real JS ``Request``, and writes the ``Response`` back; the
host's ``python`` (the tox env's, with httpx) runs workers/tests/client_scenario.py
against that URL, and this test awaits its exit (JSPI: Node's event loop serves the
requests meanwhile) and asserts on the JSON report it prints. Over one D1 database and
over one Durable Object per tenant.

Two servers front the same Worker setup: ``url`` without a rate limiter, and ``limited``
with miniflare's real one (``budget`` requests per token per period, Retry-After 7).
That limiter cannot be moved in time, so ``POST /__harness/period-over`` on ``limited``
(which the client's ``sleep`` hook sends instead of sleeping) gives the Worker a fresh
limiter: the period is over. It never reaches the Worker.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import engramdb_bindings
import engramdb_http
import js
from js import Object
from pyodide.ffi import create_proxy, to_js
from workers import Request

from engramdb import __version__
from test_api import SAM, SAM_TOKEN, TOKENS

PERIOD = "7"  # the limiter's Retry-After, seconds
BAD_TOKEN = "not-a-token-anyone-knows"


class Front:
    """One HTTP server in front of ``worker``: what it answered, by status, in order."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.statuses: list[int] = []
        self.periods_over = 0
        self.proxy = create_proxy(lambda request: asyncio.ensure_future(self.handle(request)))
        self.server: Any = None

    async def handle(self, js_request: Any) -> Any:
        if str(js.URL.new(js_request.url).pathname) == "/__harness/period-over":
            env = self.worker.env  # the SDK's wrapper of the JS env, which caches bindings
            env._env.RATE_LIMITER = engramdb_bindings.newRateLimiter()
            vars(env).pop("RATE_LIMITER", None)
            self.periods_over += 1
            return js.Response.new(None, to_js({"status": 204}, dict_converter=Object.fromEntries))
        response = (await self.worker.fetch(Request(js_request))).js_object
        self.statuses.append(int(response.status))
        return response

    async def __aenter__(self) -> str:
        self.server = await engramdb_http.serve(self.proxy)
        return str(self.server.url)

    async def __aexit__(self, *exc: object) -> None:
        await self.server.close()
        self.proxy.destroy()


async def run_scenario(config: dict[str, Any]) -> dict[str, Any]:
    """Run client_scenario.py on the host with the tox env's python; its JSON report."""
    repo = str(engramdb_http.repo)
    paths = str(engramdb_http.pathDelimiter).join([f"{repo}/core", f"{repo}/drivers"])
    env = to_js({"PYTHONPATH": paths}, dict_converter=Object.fromEntries)
    args = to_js([f"{repo}/workers/tests/client_scenario.py", json.dumps(config)])
    done = await engramdb_http.run("python", args, env)
    assert int(done.code) == 0, f"client_scenario.py exited {done.code}:\n{done.stderr}"
    return dict(json.loads(str(done.stdout)))


async def test_the_client_against_the_worker_over_http(make_host: Any) -> None:
    budget = int(engramdb_bindings.rateLimit)
    open_front = Front(make_host(TOKENS))
    limited_front = Front(
        make_host(
            TOKENS,
            RATE_LIMITER=engramdb_bindings.newRateLimiter(),
            RATE_LIMIT_PERIOD=PERIOD,
        )
    )
    async with open_front as url, limited_front as limited:
        report = await run_scenario(
            {
                "url": url,
                "limited": limited,
                "token": SAM_TOKEN,
                "bad_token": BAD_TOKEN,
                "budget": budget,
            }
        )

    trip = report["round_trip"]
    assert trip["remembered"] == [SAM, "Sam drinks green tea", 1, {"topic": ["drinks"]}]
    assert trip["remembered_again_is_same"] is True and trip["get_is_record"] is True
    assert trip["recall"] == {
        "status": "used",
        "mode": "hybrid",
        "has_selection": True,
        "top_is_record": True,
        "evidence_id": trip["id"],
        "evidence_revision": 1,
        "evidence_sha_is_record": True,
        "space": "cloudflare/cf/baai/bge-base-en-v1.5@768",
    }
    assert trip["updated"] == [2, "Sam drinks black tea"]
    assert trip["conflict"]["error"] == "ConflictError"
    assert "revision_conflict, HTTP 409" in trip["conflict"]["message"]
    assert trip["unchanged_after_conflict"] is True
    assert trip["history"] == ["Sam drinks green tea"]
    assert trip["listed"] is True and trip["scopes"] == [[SAM, 1]]
    assert trip["feedback_id_is_record"] is True
    assert trip["completed"] == [True, False]  # a selection is used once
    assert trip["status"] == [__version__, SAM, 1]
    assert trip["forgot"] == [True, False]
    assert trip["after_forget"] == [None, None, None, None]

    errors = report["errors"]
    assert errors["bad_token"]["error"] == "ConfigurationError"
    assert errors["bad_token"]["message"].startswith("the server refused the token")
    assert "invalid_token, HTTP 401" in errors["bad_token"]["message"]
    assert BAD_TOKEN not in json.dumps(errors)  # neither in a message nor in the repr
    assert errors["bad_token_repr"] == f"RemoteMemory({url!r})"
    for case, says in (("top_k", "top_k"), ("empty_text", "text"), ("too_long", "HTTP 413")):
        assert errors[case]["error"] == "ValidationError", errors[case]
        assert says in errors[case]["message"], errors[case]

    assert report["async"] == ["Sam's train leaves at 7", True, [True, False], None]

    retried = report["retries"]
    assert retried["within_budget"] == [SAM] * budget
    assert retried["past_budget"]["error"] == "StoreError"
    assert "rate_limited, HTTP 429" in retried["past_budget"]["message"]
    assert retried["past_budget_waits"] == [7.0, 7.0]  # Retry-After, not the 0.5 s back-off
    assert (retried["after_wait"], retried["after_wait_waits"]) == (SAM, [7.0])
    # budget answers, three 429s (a try and two retries), a 429 then the retry served
    assert limited_front.statuses == [200] * budget + [429] * 4 + [200]
    assert limited_front.periods_over == 1
    assert 429 not in open_front.statuses and 401 in open_front.statuses
