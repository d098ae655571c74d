"""A tenant over several Durable Objects (``SHARDS``), through the Worker's HTTP API.

Every memory lives in the object its id names; a text reaches the same object every
time (so a text is stored once across shards); a bad batch stores nothing in any
object; pages, scope counts, receipts and status add up over the shards as one object's
would; and a recall over 1, 2 and 4 objects answers alike (``engramdb.shards``). The
operations every deployment answers alike run over ``SHARDS=4`` as well (``make_host``
in conftest.py: test_api.py, test_client_worker.py, test_openapi.py ...).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from eval.locomo import load, memory_text, metrics

from engramdb.shards import shard_of
from engramdb_workers.tenant import shard_name
from test_api import SAM, SAM_TOKEN, TOKENS, call

TENANT = json.dumps(SAM[:1])


def sharded(make_worker: Any, count: int, **variables: str) -> Any:
    return make_worker(None, TOKENS, objects=True, SHARDS=str(count), **variables)


async def held(worker: Any) -> dict[int, set[str]]:
    """The ids each object of Sam's tenant holds, read from the object's own store."""
    out: dict[int, set[str]] = {}
    for n in range(4):
        instance = worker.objects.instances.get(shard_name(TENANT, n))
        if instance is not None:
            view = instance.tenant.memory.bind(tuple(SAM))
            out[n] = {record.id for record in await view.list(limit=1000)}
    return out


async def remember_batch(worker: Any, texts: list[str]) -> list[dict[str, Any]]:
    body = {"memories": [{"text": text} for text in texts]}
    status, answer, _ = await call(worker, "POST", "/v1/memories/batch", token=SAM_TOKEN, body=body)
    assert status == 201, answer
    return list(answer["memories"])


async def test_each_memory_lives_in_the_object_its_id_names(make_worker: Any) -> None:
    worker = sharded(make_worker, 4)
    records = await remember_batch(worker, [f"Sam's note number {n}" for n in range(40)])
    status, one, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "one more"}
    )
    assert status == 201
    ids = [record["id"] for record in records] + [one["memory"]["id"]]
    assert [record["text"] for record in records] == [f"Sam's note number {n}" for n in range(40)]
    holders = await held(worker)
    assert set(holders) == {0, 1, 2, 3}  # every shard got some
    assert all(holders[n] for n in range(4))
    assert sorted(i for ids_of in holders.values() for i in ids_of) == sorted(ids)
    for n, ids_of in holders.items():
        assert {shard_of(i, 4) for i in ids_of} <= {n}
    for memory_id in ids:  # every operation by id finds it
        status, got, _ = await call(worker, "GET", f"/v1/memories/{memory_id}", token=SAM_TOKEN)
        assert (status, got["memory"]["id"]) == (200, memory_id)


async def test_a_text_is_stored_once_across_shards(make_worker: Any) -> None:
    """Placement by scope and text: the same text reaches the same object, whose
    deduplication answers the memory it holds, one call or a batch."""
    worker = sharded(make_worker, 4)
    texts = [f"Sam likes colour {n}" for n in range(12)]
    first = await remember_batch(worker, texts)
    again = await remember_batch(worker, list(reversed(texts)))
    assert [r["id"] for r in again] == [r["id"] for r in reversed(first)]
    for record in first[:3]:
        status, one, _ = await call(
            worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": record["text"]}
        )
        assert (status, one["memory"]["id"]) == (201, record["id"])
    _, status_body, _ = await call(worker, "GET", "/v1/status", token=SAM_TOKEN)
    assert status_body["items"] == 12
    _, counted, _ = await call(worker, "GET", "/v1/count", token=SAM_TOKEN)
    assert counted == {"count": 12}  # every object's count, summed (Route(summed="count"))
    copies = {"memories": [{"text": texts[0]}, {"text": texts[1]}], "dedupe": False}
    status, stored, _ = await call(
        worker, "POST", "/v1/memories/batch", token=SAM_TOKEN, body=copies
    )
    assert status == 201 and {r["id"] for r in stored["memories"]}.isdisjoint(
        r["id"] for r in first
    )  # dedupe=false reaches the objects that store them: copies, not the held ones


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"text": "fine", "importance": 2}, "memories[5]: 'importance' is 2"),
        ({"text": ""}, "memories[5]"),
        ({"text": "fine", "colour": "red"}, "memories[5]"),
        ({"text": "fine", "metadata": "not an object"}, "memories[5]: 'metadata'"),
    ],
)
async def test_a_bad_item_stores_nothing_in_any_shard(
    make_worker: Any, bad: dict[str, Any], says: str
) -> None:
    worker = sharded(make_worker, 4)
    items: list[dict[str, Any]] = [{"text": f"good text {n}"} for n in range(10)]
    items[5] = bad
    status, answer, _ = await call(
        worker, "POST", "/v1/memories/batch", token=SAM_TOKEN, body={"memories": items}
    )
    assert status == 400 and answer["error"]["code"] == "invalid_request", answer
    assert says in answer["error"]["message"], answer
    _, status_body, _ = await call(worker, "GET", "/v1/status", token=SAM_TOKEN)
    assert status_body["items"] == 0
    assert not any((await held(worker)).values())


async def test_pages_scopes_and_counts_add_up_over_the_shards(make_worker: Any) -> None:
    """``list`` pages newest first across shards (``next_before``, a forgotten memory's
    id lists nothing, as in one object), ``/v1/scopes`` sums each scope's count,
    ``status`` counts every shard's memories and ``DELETE /v1/scope`` forgets in all."""
    one, four = sharded(make_worker, 1), sharded(make_worker, 4)
    texts = [f"entry {n:02d} of the diary" for n in range(25)]
    for worker in (one, four):
        for start in range(0, 25, 5):  # five calls: five creation times
            await remember_batch(worker, texts[start : start + 5])

    async def pages(worker: Any, limit: int) -> list[str]:
        seen: list[str] = []
        path = f"/v1/memories?limit={limit}"
        while True:
            status, page, _ = await call(worker, "GET", path, token=SAM_TOKEN)
            assert status == 200, page
            seen += [record["text"] for record in page["memories"]]
            if page["next_before"] is None:
                return seen
            path = f"/v1/memories?limit={limit}&before={page['next_before']}"

    alone = await pages(one, 7)
    calls = [texts[start : start + 5] for start in range(20, -1, -5)]  # newest call first
    assert alone == [text for call_texts in calls for text in reversed(call_texts)]
    spread = await pages(four, 7)
    assert spread == await pages(four, 25) == await pages(four, 1)
    # newest first by call; within one call each shard's items have their own times and
    # ids, so their order among themselves is not the batch's (docs/workers.md)
    assert [set(spread[n : n + 5]) for n in range(0, 25, 5)] == [set(c) for c in calls]
    _, first, _ = await call(four, "GET", "/v1/memories?limit=3", token=SAM_TOKEN)
    gone = first["memories"][-1]["id"]
    assert (await call(four, "DELETE", f"/v1/memories/{gone}", token=SAM_TOKEN))[0] == 200
    status, after, _ = await call(four, "GET", f"/v1/memories?before={gone}", token=SAM_TOKEN)
    assert (status, after) == (200, {"memories": [], "next_before": None})

    _, scopes, _ = await call(four, "GET", "/v1/scopes", token=SAM_TOKEN)
    assert scopes == {"scopes": [{"scope": SAM, "count": 24}], "next_cursor": None}
    _, status_body, _ = await call(four, "GET", "/v1/status", token=SAM_TOKEN)
    assert (status_body["items"], status_body["scope"]) == (24, SAM)
    status, deleted, _ = await call(four, "DELETE", "/v1/scope", token=SAM_TOKEN)
    assert (status, deleted) == (200, {"deleted": 24, "scope": SAM})
    assert not any((await held(four)).values())


