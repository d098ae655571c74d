"""engramdb.http_api without a host: the pure request -> reply function (also in Pyodide)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from engramdb import AsyncMemory, HashEmbedder, InMemoryStore
from engramdb.http_api import (
    DEFAULT_TOP_K,
    MAX_BODY_BYTES,
    MAX_JSON_DEPTH,
    Reply,
    handle,
    parse_tokens,
)

GRANTS = parse_tokens(
    json.dumps(
        {
            "sam": ["acme", "user", "sam"],
            "alex": {"scope": ["acme", "user", "alex"], "read": [["acme", "shared"]]},
        }
    )
)


def make_memory() -> AsyncMemory:
    return AsyncMemory(InMemoryStore(), HashEmbedder())


async def call(memory: AsyncMemory, method: str, url: str, token: str, body: Any = None) -> Reply:
    async def read_body() -> str:
        return "" if body is None else body if isinstance(body, str) else json.dumps(body)

    return await handle(
        method,
        "https://memory.example" + url,
        {"authorization": f"Bearer {token}"},
        read_body,
        grants=lambda: GRANTS,
        memory=lambda grant: memory,
    )


async def test_read_scopes_can_be_read_but_not_changed() -> None:
    """A grant's read scopes answer GET and history, and are never updated, deleted or rated
    through it (404, and the memory is unchanged)."""
    memory = make_memory()
    shared = await memory.remember("The office closes on Dec 24", ("acme", "shared"))
    url = f"/v1/memories/{shared.id}"
    assert (await call(memory, "GET", url, "alex")).status == 200
    assert (await call(memory, "GET", url + "/history", "alex")).status == 200
    assert (await call(memory, "PATCH", url, "alex", {"text": "never"})).status == 404
    assert (await call(memory, "DELETE", url, "alex")).status == 404
    rating = {"memory_id": shared.id, "value": 1}
    assert (await call(memory, "POST", "/v1/feedback", "alex", rating)).status == 404
    assert (await call(memory, "GET", url, "sam")).status == 404  # not Sam's read scope
    after = await memory.get(shared.id)
    assert after is not None and (after.text, after.revision) == (shared.text, 1)
    assert after.utility.manual is None


async def test_json_nested_to_the_limit_is_accepted_and_one_deeper_refused() -> None:
    """A body nested exactly MAX_JSON_DEPTH levels is read; one level more is a 400
    invalid_json and nothing is stored."""
    memory = make_memory()

    def nested(levels: int) -> dict[str, Any]:
        value: dict[str, Any] = {"k": 1}
        for _ in range(levels - 2):  # the body and "metadata" are two levels
            value = {"k": value}
        return {"text": "deep", "metadata": value}

    ok = await call(memory, "POST", "/v1/memories", "sam", nested(MAX_JSON_DEPTH))
    refused = await call(memory, "POST", "/v1/memories", "sam", nested(MAX_JSON_DEPTH + 1))
    assert ok.status == 201, ok.body
    assert (refused.status, refused.body["error"]["code"]) == (400, "invalid_json")
    assert "nested deeper" in refused.body["error"]["message"]


async def test_a_very_deep_body_is_refused_before_the_parser() -> None:
    """A small body nested 5,000 levels deep (which overflowed Pyodide's JavaScript stack
    inside json.loads and killed the runtime) is a 400 before any parsing; brackets inside
    strings do not count, and the service answers the next request."""
    memory = make_memory()
    deep = '{"text": "x", "metadata": ' + '{"k": ' * 5000 + "1" + "}" * 5001
    reply = await call(memory, "POST", "/v1/memories", "sam", deep)
    assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_json")
    quoted = {"text": "[[[[{{{{" * 20, "metadata": {"note": "}}]]" * 50}}
    assert (await call(memory, "POST", "/v1/memories", "sam", quoted)).status == 201
    assert (await call(memory, "GET", "/v1/status", "sam")).status == 200


def test_the_depth_scan_counts_brackets_outside_strings_only() -> None:
    from engramdb.http_api._wire import _deeper_than_allowed

    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert not _deeper_than_allowed(at_limit)
    assert _deeper_than_allowed("[" + at_limit + "]")
    quoted = '{"a": "' + "[" * 100 + '", "b": "\\"' + "{" * 100 + '", "c": [[1]]}'
    assert not _deeper_than_allowed(quoted)  # many brackets, all inside strings
    assert _deeper_than_allowed("[" * 5000 + "]" * 5000)


async def test_a_limit_that_is_not_ascii_digits_is_a_400() -> None:
    """``?limit=%C2%B2`` (a superscript two, which str.isdigit accepts) is a 400, not a
    500."""
    memory = make_memory()
    for raw in ("%C2%B2", "%D9%A3", "-1", "1e3"):
        reply = await call(memory, "GET", f"/v1/memories?limit={raw}", "sam")
        assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_request"), raw


async def test_a_batch_with_one_bad_item_stores_nothing() -> None:
    """Every item of a batch is checked before any is stored: one bad item is a 400 that
    names its position, and the scope stays empty."""
    memory = make_memory()
    batch = {"memories": [{"text": "fine"}, {"text": "also fine", "scope": ["acme"]}]}
    reply = await call(memory, "POST", "/v1/memories/batch", "sam", batch)
    assert reply.status == 400
    assert reply.body["error"]["message"].startswith("memories[1]: ")
    assert await memory.list(("acme", "user", "sam")) == []


async def test_recall_answers_ten_hits_unless_top_k_says_otherwise() -> None:
    """Without ``top_k`` a recall answers up to DEFAULT_TOP_K (10) hits, as before it went
    through a bound view (whose own default is 5); ``top_k`` overrides it."""
    memory = make_memory()
    for number in range(12):
        await memory.remember(f"tea note {number}", ("acme", "user", "sam"))
    plain = await call(memory, "POST", "/v1/recall", "sam", {"query": "tea"})
    three = await call(memory, "POST", "/v1/recall", "sam", {"query": "tea", "top_k": 3})
    assert (len(plain.body["hits"]), len(three.body["hits"])) == (DEFAULT_TOP_K, 3) == (10, 3)


async def test_an_async_lookup_by_digest_and_a_rate_limit_that_runs_after_it() -> None:
    """With ``lookup=`` the grant is awaited by the token's digest (never the token); the
    rate limit is asked only for a known token, before the body is read or the memory
    built, and a refusal is a 429 with Retry-After."""
    from engramdb.http_api import token_digest

    memory = make_memory()
    asked: list[str] = []
    limited: list[str] = []
    events: list[str] = []

    async def lookup(digest: str) -> Any:
        asked.append(digest)
        return GRANTS.get(digest)

    async def rate_limit(digest: str) -> int | None:
        limited.append(digest)
        return 10 if len(limited) > 1 else None

    async def read_body() -> str:
        events.append("body")
        return json.dumps({"text": "Sam is vegetarian"})

    def build(grant: Any) -> AsyncMemory:
        events.append("memory")
        return memory

    async def send(token: str) -> Reply:
        return await handle(
            "POST",
            "https://memory.example/v1/memories",
            {"authorization": f"Bearer {token}"},
            read_body,
            lookup=lookup,
            rate_limit=rate_limit,
            memory=build,
        )

    assert (await send("stranger")).status == 401
    assert limited == [] and events == []  # an unknown token spends no one's budget
    assert (await send("sam")).status == 201
    refused = await send("sam")
    assert (refused.status, refused.body["error"]["code"]) == (429, "rate_limited")
    assert refused.headers == {"retry-after": "10"}
    assert events == ["body", "memory"]  # the refused request read nothing
    assert asked == [token_digest(t) for t in ("stranger", "sam", "sam")]
    assert limited == [token_digest("sam")] * 2


def test_a_stored_grant_parses_like_a_token_entry_and_names_only_its_place() -> None:
    import pytest

    from engramdb import ConfigurationError
    from engramdb.http_api import Grant, parse_grant

    read = '{"scope": ["acme", "user", "alex"], "read": [["acme", "shared"]]}'
    assert parse_grant('["acme", "user", "sam"]', "KV") == Grant(("acme", "user", "sam"))
    assert parse_grant(read, "KV") == Grant(("acme", "user", "alex"), (("acme", "shared"),))
    for bad in ("not json", '{"scope": "acme"}', '{"scopes": []}'):
        with pytest.raises(ConfigurationError, match=r"^the grant sha256:ab12"):
            parse_grant(bad, "the grant sha256:ab12")


async def test_a_declared_length_over_the_limit_is_413_before_the_body_is_read() -> None:
    """A Content-Length over the limit, even one of 5,000 digits (which int() refuses),
    is a 413 without a call of read_body, never a 500."""
    memory = make_memory()
    reads = 0

    async def read_body() -> str:
        nonlocal reads
        reads += 1
        return json.dumps({"text": "never read"})

    for length in (str(MAX_BODY_BYTES + 1), "9" * 5000):
        reply = await handle(
            "POST",
            "https://memory.example/v1/memories",
            {"authorization": "Bearer sam", "content-length": length},
            read_body,
            grants=lambda: GRANTS,
            memory=lambda grant: memory,
        )
        assert (reply.status, reply.body["error"]["code"]) == (413, "payload_too_large")
    assert reads == 0
    assert await memory.list(("acme", "user", "sam")) == []


HUGE = "1" + "0" * 400  # an integer no float holds: float() of it raises OverflowError


async def test_an_integer_of_400_digits_in_any_number_field_is_a_400_naming_it() -> None:
    """importance, min_similarity, top_k, feedback value, complete score, update importance
    and expected_revision of 400 digits are each a 400 invalid_request whose message names
    the field and the value's size (never a 500 from an OverflowError); nothing is written."""
    memory = make_memory()
    kept = await memory.remember("Sam likes jazz", ("acme", "user", "sam"))
    recalled = await call(memory, "POST", "/v1/recall", "sam", {"query": "jazz"})
    selection = recalled.body["selection_id"]
    item = f"/v1/memories/{kept.id}"
    for method, url, body, field in [
        ("POST", "/v1/memories", f'{{"text": "x", "importance": {HUGE}}}', "importance"),
        (
            "POST",
            "/v1/memories/batch",
            f'{{"memories": [{{"text": "x", "importance": -{HUGE}}}]}}',
            "importance",
        ),
        ("POST", "/v1/recall", f'{{"query": "x", "min_similarity": {HUGE}}}', "min_similarity"),
        ("POST", "/v1/recall", f'{{"query": "x", "top_k": {HUGE}}}', "top_k"),
        ("POST", "/v1/feedback", f'{{"memory_id": "{kept.id}", "value": {HUGE}}}', "value"),
        ("POST", "/v1/complete", f'{{"selection_id": "{selection}", "score": -{HUGE}}}', "score"),
        ("PATCH", item, f'{{"importance": {HUGE}}}', "importance"),
        ("PATCH", item, f'{{"text": "y", "expected_revision": {HUGE}}}', "expected_revision"),
    ]:
        reply = await call(memory, method, url, "sam", body)
        assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_request"), url
        message = reply.body["error"]["message"]
        assert field in message and "integer of about 401 digits" in message, message
        assert len(message) < 200
    after = await memory.get(kept.id)
    assert after is not None and after.revision == 1 and after.utility.manual is None
    assert [s.items for s in await memory.list_scopes()] == [1]
    again = await call(
        memory, "POST", "/v1/complete", "sam", {"selection_id": selection, "score": 1}
    )
    assert again.body["completed"] is True  # the refused score completed nothing


