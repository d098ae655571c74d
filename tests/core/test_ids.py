"""Ids are ULIDs: 26 Crockford base32 characters that sort by creation time."""

from __future__ import annotations

from engramdb._ids import new_id

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
    """Decoding gives back the time and 80 bits that differ between ids (no lost digit)."""
    idents = [new_id(2**48 - 1) for _ in range(64)]
    values = [decode(ident) for ident in idents]
    assert all(value >> 80 == 2**48 - 1 and value < 2**128 for value in values)
    seen = 0
    for value in values:
        seen |= value & (2**80 - 1)
    assert seen == 2**80 - 1  # each random bit is 1 in some id: none is dropped
