"""Scope isolation as a property, in every store and both faces.

Hypothesis draws scopes from parts that are prefixes of each other and hold ``%`` and
``_`` (LIKE wildcards), ``/`` and quotes, memories across them with texts from a shared
vocabulary (so every query matches in many scopes), and selections of scopes and
``ScopePrefix`` objects. A plain model (a list of (id, scope, text)) says what each call
may see: no recall, list, get, list_scopes, forget_scope, forget_where or bound view
ever returns or touches an item outside the scopes (or whole-part prefixes) it named.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from isolation_faces import FACES, isolation_memory

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


@pytest.mark.parametrize(("kind", "face"), FACES, ids=[f"{k}-{f}" for k, f in FACES])
def test_no_call_sees_or_touches_an_item_outside_what_it_named(
    kind: str, face: str, tmp_path_factory: pytest.TempPathFactory, long_factor: int
) -> None:
    directory = tmp_path_factory.mktemp(f"{kind}-{face}")

    @settings(
        max_examples=CI_EXAMPLES * long_factor,
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
        with isolation_memory(kind, face, directory) as memory:
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
