"""Tools, retriever and context block for agents: specs, a dispatcher that never raises,
and authority that no argument can widen."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engramdb import (
    AsyncMemory,
    HashEmbedder,
    Hit,
    InMemoryStore,
    Memory,
    ValidationError,
    format_context,
    memory_tools,
    retriever,
)

SAM = ("acme", "user", "sam")
KIM = ("acme", "user", "kim")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def memory() -> Memory:
    return Memory(InMemoryStore(), HashEmbedder(), clock=Clock())


def test_specs_are_openai_function_tools_without_a_scope_parameter(memory: Memory) -> None:
    """Three function specs with a name, a description and a closed JSON schema; no
    parameter names a scope, a namespace or a session."""
    tools = memory_tools(memory.bind(SAM))
    assert [spec["function"]["name"] for spec in tools.specs] == ["remember", "recall", "forget"]
    for spec in tools.specs:
        assert spec["type"] == "function"
        function = spec["function"]
        assert len(function["description"]) > 40
        schema = function["parameters"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert not {"scope", "namespace", "session", "user"} & set(schema["properties"])
    json.dumps(tools.specs)  # JSON-ready
    durability = tools.specs[0]["function"]["parameters"]["properties"]["durability"]
    assert durability["enum"] == ["shared"]
    with_session = memory_tools(memory.bind(SAM, session="s1"))
    durability = with_session.specs[0]["function"]["parameters"]["properties"]["durability"]
    assert durability["enum"] == ["shared", "session"]


def test_dispatch_runs_remember_recall_and_forget(memory: Memory) -> None:
    """A tool call's arguments may be JSON text (as models send them) or a dict."""
    tools = memory_tools(memory.bind(SAM, session="s1"))
    saved = tools.dispatch(
        "remember",
        '{"text": "Sam is allergic to nuts", "labels": {"Topic": ["Health"]}, "importance": 0.9}',
    )
    assert saved["durability"] == "shared"
    stored = memory.get(saved["id"])
    assert stored.scope == SAM and stored.labels == {"topic": ["health"]}
    assert stored.importance == 0.9
    private = tools.dispatch("remember", {"text": "draft plan: nuts", "durability": "session"})
    assert memory.get(private["id"]).scope == (*SAM, "session", "s1")
    found = tools.dispatch("recall", {"query": "nuts allergy", "top_k": 5})
    assert {h["memory"]["id"] for h in found["hits"]} == {saved["id"], private["id"]}
    assert found["selection_id"] and found["status"] == "used"
    assert found["space"] == "hash/bow@256"
    assert tools.dispatch("forget", {"id": saved["id"]}) == {"forgotten": True, "id": saved["id"]}
    assert memory.get(saved["id"]) is None