async def test_a_recall_s_selection_completes_once_in_every_shard(make_worker: Any) -> None:
    worker = sharded(make_worker, 4, EMBEDDING_MODEL="static")
    await remember_batch(worker, [f"Sam drinks tea number {n}" for n in range(12)])
    status, hits, _ = await call(
        worker, "POST", "/v1/recall", token=SAM_TOKEN, body={"query": "tea"}
    )
    assert status == 200 and len(hits["hits"]) == 10
    parts = hits["selection_id"].split(".")
    assert len(parts) == 4 and all(parts)
    body = {"selection_id": hits["selection_id"], "score": 1.0}
    answers = [await call(worker, "POST", "/v1/complete", token=SAM_TOKEN, body=body) for _ in "ab"]
    assert [(s, a["completed"]) for s, a, _ in answers] == [(200, True), (200, False)]
    assert answers[0][1]["selection_id"] == hits["selection_id"]
    for foreign in (parts[0], "X.Y"):  # not a recall over these four shards
        body = {"selection_id": foreign, "score": 1.0}
        status, answer, _ = await call(worker, "POST", "/v1/complete", token=SAM_TOKEN, body=body)
        assert (status, answer["completed"]) == (200, False)


@pytest.mark.parametrize("count", [2, 4])
async def test_a_recall_over_shards_answers_as_one_object(make_worker: Any, count: int) -> None:
    """The same memories in one object and over ``count``: vector recall ranks alike
    (a cosine does not depend on the other memories); lexical and hybrid recall answer
    as many hits with the same statuses (how close their rankings stay, each shard's BM25
    statistics being its own part of the scope's, test_locomo_shards.py measures)."""
    texts = [
        f"{who} {does} {what} on {day}"
        for who in ("Sam", "Alex", "Kim")
        for does, what in (
            ("drinks", "green tea"),
            ("rides", "a red bike"),
            ("reads", "a book about rivers"),
            ("plays", "the piano"),
            ("visits", "Paris in the rain"),
        )
        for day in ("Monday", "Friday")
    ]
    one = sharded(make_worker, 1, EMBEDDING_MODEL="static")
    many = sharded(make_worker, count, EMBEDDING_MODEL="static")
    for worker in (one, many):
        await remember_batch(worker, texts)
    for query in ("tea on Monday", "who plays music", "Alex and the bike", "rainy city", "rivers"):
        for mode in ("vector", "lexical", "hybrid"):
            body = {"query": query, "mode": mode, "top_k": 5}
            answers = [
                (await call(worker, "POST", "/v1/recall", token=SAM_TOKEN, body=body))[1]
                for worker in (one, many)
            ]
            ranked = [[(h["memory"]["text"], h["score"]) for h in a["hits"]] for a in answers]
            if mode == "vector":
                assert ranked[1] == ranked[0], query
            assert (
                answers[1]["status"]
                == answers[0]["status"]
                == ("lexical_only" if mode == "lexical" else "used")
            )
            assert len(ranked[1]) == len(ranked[0])


