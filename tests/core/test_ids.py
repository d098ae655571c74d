"""Ids are ULIDs: 26 Crockford base32 characters that sort by creation time."""

from __future__ import annotations

from engramdb.store._ids import PLACE_BITS, IdSequence, new_id, place_of

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def decode(text: str) -> int:
    value = 0
    for char in text:
        value = value * 32 + CROCKFORD.index(char)
    return value


def test_id_layout_is_time_then_randomness() -> None:
    """The first 48 bits are the milliseconds; the id is 26 Crockford characters."""
    ident = new_id(1_767_225_600_123)
    assert len(ident) == 26 and set(ident) <= set(CROCKFORD)
    assert decode(ident) >> 80 == 1_767_225_600_123


def test_ids_sort_by_time_and_are_unique() -> None:
    """Later ids sort after earlier ones; ids made in one millisecond differ."""
    assert new_id(1000) < new_id(1001) < new_id(2**40)
    assert len({new_id(5) for _ in range(1000)}) == 1000


def test_every_bit_of_the_value_is_spelled() -> None:
    """Decoding gives back the time, and 41 random bits above the 6 bits of place that
    differ between ids (no lost digit); above them a count of the process's sequences,
    and bits 47 and 79 are 0, so that a sequence can count up without carrying into the
    count or the time."""
    times = [2**48 - 1 - i for i in range(64)]
    values = [decode(new_id(time)) for time in times]
    assert [value >> 80 for value in values] == times and max(values) < 2**128
    seen = 0
    for value in values:
        seen |= value >> PLACE_BITS & (2**41 - 1)
    assert seen == 2**41 - 1  # each random bit is 1 in some id: none is dropped
    assert all(value & 63 == 0 for value in values)  # new_id carries no place
    counts = [value >> 48 & (2**31 - 1) for value in values]
    assert counts == sorted(counts) and len(set(counts)) == 64
    assert all(value >> 79 & 1 == 0 and value >> 47 & 1 == 0 for value in values)


def test_a_sequence_counts_up_in_the_order_taken_whatever_the_places() -> None:
    """The ids of one batch ascend in the order they were taken, whatever place each
    carries (its low 6 bits, which ``place_of`` reads back), with the batch's time: ties
    broken by id keep the order the items were given in."""
    take = IdSequence(1_700_000_000_000)
    places = [(n * 37) % 64 for n in range(1000)]
    idents = [take(place) for place in places]
    values = [decode(ident) for ident in idents]
    assert idents == sorted(idents) and len(set(idents)) == 1000
    assert [b >> PLACE_BITS for b in values] == [(values[0] >> PLACE_BITS) + n for n in range(1000)]
    assert [place_of(ident) for ident in idents] == places
    assert {value >> 80 for value in values} == {1_700_000_000_000}
    assert place_of("not-an-id") is None and place_of("01j0000000000000000000000a") is None


def test_ids_of_one_millisecond_ascend_across_calls() -> None:
    """Within a process, a sequence (one call) started after another in the same
    millisecond has greater ids, so writes within one millisecond keep the order they
    were made in; within a sequence, ids ascend in the order taken."""
    idents = [new_id(1_800_000_000_000) for _ in range(200)]
    assert idents == sorted(idents) and len(set(idents)) == 200
    first, second = IdSequence(1_800_000_000_001), IdSequence(1_800_000_000_001)
    earlier = [first() for _ in range(3)]
    later = [second() for _ in range(3)]
    assert earlier == sorted(earlier) and later == sorted(later)
    assert max(earlier) < min(later) < new_id(1_800_000_000_001)


def test_ids_spell_their_values_across_a_carry_into_the_upper_digits(monkeypatch) -> None:
    """A sequence's ids keep spelling their whole value when its count carries into the
    digits that its earlier ids shared (here into bit 40, where the leading 18
    characters change): each id decodes to the sequence's start plus its count, with
    its place."""
    start = 2**34 - 3  # three ids below the carry into bit 40
    monkeypatch.setattr("engramdb.store._ids.os.urandom", lambda n: (start << 7).to_bytes(n, "big"))
    sequence = IdSequence(1_767_225_600_123)
    ids = [sequence(place) for place in (5, 0, 63, 1, 2, 7)]
    values = [decode(ident) for ident in ids]
    first = values[0] - 5
    assert values == [first + (n << PLACE_BITS) + p for n, p in enumerate((5, 0, 63, 1, 2, 7))]
    assert first >> PLACE_BITS & (2**41 - 1) == start
    assert len({ident[:18] for ident in ids}) == 2  # the carry changed the leading digits
    assert ids == sorted(ids)
