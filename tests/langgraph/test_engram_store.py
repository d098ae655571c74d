"""What EngramStore adds to, or decides beyond, LangGraph's own store tests (which
run in ``upstream/``): TTL, sync calls on an event loop's thread, namespaces that are
not scope parts, embedders, bad input, and the engramdb view of the same items."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fakes import ManualClock  # tests/contract, on the path (conftest)
from langchain_core.embeddings import Embeddings
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

from engramdb import (
    ConfigurationError,
    HashEmbedder,
    InMemoryStore,
    Memory,
    ScopePrefix,
    StoreError,
    ValidationError,
)
from engramdb.langgraph import EngramStore
from engramdb.sqlite import SqliteStore


class CountingEmbeddings(Embeddings):
    """A LangChain Embeddings that records which texts it embedded, and how."""

    def __init__(self) -> None:
        self.documents: list[str] = []
        self.queries: list[str] = []
        self._hash = HashEmbedder(64)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += texts
        return [list(v) for v in self._hash.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return list(self._hash.embed([text], "query")[0])


@pytest.fixture(params=["inmemory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "inmemory":
        yield InMemoryStore()
    else:
        store = SqliteStore(tmp_path / "memory.db")
        yield store
        store.close()


def test_no_argument_means_an_in_memory_store() -> None:
    """``EngramStore()`` works as LangGraph's own stores do, with no argument."""
    store = EngramStore()
    store.put(("users", "u1"), "prefs", {"theme": "dark"})
    assert isinstance(store.store, InMemoryStore)
    assert store.get(("users", "u1"), "prefs").value == {"theme": "dark"}  # type: ignore[union-attr]


def test_a_put_of_an_existing_key_keeps_created_at_and_moves_updated_at(backend: Any) -> None:
    clock = ManualClock()
    created = clock.now
    store = EngramStore(backend, clock=clock)
    store.put(("a",), "k", {"v": 1})
    clock.advance(minutes=5)
    store.put(("a",), "k", {"v": 2})
    item = store.get(("a",), "k")
    assert item is not None
    assert (item.value, item.created_at, item.updated_at) == (
        {"v": 2},
        created,
        created + timedelta(minutes=5),
    )


def test_items_expire_after_their_ttl_and_a_read_refreshes_it(backend: Any) -> None:
    """``ttl`` is in minutes from the last write or refreshing read; an expired item is
    gone from every read at once, and ``sweep_ttl`` deletes it."""
    clock = ManualClock()
    store = EngramStore(
        backend,
        clock=clock,
        index={"dims": 64, "embed": CountingEmbeddings()},
        ttl={"refresh_on_read": True},
    )
    assert store.supports_ttl
    store.put(("a",), "short", {"text": "one", "more": "two"}, index=["text", "more"], ttl=10)
    store.put(("a",), "kept", {"text": "three"})
    clock.advance(minutes=8)
    assert store.get(("a",), "short") is not None  # refreshed: now expires at 18
    clock.advance(minutes=8)
    assert store.get(("a",), "short", refresh_ttl=False) is not None  # 16 < 18: not moved
    clock.advance(minutes=3)
    assert store.get(("a",), "short") is None
    assert [i.key for i in store.search(("a",), query="one")] == ["kept"]
    assert store.list_namespaces() == [("a",)]
    assert store.sweep_ttl() == 2  # the item and the part holding its second text
    assert Memory(backend, HashEmbedder(64)).status().expired == 0


def test_reads_refresh_no_ttl_unless_the_store_says_refresh_on_read() -> None:
    """As in LangGraph's SQL stores, ``refresh_ttl`` acts only when the store's
    ``TTLConfig`` sets ``refresh_on_read``."""
    clock = ManualClock()
    store = EngramStore(clock=clock, ttl={"default_ttl": 10})
    store.put(("a",), "k", {"v": 1})
    clock.advance(minutes=8)
    assert store.get(("a",), "k", refresh_ttl=True) is not None
    assert store.search(("a",), refresh_ttl=True) != []
    clock.advance(minutes=3)
    assert store.get(("a",), "k") is None


def test_default_ttl_comes_from_the_ttl_config() -> None:
    clock = ManualClock()
    store = EngramStore(clock=clock, ttl={"default_ttl": 1.0})
    store.put(("a",), "k", {"v": 1})
    clock.advance(minutes=2)
    assert store.get(("a",), "k") is None