def test_expiry_arguments_are_validated(memory: Memory) -> None:
    tools = memory_tools(memory.bind(SAM))
    ok = tools.dispatch("remember", {"text": "a", "expires_at": "2026-01-02T00:00:00+00:00"})
    assert memory.get(ok["id"]).expires_at == datetime(2026, 1, 2, tzinfo=UTC)
    ok = tools.dispatch("remember", {"text": "b", "ttl_seconds": 30})
    assert memory.get(ok["id"]).expires_at == Clock()() + timedelta(seconds=30)
    for bad in ({"expires_at": "tomorrow"}, {"expires_at": "2026-01-02T00:00:00"}):
        assert "ISO 8601" in tools.dispatch("remember", {"text": "c", **bad})["error"]
    assert "ttl" in tools.dispatch("remember", {"text": "c", "ttl_seconds": -1})["error"]


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("remember", {"text": "x", "scope": ["acme", "user", "kim"]}, "does not take 'scope'"),
        ("remember", {"text": "x", "namespace": "kim"}, "does not take 'namespace'"),
        ("remember", {"text": "x", "durability": "session"}, "needs a session bound"),
        ("remember", {"text": "x", "session": "s2"}, "does not take 'session'"),
        ("recall", {"query": "x", "scopes": [["acme"]]}, "does not take 'scopes'"),
        ("recall", {"query": "x", "filter": {"scope": "kim"}}, "does not take 'filter'"),
        ("forget", {"id": "x", "scope": ["acme"]}, "does not take 'scope'"),
        ("remember", '{"text": "x", "scope": "kim"', "not valid JSON"),
        ("remember", "[1, 2]", "must be a JSON object"),
        ("remember", {}, "needs 'text'"),
        ("remember", {"text": 42}, "text"),
        ("remember", {"text": "x", "importance": 7}, "importance"),
        ("remember", {"text": "x", "labels": "red"}, "labels"),
        ("recall", {"query": "x", "top_k": 500}, "top_k=500"),
        ("drop_table", {}, "no memory tool"),
    ],
)
def test_crafted_arguments_come_back_as_errors_and_change_nothing(
    memory: Memory, name: str, arguments: Any, message: str
) -> None:
    """Whatever a model sends, the answer is {"error": ...} naming the problem, and no
    scope but the bound one (and no session but the bound one) is ever touched."""
    tools = memory_tools(memory.bind(SAM))
    kim = memory.remember("Kim's private note", KIM)
    answer = tools.dispatch(name, arguments)
    assert set(answer) == {"error"} and message in answer["error"]
    assert [count.scope for count in memory.list_scopes()] == [KIM]
    assert memory.get(kim.id) is not None


def test_tools_cannot_reach_another_scope_by_id(memory: Memory) -> None:
    """An id of another scope's memory is as good as unknown to the tools."""
    kim = memory.remember("Kim's private note about nuts", KIM)
    tools = memory_tools(memory.bind(SAM))
    assert "there is no memory" in tools.dispatch("forget", {"id": kim.id})["error"]
    assert tools.dispatch("recall", {"query": "private note nuts"})["hits"] == []
    assert memory.get(kim.id) is not None


class ExplodingEmbedder(HashEmbedder):
    def embed(self, texts: list[str], kind: str = "document") -> list[list[float]]:
        raise RuntimeError("the embedding service is on fire (api key sk-secret)")


def test_a_failing_handler_is_a_tool_error_not_an_exception() -> None:
    """An unexpected failure is reported by its type only (no message that could carry a
    credential), and the loop goes on."""
    tools = memory_tools(Memory(InMemoryStore(), ExplodingEmbedder()).bind(SAM))
    answer = tools.dispatch("remember", {"text": "x"})
    assert answer == {"error": "the memory tool failed (RuntimeError); try again later"}


async def test_async_tools_dispatch_awaitably() -> None:
    """With an AsyncMemory's view, dispatch answers an awaitable, errors included."""
    memory = AsyncMemory(InMemoryStore(), HashEmbedder())
    tools = memory_tools(memory.bind(SAM))
    saved = await tools.dispatch("remember", {"text": "Sam likes jazz"})
    found = await tools.dispatch("recall", {"query": "jazz"})
    assert [h["memory"]["id"] for h in found["hits"]] == [saved["id"]]
    wrong = await tools.dispatch("recall", {"query": "x", "k": 1})
    assert "does not take" in wrong["error"]
    assert "no memory tool" in (await tools.dispatch("nope", {}))["error"]


def test_memory_tools_needs_a_bound_view(memory: Memory) -> None:
    with pytest.raises(ValidationError, match="bound view"):
        memory_tools(memory)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="choose from"):
        memory_tools(memory.bind(SAM), tools=["remember", "delete_all"])


def test_retriever_applies_defaults_and_call_options(memory: Memory) -> None:
    view = memory.bind(SAM)
    for n in range(5):
        view.remember(f"deploy note {n}")
    retrieve = retriever(view, top_k=2)
    assert len(retrieve.retrieve("deploy note")) == 2
    assert len(retrieve("deploy note", top_k=4)) == 4