async def test_a_cursor_nested_3000_deep_is_a_400_before_the_parser() -> None:
    """GET /v1/scopes?cursor= followed by 3,000 '[' is refused by the body's nesting scan
    (400 invalid_request naming the cursor), never a RecursionError's 500; a cursor nested
    exactly MAX_JSON_DEPTH deep reaches the scope check and a JSON integer of 5,000 digits
    is refused as not JSON."""
    memory = make_memory()
    deep = await call(memory, "GET", "/v1/scopes?cursor=" + "[" * 3000, "sam")
    assert (deep.status, deep.body["error"]["code"]) == (400, "invalid_request")
    assert "cursor is nested deeper than" in deep.body["error"]["message"]
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    shallow = await call(memory, "GET", "/v1/scopes?cursor=" + at_limit, "sam")
    assert shallow.status == 400 and "JSON scope" in shallow.body["error"]["message"]
    for raw in ("1" * 5000, "NaN", '["a", 1e999]'):
        reply = await call(memory, "GET", "/v1/scopes?cursor=" + raw, "sam")
        assert reply.status == 400, raw
    fine = await call(memory, "GET", '/v1/scopes?cursor=["acme"]', "sam")
    assert fine.status == 200


async def test_a_limit_of_5000_digits_is_a_400_with_a_short_message() -> None:
    """?limit= with more digits than int() reads is a 400 whose message is cut short."""
    memory = make_memory()
    reply = await call(memory, "GET", "/v1/memories?limit=" + "9" * 5000, "sam")
    assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_request")
    assert len(reply.body["error"]["message"]) < 200