def test_sync_calls_work_on_a_thread_that_runs_an_event_loop(backend: Any) -> None:
    """Inside a coroutine, ``batch`` runs without starting or needing a loop."""
    store = EngramStore(backend, index={"dims": 64, "embed": CountingEmbeddings()})

    async def agent_node() -> list[str]:
        store.put(("a",), "k", {"text": "cats purr"})
        return [item.key for item in store.search(("a",), query="cats")]

    assert asyncio.run(agent_node()) == ["k"]


def test_labels_that_are_not_scope_parts_round_trip(backend: Any) -> None:
    """A label with a newline or only spaces is stored encoded and listed as given."""
    store = EngramStore(backend)
    odd = [("users", "alice\n"), ("users", "alice"), ("  ",), ("tab\there", "x")]
    for namespace in odd:
        store.put(namespace, "k", {"ns": list(namespace)})
    assert sorted(store.list_namespaces(limit=100)) == sorted(odd)
    for namespace in odd:
        assert store.get(namespace, "k").value == {"ns": list(namespace)}  # type: ignore[union-attr]
    assert store.list_namespaces(prefix=("users", "alice")) == [("users", "alice")]
    scopes = [c.scope for c in Memory(backend, HashEmbedder()).list_scopes()]
    assert ("users", ".alice%0A") in scopes


def test_a_namespace_engramdb_cannot_hold_is_refused_naming_the_limit() -> None:
    store = EngramStore()
    with pytest.raises(InvalidNamespaceError, match="at most 16 labels"):
        store.put(tuple(f"l{i}" for i in range(17)), "k", {"v": 1})


def test_a_bad_op_fails_the_batch_before_anything_changes(backend: Any) -> None:
    store = EngramStore(backend)
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        store.batch([PutOp(("a",), "good", {"v": 1}), PutOp(("a",), "bad", {"v": {1, 2}})])
    with pytest.raises(ValueError, match="Invalid filter key"):
        store.batch([PutOp(("a",), "good", {"v": 1}), SearchOp(("a",), filter={"a b": 1})])
    with pytest.raises(ValueError, match=r"operators \['\$in'\]"):
        store.batch([PutOp(("a",), "good", {"v": 1}), SearchOp(("a",), filter={"v": {"$in": [1]}})])
    with pytest.raises(ValueError, match="Unknown operation type"):
        store.batch([PutOp(("a",), "good", {"v": 1}), "GetOp"])  # type: ignore[list-item]
    assert store.search(("a",)) == []


def test_filters_follow_langgraph_paths_and_operators() -> None:
    """Keys are dotted paths into the value; ``$ne`` matches a missing key; ordering
    operators compare numbers with numbers and strings with strings only."""
    store = EngramStore()
    store.put(("a",), "1", {"user": {"name": "ann", "age": 30}, "tag": "x"})
    store.put(("a",), "2", {"user": {"name": "bob", "age": 41}})
    store.put(("a",), "3", {"user": {"name": "cy", "age": "old"}, "tag": "y"})

    def keys(filter: dict[str, Any]) -> list[str]:
        return sorted(item.key for item in store.search(("a",), filter=filter))

    assert keys({"user.name": "bob"}) == ["2"]
    assert keys({"user.age": {"$gte": 30, "$lt": 41}}) == ["1"]
    assert keys({"user.age": {"$gt": "a"}}) == ["3"]
    assert keys({"tag": {"$ne": "x"}}) == ["2", "3"]
    assert keys({"user": {"name": "ann"}}) == ["1"]


def test_queries_are_embedded_as_queries_and_texts_once_per_namespace() -> None:
    """A text its namespace already holds is not embedded again; another namespace's
    copy is embedded by that namespace's own put (the trust domain of a vector is the
    scope: whether ("b",) holds a text must not change what ("a",) costs); a query goes
    through ``embed_query``."""
    embeddings = CountingEmbeddings()
    store = EngramStore(index={"dims": 64, "embed": embeddings, "fields": ["text"]})
    store.put(("a",), "1", {"text": "same words"})
    store.put(("b",), "2", {"text": "same words"})
    store.put(("a",), "1", {"text": "same words", "other": 1})
    hits = store.search(("a",), query="words")
    assert (embeddings.documents, embeddings.queries) == (
        ["same words", "same words"],
        ["words"],
    )
    assert [(h.key, h.score is not None) for h in hits] == [("1", True)]


