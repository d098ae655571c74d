"""The numpy vector kernel of ``SqliteStore``: one float32 matrix per cache entry.

On a CPython host with numpy, ``SqliteStore`` builds its vector cache's indexes with
:class:`NumpyVectorIndex` (``ENGRAMDB_VECTOR_KERNEL``, ``docs/performance-history.md``, "The
numpy kernel"). It answers an exact search as the pure-Python ``VectorIndex`` does,
(id, similarity) for (id, similarity), bit for bit; where that index would search
approximately (``use_exact_vector_scan``), without ``exact=True``, and when the
candidates are at most ``_SHARE`` of the eligible vectors (so above 1,000 of them at
least: up to 1,000 every one is a candidate),
it first narrows them to the ``_WIDER`` times ``vector_candidates_for`` whose sign codes
differ least from the query's (numpy 2's ``bitwise_count`` of their XOR) and answers
exactly among those. An exact answer among some vectors:

1. a float32 matrix-vector product scores every eligible vector, and the ``C`` best of
   those scores (``C = k + max(16, k // 4)`` at first) are the candidates;
2. the candidates get the similarities of the pure-Python index's own exact scorer
   (``engramdb.driver.score_vectors_exactly``) on the same float32 components, so their
   similarities, ties and order are the reference's: each from a float64 estimate of
   the scorer's formula whose error bound stays within one step of the 2**-30 grid the
   similarities are quantised to (``_on_grid``), the scorer itself only for the few
   whose bound straddles a grid line (or reaches the clamp at +-1);
3. the answer is kept only when it cannot miss a vector: every vector left out scored at
   most ``floor`` in float32, and a float32 dot product of unit vectors errs by at most
   ``slack`` (about ``(d + 2) * 2**-24``, a bound for any summation order; plus, for
   Python 3.11's scorer, which reads ``1 - |q - v|^2 / 2``, half the largest
   ``|1 - |v|^2|`` seen), so when the k-th similarity exceeds ``floor + slack`` nothing
   left out can reach it. Otherwise ``C`` grows fourfold, up to every eligible vector
   (which is the reference's scan).

The index keeps the float32 components in one numpy matrix with room to grow, which a
search views without copying, and each vector's sign code beside it (``_signs``, no
``uint8`` or 4-bit copies: exact scores of a few thousand candidates cost less than
those would). The store tells the index how many vectors a load will bring
(``reserve``: the scope's item count), so a cold load allocates the matrix once and
copies each packed segment's blob into it as it arrives. On Linux a large matrix is an
anonymous private mapping (``_empty``), not ``np.empty``: numpy asks for transparent huge
pages for its large arrays (``MADV_HUGEPAGE``), and where the kernel's THP ``defrag``
setting is ``madvise`` (a common default) a fault in such memory can stall on a
synchronous compaction when no huge page is free (numpy issue 31590): a cold load at
100k x 384 took 0.18-0.64 s from one process to the next on such a host, and 0.18-0.19 s
with the mapping, each segment's rows faulted in by one call before its copy
(``MADV_POPULATE_WRITE``). Past the room (an eighth more than the hint) the matrix grows
by half, a copy of the rows in use; removals give no room back until the entry is loaded
again. Rows load in bulk, a page at a time: the new components are checked finite by
the numpy pass that bounds their norms, and the rows are checked as the pure-Python
index checks them (``engramdb.driver.vector_row_errors``: length, finiteness, the CRC-32
recorded in their index data, the norm where there is none). Removal swaps the last
vector into the hole.
The map from key to position is built on first need: a scope loaded from packed
segments alone (walked in id order, each segment's ids ascending) and searched whole
never needs it (``load_packed``). Not thread-safe.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import sys
from collections import deque
from collections.abc import Container, Iterable, Iterator, Sequence
from itertools import accumulate, count, islice
from operator import itemgetter, lt
from typing import Any

import numpy as np

from engramdb.driver import (
    CompactKeys,
    check_vector_dimensions,
    check_vector_query,
    eligible_vector_positions,
    score_vectors_exactly,
    use_exact_vector_scan,
    vector_candidates_for,
    vector_row_errors,
)

__all__ = ["NumpyVectorIndex"]

_FLOAT32_EPSILON = 2.0**-24  # the unit roundoff of float32
_GRID = 1073741824.0  # 2**30: similarities are quantised to multiples of 1 / _GRID
_FLOAT64_EPSILON = 2.0**-53  # the unit roundoff of float64
_BLOCK = 4096  # rows widened to float64 at a time (12 MB at d=384)
# Candidate rows gathered and scored at a time (_dot_rows): 768 KB at d=384, scored
# while in cache.
_GATHER = 512
_UNIT_TOLERANCE = 1e-3  # a stored vector's norm is within this of 1 (engramdb._vectors.codec)
_LITTLE_F32 = np.dtype("<f4")  # a blob's components
_BIG_ENDIAN = sys.byteorder == "big"
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_THIRD = itemgetter(2)
# The approximate path counts differing sign bits with numpy 2's popcount; without it
# (numpy 1.x) every search scans exactly.
_POPCOUNT: Any = getattr(np, "bitwise_count", None)
# Exact scores cost next to nothing here: the approximate path takes this many times
# the pure-Python index's default candidates, and pays only when those are at most
# _SHARE of the eligible vectors. `python -m bench.vector_kernels --wider 1,2,4,8 --data
# projection` measures both (docs/performance-history.md, "The numpy kernel"): at 100k x 384,
# k = 100, recall@10 0.94 with 1x, 0.99 with 4x (7.3 ms against a 27.8 ms exact scan);
# at 10k, 4x took 3.6 ms against 2.9 ms.
_WIDER = 4
_SHARE = 1 / 4
# _empty maps arrays of at least this many bytes itself, on Linux: numpy advises huge
# pages from 4 MiB (the threshold of its own madvise).
_MAPPED_FROM = 1 << 22
_MAPS = sys.platform == "linux"
# Fault in a range of a mapping for writing, in one call (linux/mman.h, Linux 5.14+;
# Python's mmap module does not name it). Older kernels refuse it: the pages then fault
# in one by one as they are written.
_MADV_POPULATE_WRITE = 23


def _dot(matrix: Any, q32: Any) -> Any:
    """``matrix @ q32`` on this thread: einsum's own SIMD loop, not BLAS, whose thread
    pool costs more than it saves on a busy host (measured: 10k x 384 took 0.8 ms this
    way, 1.4 ms in one BLAS thread and 7 ms in two on a loaded two-core machine)."""
    return np.einsum("ij,j->i", matrix, q32)


class NumpyVectorIndex:
    """An index of unit vectors of one dimension, keyed by string, in one float32 matrix.

    Its methods are those of ``engramdb.driver.CacheIndex``; ``exact`` and ``candidates``
    mean what they mean to the pure-Python index (``candidates``: how many vectors the
    sign codes pick, all scored exactly).
    """

    uses_index_data = False
    """:meth:`load_packed` needs no index data: the store does not even read it."""

    __slots__ = (
        "_dimensions",
        "_keys",
        "_mapping",
        "_matrix",
        "_norms",
        "_positions",
        "_signs",
        "_slack",
    )

    def __init__(self, dimensions: int) -> None:
        check_vector_dimensions(dimensions)
        self._dimensions = dimensions
        # Vector i in row i, native float32, for i < len(_keys); the rows past those are
        # room for more (_room).
        self._matrix: Any = np.empty((0, dimensions), dtype=np.float32)
        self._mapping: mmap.mmap | None = None  # what holds _matrix, if _empty mapped it
        # Column i holds row i's sign code (_sign_words), one row per 64 dimensions, so
        # that the Hamming stage reads each word of every code contiguously; None
        # without a popcount (no approximate path).
        self._signs: Any = (
            None if _POPCOUNT is None else np.empty((-(-dimensions // 64), 0), dtype=np.uint64)
        )
        self._keys = CompactKeys()  # 26 bytes per id, not an 88-byte str and pointer
        # key -> position, built on first need (_where); while None, _keys is strictly
        # ascending, so no key repeats (load_packed).
        self._positions: dict[str, int] | None = None
        # |float32 score - exact score| <= this: the query's rounding to float32 (u) and
        # the products and sums of d terms (gamma_d), for vectors of norm <= 1 + 1e-3.
        terms = (dimensions + 2) * _FLOAT32_EPSILON
        self._slack = (1.0 + _UNIT_TOLERANCE) * terms / (1.0 - terms) + 1e-12
        # On Python 3.11 the exact scorer takes cos = 1 - |q - v|^2 / 2, which is
        # q . v + (1 - |v|^2) / 2: this bounds |1 - |v|^2| / 2 over every vector added.
        self._norms = 0.0

    @property
    def dimensions(self) -> int:
        """The number of dimensions of every vector in the index."""
        return self._dimensions

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._where()

    def _where(self) -> dict[str, int]:
        """The map from each key to its position, built now if it was not yet."""
        positions = self._positions
        if positions is None:
            positions = self._positions = dict(zip(self._keys, count()))
        return positions

    def keys(self) -> Iterator[str]:
        """Iterate over the keys, in no particular order."""
        return iter(list(self._keys))

    def load(self, rows: Iterable[tuple[str, bytes, bytes | None]]) -> dict[str, str]:
        """Add (or replace) ``(key, float32 blob, index data or None)`` rows, as
        ``VectorIndex.load`` does: a corrupt row is skipped and reported in the returned
        ``{key: error message}``; a key given twice keeps its last good row."""
        listed = rows if isinstance(rows, list) else list(rows)
        keys: list[str] = list(map(_FIRST, listed))
        blobs: list[bytes] = list(map(_SECOND, listed))
        records: list[bytes | None] = list(map(_THIRD, listed))
        del listed
        d = self._dimensions
        # Keys past every key held, in strictly ascending order (the rows after a
        # scope's packed segments, in id order) are new and distinct without the map
        # from key to position, which is then not built (load_packed).
        ascending = self._positions is None and _ascending_after(self._keys, keys)
        added = None if ascending else dict(zip(keys, count(len(self._keys))))
        appended = (
            set(map(type, blobs)) <= {bytes, bytearray}
            and set(map(len, blobs)) <= {4 * d}
            and (
                added is None
                or (len(added) == len(keys) and self._where().keys().isdisjoint(added))
            )
            and self._append(blobs, len(blobs))
        )
        errors, _ = vector_row_errors(keys, blobs, records, d, finite=appended)
        if appended and not errors:  # new, distinct keys (a page of a load): done
            self._keys.extend(keys)
            if added is not None:
                self._where().update(added)
            return {}
        # Otherwise (a CRC-32 or norm error) the page copied past the rows in use is
        # room again: add row by row.
        kept = [i for i in range(len(keys)) if i not in errors]
        for i in kept:
            self._put(keys[i], blobs[i])
        return {keys[i]: str(errors[i]) for i in sorted(errors)}

    def load_packed(self, keys: Sequence[str], vectors: bytes, index_data: bytes | None) -> None:
        """Add new ``keys`` whose float32 blobs are given concatenated, as a packed
        segment holds them, checked when packed (no index data: ``uses_index_data``):
        one copy into the matrix. Raises ``ValueError`` for keys already present
        or lengths that do not match, and changes nothing then.

        While every key so far came in strictly ascending order (the map from key to
        position not built yet), a segment whose keys are strictly ascending and all
        greater than the last key held cannot repeat one: it is added without building
        that map. Otherwise the map is built and the keys are checked against it."""
        n, d = len(keys), self._dimensions
        if len(vectors) != 4 * d * n:
            raise ValueError(f"a packed segment of {n} vectors of {d} dimensions has bad lengths")
        added: dict[str, int] | None = None
        if self._positions is not None or not _ascending_after(self._keys, keys):
            positions = self._where()
            added = dict(zip(keys, count(len(self._keys))))
            if len(added) != n or any(map(positions.__contains__, keys)):
                raise ValueError("a packed segment repeats a key or holds one already indexed")
        if not self._append([vectors], n):
            raise ValueError(
                "a packed segment holds a component that is not finite (or a norm past "
                "float32's range)"
            )
        self._keys.extend(keys)
        if added is not None:
            self._where().update(added)

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` vectors in all, and an eighth more for the writes that
        follow: a hint, given before a load of about that many, so that the matrix is
        allocated once (room never used stays virtual memory). A hint past what the host
        can allocate is ignored: the room then grows as vectors come."""
        if rows > len(self._matrix):
            with contextlib.suppress(MemoryError):
                self._grow(rows + rows // 8)

    def _grow(self, rows: int) -> None:
        """Move the rows in use into a new matrix of ``rows`` rows."""
        held = len(self._keys)
        grown, mapping = _empty((rows, self._dimensions), np.float32)
        grown[:held] = self._matrix[:held]
        self._matrix, self._mapping = grown, mapping
        if self._signs is not None:
            signs = _empty((len(self._signs), rows), np.uint64)[0]
            signs[:, :held] = self._signs[:, :held]
            self._signs = signs

    def _room(self, extra: int) -> None:
        """Make room for ``extra`` more vectors: half as many again as there is room for
        now, at least (each growth copies the rows in use)."""
        needed = len(self._keys) + extra
        if needed > len(self._matrix):
            self._grow(max(needed, len(self._matrix) * 3 // 2))

    def _append(self, blobs: list[bytes], rows: int) -> bool:
        """Copy ``rows`` vectors, whose float32 blobs ``blobs`` hold in order (one vector
        or a segment's each), into the room past the rows in use: one C-level copy per
        blob. Return whether every component is finite (and every norm within float32's
        range: ``_note_norms``); they are in use once the caller adds their keys."""
        if not rows:
            return True
        self._room(rows)
        start = len(self._keys)
        new = self._matrix[start : start + rows]
        _fault_in(self._mapping, start * new.strides[0], (start + rows) * new.strides[0])
        ends = list(accumulate(map(len, blobs)))
        with memoryview(new) as view, view.cast("B") as target:
            deque(map(target.__setitem__, map(slice, [0, *ends[:-1]], ends), blobs), maxlen=0)
        if _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
            new.byteswap(inplace=True)  # the blobs are little-endian
        self._note_signs(start, new)
        return self._note_norms(new)

    def _note_signs(self, start: int, rows: Any) -> None:
        """Record the sign codes of ``rows`` (float32, one vector per row), which sit
        at ``start`` onwards in the matrix."""
        if self._signs is not None:
            self._signs[:, start : start + len(rows)] = _sign_words(rows).T

    def _note_norms(self, values: Any) -> bool:
        """Widen ``_norms`` for the vectors ``values`` (float32, d per vector): their
        squared norms in float32 err by at most ``d * 2**-24`` of themselves. Return
        False, widening nothing, when a squared norm is not finite: a component is not
        finite (a NaN propagates; an infinity stays one in a sum of squares, none of
        them negative), or the norm is past float32's range, which no unit vector's is.
        One pass over the components for both checks."""
        if not values.size:
            return True
        d = self._dimensions
        rows = values.reshape(-1, d)
        squares = np.einsum("ij,ij->i", rows, rows)
        off = float(np.abs(squares - np.float32(1.0)).max())
        if not math.isfinite(off):
            return False
        error = d * _FLOAT32_EPSILON / (1.0 - d * _FLOAT32_EPSILON) * (1.0 + off)
        self._norms = max(self._norms, (off + error) / 2.0 + 1e-12)
        return True

    def _put(self, key: str, blob: bytes) -> None:
        """Add or replace one checked vector."""
        values = np.frombuffer(blob, dtype=_LITTLE_F32)
        if not self._note_norms(values):
            self._norms = math.inf  # finite components, a norm past float32's range
        positions = self._where()
        position = positions.get(key)
        if position is None:
            self._room(1)
            position = positions[key] = len(self._keys)
            self._keys.append(key)
        self._matrix[position] = values
        self._note_signs(position, self._matrix[position : position + 1])

    def remove(self, key: str) -> bool:
        """Remove ``key``; return whether it was present."""
        positions = self._where()
        position = positions.pop(key, None)
        if position is None:
            return False
        last = len(self._keys) - 1
        if position != last:
            moved = self._keys[last]
            self._matrix[position] = self._matrix[last]
            if self._signs is not None:
                self._signs[:, position] = self._signs[:, last]
            self._keys[position] = moved
            positions[moved] = position
        self._keys.pop()
        return True

    def search(
        self,
        query: Sequence[float],
        k: int,
        *,
        exact: bool = False,
        allowed: Container[str] | None = None,
        candidates: int | None = None,
        newer: Any = None,
    ) -> list[tuple[str, float]]:
        """Return up to ``k`` ``(key, cosine similarity)`` pairs, best first: what
        ``VectorIndex.search(..., exact=True)`` returns for the same vectors, among every
        eligible vector where the pure-Python index scans them all (``exact``, or few
        enough: ``use_exact_vector_scan``) or the candidates would be more than
        ``_SHARE`` of them, else among the ``candidates`` (default ``_WIDER`` times
        ``vector_candidates_for``) whose sign codes are nearest the query's."""
        q = check_vector_query(query, k, self._dimensions, candidates)
        if k == 0 or not self._keys:
            return []
        positions = (
            None  # the whole index: no map from key to position needed
            if allowed is None
            else eligible_vector_positions(allowed, self._keys, self._where())
        )
        n = len(self._keys) if positions is None else len(positions)
        if n == 0:
            return []
        if not exact and self._signs is not None:
            wanted = (
                min(n, _WIDER * vector_candidates_for(n, k))
                if candidates is None
                else max(candidates, k)
            )
            if wanted <= _SHARE * n and not use_exact_vector_scan(n, wanted, k):
                positions = self._nearest_signs(q, positions, wanted)
                n = wanted
        c = k + max(16, k // 4)
        if n <= 2 * c:  # a float32 pass would not save much
            return self._exactly(q, positions, k, newer)
        matrix = self._matrix[: len(self._keys)]  # no copy
        q32 = np.asarray(q, dtype=np.float32)
        chosen: Any = None
        if positions is None:
            scores = _dot(matrix, q32)
        else:
            chosen = np.asarray(positions, dtype=np.intp)
            scores = (
                _dot_rows(matrix, chosen, q32)
                if 2 * n < len(self._keys)
                else _dot(matrix, q32)[chosen]
            )
        while c < n:
            top = np.argpartition(scores, n - c)[n - c :]
            floor = float(scores[top].min())  # every vector left out scored at most this
            picked = (top if chosen is None else chosen[top]).tolist()
            found = self._exactly(q, picked, k, newer)
            if len(found) == k and found[-1][1] > floor + self._slack + self._norms:
                return found
            c *= 4
        return self._exactly(q, positions, k, newer)

    def _nearest_signs(self, q: list[float], positions: list[int] | None, c: int) -> Any:
        """The ``c`` (fewer than eligible) eligible positions (None: all) whose sign
        codes differ from the query's in the fewest bits, as an ``intp`` array (what the
        exact path indexes the matrix with); at the cut, equal distances go as numpy's
        partition leaves them."""
        held = self._signs[:, : len(self._keys)]
        chosen = None if positions is None else np.asarray(positions, dtype=np.intp)
        codes = held if chosen is None else held[:, chosen]
        query = _sign_words(np.asarray([q], dtype=np.float32))[0]
        distances = np.zeros(codes.shape[1], dtype=np.uint32)
        for words, word in zip(codes, query, strict=True):
            distances += _POPCOUNT(words ^ word)
        nearest = np.argpartition(distances, c - 1)[:c]
        return nearest if chosen is None else chosen[nearest]

    def _exactly(
        self, q: list[float], positions: Sequence[int] | None, k: int, newer: Any
    ) -> list[tuple[str, float]]:
        """What ``score_vectors_exactly`` answers for ``positions`` (None: all), from
        float64 estimates of the reference's similarities (``_on_grid``, a block of
        rows at a time): the reference scorer runs only for the vectors whose grid value
        the estimate leaves open. Then as the reference orders: only those at or above
        the k-th best similarity, newest first, then (stable) similarity descending."""
        d, keys = self._dimensions, self._keys
        chosen = np.arange(len(keys)) if positions is None else np.asarray(positions, np.intp)
        values = np.empty(len(chosen), dtype=np.float64)
        for start in range(0, len(chosen), _BLOCK):
            block = chosen[start : start + _BLOCK]
            grid, sure = _on_grid(self._matrix[block], q, self._norms)
            values[start : start + len(block)] = grid
            for i in np.flatnonzero(~sure).tolist():  # near a grid line (or +-1)
                row, position = self._matrix[block[i]], int(block[i])
                ((_, values[start + i]),) = score_vectors_exactly(  # ask the reference
                    row, d, [keys[position]], q, [0], 1, newer
                )
        if len(values) > k:  # only those at or above the k-th best
            cut = np.partition(values, len(values) - k)[len(values) - k]
            kept = np.flatnonzero(values >= cut)
        else:
            kept = np.arange(len(values))
        # similarity descending, equal ones in their order (a stable sort, as the
        # reference's), then newest first among equal ones
        order = kept[np.argsort(-values[kept], kind="stable")]
        pairs = list(zip(keys.at(chosen[order].tolist()), values[order].tolist(), strict=True))
        return _newest_first_among_equal(pairs, newer)[:k]


def _dot_rows(matrix: Any, rows: Any, q32: Any) -> Any:
    """``matrix[rows] @ q32``, ``_GATHER`` rows gathered and scored at a time, each block
    while it is in cache, not gathered whole (4,000 rows at 100k x 384: a 6 MB copy
    written out and read back; ``bench.versus --vector-only`` compares trees)."""
    scores = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), _GATHER):
        scores[start : start + _GATHER] = _dot(matrix[rows[start : start + _GATHER]], q32)
    return scores


def _empty(shape: tuple[int, int], dtype: Any) -> tuple[Any, mmap.mmap | None]:
    """An uninitialised C-ordered array of ``shape`` and the mapping that holds it, if
    any: on Linux, from ``_MAPPED_FROM`` bytes, an anonymous private mapping of its own,
    which no one advises huge pages for (see the module's docstring), unmapped when the
    last view of it goes; otherwise ``np.empty`` (None). Raises ``MemoryError`` when the
    host cannot map it, as ``np.empty`` does."""
    dtype = np.dtype(dtype)
    size = shape[0] * shape[1] * dtype.itemsize
    if not _MAPS or size < _MAPPED_FROM:
        return np.empty(shape, dtype=dtype), None
    try:
        mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    except OSError as exc:
        raise MemoryError(f"cannot map {size} bytes for vectors: {exc}") from exc
    return np.frombuffer(mapping, dtype=dtype).reshape(shape), mapping


def _fault_in(mapping: mmap.mmap | None, start: int, stop: int) -> None:
    """Fault in bytes ``start`` to ``stop`` of ``mapping`` for writing, in one call
    where the host can: cheaper than a fault per page as a copy writes them."""
    if mapping is not None and stop > start:
        first = start - start % mmap.PAGESIZE
        with contextlib.suppress(OSError):  # a kernel before 5.14: faults as written
            mapping.madvise(_MADV_POPULATE_WRITE, first, stop - first)


def _sign_words(rows: Any) -> Any:
    """The sign code of each float32 row: bit j set where component j is above 0, as
    ``ceil(d / 64)`` native uint64 words per row (zero bits past ``d``)."""
    bits = np.packbits(rows > 0, axis=1)
    width = -(-bits.shape[1] // 8) * 8
    if width != bits.shape[1]:
        padded = np.zeros((len(bits), width), dtype=np.uint8)
        padded[:, : bits.shape[1]] = bits
        bits = padded
    return bits.view(np.uint64)


def _ascending_after(held: Sequence[str], keys: Sequence[str]) -> bool:
    """Whether ``keys`` are strictly ascending and all greater than the last of ``held``
    (when ``held`` is strictly ascending too, no key of ``keys`` repeats one of either).
    False for keys that do not compare (not strings)."""
    try:
        return (not held or not keys or held[-1] < keys[0]) and all(
            map(lt, keys, islice(keys, 1, None))
        )
    except TypeError:
        return False


def _newest_first_among_equal(
    pairs: list[tuple[str, float]], newer: Any
) -> list[tuple[str, float]]:
    """``pairs`` (similarity descending, stably sorted) with each run of equal
    similarities newest first (``newer(key)`` descending, the key when None; equal
    ones keep their order): the reference's order (newest first, then a stable sort
    by similarity), asking ``newer`` only about the pairs that tie."""
    values = list(map(_SECOND, pairs))
    if len(set(values)) == len(values):  # no ties: the common case, found at C speed
        return pairs
    key = _FIRST if newer is None else (lambda pair: newer(pair[0]))
    start = 0
    while start < len(pairs):
        value, stop = pairs[start][1], start + 1
        while stop < len(pairs) and pairs[stop][1] == value:
            stop += 1
        if stop - start > 1:
            pairs[start:stop] = sorted(pairs[start:stop], key=key, reverse=True)
        start = stop
    return pairs


def _on_grid(rows: Any, q: list[float], norms: float) -> tuple[Any, Any]:
    """For each float32 row ``v``, the similarity ``score_vectors_exactly`` gives it
    with the normalised query ``q``, quantised (``floor(s * 2**30) / 2**30``), as a
    float64 array, with a bool array that is False where the estimate cannot decide it
    (its value is then not the reference's); ``norms`` bounds ``|1 - |v|**2| / 2``.

    The reference takes ``1 - dist(q, v)**2 / 2`` on Python 3.11 and ``sumprod(v, q)``
    on 3.12+: each within a few ulps (below 1e-14) of that formula's exact value on the
    same components. Here the same formula in float64 (the float32 components widen
    exactly): a sum of ``d`` rounded terms errs by at most ``(d + 1) * 2**-53`` times
    the sum of their magnitudes (``|q - v|**2``, or at most ``|v|`` for the dot
    product), so the estimate is within ``margin`` (twice that bound, plus 1e-13) of
    the reference's similarity. When the estimate's neighbourhood of ``margin`` lies
    within one grid step, strictly inside (-1, 1) (the reference clamps to that range),
    that step is the reference's answer; otherwise (a few vectors in 10,000) not sure."""
    d = rows.shape[1]
    wide = rows.astype(np.float64)
    q64 = np.asarray(q, dtype=np.float64)
    error = 2.0 * (d + 2) * _FLOAT64_EPSILON
    if getattr(math, "sumprod", None) is not None:  # chosen per call, as the reference
        estimate = np.einsum("ij,j->i", wide, q64)
        margin: Any = error * math.sqrt(1.0 + 2.0 * norms) + 1e-13
    else:
        wide -= q64
        squares = np.einsum("ij,ij->i", wide, wide)
        estimate = 1.0 - squares / 2.0
        margin = error * squares + 1e-13
    low = np.floor((estimate - margin) * _GRID)
    high = np.floor((estimate + margin) * _GRID)
    sure = (low == high) & (estimate + margin < 1.0) & (estimate - margin > -1.0)
    return low / _GRID, sure