DEV = Path(os.environ.get("ENGRAMDB_LOCOMO", "/mnt/shared/data/locomo/locomo_dev.json"))
TOLERANCE = 0.025  # recall@10 and MRR (docs/workers.md): four shards of a ~420-turn
# conversation hold ~105 memories each, whose BM25 statistics are a quarter's; measured
# 2026-12-06: lexical MRR 0.442 in one object, 0.422 over four, the largest drop


@pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo's development split is absent")
async def test_a_locomo_conversation_ranks_alike_over_1_2_and_4_objects(make_worker: Any) -> None:
    """LoCoMo's first development conversation through the HTTP API (the static table,
    each turn one memory with its date) in a tenant of 1, 2 and 4 objects: every
    question asked in every mode. Vector recall over shards ranks as one object;
    lexical and hybrid recall@10 and MRR stay within the documented tolerance."""
    (conversation,) = load(DEV)[:1]
    turns = [
        {"text": memory_text(turn, date_in_text=True), "metadata": {"dia_id": turn.dia_id}}
        for turn in conversation.turns
    ]
    asked = [q for q in conversation.questions if q.evidence and q.category != 5]
    gold = [q.evidence for q in asked]
    found: dict[tuple[int, str], tuple[list[list[str]], dict[str, float]]] = {}
    for count in (1, 2, 4):
        worker = sharded(make_worker, count, EMBEDDING_MODEL="static")
        for start in range(0, len(turns), 100):
            body = {"memories": turns[start : start + 100]}
            status, _, _ = await call(
                worker, "POST", "/v1/memories/batch", token=SAM_TOKEN, body=body
            )
            assert status == 201
        for mode in ("vector", "lexical", "hybrid"):
            ranked = []
            for question in asked:
                body = {"query": question.text, "mode": mode, "top_k": 10}
                status, hits, _ = await call(
                    worker, "POST", "/v1/recall", token=SAM_TOKEN, body=body
                )
                assert status == 200, hits
                ranked.append([hit["memory"]["metadata"]["dia_id"] for hit in hits["hits"]])
            found[count, mode] = ranked, metrics(ranked, gold)
    for (count, mode), (_, scores) in sorted(found.items()):  # the figures, for the docs
        print(f"{mode} over {count}: recall@10 {scores['recall@10']}, MRR {scores['mrr']}")
    for mode in ("vector", "lexical", "hybrid"):
        ranked, one = found[1, mode]
        assert one["recall@10"] > 0.5, (mode, one)
        for count in (2, 4):
            other, scores = found[count, mode]
            if mode == "vector":
                assert other == ranked, f"vector over {count} objects"
            for metric in ("recall@10", "mrr"):
                assert scores[metric] >= one[metric] - TOLERANCE, (mode, count, metric, scores, one)


