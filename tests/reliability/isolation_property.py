"""Scope isolation as a property: the strategies, the model and the check, for any store.

``check_isolation(open_memory, examples)`` runs the property with ``open_memory()`` giving
a fresh, empty memory (a context manager yielding a blocking ``Memory``-like object) per
example: tests/reliability runs it on the CPython stores, workers/tests on D1 and on a
Durable Object's database.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import ScopePrefix

CI_EXAMPLES = 50
PARTS = ["a", "a%", "%", "_", "a_", "ab", "a/b", "a'", "A", "a b"]
VOCABULARY = ["tea", "coffee", "sam", "likes", "vegetarian", "%", "_"]

Scope = tuple[str, ...]
scopes = st.lists(st.sampled_from(PARTS), min_size=1, max_size=3).map(tuple)
items = st.lists(
    st.tuples(
        scopes,
        st.lists(st.sampled_from(VOCABULARY[:5]), min_size=1, max_size=3).map(" ".join),
        st.booleans(),  # metadata {"tag": "x"} or not
    ),
    min_size=1,
    max_size=12,
)
selections = st.lists(
    st.tuples(scopes, st.booleans()),  # (scope, as a prefix)
    min_size=1,
    max_size=3,
)


def under(scope: Scope, prefix: Scope) -> bool:
    """Whole-part prefix: ("a",) is over ("a", "b"), never over ("ab",) or ("a%",)."""
    return scope[: len(prefix)] == prefix


def selected(scope: Scope, selection: list[tuple[Scope, bool]]) -> bool:
    return any(under(scope, s) if prefix else scope == s for s, prefix in selection)


def as_api(selection: list[tuple[Scope, bool]]) -> list[Any]:
    return [ScopePrefix(s) if prefix else s for s, prefix in selection]


def check_isolation(open_memory: Callable[[], AbstractContextManager[Any]], examples: int) -> None:
    """Run the property ``examples`` times, each on a fresh memory from ``open_memory``."""

    @settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        stored=items,
        selection=selections,
        query=st.sampled_from(VOCABULARY),
        forget=st.tuples(scopes, st.booleans()),
        reads=selections,
    )
    def check(
        stored: list[tuple[Scope, str, bool]],
        selection: list[tuple[Scope, bool]],
        query: str,
        forget: tuple[Scope, bool],
        reads: list[tuple[Scope, bool]],
    ) -> None:
        with open_memory() as memory:
            model: dict[str, Scope] = {}
            tagged: set[str] = set()
            for scope, text, tag in stored:
                record = memory.remember(
                    text, scope, metadata={"tag": "x"} if tag else None, dedupe=False
                )
                assert record.scope == scope
                model[record.id] = scope
                if tag:
                    tagged.add(record.id)

            def ids_in(selection: list[tuple[Scope, bool]]) -> set[str]:
                return {i for i, s in model.items() if selected(s, selection)}

            # recall: every hit is inside the selection, whatever the mode
            for mode in ("lexical", "vector", "hybrid"):
                hits = memory.recall(query, as_api(selection), top_k=100, mode=mode)
                assert {h.memory.id for h in hits} <= ids_in(selection), mode
                assert all(selected(h.memory.scope, selection) for h in hits)
            # list: exactly the scope's (or prefix's) items
            for scope, prefix in selection:
                listed = memory.list(ScopePrefix(scope) if prefix else scope, limit=100)
                assert {r.id for r in listed} == ids_in([(scope, prefix)])
                filtered = memory.list(scope, limit=100, filter={"metadata": {"tag": "x"}})
                assert {r.id for r in filtered} == ids_in([(scope, False)]) & tagged
                # list_scopes: the scopes under the prefix, with their counts
                counts = {c.scope: c.items for c in memory.list_scopes(prefix=scope, limit=1000)}
                expected: dict[Scope, int] = {}
                for s in model.values():
                    if under(s, scope):
                        expected[s] = expected.get(s, 0) + 1
                assert counts == expected
            # get: each id answers its own record
            for item_id, scope in model.items():
                got = memory.get(item_id)
                assert got is not None and got.scope == scope
            # a bound view sees its scope and its read scopes, changes only its scope
            home = selection[0][0]
            view = memory.bind(home, read=as_api(reads))
            visible = ids_in([(home, False), *reads])
            assert {h.memory.id for h in view.recall(query, top_k=100)} <= visible
            for item_id, scope in model.items():
                assert (view.get(item_id) is not None) == (item_id in visible)
                if scope != home:
                    assert view.forget(item_id) is False
            assert {i for i in model if memory.get(i) is not None} == set(model)
            # forget_where: only the tagged items of the named scope(s)
            where_scope, where_prefix = selection[-1]
            doomed = ids_in([(where_scope, where_prefix)]) & tagged
            named: Any = ScopePrefix(where_scope) if where_prefix else where_scope
            assert memory.forget_where(named, {"metadata": {"tag": "x"}}) == len(doomed)
            for item_id in doomed:
                del model[item_id]
            # forget_scope: exactly the named scope's (or prefix's) items
            doomed = ids_in([forget])
            named = ScopePrefix(forget[0]) if forget[1] else forget[0]
            assert memory.forget_scope(named) == len(doomed)
            for item_id in doomed:
                del model[item_id]
            alive = {c.scope: c.items for c in memory.list_scopes(limit=1000)}
            assert sum(alive.values()) == len(model)
            assert all(memory.get(i) is not None for i in model)

    check()
