"""What a :class:`~engramdb._vectors.index.VectorIndex` holds, in bytes, by part.

A memory budget (``SqliteVectorCache``'s) adds up many indexes often, so an index
estimates what it holds from its counts (vectors, built 4-bit copies, decoded copies)
times the sizes here, instead of walking its objects. The sizes are this interpreter's:
pointers are 4 bytes in Pyodide's wasm32 and 8 on 64-bit CPython, and ``sys.getsizeof``
gives each object's header. Within about a tenth of ``tracemalloc``'s figure
(``tests/core/test_vector_budget.py``, on CPython and in Pyodide).
"""

from __future__ import annotations

import functools
import struct
import sys
from typing import NamedTuple

__all__ = ["DATED_ITEM", "PACKED_ITEM", "Held", "Sizes", "sizes"]

_POINTER = struct.calcsize("P")
_SLOT = 6 * _POINTER  # a dict entry (hash, key, value) at about half load
DATED_ITEM = sys.getsizeof(1 << 40) + _SLOT
"""An item's created_at (ms) in a dict by id: its int and its slot (a cache entry's)."""
PACKED_ITEM = 8 + _POINTER
"""An item's created_at as a packed segment left it: an int64 in an array, and its id's
slot in the segment's list of ids (the id itself is the index's)."""


class Held(NamedTuple):
    """The bytes an index holds, about (:meth:`VectorIndex.held_bytes`), by part: what
    only a reload rebuilds, and three caches it can drop and still answer the same."""

    codes: int
    """Keys, sign codes, 4-bit copies, CRC-32s: the index itself."""
    nibbles: int
    """The bit planes searches have built (:meth:`VectorIndex.drop_nibbles`)."""
    floats: int
    """The float32 copies (:meth:`VectorIndex.drop_floats`: rows are read instead)."""
    decoded: int
    """Pyodide's decoded copies of scored vectors (:meth:`VectorIndex.drop_decoded`)."""


class Sizes(NamedTuple):
    """Bytes a vector of an index holds, by part (:meth:`VectorIndex.held_bytes`)."""

    vector: int  # 4-bit copy, sign code, prefix bytes, list and dict slots (key apart)
    nibbles: int  # built bit planes: (planes, sum)
    decoded: int  # a decoded copy: (tuple of floats, squared norm) and its dict slot


@functools.lru_cache(maxsize=16)
def sizes(dimensions: int, prefix: int) -> Sizes:
    """This interpreter's object sizes for ``dimensions`` (pointers are 4 bytes in
    Pyodide's wasm32, 8 on 64-bit CPython)."""
    d, pointer, number = dimensions, _POINTER, sys.getsizeof(1.0)
    pair, slot = sys.getsizeof((0, 0)), _SLOT
    return Sizes(
        vector=(d + 1) // 2
        + sys.getsizeof(1 << (d - 1))
        + prefix  # the bytes of its code in the prefix columns
        + 2 * pointer  # the codes and keys lists
        + slot,  # positions
        nibbles=pair + sys.getsizeof(1 << (4 * d - 1)) + sys.getsizeof(1 << 40) + pointer,
        decoded=sys.getsizeof(()) + d * (pointer + number) + pair + number + slot,
    )
