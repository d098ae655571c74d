"""The HTTP API's probes without a host: ``/healthz`` and ``/readyz`` answered before any
token, with the host's readiness check (also in Pyodide)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engramdb import (
    AsyncMemory,
    HashEmbedder,
    InMemoryStore,
    Maintainer,
    SchemaTooNewError,
    StoreError,
    __version__,
)
from engramdb.http_api import (
    MAINTAINER_FAILURES_UNREADY,
    Readiness,
    Reply,
    check_store,
    handle,
    maintainer_summary,
    parse_tokens,
)

SAM = ("acme", "user", "sam")
GRANTS = parse_tokens(json.dumps({"sam-token": list(SAM)}))


class Outage(InMemoryStore):
    """An in-memory store whose batches raise ``error`` while it is set (a database
    whose file went away, a server that stopped answering)."""

    def __init__(self) -> None:
        super().__init__()
        self.error: Exception | None = None

    async def abatch(self, ops: Sequence[Any]) -> list[Any]:
        if self.error is not None:
            raise self.error
        return await super().abatch(ops)


class Untouchable:
    """What a probe must never use: the grants, the memory, the body."""

    def __init__(self) -> None:
        self.touched: list[str] = []

    def grants(self) -> Any:
        self.touched.append("grants")
        return GRANTS

    def memory(self, grant: Any) -> Any:
        self.touched.append("memory")
        raise AssertionError("a probe built a memory")

    async def read_body(self) -> str:
        self.touched.append("body")
        return "{}"


async def call(
    method: str, path: str, *, ready: Any = None, token: str | None = None
) -> tuple[Reply, list[str]]:
    host = Untouchable()
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    reply = await handle(
        method,
        "https://memory.example" + path,
        headers,
        host.read_body,
        grants=host.grants,
        memory=host.memory,
        ready=ready,
    )
    return reply, host.touched


async def test_healthz_answers_without_a_token_and_touches_nothing() -> None:
    """``GET /healthz`` (also with a trailing slash or a query) is 200 with the version,
    without a token; the grants, the body and the memory are not used. Any other path
    still needs a token."""
    for path in ("/healthz", "/healthz/", "/healthz?verbose=1"):
        reply, touched = await call("GET", path)
        assert (reply.status, reply.body) == (200, {"status": "ok", "engramdb": __version__})
        assert touched == []
    status, _ = await call("GET", "/v1/status")
    assert (status.status, status.body["error"]["code"]) == (401, "missing_token")


async def test_probes_refuse_other_methods_with_allow_and_never_read_a_body() -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        for path in ("/healthz", "/readyz"):
            reply, touched = await call(method, path, token="sam-token")
            assert reply.status == 405
            assert reply.body["error"]["code"] == "method_not_allowed"
            assert reply.headers == {"allow": "GET, HEAD"}
            assert touched == []
    head, _ = await call("HEAD", "/readyz")
    assert head.status == 200


async def test_readyz_without_a_host_check_is_ready_with_no_checks() -> None:
    reply, touched = await call("GET", "/readyz")
    assert (reply.status, reply.body) == (
        200,
        {"status": "ready", "engramdb": __version__, "checks": {}},
    )
    assert touched == []


async def test_readyz_follows_the_store_and_keeps_the_details_in_the_log() -> None:
    """A store that answers: 200 ``ready``. One whose batches raise: 503 ``unavailable``
    with ``"store": "unreachable"``; the error's words go to ``reply.log`` only (a
    credential in them redacted). Schema too new has its own word."""
    store = Outage()

    async def ready() -> Readiness:
        word, log = await check_store(lambda: store)
        return Readiness({"store": word}, log=log)

    up, _ = await call("GET", "/readyz", ready=ready)
    assert (up.status, up.body["status"], up.body["checks"]) == (200, "ready", {"store": "ok"})
    assert up.log is None

    key = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    store.error = StoreError(f"cannot reach postgres://app:{key}@db.internal/mem")
    down, _ = await call("GET", "/readyz", ready=ready)
    assert down.status == 503
    assert down.body == {
        "status": "unavailable",
        "engramdb": __version__,
        "checks": {"store": "unreachable"},
    }
    assert down.log is not None and "StoreError" in down.log and "db.internal" in down.log
    assert key not in down.log

    store.error = SchemaTooNewError("written by engramdb 9", found=99, supported=5)
    newer, _ = await call("GET", "/readyz", ready=ready)
    assert (newer.status, newer.body["checks"]) == (503, {"store": "schema_too_new"})


async def test_a_store_that_cannot_open_is_unreachable() -> None:
    def cannot_open() -> Any:
        raise OSError("No such file or directory: '/srv/engramdb/memory.sqlite3'")

    word, log = await check_store(cannot_open)
    assert word == "unreachable"
    assert log is not None and "OSError" in log


async def test_a_readiness_check_that_raises_is_a_503_not_a_crash() -> None:
    async def broken() -> Readiness:
        raise RuntimeError("the check itself broke")

    reply, _ = await call("GET", "/readyz", ready=broken)
    assert (reply.status, reply.body["checks"]) == (503, {"probe": "failed"})
    assert reply.log is not None and "the check itself broke" in reply.log
    assert "broke" not in json.dumps(reply.body)


async def test_the_maintainer_summary_fails_readiness_only_after_repeated_failures() -> None:
    """A real maintainer over a store that fails: after one failed pass the summary says
    ``backing_off`` and readiness holds; after MAINTAINER_FAILURES_UNREADY in a row it
    says ``failing`` and readiness fails; a successful pass makes it ``idle`` again with
    the pass's times. No count of maintainers (tenants) is shown."""
    store = Outage()
    memory = AsyncMemory(store, HashEmbedder())
    await memory.remember("Sam likes tea", SAM)
    maintainer = Maintainer(memory)
    other = Maintainer(AsyncMemory(InMemoryStore(), HashEmbedder()))  # another tenant's

    word, summary = maintainer_summary([maintainer.snapshot, other.snapshot])
    assert (word, summary) == (
        "ok",
        {"state": "idle", "last_pass_at": None, "last_success_at": None},
    )

    store.error = StoreError("the database is gone")
    assert await maintainer.arun_once() is None
    word, summary = maintainer_summary([other.snapshot, maintainer.snapshot])
    assert (word, summary["state"]) == ("ok", "backing_off")
    for _ in range(MAINTAINER_FAILURES_UNREADY - 1):
        await maintainer.arun_once()
    word, summary = maintainer_summary([other.snapshot, maintainer.snapshot])
    assert (word, summary["state"]) == ("failing", "failing")
    assert summary["last_success_at"] is None and summary["last_pass_at"] is not None
    assert set(summary) == {"state", "last_pass_at", "last_success_at"}

    store.error = None
    assert await maintainer.arun_once() is not None
    word, summary = maintainer_summary([other.snapshot, maintainer.snapshot])
    assert (word, summary["state"]) == ("ok", "idle")
    assert summary["last_success_at"] == summary["last_pass_at"] is not None

    assert maintainer_summary([maintainer.snapshot], enabled=False)[1]["state"] == "off"


async def test_the_store_check_looks_up_at_the_host_s_clock() -> None:
    """``check_store`` reads no clock of its own: its lookup is made at ``clock()``."""
    from datetime import UTC, datetime

    seen: list[datetime] = []

    class Recording:
        def batch(self, ops: Sequence[Any]) -> list[Any]:
            seen.extend(op.now for op in ops)
            return [[None]]

    at = datetime(2031, 2, 3, 4, 5, tzinfo=UTC)
    assert await check_store(lambda: Recording(), clock=lambda: at) == ("ok", None)
    assert seen == [at]