class _LengthReranker:
    """Scores a text by its length: the longest first."""

    id = "test/length"
    max_batch = 100

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return [float(len(text)) for text in texts]

    async def arerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return self.rerank(query, texts)


async def test_recall_takes_a_bounded_rerank_count() -> None:
    """``rerank`` re-scores the first N hits with the server's reranker (the JSON of a
    re-scored hit's evidence carries ``rerank_score``); it is checked like the other
    numbers (a 400 naming it), and asking a server without a reranker is a 400, not a
    500."""
    memory = AsyncMemory(InMemoryStore(), HashEmbedder(), reranker=_LengthReranker())
    for text in ("tea", "green tea with mint", "tea time"):
        await memory.remember(text, ("acme", "user", "sam"))
    reply = await call(memory, "POST", "/v1/recall", "sam", {"query": "tea", "rerank": 2})
    assert reply.status == 200
    hits = reply.body["hits"]
    scored = [hit["evidence"].get("rerank_score") for hit in hits]
    assert scored[:2] == sorted(scored[:2], reverse=True) and None not in scored[:2]
    assert "rerank_score" not in hits[2]["evidence"]
    off = await call(memory, "POST", "/v1/recall", "sam", {"query": "tea", "rerank": 0})
    assert all("rerank_score" not in hit["evidence"] for hit in off.body["hits"])
    for bad in ("-1", "1001", '"5"', "true", HUGE):
        reply = await call(
            memory, "POST", "/v1/recall", "sam", f'{{"query": "x", "rerank": {bad}}}'
        )
        assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_request"), bad
        assert "rerank" in reply.body["error"]["message"]
    plain = make_memory()
    reply = await call(plain, "POST", "/v1/recall", "sam", {"query": "tea", "rerank": 5})
    assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_request")
    assert "no reranker" in reply.body["error"]["message"]
    assert (
        await call(plain, "POST", "/v1/recall", "sam", {"query": "t", "rerank": 0})
    ).status == 200


