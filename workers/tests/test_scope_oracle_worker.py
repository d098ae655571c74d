"""No scope oracle on the Worker: what Alex's token sees — its Workers AI calls, hits,
scores and evidence — is the same whether or not Sam (another scope of the same tenant,
``TENANT_PARTS=1``: both are ``acme``) stored the same texts first, in D1 mode and with
one Durable Object per tenant (docs/concepts.md#embedding-spaces).

Each run is a fresh database (or object namespace) and a fresh isolate; the AI binding
stub counts the texts it embeds."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from conftest import AiStub, new_d1
from engramdb_workers import worker as worker_module
from test_api import ALEX_TOKEN, SAM_TOKEN, TOKENS, call

SECRETS = ["the vault PIN is 4921", "Alex sees Dr Ito on Friday", "the spare key is under the mat"]
OTHERS = ["Sam plays the cello", "Sam is vegetarian", "Sam lives in Lisbon"]

ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


def embedded(stub: AiStub) -> int:
    return sum(len(texts) for _, texts in stub.calls)


async def alex_session(
    make_worker: Any, stub: AiStub, mode: str, sam_texts: list[str]
) -> tuple[int, list[Any]]:
    """Sam stores ``sam_texts``; then Alex's sequence. Answers how many texts Alex's
    requests had embedded and everything they answered."""
    worker_module.reset_isolate()
    db = await new_d1() if mode == "d1" else None
    worker = make_worker(db, TOKENS, objects=mode == "objects")
    for text in sam_texts:
        answer = await call(worker, "POST", "/v1/memories", token=SAM_TOKEN, body={"text": text})
        assert answer[0] == 201
    before = embedded(stub)
    seen: list[Any] = []

    async def alex(method: str, path: str, body: object = None) -> Any:
        status, answer, _ = await call(worker, method, path, token=ALEX_TOKEN, body=body)
        seen.append((method, path, status, answer))
        return answer

    first = (await alex("POST", "/v1/memories", {"text": SECRETS[0]}))["memory"]
    batch = [{"text": SECRETS[1]}, {"text": "Alex likes green tea"}]
    await alex("POST", "/v1/memories/batch", {"memories": batch})
    await alex("PATCH", f"/v1/memories/{first['id']}", {"text": SECRETS[2]})
    await alex("POST", "/v1/memories", {"text": SECRETS[0]})
    for query in [*SECRETS, "green tea", "an unrelated query"]:
        for recall_mode in ("hybrid", "vector", "lexical"):
            await alex("POST", "/v1/recall", {"query": query, "mode": recall_mode})
    await alex("GET", "/v1/status")
    return embedded(stub) - before, seen


def normalized(seen: list[Any]) -> str:
    """The answers with ids and times named by their first appearance (an
    ``embedded_at`` of Sam's earlier write would be a name of its own) and the
    selection ids dropped."""
    text = json.dumps(seen, sort_keys=True)
    text = re.sub(r'"selection_id": "[^"]*"', '"selection_id": ""', text)
    names: dict[str, str] = {}
    for pattern, prefix in ((ID, "id"), (TIME, "t")):
        for found in pattern.findall(text):
            names.setdefault(found, f"{prefix}{len(names)}")
    return re.sub(f"{ID.pattern}|{TIME.pattern}", lambda m: names[m[0]], text)


@pytest.mark.parametrize("mode", ["d1", "objects"])
async def test_what_a_scope_sees_from_the_worker_does_not_depend_on_another_scope_holding_its_texts(
    mode: str, make_worker: Any, ai_stub: AiStub
) -> None:
    calls_same, seen_same = await alex_session(make_worker, ai_stub, mode, SECRETS)
    calls_other, seen_other = await alex_session(make_worker, ai_stub, mode, OTHERS)
    assert calls_same == calls_other
    assert normalized(seen_same) == normalized(seen_other)
    # a real comparison: Alex's requests embedded its texts and found them by vector
    assert calls_same >= len(SECRETS) + 1
    recalls = [answer for _, path, _, answer in seen_same if path == "/v1/recall"]
    best = recalls[1]["hits"][0]  # the vector recall of Alex's first text
    assert best["memory"]["text"] == SECRETS[0] and best["similarity"] > 0.999