def _hits(memory: Memory) -> list[Hit]:
    view = memory.bind(SAM)
    view.remember("Sam is allergic to nuts")
    view.remember("Sam likes  nut-free\ncookies, no nuts")
    view.remember("Sam's nuts allergy is severe, carry an epipen")
    return list(view.recall("nuts allergy"))


def test_format_context_orders_by_score_and_cites_ids(memory: Memory) -> None:
    hits = _hits(memory)
    assert hits[0].score > hits[1].score > hits[2].score
    block = format_context(list(reversed(hits)))
    lines = block.splitlines()
    assert lines[0] == "Relevant memories (cite by [id]):"
    assert lines[1:] == [f"- [{hit.memory.id}] {' '.join(hit.memory.text.split())}" for hit in hits]


@pytest.mark.parametrize("budget", [1, 10, 40, 60, 80, 120, 200, 1000])
def test_format_context_never_exceeds_its_budget(memory: Memory, budget: int) -> None:
    hits = _hits(memory)
    block = format_context(hits, budget_chars=budget)
    assert len(block) <= budget
    if block:
        assert block.splitlines()[1].startswith(f"- [{hits[0].memory.id}]")
    assert format_context([], budget_chars=budget) == ""
    with pytest.raises(ValidationError, match="budget_chars"):
        format_context(hits, budget_chars=0)


HUGE = 10**400  # no float holds it: float() and math.isfinite() of it raise OverflowError


def test_integers_of_400_digits_are_tool_errors_naming_the_argument(memory: Memory) -> None:
    """importance, ttl_seconds, top_k, feedback value and complete score of 400 digits
    each come back as {"error": ...} naming the argument (not "try again later"), and
    nothing is stored, rated or completed."""
    names = ("remember", "recall", "feedback", "complete")
    tools = memory_tools(memory.bind(SAM), tools=names)
    kept = memory.remember("Sam likes jazz", SAM)
    selection = tools.dispatch("recall", {"query": "jazz"})["selection_id"]
    for name, arguments, field in [
        ("remember", {"text": "x", "importance": HUGE}, "importance"),
        ("remember", {"text": "x", "ttl_seconds": HUGE}, "ttl"),
        ("recall", {"query": "x", "top_k": -HUGE}, "top_k"),
        ("feedback", {"memory_id": kept.id, "value": HUGE}, "value"),
        ("complete", {"selection_id": selection, "score": HUGE}, "score"),
    ]:
        answer = tools.dispatch(name, arguments)
        assert set(answer) == {"error"}, answer
        assert field in answer["error"] and "integer of about 401 digits" in answer["error"]
    assert [s.items for s in memory.list_scopes()] == [1]
    after = memory.get(kept.id)
    assert after is not None and after.utility.manual is None
    assert tools.dispatch("complete", {"selection_id": selection, "score": 1})["completed"]


def test_python_api_refuses_integers_no_float_holds(memory: Memory) -> None:
    """Memory.remember(importance=, ttl=), recall(min_similarity=, weights=),
    update(importance=) and a bound view's feedback/complete raise ValidationError for an
    integer of 400 (and 5,000) digits, with a short message; nothing changes."""
    kept = memory.remember("Sam likes jazz", SAM)
    view = memory.bind(SAM)
    selection = view.recall("jazz").selection_id
    calls = [
        lambda: memory.remember("x", SAM, importance=HUGE),
        lambda: memory.remember("x", SAM, ttl=HUGE),
        lambda: memory.recall("x", [SAM], min_similarity=-HUGE),
        lambda: memory.recall("x", [SAM], weights={"vector": HUGE}),
        lambda: memory.update(kept.id, importance=10**5000),
        lambda: view.feedback(kept.id, HUGE),
        lambda: view.complete(selection, -HUGE),
    ]
    for attempt in calls:
        with pytest.raises(ValidationError, match="integer of about") as caught:
            attempt()
        assert len(str(caught.value)) < 200
    after = memory.get(kept.id)
    assert after is not None and (after.revision, after.importance) == (1, kept.importance)
    assert [s.items for s in memory.list_scopes()] == [1]
    assert view.complete(selection, 1.0) is True