def redeploy(worker: Any, shards: str) -> None:
    """The same objects and Worker, with ``SHARDS=shards``: the env changed, the
    Worker's cached bindings dropped, every object restarted."""
    worker.objects.env.SHARDS = shards
    vars(worker.env).pop("SHARDS", None)  # the SDK's env wrapper caches what it read
    for name in list(worker.objects.instances):
        worker.objects.restart(name)


async def test_a_tenant_s_shard_count_cannot_change_under_its_memories(make_worker: Any) -> None:
    """Memories live where their ids name among SHARDS objects: a deployment that changes
    SHARDS afterwards gets a 500 (the log names the count to set back) and loses
    nothing; an object written before SHARDS existed counts as one."""
    worker = make_worker(None, TOKENS, objects=True, EMBEDDING_MODEL="hash")  # no SHARDS
    status, kept, _ = await call(
        worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": "kept"}
    )
    assert status == 201
    path = f"/v1/memories/{kept['memory']['id']}"
    redeploy(worker, "4")
    for method, where in (("GET", "/v1/status"), ("GET", path)):
        status, answer, _ = await call(worker, method, where, token=SAM_TOKEN)
        assert (status, answer["error"]["code"]) == (500, "server_misconfigured"), where
    redeploy(worker, "1")
    status, got, _ = await call(worker, "GET", path, token=SAM_TOKEN)
    assert (status, got["memory"]["text"]) == (200, "kept")
    status, body, _ = await call(worker, "GET", "/v1/status", token=SAM_TOKEN)
    assert (status, body["items"]) == (200, 1)


async def finish_moves(worker: Any, count: int) -> int:
    """Run every object's alarm until no move is left; how many pages moved."""
    from engramdb_workers import moving

    pages = 0
    for n in range(count):
        instance = worker.objects.open(shard_name(TENANT, n))
        while await moving.load(instance.tenant._storage) is not None:
            await instance.tenant.maintain()
            pages += 1
    return pages


async def snapshot(worker: Any, ids: list[str]) -> dict[str, tuple[str, int]]:
    """Every id's text and revision, as the HTTP API answers them."""
    out = {}
    for memory_id in ids:
        status, got, _ = await call(worker, "GET", f"/v1/memories/{memory_id}", token=SAM_TOKEN)
        assert status == 200, (memory_id, got)
        out[memory_id] = (got["memory"]["text"], got["memory"]["revision"])
    return out


