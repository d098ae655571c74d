"""The HTTP API acts only through the grant's bound view, over a real SQLite file and the
real ASGI app (``engramdb.server.App``): a ``PATCH`` raced with a scope move changes
nothing of another scope, and a batch goes through the view's label rules, labeler and
capacity."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engramdb import AsyncMemory, HashEmbedder, LabelRules, Policy
from engramdb.http_api import parse_tokens
from engramdb.server import App
from engramdb.sqlite import SqliteStore
from engramdb.store import DeleteItem, GetItems, Op, PatchItem, PutItem

SAM = ("acme", "user", "sam")
KIM = ("acme", "user", "kim")
GRANTS = parse_tokens(json.dumps({"sam": list(SAM)}))


def request(app: App, method: str, path: str, body: object = None) -> tuple[int, Any]:
    """One request through the ASGI app, as uvicorn sends it; (status, JSON body)."""
    sent: list[dict[str, Any]] = []
    data = b"" if body is None else json.dumps(body).encode()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": data, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"authorization", b"Bearer sam"), (b"content-type", b"application/json")],
    }
    asyncio.run(app(scope, receive, send))
    start, reply = sent
    return start["status"], json.loads(reply["body"])


class MovesBeforePatch:
    """A SQLite file store that, just before it runs a batch holding a ``PatchItem`` of
    ``item``, lets another writer move ``item`` to ``to`` (forget it and store it again
    with its id in the other scope, in one batch): the moment between a check and its
    write, where a check made in another batch would be stale."""

    def __init__(self, path: Path, item: str, to: Sequence[str]) -> None:
        self.store = SqliteStore(str(path))
        self.capabilities = self.store.capabilities
        self.item, self.to = item, tuple(to)
        self.moved = False

    async def abatch(self, ops: Sequence[Op]) -> list[Any]:
        if not self.moved and any(isinstance(op, PatchItem) and op.id == self.item for op in ops):
            self.moved = True
            (found,) = (await self.store.abatch([_get(self.item)]))[0]
            moved = replace(found.record, scope=self.to)
            await self.store.abatch([DeleteItem(self.item), PutItem(moved, moved.updated_at)])
        return await self.store.abatch(ops)

    async def aclose(self) -> None:
        self.store.close()


def _get(item: str) -> Op:
    return GetItems((item,), datetime.now(UTC))


def test_a_patch_raced_with_a_move_out_of_the_scope_is_404_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """Sam's memory is moved to Kim's scope by another writer between the request's
    arrival and its write: the PATCH answers 404 and Kim's memory keeps its text and
    revision, because the store checks the scope inside the write batch."""
    db = tmp_path / "memory.sqlite3"
    setup = AsyncMemory(SqliteStore(str(db)), HashEmbedder())
    mine = asyncio.run(setup.remember("Sam's door code is 4711", SAM))
    asyncio.run(setup.aclose())
    store = MovesBeforePatch(db, mine.id, KIM)
    memory = AsyncMemory(store, HashEmbedder())
    app = App(GRANTS, lambda grant: memory)

    assert request(app, "GET", f"/v1/memories/{mine.id}")[0] == 200  # Sam's, before
    status, body = request(app, "PATCH", f"/v1/memories/{mine.id}", {"text": "stolen"})
    assert store.moved
    assert (status, body["error"]["code"]) == (404, "not_found")
    after = asyncio.run(memory.get(mine.id))
    assert after is not None
    assert (after.scope, after.text, after.revision) == (KIM, mine.text, 1)
    assert request(app, "GET", f"/v1/memories/{mine.id}")[0] == 404  # Kim's now
    asyncio.run(memory.aclose())


def test_a_patch_of_another_scope_id_is_404_and_changes_nothing(tmp_path: Path) -> None:
    """Without a race too: Kim's id patched with Sam's token is not found, unchanged."""
    memory = AsyncMemory(SqliteStore(str(tmp_path / "memory.sqlite3")), HashEmbedder())
    kims = asyncio.run(memory.remember("Kim's locker is 12", KIM))
    app = App(GRANTS, lambda grant: memory)
    status, body = request(app, "PATCH", f"/v1/memories/{kims.id}", {"importance": 1.0})
    assert (status, body["error"]["code"]) == (404, "not_found")
    assert asyncio.run(memory.get(kims.id)) == kims
    asyncio.run(memory.aclose())


def test_a_batch_goes_through_the_views_label_rules_labeler_and_capacity(
    tmp_path: Path,
) -> None:
    """``POST /v1/memories/batch`` stores through the grant's bound view: labels outside
    the view's rules are refused (400, nothing stored, no labeler call), the labeler
    labels each memory, and the scope's capacity keeps the newest ``max_items``."""
    seen: list[str] = []

    def labeler(text: str) -> dict[str, list[str]]:
        seen.append(text)
        return {"topic": ["food" if "lunch" in text else "other"]}

    policy = Policy(max_items=2, labeler=labeler, label_rules=LabelRules(allowed={"topic": []}))

    class HostMemory(AsyncMemory):
        """A host whose views carry its policy (the API binds the grant's scope)."""

        def bind(self, scope: Any, **options: Any) -> Any:
            return super().bind(scope, **options, policy=policy)

    memory = HostMemory(SqliteStore(str(tmp_path / "memory.sqlite3")), HashEmbedder())
    app = App(GRANTS, lambda grant: memory)

    refused = {"memories": [{"text": "fine"}, {"text": "bad", "labels": {"secret": ["x"]}}]}
    status, body = request(app, "POST", "/v1/memories/batch", refused)
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    assert "'secret' is not allowed" in body["error"]["message"]
    assert seen == [] and asyncio.run(memory.list(SAM)) == []

    batch = {"memories": [{"text": f"note {n}"} for n in range(3)] + [{"text": "lunch at 1"}]}
    status, body = request(app, "POST", "/v1/memories/batch", batch)
    assert status == 201
    labels = [m["labels"] for m in body["memories"]]
    assert labels == [{"topic": ["other"]}] * 3 + [{"topic": ["food"]}]
    assert seen == ["note 0", "note 1", "note 2", "lunch at 1"]
    kept = asyncio.run(memory.list(SAM))
    assert [r.text for r in kept] == ["lunch at 1", "note 2"]  # capacity 2: the newest
    asyncio.run(memory.aclose())
