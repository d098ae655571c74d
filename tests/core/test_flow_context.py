"""Flows run in one frozen ``FlowContext``, and are stepped here by hand (DESIGN §2): a
flow is a generator of effects, so a test can read each effect it yields and answer it,
with no store and no embedder behind it. Nothing outside ``flows/_operations.py`` reaches into
``MemoryFlows``' private parts: search, maintenance, bound views and the LangGraph
adapter take the context."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Generator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engramdb import ConfigurationError, EmbeddingSpace, HashEmbedder, ProviderError
from engramdb.flows._effects import Embed, Store
from engramdb.flows._operations import MemoryFlows
from engramdb.flows.context import _PROBE_TEXT, FlowContext
from engramdb.store import (
    FindContent,
    GetVectors,
    PutItem,
    PutVector,
    RegisterSpace,
    SearchLexical,
    SearchResult,
    Stats,
    StoreCapabilities,
    StoreStats,
    unit_f32,
)

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _context(**options: object) -> FlowContext:
    return FlowContext.of(
        HashEmbedder(dimensions=16), clock=lambda: NOW, capabilities=StoreCapabilities(), **options
    )  # type: ignore[arg-type]


def test_a_remember_finds_content_then_embeds_then_writes_one_batch() -> None:
    """A scope that holds no such text embeds it without asking whether another scope's
    vector of it is stored (what a scope's writes cost never depends on another's); its
    write batch reads back the vector the store kept (one not the embedder's is replaced
    after it: a vector a caller passed)."""
    flow = MemoryFlows(_context()).remember("the boat is blue", ("u",))

    effect = next(flow)
    assert isinstance(effect, Store) and [type(op) for op in effect.ops] == [FindContent]
    effect = flow.send([{}])  # the scope holds no such text
    assert effect == Embed(("the boat is blue",), "document")
    effect = flow.send(HashEmbedder(dimensions=16).embed(["the boat is blue"]))
    assert isinstance(effect, Store)
    assert [type(op) for op in effect.ops] == [RegisterSpace, PutVector, PutItem, GetVectors]
    put = effect.ops[2]
    assert isinstance(put, PutItem) and put.record.text == "the boat is blue"
    with pytest.raises(StopIteration) as done:
        flow.send([None, None, put.record, {}])
    assert done.value.value == put.record


def test_a_stored_vector_that_is_not_the_embedders_is_replaced_after_the_write() -> None:
    """When the vector the store kept for a text is not the embedder's vector of it (a
    vector another scope passed), the embedder's replaces it in the next batch, so the
    new memory is never scored by another scope's vector; the embedder's own (or one
    within float rounding of it) is kept."""
    for kept, replaced in (([0.0] * 15 + [1.0], True), (None, False)):
        flow = MemoryFlows(_context()).remember("the boat is blue", ("u",))
        next(flow)
        flow.send([{}])
        effect = flow.send(HashEmbedder(dimensions=16).embed(["the boat is blue"]))
        _, fresh, put, check = effect.ops
        assert isinstance(check, GetVectors) and check.hashes == (fresh.content_sha256,)
        stored = fresh.vector if kept is None else unit_f32(kept)
        answer = [None, None, put.record, {fresh.content_sha256: (stored, NOW)}]
        if not replaced:
            with pytest.raises(StopIteration):
                flow.send(answer)
            continue
        effect = flow.send(answer)
        assert isinstance(effect, Store)
        assert effect.ops == (dataclasses.replace(fresh, replace=True),)
        with pytest.raises(StopIteration) as done:
            flow.send([None])
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


class _Learning:
    """An embedder without ``dimensions=``: its size comes from its answers (a test that
    steps a flow by hand sets ``learned`` as it answers an ``Embed``)."""

    max_batch = 8

    def __init__(self) -> None:
        self.learned: int | None = None
        self.forgotten = 0

    @property
    def space(self) -> EmbeddingSpace:
        if self.learned is None:
            raise ConfigurationError("not known until the first answer")
        return EmbeddingSpace("fake", "m", self.learned)

    @property
    def dimensions_learned(self) -> bool:
        return self.learned is not None

    def forget_dimensions(self) -> None:
        self.learned, self.forgotten = None, self.forgotten + 1

    def embed(self, texts: object, kind: object = "document") -> list[list[float]]:
        raise AssertionError("stepped by hand")

    async def aembed(self, texts: object, kind: object = "document") -> list[list[float]]:
        raise AssertionError("stepped by hand")


def _stats(*spaces: str) -> StoreStats:
    return StoreStats(0, 0, 0, 0, 0, spaces, None)


def _learning_remember(embedder: _Learning) -> Generator[object, object, object]:
    """A remember on a fresh scope, stepped to its first ``Embed``."""
    ctx = FlowContext.of(embedder, clock=lambda: NOW, capabilities=StoreCapabilities())  # type: ignore[arg-type]
    flow = MemoryFlows(ctx).remember("the boat is blue", ("u",))
    effect = next(flow)
    assert isinstance(effect, Store) and [type(op) for op in effect.ops] == [FindContent]
    effect = flow.send([{}])  # no vector lookup: the embedder has no space yet
    assert effect == Embed(("the boat is blue",), "document")
    return flow


def test_a_learned_size_new_to_the_store_is_confirmed_by_a_second_call_before_a_write() -> None:
    """The size learned from the answer, of a model the store holds no space of, is
    confirmed by embedding the fixed probe text in a call of its own; then one batch
    registers the space and writes."""
    embedder = _Learning()
    flow = _learning_remember(embedder)
    embedder.learned = 3
    effect = flow.send([[1.0, 0.5, 0.25]])
    assert isinstance(effect, Store) and [type(op) for op in effect.ops] == [Stats]
    assert flow.send([_stats()]) == Embed((_PROBE_TEXT,), "document")
    effect = flow.send([[0.5, 0.5, 0.5]])
    assert isinstance(effect, Store)
    assert [type(op) for op in effect.ops] == [RegisterSpace, PutVector, PutItem, GetVectors]
    assert effect.ops[0] == RegisterSpace(EmbeddingSpace("fake", "m", 3), NOW)


def test_a_learned_size_the_confirming_call_disagrees_with_writes_nothing_and_is_forgotten() -> (
    None
):
    embedder = _Learning()
    flow = _learning_remember(embedder)
    embedder.learned = 4  # a wrong first answer
    flow.send([[1.0, 0.5, 0.25, 0.125]])
    assert flow.send([_stats()]) == Embed((_PROBE_TEXT,), "document")
    with pytest.raises(ProviderError, match="a second call to confirm its size disagreed"):
        flow.send([[0.5, 0.5, 0.5]])  # the healthy size
    assert (embedder.forgotten, embedder.dimensions_learned) == (1, False)


def test_a_learned_size_of_a_space_the_store_holds_is_not_confirmed_again() -> None:
    embedder = _Learning()
    flow = _learning_remember(embedder)
    embedder.learned = 3
    flow.send([[1.0, 0.5, 0.25]])
    effect = flow.send([_stats("fake/m@3")])
    assert isinstance(effect, Store)
    assert [type(op) for op in effect.ops] == [RegisterSpace, PutVector, PutItem, GetVectors]


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
    flows_py = ROOT / "core" / "engramdb" / "flows" / "_operations.py"
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
        "core/engramdb/flows/_search.py",
        "core/engramdb/flows/_maintenance.py",
        "core/engramdb/flows/context.py",
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
