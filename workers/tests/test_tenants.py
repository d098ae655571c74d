"""One Durable Object per tenant: what one tenant does never shows in another's replies.

The Worker (``Default.fetch``, real ``Request``s) authenticates each token and forwards
to the tenant's ``MemoryObject`` (``env.MEMORY``); each object runs over its own real
SQLite-backed Durable Object in miniflare. The probes are the ones an outside test
used against the shared D1 database: a content-addressed vector shared across tenants
(``embedded_at`` told A when B had stored a text), BM25 statistics moving with another
tenant's writes, and counts covering other tenants.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engramdb.store._sqlite import Statement
from test_api import call

ACME = "acme-token"
GLOBEX = "globex-token"
ACME_TEAM = "acme-team-token"
TOKENS = json.dumps(
    {
        "sha256:" + hashlib.sha256(ACME.encode()).hexdigest(): ["acme", "user", "sam"],
        "sha256:" + hashlib.sha256(GLOBEX.encode()).hexdigest(): ["globex", "user", "kim"],
        "sha256:" + hashlib.sha256(ACME_TEAM.encode()).hexdigest(): ["acme", "team", "ops"],
    }
)
PIN = "The vault PIN is 4921"


def tenant(*parts: str) -> str:
    return json.dumps(list(parts))


async def remember(worker: Any, token: str, text: str) -> dict[str, Any]:
    status, body, _ = await call(worker, "POST", "/v1/memories", token=token, body={"text": text})
    assert status == 201, body
    return body  # type: ignore[no-any-return]


async def recall(
    worker: Any, token: str, query: str, mode: str = "lexical"
) -> list[dict[str, Any]]:
    status, body, _ = await call(
        worker, "POST", "/v1/recall", token=token, body={"query": query, "mode": mode}
    )
    assert status == 200, body
    return body["hits"]  # type: ignore[no-any-return]


def embedded_at(hit: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(hit["evidence"]["embedded_at"].replace("Z", "+00:00"))


async def test_each_tenant_gets_its_own_object_and_database(make_worker: Any) -> None:
    worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash")
    await remember(worker, ACME, "Sam likes tea")
    await remember(worker, GLOBEX, "Kim likes coffee")
    assert set(worker.objects.instances) == {tenant("acme"), tenant("globex")}
    for name, text in [(tenant("acme"), "Sam likes tea"), (tenant("globex"), "Kim likes coffee")]:
        store = worker.objects.instances[name].tenant.store
        rows = store._exec(Statement("SELECT text FROM items"))
        assert rows == [(text,)]
    status, body, _ = await call(worker, "GET", "/v1/memories", token=GLOBEX)
    assert status == 200
    assert [m["text"] for m in body["memories"]] == ["Kim likes coffee"]


async def test_a_text_another_tenant_holds_is_embedded_anew(make_worker: Any, ai_stub: Any) -> None:
    """Storing a text tenant B already holds costs tenant A its own embedding call, and
    A's evidence shows A's time: nothing tells A that B holds the text."""
    worker = make_worker(None, TOKENS, objects=True)
    await remember(worker, GLOBEX, PIN)
    globex_hit = (await recall(worker, GLOBEX, "vault PIN", "hybrid"))[0]
    calls_before = len(ai_stub.calls)
    before_acme = datetime.now(UTC)
    await remember(worker, ACME, PIN)
    assert [texts for _, texts in ai_stub.calls[calls_before:]] == [[PIN]]
    acme_hit = (await recall(worker, ACME, "vault PIN", "hybrid"))[0]
    acme_embedded = datetime.fromisoformat(
        acme_hit["evidence"]["embedded_at"].replace("Z", "+00:00")
    )
    globex_embedded = datetime.fromisoformat(
        globex_hit["evidence"]["embedded_at"].replace("Z", "+00:00")
    )
    assert globex_embedded < before_acme <= acme_embedded + timedelta(milliseconds=1)


@pytest.mark.parametrize("storage", ["objects", "d1"])
async def test_bm25_scores_do_not_move_with_another_tenants_writes(
    make_worker: Any, d1: Any, storage: str
) -> None:
    """BM25's statistics are per scope: another tenant's writes move no score, in a
    shared D1 database as in objects of their own."""
    if storage == "objects":
        worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash")
    else:
        worker = make_worker(d1, TOKENS, EMBEDDING_MODEL="hash")
    for text in ["deploy window is Friday", "the window cleaner comes Monday", "lunch at noon"]:
        await remember(worker, ACME, text)
    before = [(h["memory"]["text"], h["bm25"]) for h in await recall(worker, ACME, "deploy window")]
    assert len(before) == 2
    for i in range(20):
        await remember(worker, GLOBEX, f"deploy number {i} missed its window")
    after = [(h["memory"]["text"], h["bm25"]) for h in await recall(worker, ACME, "deploy window")]
    assert after == before
    # The probe can see movement: a write in the same tenant does change the statistics.
    await remember(worker, ACME, "deploy deploy deploy")
    moved = [(h["memory"]["text"], h["bm25"]) for h in await recall(worker, ACME, "deploy window")]
    assert [bm25 for text, bm25 in moved if text in dict(before)] != [b for _, b in before]


async def test_tenant_parts_sets_how_many_scope_parts_name_a_tenant(make_worker: Any) -> None:
    one = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash")
    await remember(one, ACME, "in acme")
    await remember(one, ACME_TEAM, "in acme too")
    assert set(one.objects.instances) == {tenant("acme")}
    two = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash", TENANT_PARTS="2")
    await remember(two, ACME, "in acme/user")
    await remember(two, ACME_TEAM, "in acme/team")
    assert set(two.objects.instances) == {tenant("acme", "user"), tenant("acme", "team")}


async def test_vector_floats_up_to_sets_when_an_object_keeps_only_codes(make_worker: Any) -> None:
    """``VECTOR_FLOATS_UP_TO`` reaches each tenant's store (default 4096, ``none`` keeps the
    floats); past it the object's index keeps only codes and recalls alike; a bad value is
    a configuration error."""
    limits = {}
    for setting in (None, "none", "2"):
        worker = make_worker(
            None, TOKENS, objects=True, EMBEDDING_MODEL="hash", VECTOR_FLOATS_UP_TO=setting
        )
        for text in ("tea with Sam", "coffee with Kim", "the deploy window is Friday"):
            await remember(worker, ACME, text)
        hits = await recall(worker, ACME, "deploy window", mode="vector")
        assert hits[0]["memory"]["text"] == "the deploy window is Friday"
        cache = worker.objects.open(tenant("acme")).tenant.store._cache
        limits[setting] = cache._floats_up_to
        (entry_key,) = cache.cached()
        assert cache.entry(*entry_key).index.keeps_floats is (setting != "2")
    assert limits == {None: 4096, "none": None, "2": 2}
    for bad in ("-1", "many"):
        worker = make_worker(
            None, TOKENS, objects=True, EMBEDDING_MODEL="hash", VECTOR_FLOATS_UP_TO=bad
        )
        status, body, _ = await call(worker, "GET", "/v1/memories", token=ACME)
        assert (status, body["error"]["code"]) == (500, "server_misconfigured")


async def test_vector_cache_mb_sets_one_budget_for_an_objects_indexes(make_worker: Any) -> None:
    """``VECTOR_CACHE_MB`` reaches each tenant's store as bytes (default 24 MiB, ``none``
    no bound); a bad value is a configuration error before any object is built."""
    budgets = {}
    for setting in (None, "none", "2"):
        worker = make_worker(
            None, TOKENS, objects=True, EMBEDDING_MODEL="hash", VECTOR_CACHE_MB=setting
        )
        await remember(worker, ACME, "the deploy window is Friday")
        hits = await recall(worker, ACME, "deploy window", mode="vector")
        assert hits[0]["memory"]["text"] == "the deploy window is Friday"
        budgets[setting] = worker.objects.open(tenant("acme")).tenant.store._cache._budget
    assert budgets == {None: 24 * 2**20, "none": None, "2": 2 * 2**20}
    for bad in ("0", "lots"):
        worker = make_worker(
            None, TOKENS, objects=True, EMBEDDING_MODEL="hash", VECTOR_CACHE_MB=bad
        )
        status, body, _ = await call(worker, "GET", "/v1/memories", token=ACME)
        assert (status, body["error"]["code"]) == (500, "server_misconfigured")
        assert worker.objects.instances == {}


async def test_a_grant_reading_another_tenant_is_refused_before_any_object(
    make_worker: Any,
) -> None:
    token = "reaching-token"
    tokens = json.dumps({token: {"scope": ["acme", "user", "sam"], "read": [["globex", "x"]]}})
    worker = make_worker(None, tokens, objects=True, EMBEDDING_MODEL="hash")
    status, body, _ = await call(worker, "GET", "/v1/memories", token=token)
    assert status == 500
    assert body["error"]["code"] == "server_misconfigured"
    assert worker.objects.instances == {}


async def test_unknown_token_reaches_no_object(make_worker: Any) -> None:
    worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash")
    status, body, _ = await call(worker, "POST", "/v1/memories", token="nope", body={"text": "x"})
    assert (status, body["error"]["code"]) == (401, "invalid_token")
    assert worker.objects.instances == {}


async def test_a_restarted_object_answers_from_its_storage(make_worker: Any) -> None:
    worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash")
    await remember(worker, ACME, "the deploy window is Friday")
    warm = await recall(worker, ACME, "deploy window")
    before = worker.objects.instances[tenant("acme")]
    worker.objects.restart(tenant("acme"))
    cold = await recall(worker, ACME, "deploy window")
    assert worker.objects.instances[tenant("acme")] is not before  # a new instance answered
    assert [h["memory"]["id"] for h in cold] == [h["memory"]["id"] for h in warm]


def test_wrangler_config_declares_the_sqlite_object_the_entry_defines() -> None:
    import re

    from workers import DurableObject

    import entry

    with open("/mnt/project/workers/wrangler.jsonc", encoding="utf-8") as file:
        text = re.sub(r"(?m)^\s*//.*$", "", file.read())
    config = json.loads(text)
    (binding,) = config["durable_objects"]["bindings"]
    assert binding["name"] == "MEMORY"
    assert issubclass(getattr(entry, binding["class_name"]), DurableObject)
    assert binding["class_name"] in config["migrations"][0]["new_sqlite_classes"]
    assert config["ai"]["binding"] == "AI"
    assert config["vars"]["TENANT_PARTS"] == "1"


async def test_the_objects_alarm_runs_its_maintenance_pass(make_worker: Any) -> None:
    """``MemoryObject.alarm`` embeds what was stored with deferred embedding, in that
    object only (the harness has no alarm scheduler: the handler is called directly)."""
    worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash")
    await remember(worker, GLOBEX, "kim stays")
    acme = worker.objects.open(tenant("acme"))
    await acme.tenant.memory.remember(
        "the deploy window is Friday", ("acme", "user", "sam"), defer_embedding=True
    )
    assert (await acme.tenant.memory.status()).pending == 1
    await acme.alarm()
    assert (await acme.tenant.memory.status()).pending == 0
    hits = await recall(worker, ACME, "deploy window", "vector")
    assert [h["memory"]["text"] for h in hits] == ["the deploy window is Friday"]


async def test_maintenance_the_objects_maintainer_shows_in_status(make_worker: Any) -> None:
    """The object's memory owns its maintainer (``MAINTAIN`` on by default): the alarm
    runs its pass, and ``/v1/status`` shows its snapshot without the object's store-wide
    counts of the last pass."""
    worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash")
    acme = worker.objects.open(tenant("acme"))
    await acme.tenant.memory.remember(
        "the deploy window is Friday", ("acme", "user", "sam"), defer_embedding=True
    )
    status, body, _ = await call(worker, "GET", "/v1/status", token=ACME)
    assert status == 200 and body["maintenance"]["runs"] == 0
    report = await acme.alarm()
    status, body, _ = await call(worker, "GET", "/v1/status", token=ACME)
    maintenance = body["maintenance"]
    assert (maintenance["state"], maintenance["successes"]) == ("idle", 1)
    assert maintenance["last_report"] is None and maintenance["last_success_at"].endswith("Z")
    assert acme.tenant.memory.maintainer.snapshot.last_report.embedded == 1
    assert report is None  # the entry's handler returns nothing; the tenant's pass ran
    assert (await acme.tenant.memory.status()).pending == 0


async def test_maintenance_off_sets_no_alarm_and_runs_no_pass(make_worker: Any) -> None:
    """``MAINTAIN=off``: the alarm handler embeds nothing and ``/v1/status`` shows
    ``maintenance: null``."""
    worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash", MAINTAIN="off")
    await remember(worker, ACME, "stored at once")
    acme = worker.objects.open(tenant("acme"))
    assert acme.tenant.memory.maintainer is None
    await acme.tenant.memory.remember(
        "the deploy window is Friday", ("acme", "user", "sam"), defer_embedding=True
    )
    await acme.alarm()
    assert (await acme.tenant.memory.status()).pending == 1
    status, body, _ = await call(worker, "GET", "/v1/status", token=ACME)
    assert status == 200 and body["maintenance"] is None


async def test_maintenance_a_failed_pass_backs_off(make_worker: Any, ai_stub: Any) -> None:
    """When Workers AI fails during the alarm's pass the maintainer backs off (its
    snapshot says so, naming the error's class only) and the texts stay pending; the
    next pass, once the model answers, embeds them."""
    worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MAX_RETRIES="0")
    acme = worker.objects.open(tenant("acme"))
    await acme.tenant.memory.remember(
        "the deploy window is Friday", ("acme", "user", "sam"), defer_embedding=True
    )
    ai_stub.fail = "AiError: 3040: Capacity temporarily exceeded, retry."
    assert await acme.tenant.maintain() is None
    snapshot = acme.tenant.memory.maintainer.snapshot
    assert (snapshot.state, snapshot.consecutive_failures) == ("backing_off", 1)
    assert snapshot.last_error is not None and "Capacity" not in snapshot.last_error
    assert snapshot.next_at is not None
    # The object's next alarm is when the back-off ends (the harness's object state has
    # no alarm API, so the object's storage is given one that records the calls).
    acme.tenant._storage = Alarms()
    acme.tenant._alarm_set = False
    assert await acme.tenant.maintain() is None
    snapshot = acme.tenant.memory.maintainer.snapshot
    assert snapshot.consecutive_failures == 2
    assert acme.tenant._storage.set == [snapshot.next_at.timestamp() * 1000]
    ai_stub.fail = None
    report = await acme.tenant.maintain()
    assert report is not None and (report.embedded, report.pending) == (1, 0)
    assert len(acme.tenant._storage.set) == 1  # nothing left: no other alarm


class Alarms:
    """``ctx.storage``'s alarm methods, recorded (no alarm is set to begin with)."""

    def __init__(self) -> None:
        self.set: list[float] = []

    async def getAlarm(self) -> Any:
        return None

    async def setAlarm(self, when: float) -> None:
        self.set.append(when)
