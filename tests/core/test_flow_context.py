"""Flows run in one frozen ``FlowContext``, and are stepped here by hand (DESIGN §2): a
flow is a generator of effects, so a test can read each effect it yields and answer it,
with no store and no embedder behind it. Nothing outside ``_flows.py`` reaches into
``MemoryFlows``' private parts: search, maintenance, bound views and the LangGraph
adapter take the context."""

from __future__ import annotations

import ast
import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engramdb import HashEmbedder, ProviderError
from engramdb._effects import Embed, Store
from engramdb._flows import MemoryFlows
from engramdb.context import FlowContext
from engramdb.store import (
    FindContent,
    PutItem,
    PutVector,
    RegisterSpace,
    SearchLexical,
    SearchResult,
    StoreCapabilities,
)

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _context(**options: object) -> FlowContext:
    return FlowContext.of(
        HashEmbedder(dimensions=16), clock=lambda: NOW, capabilities=StoreCapabilities(), **options
    )  # type: ignore[arg-type]


def test_a_remember_finds_content_then_embeds_then_writes_one_batch() -> None:
    """A scope that holds no such text embeds it without asking whether another scope's
    vector of it is stored (what a scope's writes cost never depends on another's)."""
    flow = MemoryFlows(_context()).remember("the boat is blue", ("u",))

    effect = next(flow)
    assert isinstance(effect, Store) and [type(op) for op in effect.ops] == [FindContent]
    effect = flow.send([{}])  # the scope holds no such text
    assert effect == Embed(("the boat is blue",), "document")
    effect = flow.send(HashEmbedder(dimensions=16).embed(["the boat is blue"]))
    assert isinstance(effect, Store)
    assert [type(op) for op in effect.ops] == [RegisterSpace, PutVector, PutItem]
    put = effect.ops[-1]
    assert isinstance(put, PutItem) and put.record.text == "the boat is blue"
    with pytest.raises(StopIteration) as done:
        flow.send([None, None, put.record])
    assert done.value.value == put.record


def test_a_remember_of_a_text_its_scope_holds_writes_nothing() -> None:
    flow = MemoryFlows(_context()).remember("the boat is blue", ("u",))
    find = next(flow)
    assert isinstance(find, Store)
    (op,) = find.ops
    assert isinstance(op, FindContent)
    held = object()
    with pytest.raises(StopIteration) as done:
        flow.send([{op.pairs[0]: held}])
    assert done.value.value is held


def test_a_recall_whose_embedder_fails_searches_words_only_and_says_degraded() -> None:
    flow = MemoryFlows(_context()).recall("boat", [("u",)])

    assert next(flow) == Embed(("boat",), "query")
    effect = flow.throw(ProviderError("the service is down", provider="test"))
    assert isinstance(effect, Store) and [type(op) for op in effect.ops] == [SearchLexical]
    with pytest.raises(StopIteration) as done:
        flow.send([SearchResult()])
    hits = done.value.value
    assert (hits.status, hits.error, list(hits)) == ("degraded", "ProviderError", [])


def test_with_on_embed_error_raise_a_recall_fails_with_the_embedder() -> None:
    flow = MemoryFlows(_context(on_embed_error="raise")).recall("boat", [("u",)])
    next(flow)
    with pytest.raises(ProviderError, match="down"):
        flow.throw(ProviderError("the service is down", provider="test"))


def test_the_context_is_frozen_and_checks_its_settings() -> None:
    ctx = _context()
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.keep_revisions = 3  # type: ignore[misc]
    with pytest.raises(ValueError, match="on_embed_error"):
        _context(on_embed_error="ignore")
    no_history = FlowContext.of(
        HashEmbedder(dimensions=16),
        clock=lambda: NOW,
        capabilities=StoreCapabilities(supports_history=False),
    )
    assert no_history.keep_revisions == 0


# -- nothing reaches into MemoryFlows --------------------------------------------------------


def _private_members(source: str, class_name: str) -> set[str]:
    """The private (``_x``, not dunder) names a class of ``source`` defines."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            names = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            return {n for n in names if n.startswith("_") and not n.startswith("__")}
    raise AssertionError(f"no class {class_name}")


def _uses(source: str, names: set[str]) -> list[str]:
    """Where ``source`` reads an attribute named in ``names`` (``x._name``)."""
    return [
        f"line {node.lineno}: .{node.attr}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in names
    ]


def _sources() -> dict[Path, str]:
    roots = (ROOT / "core" / "engramdb", ROOT / "drivers" / "engramdb", ROOT / "workers" / "src")
    return {p: p.read_text(encoding="utf-8") for root in roots for p in root.rglob("*.py")}


def test_no_module_but_flows_touches_a_private_part_of_memory_flows() -> None:
    flows_py = ROOT / "core" / "engramdb" / "_flows.py"
    private = _private_members(flows_py.read_text(encoding="utf-8"), "MemoryFlows")
    sources = _sources()
    assert len(sources) > 60, "the source tree was not found"
    found = {
        str(path.relative_to(ROOT)): uses
        for path, source in sources.items()
        if path != flows_py and (uses := _uses(source, private))
    }
    assert found == {}


def test_the_check_finds_a_private_call() -> None:
    source = "class MemoryFlows:\n    def _now(self): ...\n    def get(self): ...\n"
    private = _private_members(source, "MemoryFlows")
    assert private == {"_now"}
    assert _uses("def f(flows):\n    return flows._now()\n", private) == ["line 2: ._now"]
    assert _uses("def f(flows):\n    return flows.get()\n", private) == []


@pytest.mark.parametrize(
    "path",
    [
        "core/engramdb/_search.py",
        "core/engramdb/_maintenance.py",
        "core/engramdb/context.py",
        "drivers/engramdb/langgraph/_batch.py",
        "drivers/engramdb/langgraph/_store.py",
    ],
)
def test_search_maintenance_and_the_langgraph_adapter_take_the_context(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {
        a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names
    }
    assert "FlowContext" in names
    assert "MemoryFlows" not in names