@pytest.mark.parametrize(
    "embed",
    [
        HashEmbedder(64),
        "hash:64",
        lambda texts: [list(v) for v in HashEmbedder(64).embed(texts)],
    ],
    ids=["engramdb-embedder", "provider-string", "callable"],
)
def test_index_embed_takes_engramdb_embedders_strings_and_functions(embed: Any) -> None:
    store = EngramStore(index={"dims": 64, "embed": embed})
    store.put(("a",), "cat", {"text": "the cat sat on the mat"})
    store.put(("a",), "fish", {"text": "fish swim in the deep sea"})
    store.put(("a",), "raw", {"text": "no vector"}, index=False)
    hits = store.search(("a",), query="cat mat")
    assert [h.key for h in hits] == ["cat", "fish", "raw"]
    assert hits[0].score is not None and hits[0].score > hits[1].score  # type: ignore[operator]
    assert hits[2].score is None


def test_a_bad_configuration_is_refused_naming_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="is not an engramdb store"):
        EngramStore({"not": "a store"})
    with pytest.raises(ConfigurationError, match="must be LangGraph's TTLConfig"):
        EngramStore(ttl=60)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="keep_revisions=-1"):
        EngramStore(keep_revisions=-1)


def test_dims_that_differ_from_the_embedder_are_refused() -> None:
    with pytest.raises(ValueError, match="differs from the embedder's 64"):
        EngramStore(index={"dims": 32, "embed": HashEmbedder(64)})
    with pytest.raises(ValueError, match="differs from the embedder's 64"):
        EngramStore(index={"dims": 32, "embed": "hash:64"})
    with pytest.raises(ValueError, match="dims=None must be the embedding size"):
        EngramStore(index={"embed": CountingEmbeddings()})


def test_items_are_engramdb_memories_with_history_and_hybrid_recall(backend: Any) -> None:
    """Built over a ``Memory``, the store uses its store and embedder; the items are
    memories of the namespace's scope, recalled (vector and words) by ``Memory``."""
    memory = Memory(backend, HashEmbedder(64))
    store = EngramStore(memory, index=None)
    store.put(("acme", "user", "sam"), "diet", {"text": "Sam is vegetarian"})
    store.put(("acme", "user", "sam"), "diet", {"text": "Sam is vegan"})
    hits = memory.recall("vegan", scopes=[ScopePrefix(("acme",))])
    assert [h.memory.metadata["key"] for h in hits] == ["diet"]
    assert hits[0].memory.scope == ("acme", "user", "sam")
    assert [r.metadata["value"] for r in memory.history(hits[0].memory.id)] == [
        {"text": "Sam is vegetarian"}
    ]


def test_items_persist_in_a_sqlite_file(tmp_path: Path) -> None:
    index = {"dims": 64, "embed": CountingEmbeddings(), "fields": ["text"]}
    first = SqliteStore(tmp_path / "agent.db")
    EngramStore(first, index=index).put(("a",), "k", {"text": "remember me"})
    first.close()
    again = SqliteStore(tmp_path / "agent.db")
    hits = EngramStore(again, index=index).search(("a",), query="remember me")
    again.close()
    assert [(h.key, round(h.score or 0, 5)) for h in hits] == [("k", 1.0)]


class AsyncOnly:
    """An async-only engramdb store (as D1Store is), over an InMemoryStore."""

    def __init__(self) -> None:
        self._inner = InMemoryStore()
        self.capabilities = self._inner.capabilities

    async def abatch(self, ops: Sequence[Any]) -> list[Any]:
        return self._inner.batch(ops)


def test_an_async_only_store_serves_abatch_and_refuses_batch_clearly() -> None:
    store = EngramStore(AsyncOnly())

    async def roundtrip() -> Any:
        await store.aput(("a",), "k", {"v": 1})
        return await store.aget(("a",), "k")

    assert asyncio.run(roundtrip()).value == {"v": 1}
    with pytest.raises(StoreError, match="async-only; call abatch"):
        store.batch([GetOp(("a",), "k")])


