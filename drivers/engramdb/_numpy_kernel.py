"""The numpy vector kernel of ``SqliteStore``: one float32 matrix per cache entry.

On a CPython host with numpy, ``SqliteStore`` builds its vector cache's indexes with
:class:`NumpyVectorIndex` (``ENGRAMDB_VECTOR_KERNEL``, ``docs/performance.md``, "The
numpy kernel"). It answers every search as the pure-Python ``VectorIndex`` answers an
exact one, (id, similarity) for (id, similarity), bit for bit:

1. a float32 matrix-vector product scores every eligible vector, and the ``C`` best of
   those scores (``C = k + max(16, k // 4)`` at first) are the candidates;
2. the candidates are scored by the pure-Python index's own exact scorer
   (``engramdb.driver.score_vectors_exactly``) on the same float32 components, so their
   similarities, ties and order are the reference's;
3. the answer is kept only when it cannot miss a vector: every vector left out scored at
   most ``floor`` in float32, and a float32 dot product of unit vectors errs by at most
   ``slack`` (about ``(d + 2) * 2**-24``, a bound for any summation order), so when the
   k-th similarity exceeds ``floor + slack`` nothing left out can reach it. Otherwise
   ``C`` grows fourfold, up to every eligible vector (which is the reference's scan).

The index keeps the float32 components only (no sign codes, no ``uint8`` copies): it
never needs an approximate path, because a scan of 100k x 384 float32s takes
milliseconds. Rows load in bulk: their blobs are checked as the pure-Python index checks
them (``engramdb.driver.vector_row_errors``: length, finiteness, the CRC-32 recorded in
their index data, the norm where there is none), joined, and read with
``numpy.frombuffer``; pages wait in a list and are copied into the matrix once, when a
search first needs it (the matrix is allocated at its full size, and each page is freed
as soon as it is copied, so the load's peak is about the matrix plus one page). Removal
swaps the last vector into the hole. Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Sequence
from itertools import count
from operator import itemgetter
from typing import Any

import numpy as np

from engramdb import ValidationError
from engramdb.driver import (
    check_vector_query,
    eligible_vector_positions,
    score_vectors_exactly,
    vector_row_errors,
)

__all__ = ["NumpyVectorIndex"]

_FLOAT32_EPSILON = 2.0**-24  # the unit roundoff of float32
_UNIT_TOLERANCE = 1e-3  # a stored vector's norm is within this of 1 (engramdb._codec)
_GROWTH = 1.25  # capacity of the matrix when rows are added after a load
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_THIRD = itemgetter(2)


def _dot(matrix: Any, q32: Any) -> Any:
    """``matrix @ q32`` on this thread: einsum's own SIMD loop, not BLAS, whose thread
    pool costs more than it saves on a busy host (measured: 10k x 384 took 0.8 ms this
    way, 1.4 ms in one BLAS thread and 7 ms in two on a loaded two-core machine)."""
    return np.einsum("ij,j->i", matrix, q32)


class NumpyVectorIndex:
    """An index of unit vectors of one dimension, keyed by string, in one float32 matrix.

    Its methods are those of ``engramdb.driver.CacheIndex``; every search is exact (the
    ``exact`` and ``candidates`` arguments are checked and otherwise change nothing).
    """

    __slots__ = ("_buffer", "_dimensions", "_keys", "_pending", "_positions", "_slack", "_stored")

    def __init__(self, dimensions: int) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int):
            raise ValidationError(
                f"dimensions={dimensions!r} must be an int; pass e.g. VectorIndex(384)"
            )
        if not 1 <= dimensions <= 65_536:
            raise ValidationError(f"dimensions={dimensions} is out of range; use 1..65536")
        self._dimensions = dimensions
        # Row i of the matrix at [i * d, (i + 1) * d), native float32; capacity beyond.
        self._buffer: Any = np.empty(0, dtype=np.float32)
        self._stored = 0  # rows in the buffer; the pages of _pending follow them
        self._pending: list[Any] = []
        self._keys: list[str] = []
        self._positions: dict[str, int] = {}
        # |float32 score - exact score| <= this: the query's rounding to float32 (u) and
        # the products and sums of d terms (gamma_d), for vectors of norm <= 1 + 1e-3.
        terms = (dimensions + 2) * _FLOAT32_EPSILON
        self._slack = (1.0 + _UNIT_TOLERANCE) * terms / (1.0 - terms) + 1e-12

    @property
    def dimensions(self) -> int:
        """The number of dimensions of every vector in the index."""
        return self._dimensions

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._positions

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
        page = None
        try:
            if set(map(len, blobs)) <= {4 * d}:  # then finiteness is one numpy pass
                page = np.frombuffer(b"".join(blobs), dtype="<f4")
                if not np.isfinite(page).all():
                    page = None
        except TypeError:  # a blob without a length, such as None: found below
            pass
        errors, _ = vector_row_errors(keys, blobs, records, d, finite=page is not None)
        if errors:
            kept = [i for i in range(len(keys)) if i not in errors]
            self._insert([keys[i] for i in kept], [blobs[i] for i in kept], None)
        else:
            self._insert(keys, blobs, page)
        return {keys[i]: str(errors[i]) for i in sorted(errors)}

    def _insert(self, keys: list[str], blobs: list[bytes], page: Any) -> None:
        """Add or replace checked rows; ``page`` is their blobs joined as float32s, or
        None."""
        if not keys:
            return
        d = self._dimensions
        added = dict(zip(keys, count(len(self._keys))))
        if len(added) == len(keys) and self._positions.keys().isdisjoint(added):
            # New, distinct keys (a page of a load): one page, copied in on the next search.
            if page is None:
                page = np.frombuffer(b"".join(blobs), dtype="<f4")
            self._pending.append(page)
            self._keys += keys
            self._positions.update(added)
            return
        self._flush()
        for key, blob in zip(keys, blobs, strict=True):
            position = self._positions.get(key)
            if position is None:
                position = len(self._keys)
                self._reserve(position + 1)
                self._keys.append(key)
                self._positions[key] = position
                self._stored += 1
            self._buffer[position * d : (position + 1) * d] = np.frombuffer(blob, dtype="<f4")

    def _reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows: exactly on the first fill, else growing by
        ``_GROWTH`` (amortised: a row added at a time does not copy the matrix each time)."""
        d = self._dimensions
        capacity = len(self._buffer) // d
        if rows <= capacity:
            return
        if capacity:
            rows = max(rows, int(capacity * _GROWTH) + 16)
        buffer = np.empty(rows * d, dtype=np.float32)
        buffer[: self._stored * d] = self._buffer[: self._stored * d]
        self._buffer = buffer

    def _flush(self) -> None:
        """Copy the pending pages into the matrix (one allocation for a whole load)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        d = self._dimensions
        self._reserve(self._stored + sum(len(page) for page in pending) // d)
        at = self._stored * d
        pending.reverse()
        while pending:  # each page is freed once copied: the peak is the matrix + a page
            page = pending.pop()
            self._buffer[at : at + len(page)] = page
            at += len(page)
            del page
        self._stored = at // d

    def remove(self, key: str) -> bool:
        """Remove ``key``; return whether it was present."""
        position = self._positions.pop(key, None)
        if position is None:
            return False
        self._flush()
        d = self._dimensions
        last = len(self._keys) - 1
        if position != last:
            moved = self._keys[last]
            self._buffer[position * d : (position + 1) * d] = self._buffer[
                last * d : (last + 1) * d
            ]
            self._keys[position] = moved
            self._positions[moved] = position
        self._keys.pop()
        self._stored -= 1
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
        ``VectorIndex.search(..., exact=True)`` returns for the same vectors."""
        q = check_vector_query(query, k, self._dimensions, candidates)
        if k == 0 or not self._keys:
            return []
        positions = eligible_vector_positions(allowed, self._keys, self._positions)
        n = len(self._keys) if positions is None else len(positions)
        if n == 0:
            return []
        self._flush()
        c = k + max(16, k // 4)
        if n <= 2 * c:  # a float32 pass would not save much
            return self._exactly(q, positions, k, newer)
        d = self._dimensions
        matrix = self._buffer[: len(self._keys) * d].reshape(-1, d)
        q32 = np.asarray(q, dtype=np.float32)
        chosen: Any = None
        if positions is None:
            scores = _dot(matrix, q32)
        else:
            chosen = np.asarray(positions, dtype=np.intp)
            scores = (
                _dot(matrix[chosen], q32) if 2 * n < len(self._keys) else _dot(matrix, q32)[chosen]
            )
        while c < n:
            top = np.argpartition(scores, n - c)[n - c :]
            floor = float(scores[top].min())  # every vector left out scored at most this
            picked = (top if chosen is None else chosen[top]).tolist()
            found = self._exactly(q, picked, k, newer)
            if len(found) == k and found[-1][1] > floor + self._slack:
                return found
            c *= 4
        return self._exactly(q, positions, k, newer)

    def _exactly(
        self, q: list[float], positions: Sequence[int] | None, k: int, newer: Any
    ) -> list[tuple[str, float]]:
        return score_vectors_exactly(
            self._buffer, self._dimensions, self._keys, q, positions, k, newer
        )