async def test_each_field_is_checked_by_its_declared_schema_and_nothing_is_stored() -> None:
    """A body or query field the view operation declares is held to its JSON schema
    (``engramdb.flows.VIEW_OPS``): the wrong type, a value out of range, a null where
    the field takes none, or malformed JSON in a query is one 400 naming the field and
    what it takes, and the scope is unchanged."""
    memory = make_memory()
    refused = [
        ("POST", "/v1/memories", {"text": "a", "importance": "high"}, "'importance' is 'high'"),
        ("POST", "/v1/memories", {"text": "a", "ttl": -1}, "'ttl' is -1; it must be a number"),
        ("POST", "/v1/memories", {"text": "a", "expires_at": "soon"}, "expires_at='soon'"),
        ("POST", "/v1/recall", {"query": "a", "fusion": "max"}, "one of 'convex', 'rrf'"),
        ("POST", "/v1/recall", {"query": "a", "exact": "yes"}, "'exact' is 'yes'"),
        ("POST", "/v1/recall", {"query": "a", "top_k": 0}, "'top_k' is 0; it must be an integer"),
        ("POST", "/v1/memories/batch", {"memories": [{"text": "a"}], "dedupe": 1}, "'dedupe'"),
        ("PATCH", "/v1/memories/x", {"text": None}, "'text' may not be null; omit it"),
        ("PATCH", "/v1/memories/x", {"expected_revision": 2}, "nothing to change"),
        ("GET", "/v1/memories?below=[1", None, "below must be JSON"),
        ("GET", "/v1/memories?below=[1,2]", None, "below=[1, 2] must be a position"),
        ("GET", "/v1/memories?limit=501", None, "limit='501' must be an integer in 1..500"),
    ]
    for method, url, body, said in refused:
        reply = await call(memory, method, url, "sam", body)
        assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_request"), url
        assert said in reply.body["error"]["message"], (said, reply.body)
    listed = await call(memory, "GET", "/v1/memories", "sam")
    assert listed.body["memories"] == []
    nulls = {"query": "a", "mode": None, "fusion": None, "top_k": None, "labels": None}
    defaults = await call(memory, "POST", "/v1/recall", "sam", nulls)  # null: the default
    assert (defaults.status, defaults.body["mode"]) == (200, "hybrid")


def test_an_operation_declared_without_a_reason_for_a_missing_face_stops_the_import() -> None:
    """``@view_op`` refuses a declaration that leaves a face out without saying why, and
    one with a route but no answer: the table cannot grow a silent gap."""
    from engramdb.flows._view_ops import VIEW_OPS, Route, view_op

    async def probe(self: Any) -> int:
        return 0

    before = dict(VIEW_OPS)
    with pytest.raises(RuntimeError, match="say why it is not offered"):
        view_op("A probe", route=Route("GET", "/v1/probe", "Count"))(probe)
    with pytest.raises(RuntimeError, match=r"\['http', 'tool', 'client', 'cli'\]"):
        view_op("A probe")(probe)
    assert before == VIEW_OPS