def test_stores_shared_by_threads_see_each_others_writes(tmp_path: Path) -> None:
    """One EngramStore over a thread-safe SqliteStore serves several threads."""
    backend = SqliteStore(tmp_path / "shared.db")
    store = EngramStore(backend)

    def write(n: int) -> None:
        for i in range(10):
            store.put(("t", str(n)), str(i), {"i": i})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store.search(("t",), limit=100)) == 30
    backend.close()


def test_the_public_surface_is_one_class() -> None:
    import engramdb.langgraph

    assert engramdb.langgraph.__all__ == ["EngramStore"]


def test_a_prefix_deeper_than_any_namespace_finds_nothing() -> None:
    """Namespaces hold at most 16 labels, so a longer prefix matches none."""
    store = EngramStore()
    store.put(("a",), "k", {"v": 1})
    deep = tuple(f"l{i}" for i in range(17))
    assert store.search(deep) == []
    assert store.list_namespaces(prefix=deep) == []


class SyncOnly:
    """A sync-only engramdb store, over an InMemoryStore."""

    def __init__(self) -> None:
        self._inner = InMemoryStore()
        self.capabilities = self._inner.capabilities

    def batch(self, ops: Sequence[Any]) -> list[Any]:
        return self._inner.batch(ops)


def test_a_sync_only_store_serves_abatch_too() -> None:
    store = EngramStore(SyncOnly())

    async def roundtrip() -> Any:
        await store.aput(("a",), "k", {"v": 1})
        return await store.aget(("a",), "k")

    assert asyncio.run(roundtrip()).value == {"v": 1}


def test_after_a_model_switch_items_are_unscored_until_reindexed(backend: Any) -> None:
    """Items embedded by the old model stay listed; a query in the new model's space
    scores them once ``Memory.reindex()`` has embedded their texts in it."""
    index = {"fields": ["text"]}
    EngramStore(backend, index={**index, "embed": HashEmbedder(64)}).put(
        ("a",), "k", {"text": "switch models"}
    )
    new = EngramStore(backend, index={**index, "embed": HashEmbedder(32)})
    assert [(h.key, h.score) for h in new.search(("a",), query="switch models")] == [("k", None)]
    assert Memory(backend, HashEmbedder(32)).reindex() == 1
    [hit] = new.search(("a",), query="switch models")
    assert hit.score == pytest.approx(1.0)


class CountingStore:
    """An engramdb store that counts the ``ListItems`` ops passed to it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.capabilities = inner.capabilities
        self.lists = 0

    def batch(self, ops: Sequence[Any]) -> list[Any]:
        from engramdb.store import ListItems

        self.lists += sum(isinstance(op, ListItems) for op in ops)
        return list(self.inner.batch(ops))

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("seed", range(3))
def test_a_query_search_ranks_from_the_nearest_vectors_as_the_full_ranking_does(
    backend: Any, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search with a query and no filter whose page holds only scored items reads the
    nearest vectors and their items, not every item under the prefix, and gives the page
    the full ranking gives: items with two texts (scored by the best), repeated texts
    (equal scores, newest first), unindexed items, several offsets."""
    import random

    from engramdb.langgraph import _batch

    rng = random.Random(seed)
    words = ["deploy", "window", "lunch", "order", "cello", "budget", "review", "train"]
    counting = CountingStore(backend)
    store = EngramStore(counting, index={"embed": HashEmbedder(64), "fields": ["a", "b"]})
    for n in range(120):
        value = {"a": " ".join(rng.sample(words, 3)), "b": " ".join(rng.sample(words, 2))}
        if n % 4 == 0:  # a text repeated 30 times: equal scores across the k-th
            value = {"a": "deploy window lunch"}
        store.put(("acme", f"u{n % 3}"), f"k{n}", value, index=False if n % 7 == 0 else None)
    searches = [("deploy window", offset, limit) for offset in (0, 3, 20) for limit in (1, 5)]
    fast = []
    for query, offset, limit in searches:
        counting.lists = 0
        fast.append(store.search(("acme",), query=query, offset=offset, limit=limit))
        assert counting.lists == 0
    monkeypatch.setattr(_batch, "_top_scored", lambda *args: (yield from ()) or None)
    full = [store.search(("acme",), query=q, offset=o, limit=n) for q, o, n in searches]
    assert [[(i.key, i.score) for i in page] for page in fast] == [
        [(i.key, i.score) for i in page] for page in full
    ]
    assert all(len(page) == limit for page, (_, _, limit) in zip(fast, searches, strict=True))
