"""``CompactKeys`` (engramdb.driver): a list of keys held as bytes while they are ASCII
and of one length, answering every operation as a plain list does, before and after a
key that does not fit turns it into one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.driver import CompactKeys

IDS = st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZ", min_size=4, max_size=4)
ANY = st.one_of(IDS, st.text(max_size=6))  # other lengths and non-ASCII keys too

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("extend"), st.lists(st.one_of(IDS, IDS, IDS, ANY), max_size=5)),
        st.tuples(st.just("append"), ANY),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("set"), st.tuples(st.integers(-8, 8), ANY)),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_answers_as_a_list_does(ops: list[tuple[str, object]]) -> None:
    """Any sequence of extends, appends, pops and assignments leaves the same keys, in
    the same order, as on a list: by index (negative too), by slice, by iteration, and
    many at once (``at``, which refuses a position out of range as indexing does)."""
    keys, model = CompactKeys(), []
    for name, arg in ops:
        if name == "extend":
            keys.extend(arg)  # type: ignore[arg-type]
            model.extend(arg)  # type: ignore[arg-type]
        elif name == "append":
            keys.append(arg)  # type: ignore[arg-type]
            model.append(arg)
        elif name == "pop":
            if model:
                assert keys.pop() == model.pop()
            else:
                with pytest.raises(IndexError):
                    keys.pop()
        else:
            index, key = arg  # type: ignore[misc]
            if -len(model) <= index < len(model):
                keys[index] = key
                model[index] = key
            else:
                with pytest.raises(IndexError):
                    keys[index] = key
        assert len(keys) == len(model)
        assert list(keys) == model
        assert [keys[i] for i in range(-len(model), len(model))] == model + model
        assert keys[1:3] == model[1:3]
        positions = [p for p in (len(model) - 1, 0, 2, 0) if 0 <= p < len(model)]
        assert keys.at(positions) == [model[p] for p in positions]
        with pytest.raises(IndexError):
            keys.at([0, len(model)])


def test_ids_are_held_as_their_bytes() -> None:
    """26-character ids cost 26 bytes each while they all fit, and a key of another
    length keeps every key it held."""
    ids = [f"01M97CGQ46{i:016d}" for i in range(1000)]
    keys = CompactKeys.of(ids)
    assert keys._listed is None and len(keys._packed) == 26 * 1000
    assert keys[-1] == ids[-1] and list(keys) == ids
    keys.append("short")
    assert list(keys) == [*ids, "short"] and keys._listed is not None
