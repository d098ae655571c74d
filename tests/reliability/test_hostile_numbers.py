"""Hostile numbers and query-string JSON through the HTTP API: a 4xx, never a 500.

Every numeric field of remember, remember-many, recall, update, feedback and complete,
and the ``limit`` and ``cursor`` query parameters, get values no field accepts: integers
of 309 to 6,000 digits (past what a float holds, and past what ``int()`` reads), NaN and
Infinity literals, ``1e999``, floats beyond a million, strings with astral and separator
characters, booleans, objects, and arrays nested up to 5,000 deep. Each request must be
answered with a 4xx and a JSON error naming a code and a message, and the store must be
exactly as it was (no memory added or changed, no exposure counted, no selection used).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import AsyncMemory, HashEmbedder, InMemoryStore
from engramdb.http_api import Reply, handle, parse_tokens

SAM = ("acme", "user", "sam")
GRANTS = parse_tokens(json.dumps({"sam": list(SAM)}))


def _sign(digits: str) -> st.SearchStrategy[str]:
    return st.sampled_from(["", "-"]).map(lambda sign: sign + digits)


# Raw JSON tokens, none of them a valid value of any numeric field (null is left out:
# it clears a feedback value).
hostile_tokens = st.one_of(
    st.integers(309, 6000).flatmap(lambda n: _sign("9" * n)),  # past float; past int()
    st.integers(20, 308).flatmap(lambda n: _sign("1" + "0" * n)),  # beyond every range
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e309", "-1e400"]),
    st.floats(allow_nan=False, allow_infinity=False)
    .filter(lambda x: abs(x) > 1e6)
    .map(repr)
    .map(lambda text: text.replace("e+", "e")),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20).map(json.dumps),
    st.sampled_from(
        [
            json.dumps("\u2028\u2029\x85\U0001f600"),
            json.dumps("1e999"),
            json.dumps("0.5"),
            "true",
            "false",
            "{}",
            '{"n": 0.5}',
            "[0.5]",
        ]
    ),
    st.integers(1, 5000).map(lambda depth: "[" * depth + "]" * depth),
)
# Query-string values for ?limit= and ?cursor=: the same, plus bare digit runs.
hostile_params = st.one_of(
    hostile_tokens,
    st.integers(10, 6000).map(lambda n: "9" * n),
    st.integers(1, 5000).map(lambda depth: "[" * depth),
    st.integers(1, 3000).map(lambda depth: '["a", ' * depth),
)

BODY_FIELDS = [
    ("POST", "/v1/memories", '{{"text": "x", "importance": {}}}'),
    ("POST", "/v1/memories/batch", '{{"memories": [{{"text": "x", "importance": {}}}]}}'),
    ("POST", "/v1/recall", '{{"query": "jazz", "top_k": {}}}'),
    ("POST", "/v1/recall", '{{"query": "jazz", "min_similarity": {}}}'),
    ("POST", "/v1/feedback", '{{"memory_id": "{id}", "value": {}}}'),
    ("POST", "/v1/complete", '{{"selection_id": "{selection}", "score": {}}}'),
    ("PATCH", "/v1/memories/{id}", '{{"importance": {}}}'),
    ("PATCH", "/v1/memories/{id}", '{{"text": "changed", "expected_revision": {}}}'),
]
QUERY_PARAMS = [
    "/v1/scopes?cursor={}",
    "/v1/scopes?limit={}",
    "/v1/memories?limit={}",
    "/v1/memories/{id}/history?limit={}",
]


async def _call(memory: AsyncMemory, method: str, url: str, body: str = "") -> Reply:
    async def read_body() -> str:
        return body

    return await handle(
        method,
        "https://memory.example" + url,
        {"authorization": "Bearer sam"},
        read_body,
        grants=lambda: GRANTS,
        memory=lambda grant: memory,
    )


async def _state(memory: AsyncMemory, item_id: str) -> Any:
    """Everything a refused request could have changed: every scope's count and every
    record with its utility (exposures, evaluations, manual value)."""
    scopes = await memory.list_scopes()
    return scopes, await memory.get(item_id), await memory.list(SAM, limit=100)


def _assert_error(reply: Reply, what: str) -> None:
    assert 400 <= reply.status < 500, (what, reply.status, reply.body, reply.log)
    error = reply.body["error"]
    assert isinstance(error["code"], str) and error["code"], what
    assert isinstance(error["message"], str) and 0 < len(error["message"]) < 400, what
    json.dumps(reply.body, allow_nan=False)  # what the host writes is JSON


def test_hostile_numbers_and_query_json_are_4xx_and_write_nothing() -> None:
    """Every numeric body field and JSON/number query parameter, given any hostile
    value: a 4xx with a JSON error, never a 5xx, and the store exactly as it was."""
    memory = AsyncMemory(InMemoryStore(), HashEmbedder())
    kept = asyncio.run(memory.remember("Sam likes jazz", SAM))
    recall = asyncio.run(_call(memory, "POST", "/v1/recall", '{"query": "jazz"}'))
    selection = recall.body["selection_id"]
    names = {"id": kept.id, "selection": selection}
    before = asyncio.run(_state(memory, kept.id))

    @settings(
        max_examples=100,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        field=st.sampled_from(BODY_FIELDS),
        param=st.sampled_from(QUERY_PARAMS),
        token=hostile_tokens,
        raw=hostile_params,
    )
    def attempt(field: tuple[str, str, str], param: str, token: str, raw: str) -> None:
        method, path, template = field
        body = template.replace("{}", "\0").replace("{id}", kept.id)
        body = body.replace("{selection}", selection).replace("{{", "{").replace("}}", "}")
        body = body.replace("\0", token)
        url = path.format(**names)
        _assert_error(asyncio.run(_call(memory, method, url, body)), f"{method} {url} {body}")
        query = param.replace("{id}", kept.id).replace("{}", quote(raw, safe=""))
        _assert_error(asyncio.run(_call(memory, "GET", query)), f"GET {query[:80]}")
        assert asyncio.run(_state(memory, kept.id)) == before

    attempt()
    # the selection was never used: its one score is still to give
    done = asyncio.run(
        _call(memory, "POST", "/v1/complete", json.dumps({"selection_id": selection, "score": 1}))
    )
    assert done.status == 200 and done.body["completed"] is True