async def test_a_tenant_grows_by_doubling_and_keeps_every_memory(make_worker: Any) -> None:
    """SHARDS 1 -> 2 -> 4: each old object moves out, page by page on its alarm, the
    memories whose ids name a new shard (records, revisions and vectors: nothing is
    embedded again). Every memory answers by id throughout, with its history; after
    the move each lives in the object its id names, and the same text remembered again
    answers the memory it has (its id names its text's place at every count)."""
    worker = sharded(make_worker, 1, EMBEDDING_MODEL="hash")
    texts = [f"Sam's fact number {n}" for n in range(300)]
    records = []
    for start in range(0, 300, 100):
        records += await remember_batch(worker, texts[start : start + 100])
    ids = [record["id"] for record in records]
    edited = ids[:5]
    for memory_id in edited:
        body = {"text": f"edited {memory_id}"}
        status, _, _ = await call(
            worker, "PATCH", f"/v1/memories/{memory_id}", token=SAM_TOKEN, body=body
        )
        assert status == 200
    before = await snapshot(worker, ids)
    _, query_before, _ = await call(
        worker, "POST", "/v1/recall", token=SAM_TOKEN, body={"query": "fact number 7"}
    )
    for count in (2, 4):
        redeploy(worker, str(count))
        assert await snapshot(worker, ids) == before  # the move not run yet: the old shard
        pages = await finish_moves(worker, count // 2)
        assert pages >= 2
        holders = await held(worker)
        assert sorted(i for found in holders.values() for i in found) == sorted(ids)
        for n, found in holders.items():
            assert {shard_of(i, count) for i in found} <= {n}, (count, n)
        assert await snapshot(worker, ids) == before
        for memory_id in edited:
            status, history, _ = await call(
                worker, "GET", f"/v1/memories/{memory_id}/history", token=SAM_TOKEN
            )
            assert [r["text"] for r in history["revisions"]] == [texts[ids.index(memory_id)]]
        _, status_body, _ = await call(worker, "GET", "/v1/status", token=SAM_TOKEN)
        assert status_body["items"] == 300
        again = await remember_batch(worker, texts[5:105])  # stored once, across shards
        assert [r["id"] for r in again] == ids[5:105]
        _, query, _ = await call(
            worker, "POST", "/v1/recall", token=SAM_TOKEN, body={"query": "fact number 7"}
        )
        assert query["hits"][0]["memory"]["id"] == query_before["hits"][0]["memory"]["id"]


async def test_a_move_killed_anywhere_resumes_to_the_same_memories(make_worker: Any) -> None:
    """A step killed after the new object restored a page but before the old one
    deleted it, or after the delete but before the cursor was saved, resumes on the next
    alarm: the page is skipped where it is already, nothing is lost or doubled. A write
    to a memory whose page is in flight gets a 503 to retry, and lands after."""
    from engramdb_workers import moving

    worker = sharded(make_worker, 1, EMBEDDING_MODEL="hash")
    records = []
    for start in range(0, 500, 100):
        records += await remember_batch(worker, [f"note {n}" for n in range(start, start + 100)])
    ids = [record["id"] for record in records]
    before = await snapshot(worker, ids)
    redeploy(worker, "2")
    assert (await call(worker, "GET", "/v1/status", token=SAM_TOKEN))[0] == 200  # confirms
    source = worker.objects.open(shard_name(TENANT, 0)).tenant
    movers = [i for i in ids if shard_of(i, 2) == 1]
    refused: list[int] = []

    class Killed(Exception):
        pass

    async def killed_after_restore(tenant: str, shard: int, sent: str, body: bytes) -> Any:
        status, _, _ = await call(
            worker, "PATCH", f"/v1/memories/{movers[0]}", token=SAM_TOKEN, body={"text": "x"}
        )
        refused.append(status)  # the page is in flight: its memories wait
        await source._send(tenant, shard, sent, body)
        raise Killed

    class KilledBeforeCursor:
        def __init__(self, storage: Any) -> None:
            self.storage = storage

        async def get(self, key: str) -> Any:
            return await self.storage.get(key)

        async def put(self, key: str, value: Any) -> None:
            raise Killed

    move = await moving.load(source._storage)
    source.in_flight = True
    with pytest.raises(Killed):
        await moving.step(source.store, source._storage, killed_after_restore, move)
    source.in_flight = False
    assert refused == [503]
    move = await moving.load(source._storage)
    with pytest.raises(Killed):
        await moving.step(source.store, KilledBeforeCursor(source._storage), source._send, move)
    assert await finish_moves(worker, 1) >= 1
    holders = await held(worker)
    assert sorted(i for found in holders.values() for i in found) == sorted(ids)
    assert all(shard_of(i, 2) == n for n, found in holders.items() for i in found)
    assert await snapshot(worker, ids) == before
    status, changed, _ = await call(
        worker, "PATCH", f"/v1/memories/{movers[0]}", token=SAM_TOKEN, body={"text": "x"}
    )
    assert (status, changed["memory"]["revision"]) == (200, 2)  # the retry lands


class LaterAlarm:
    """An object's storage whose alarm is set for an hour from now (maintenance after a
    write), with every alarm set recorded; the rest is the object's own storage."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage
        self.set: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.storage, name)

    async def getAlarm(self) -> Any:
        return time.time() * 1000 + 3_600_000

    async def setAlarm(self, when: float) -> None:
        self.set.append(when)


async def test_a_move_starts_on_the_next_alarm_not_the_maintenance_one(make_worker: Any) -> None:
    """The old object that learns of a doubling sets its alarm for now, even when one is
    set for later (a maintenance pass ten minutes after a write), and whatever MAINTAIN
    says: the move does not wait for maintenance."""
    worker = sharded(make_worker, 1, EMBEDDING_MODEL="hash", MAINTAIN="off")
    await remember_batch(worker, [f"fact {n}" for n in range(10)])
    redeploy(worker, "2")
    source = worker.objects.open(shard_name(TENANT, 0)).tenant
    source._storage = LaterAlarm(source._storage)
    started = time.time() * 1000
    assert (await call(worker, "GET", "/v1/status", token=SAM_TOKEN))[0] == 200
    assert len(source._storage.set) == 1
    assert started <= source._storage.set[0] <= time.time() * 1000


async def test_a_tenant_doubles_again_only_once_its_move_has_ended(make_worker: Any) -> None:
    """SHARDS doubled twice before the first move ended would leave memories where no
    id leads: the second doubling is a 500 (its log says to wait) until the move ends,
    and every memory answers meanwhile."""
    worker = sharded(make_worker, 1, EMBEDDING_MODEL="hash")
    records = await remember_batch(worker, [f"fact {n}" for n in range(60)])
    ids = [record["id"] for record in records]
    redeploy(worker, "2")
    assert (await call(worker, "GET", "/v1/status", token=SAM_TOKEN))[0] == 200
    redeploy(worker, "4")
    status, answer, _ = await call(worker, "GET", "/v1/status", token=SAM_TOKEN)
    assert (status, answer["error"]["code"]) == (500, "server_misconfigured")
    redeploy(worker, "2")
    assert len(await snapshot(worker, ids)) == 60
    await finish_moves(worker, 1)
    redeploy(worker, "4")
    assert (await call(worker, "GET", "/v1/status", token=SAM_TOKEN))[0] == 200
    await finish_moves(worker, 2)
    assert len(await snapshot(worker, ids)) == 60
    holders = await held(worker)
    assert all(shard_of(i, 4) == n for n, found in holders.items() for i in found)


async def test_documents_and_conversations_are_refused_over_several_objects(
    make_worker: Any,
) -> None:
    """What a tenant over one object only serves is a 400 that says why, and stores
    nothing: a document (its chunks are replaced where they are), a conversation and a
    recall with context (a turn's neighbours live in the objects of their own texts)."""
    worker = sharded(make_worker, 4)
    turns = [{"speaker": "Sam", "text": "hello"}, {"speaker": "Kim", "text": "hi Sam"}]
    asked = [
        ("/v1/documents", {"text": "# Oslo\n\nSam flies on Monday.", "source": "oslo.md"}),
        ("/v1/conversations", {"turns": turns, "conversation": "c1"}),
        ("/v1/recall", {"query": "hello", "context": 1}),
    ]
    for path, body in asked:
        status, answer, _ = await call(worker, "POST", path, token=SAM_TOKEN, body=body)
        assert status == 400, answer
        assert "several objects (SHARDS > 1)" in answer["error"]["message"]
    assert not any((await held(worker)).values())
    status, hits, _ = await call(
        worker, "POST", "/v1/recall", token=SAM_TOKEN, body={"query": "hello", "context": 0}
    )
    assert (status, hits["hits"]) == (200, [])
