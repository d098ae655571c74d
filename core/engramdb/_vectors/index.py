"""Vector maths and the in-process vector index.

Everything here is the standard library only, so it runs unchanged in CPython and in
Pyodide. Vectors are L2-normalised once on write and once per query, so cosine
similarity is a dot product (see ``docs/performance-history.md``, section "Vectors", for the
measurements behind every choice below).

:class:`VectorIndex` keeps all vectors of one embedding space in one flat
``array('f')`` (4 bytes per dimension) plus one sign-bit code (a Python ``int``) per
vector and one 4-bit copy of its components (half a byte per dimension: the top half of
each byte of its ``uint8`` copy). A search either
scores every eligible vector exactly (``use_exact``: ``exact=True``, or no more than
it would score exactly anyway), or runs the *approximate* path: up to 1,000 eligible
vectors are all candidates, above that the Hamming distance
between sign-bit codes picks ``C`` of them (``candidates_for``); the candidates'
4-bit copies (as four bit planes built when a search first needs them) re-score those
cheaply and keep the best ``rerank_for``, and only
those are scored exactly from the float32 array (the three counts: ``rules``;
the bit-level kernels: ``codes``). For 64 <= d <= 384 the Hamming stage
first narrows all vectors to about 3C by the distance of their codes' first 192 bits
(all of them below d = 192), computed a byte column at a time in C (``bytes.translate``
and big-integer sums).

The sign code and the ``uint8`` copy of a vector are its *index data*
(``index_data``). A store can keep them next to the float32 blob, so that
:meth:`VectorIndex.load` rebuilds an index in bulk without recomputing them.
"""

from __future__ import annotations

import functools
import heapq
import math
import struct
import sys
from array import array
from binascii import crc32
from collections import deque
from collections.abc import (
    Container,
    Iterable,
    Iterator,
    Sequence,
)
from itertools import count, repeat
from operator import itemgetter
from typing import cast

from engramdb._base.errors import ValidationError
from engramdb._vectors import rules
from engramdb._vectors.codec import encode_f32, sign_code
from engramdb._vectors.codes import (
    diagonals,
    four_bits,
    nearest_by_prefix,
    nearest_codes,
    nibble_planes,
)
from engramdb._vectors.exact import (
    _clamp,
    _smallest,
    _unit,
    check_query,
    eligible_positions,
    normalize,
    score_exactly,
)
from engramdb._vectors.held import Held, sizes
from engramdb._vectors.index_data import (
    HEADER,
    check_dimensions,
    code_bytes,
    floats,
    index_data_joined,
    quantiser,
    row_errors,
)
from engramdb._vectors.rows import ByteRows
from engramdb.ranking._ties import Newer

__all__ = [
    "VectorIndex",
    "check_query",
    "eligible_positions",
    "normalize",
    "score_exactly",
    "unit_f32",
]

# Its prefilter reads the first _PREFIX_BYTES bytes (192 dimensions) of each sign code
# (at most 31: the byte lanes of the column sums must not carry) and keeps about
# _PREFIX_POOL * C codes for the full Hamming distance. It is used from d = 64
# (_PREFIX_MIN bytes) to d = 384, where the prefix is at least half the code; outside
# that every full code is scanned instead (at d = 768 a quarter-code prefix lost much
# of the recall on unclustered data, docs/performance-history.md).
_PREFIX_BYTES = 24
_PREFIX_MIN = 8
_PREFIX_POOL = 3
_BIG_ENDIAN = sys.byteorder == "big"


def unit_f32(vector: Iterable[float]) -> bytes:
    """``encode_f32(normalize(vector))`` (the same bytes) in one cheaper pass.

    Unit components lie in [-1, 1], so the float32 conversion needs no overflow check.
    """
    values = _unit(vector)
    return _f32_struct(len(values)).pack(*values)  # 2x array("f", ...) for lists


@functools.lru_cache(maxsize=16)
def _f32_struct(dimensions: int) -> struct.Struct:
    """Little-endian float32 x ``dimensions``, whatever the host's byte order."""
    return struct.Struct(f"<{dimensions}f")


# --- the index -----------------------------------------------------------------------


class VectorIndex:
    """A compact, in-process index of unit vectors of one dimension, keyed by string.

    Vectors live in one flat ``array('f')`` next to their 4-bit copies (``ByteRows``,
    half a byte per dimension), a list of sign-bit codes and a list of bit planes
    (removal swaps the last vector into the hole of each), so 100k vectors at d=384
    take about 180 MB, plus about 310 B per vector (d=384; 470 B at d=768) once its bit
    planes are built. In Pyodide an index of up to 1,000 vectors also keeps each scored
    vector as a tuple of floats, about 7.8 KB per vector at d=384 (15.4 KB at d=768).
    With ``floats_up_to=N``, once it holds more than ``N`` vectors the index drops the
    float32 array for good and keeps each vector's CRC-32 instead (a fifth of the bytes
    at d=768): :meth:`search` then refuses, and a caller asks :meth:`shortlist` which
    vectors to score exactly and hands their blobs to :meth:`rescore`, with the same
    answer. The index is not thread-safe; it does no I/O.
    """

    uses_index_data = True
    """:meth:`load_packed` takes the vectors' index data (their sign codes and copies)."""

    __slots__ = (
        "_codes",
        "_columns",
        "_crcs",
        "_decoded",
        "_dimensions",
        "_flat",
        "_floats_up_to",
        "_four",
        "_key_bytes",
        "_keys",
        "_nibbles",
        "_nibbles_built",
        "_positions",
        "_scale",
    )

    def __init__(self, dimensions: int, *, floats_up_to: int | None = None) -> None:
        check_dimensions(dimensions)
        if floats_up_to is not None and (
            isinstance(floats_up_to, bool) or not isinstance(floats_up_to, int) or floats_up_to < 0
        ):
            raise ValidationError(
                f"floats_up_to={floats_up_to!r} must be None or an int >= 0; "
                "pass e.g. VectorIndex(768, floats_up_to=4096)"
            )
        self._dimensions = dimensions
        self._flat: array[float] = array("f")
        # Past floats_up_to vectors the float32 copies are dropped for good and only the
        # CRC-32 of each vector's blob is kept (_crcs, None until then): a search then
        # names the vectors it must score exactly (shortlist) and the caller hands their
        # blobs to rescore, which checks them against these CRCs.
        self._floats_up_to = floats_up_to
        self._crcs: array[int] | None = None
        # 4-bit copy: the top half of each byte of the uint8 copy (clamp(round(x * S),
        # -127, 127) + 128 per component, rounding half up, by quantiser(dimensions): the
        # last d bytes of the vector's index data), two components a byte (four_bits).
        # Half the bytes of the uint8 copy, and all that the 4-bit re-score reads.
        self._four = ByteRows((dimensions + 1) // 2)
        self._scale = quantiser(dimensions).scale
        self._codes: list[int] = []
        # The 4-bit copy of each vector as four bit planes side by side in one int (plane
        # i: bit i of every component, component 0 the most significant bit, at bit
        # i * d) and the sum of its 4-bit values: the cheap re-score of _nibble_scores.
        # Built from a vector's 4-bit copy when a search first scores it (None until then:
        # loading and exact searches never pay for it, a search of 10k vectors only for
        # its candidates); None again when the vector is replaced.
        self._nibbles: list[tuple[int, int] | None] = []
        self._nibbles_built = 0  # how many of them are not None (held_bytes)
        # In Pyodide, up to ALL_CANDIDATES vectors: {position: (its float32 components as
        # a tuple of Python floats, their squared norm)}, decoded when an exact score first
        # needs it (dropped when the vector is replaced, and all dropped once the index
        # holds more vectors). math.dist on these scores about 2x cheaper there than
        # math.sumprod on a memoryview slice, for about 20 bytes per dimension
        # (docs/performance-history.md).
        self._decoded: dict[int, tuple[tuple[float, ...], float]] = {}
        # The first bytes of every sign code, one bytearray per byte position (byte j of
        # vector i at self._columns[j][i]): the prefix prefilter of _nearest_by_prefix.
        width = min(_PREFIX_BYTES, dimensions // 8)
        used = width >= _PREFIX_MIN and 16 * width >= dimensions  # 64 <= d <= 384
        self._columns = [bytearray() for _ in range(width if used else 0)]
        self._keys: list[str] = []
        self._key_bytes = 0  # sys.getsizeof of every key (held_bytes)
        self._positions: dict[str, int] = {}

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

    def add(self, key: str, blob: bytes) -> None:
        """Add (or replace) the vector under ``key``.

        ``blob`` holds the little-endian float32 bytes of a unit vector, as made by
        ``encode_f32(normalize(v))``. Raises ``CorruptDataError`` for bad bytes,
        ``DimensionMismatchError`` for a wrong length and ``ValidationError`` for a
        vector that is not unit length. A failed add changes nothing.
        """
        self.add_many(((key, blob),))

    def add_many(self, pairs: Iterable[tuple[str, bytes]]) -> None:
        """Add (or replace) many ``(key, blob)`` pairs; the same as :meth:`add` for each.

        The blobs are checked, sign-coded and quantised in bulk, which is several times
        faster than repeated :meth:`add`. Raises what :meth:`add` raises for the first bad
        pair; a failed call changes nothing. A key given twice keeps its last vector.
        """
        keys: list[str] = []
        blobs: list[bytes] = []
        for key, blob in pairs:
            keys.append(key)
            blobs.append(blob)
        errors, blobs, records = self._prepare(keys, blobs, [None] * len(keys))
        if errors:
            raise errors[min(errors)]
        self._insert(keys, blobs, records)

    def load(self, rows: Iterable[tuple[str, bytes, bytes | None]]) -> dict[str, str]:
        """Add (or replace) many ``(key, float32 blob, index data or None)`` rows.

        A row whose index data (:func:`index_data`) has the current version and length is
        added as it is: its sign code and ``uint8`` copy are not recomputed. For other rows
        they are computed, as :meth:`add_many` does. A row whose blob is corrupt (the wrong
        length, a NaN or infinite component, a CRC-32 in its current index data that it
        no longer matches, or, when its index data is computed here, a norm that is not
        1) is skipped; every other row is added, and a key given twice
        keeps the last such row. Returns ``{key: error message}`` for the skipped rows.

        Never raises for a bad row; raises ``ValidationError`` for a key that is not a
        ``str`` (then nothing changes). With current index data this costs a few C-level
        passes over the bytes and no Python object per component.
        """
        listed = rows if isinstance(rows, list) else list(rows)
        keys: list[str] = list(map(itemgetter(0), listed))
        blobs: list[bytes] = list(map(itemgetter(1), listed))
        records: list[bytes | None] = list(map(itemgetter(2), listed))
        del listed
        errors, blobs, filled = self._prepare(keys, blobs, records)
        if not errors:
            self._insert(keys, blobs, filled)
            return {}
        self._insert([key for i, key in enumerate(keys) if i not in errors], blobs, filled)
        return {keys[i]: str(errors[i]) for i in sorted(errors)}

    def load_packed(self, keys: Sequence[str], vectors: bytes, index_data: bytes | None) -> None:
        """Add new ``keys`` whose float32 blobs and current index data are given
        concatenated, in key order, as a packed segment holds them (checked when packed:
        nothing is checked again here). Raises ``ValueError`` for keys already present,
        missing index data or lengths that do not match."""
        n, d = len(keys), self._dimensions
        if index_data is None:
            raise ValueError("a packed segment without index data")
        size = len(index_data) // n if n else 0
        if len(vectors) != 4 * d * n or size * n != len(index_data):
            raise ValueError(f"a packed segment of {n} vectors of {d} dimensions has bad lengths")
        if len(set(keys)) != n or not self._positions.keys().isdisjoint(keys):
            raise ValueError("a packed segment repeats a key or holds one already indexed")
        records = [index_data[i : i + size] for i in range(0, len(index_data), size)] if n else []
        # New keys take _insert's bulk path, which reads the blobs only to keep their
        # floats, in any split: the segment's vectors whole, not a slice per vector.
        self._insert(list(keys), [vectors] if self._crcs is None else [], records)

    def _prepare(
        self, keys: list[str], blobs: list[bytes], records: list[bytes | None]
    ) -> tuple[dict[int, Exception], list[bytes], list[bytes]]:
        """Check rows and complete their index data, for :meth:`_insert`.

        Returns the error of each bad row (by index), and the blobs and index data of the
        other rows: ``records[i]`` where it is current, else computed here (``records`` is
        updated in place).
        """
        d = self._dimensions
        errors, stale = row_errors(keys, blobs, records, d)
        if stale:
            computed = b"".join([blobs[i] for i in stale])
            for i, record in zip(stale, index_data_joined(computed, d), strict=True):
                records[i] = record
        filled = cast("list[bytes]", records)  # every row without an error has its data
        if not errors:
            return errors, blobs, filled
        kept = [i for i in range(len(blobs)) if i not in errors]
        return errors, [blobs[i] for i in kept], [filled[i] for i in kept]

    def _insert(self, keys: list[str], blobs: list[bytes], records: Sequence[bytes]) -> None:
        """Add or replace checked vectors, given their float32 blobs and index data. New,
        distinct keys (the bulk path) take the blobs in any split, joined or not, and
        none once the index keeps CRC-32s instead of floats (:meth:`load_packed`)."""
        d = self._dimensions
        width = code_bytes(d)
        code_parts: list[bytes] = list(map(itemgetter(slice(HEADER, HEADER + width)), records))
        codes = list(map(int.from_bytes, code_parts))  # big-endian: the default
        uint8_copy = itemgetter(slice(HEADER + width, None))
        start = len(self._keys)
        added = dict(zip(keys, count(start)))
        if len(added) == len(keys) and self._positions.keys().isdisjoint(added):
            # New, distinct keys (a bulk load): append everything, a C-level pass each.
            if self._crcs is not None:
                self._crcs += array("I", map(_crc_of, records))
            elif _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
                self._flat += floats(b"".join(blobs))
            else:
                _consume(map(self._flat.frombytes, blobs))
            self._four.extend(four_bits(b"".join(map(uint8_copy, records)), d))
            self._nibbles += repeat(None, len(keys))
            self._codes += codes
            if self._columns and d % 8 == 0:  # a prefix is the first bytes of a code
                self._append_prefixes(b"".join(code_parts), width)
            elif self._columns:
                self._append_prefixes(b"".join(map(self._prefix, codes)), len(self._columns))
            self._keys += keys
            self._key_bytes += sum(map(sys.getsizeof, keys))
            self._positions.update(added)
            self._drop_floats_past_limit()
            return
        crcs = self._crcs
        for key, blob, record, code in zip(keys, blobs, records, codes, strict=True):
            position = self._positions.get(key)
            if position is None:
                if crcs is None:
                    self._flat += floats(blob)
                else:
                    crcs.append(_crc_of(record))
                self._four.extend(four_bits(uint8_copy(record), d))
                self._nibbles.append(None)
                self._codes.append(code)
                self._append_prefixes(self._prefix(code), len(self._columns))
                self._keys.append(key)
                self._key_bytes += sys.getsizeof(key)
                self._positions[key] = len(self._keys) - 1
            else:
                if crcs is None:
                    self._flat[position * d : (position + 1) * d] = floats(blob)
                else:
                    crcs[position] = _crc_of(record)
                self._four[position] = four_bits(uint8_copy(record), d)
                self._nibbles_built -= self._nibbles[position] is not None
                self._nibbles[position] = None
                self._decoded.pop(position, None)
                self._codes[position] = code
                self._set_prefix(position, self._prefix(code))
        self._drop_floats_past_limit()

    def _drop_floats_past_limit(self) -> None:
        """Past ``floats_up_to`` vectors, keep each vector's CRC-32 instead of its floats."""
        limit = self._floats_up_to
        if limit is not None and len(self._keys) > limit:
            self.drop_floats()

    def reserve(self, rows: int) -> None:
        """A load of about ``rows`` vectors follows (``CacheEntry.reserve``): when they
        take the index past ``floats_up_to``, it keeps no float32 copies from the start,
        instead of building them for the first ``floats_up_to`` vectors and dropping them
        (in Pyodide the holes that growth leaves stay in the wasm memory, which never
        shrinks: ``docs/workers.md``, "One budget per object")."""
        limit = self._floats_up_to
        if limit is not None and len(self._keys) + rows > limit:
            self.drop_floats()

    def drop_floats(self) -> None:
        """Keep each vector's CRC-32 instead of its float32 copy, from now on: as past
        ``floats_up_to`` vectors, :meth:`search` then refuses and :meth:`shortlist` with
        :meth:`rescore` answer. Frees about ``4 * d`` bytes a vector (a memory budget's
        eviction: ``SqliteVectorCache``)."""
        if self._crcs is not None:
            return
        flat, d = self._flat, self._dimensions
        self._crcs = array("I", [crc32(_blob_at(flat, p, d)) for p in range(len(self._keys))])
        self._flat = array("f")
        self._decoded = {}

    def drop_decoded(self) -> None:
        """Forget the decoded copies of scored vectors (Pyodide's cheaper exact scores,
        rebuilt when a search needs them again)."""
        self._decoded = {}

    def drop_nibbles(self) -> None:
        """Forget the bit planes searches have built (rebuilt, in bulk from the 4-bit
        copies, for the candidates of the next searches)."""
        self._nibbles = [None] * len(self._keys)
        self._nibbles_built = 0

    def held_bytes(self) -> Held:
        """About how many bytes the index holds, by part (:class:`Held`). An estimate
        from counts, not a walk: within about a tenth of ``tracemalloc``'s figure
        (``tests/core/test_vector_budget.py``)."""
        n, d = len(self._keys), self._dimensions
        per = sizes(d, len(self._columns))
        return Held(
            n * per.vector + self._key_bytes + (4 * n if self._crcs is not None else 0),
            self._nibbles_built * per.nibbles,
            4 * len(self._flat),
            len(self._decoded) * per.decoded,
        )

    def remove(self, key: str) -> bool:
        """Remove ``key``; return whether it was present."""
        position = self._positions.pop(key, None)
        if position is None:
            return False
        d = self._dimensions
        last = len(self._keys) - 1
        crcs = self._crcs
        self._nibbles_built -= self._nibbles[position] is not None
        self._key_bytes -= sys.getsizeof(key)
        if position != last:
            moved = self._keys[last]
            if crcs is None:
                self._flat[position * d : (position + 1) * d] = self._flat[last * d :]
            else:
                crcs[position] = crcs[last]
            self._four[position] = self._four[last]
            self._codes[position] = self._codes[last]
            self._nibbles[position] = self._nibbles[last]
            decoded = self._decoded.pop(last, None)
            if decoded is None:
                self._decoded.pop(position, None)
            else:
                self._decoded[position] = decoded
            self._set_prefix(position, self._prefix(self._codes[last]))
            self._keys[position] = moved
            self._positions[moved] = position
        if crcs is None:
            del self._flat[last * d :]
        else:
            crcs.pop()
        self._four.pop()
        self._codes.pop()
        self._nibbles.pop()
        self._decoded.pop(last, None)
        for column in self._columns:
            column.pop()
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
        newer: Newer | None = None,
    ) -> list[tuple[str, float]]:
        """Return up to ``k`` ``(key, cosine similarity)`` pairs, best first.

        Similarities are rounded down to a multiple of 2**-30 (``_ties.quantised``), so
        that runtimes whose dot products differ in the last bits rank alike. Equal
        similarities come newest first, before the cut to ``k``: by ``newer(key)``
        descending (a store passes its items' ``(created_at, id)``), by key descending when
        ``newer`` is None (ids are time-ordered). The approximate path's candidate stages
        take equal distances in index order, so among more tied vectors than they keep the
        newest are not guaranteed (``docs/performance-history.md``, "Ties"). ``allowed`` restricts
        the eligible keys. ``exact=True`` scores every eligible vector; otherwise large sets
        use the approximate path: ``candidates`` (default :func:`candidates_for`) Hamming
        candidates (every eligible vector when there are no more) are re-scored from their
        4-bit copies and the best :func:`rerank_for` of those exactly. Which sets are
        "large" is :func:`use_exact`'s rule. The query need not be
        normalised.
        """
        q = check_query(query, k, self._dimensions, candidates)
        if self._crcs is not None:
            raise ValueError(
                f"this index holds {len(self._keys)} vectors, past floats_up_to="
                f"{self._floats_up_to}, and keeps no float32 copies: call shortlist() and "
                "pass the float32 blobs of the keys it names to rescore()"
            )
        picked = self._pick(q, k, exact, allowed, candidates)
        return [] if picked == [] else self._score(q, picked, k, newer)

    @property
    def keeps_floats(self) -> bool:
        """Whether :meth:`search` answers alone; False once the index has held more than
        ``floats_up_to`` vectors (then :meth:`shortlist` and :meth:`rescore` do)."""
        return self._crcs is None

    def shortlist(
        self,
        query: Sequence[float],
        k: int,
        *,
        exact: bool = False,
        allowed: Container[str] | None = None,
        candidates: int | None = None,
    ) -> list[str]:
        """The keys whose vectors :meth:`search` with these arguments would score exactly
        (every eligible key for an exact search), in index order: the rows to read for
        :meth:`rescore` when the index keeps no float32 copies (:attr:`keeps_floats`)."""
        q = check_query(query, k, self._dimensions, candidates)
        picked = self._pick(q, k, exact, allowed, candidates)
        keys = self._keys
        return list(keys) if picked is None else [keys[p] for p in picked]

    def rescore(
        self,
        query: Sequence[float],
        k: int,
        vectors: Iterable[tuple[str, bytes]],
        newer: Newer | None = None,
    ) -> tuple[list[tuple[str, float]], dict[str, str]]:
        """Score ``(key, float32 blob)`` pairs exactly, as :meth:`search` scores its
        shortlist: the best ``k`` ``(key, similarity)`` pairs, and ``{key: why}`` for
        the blobs left out because they are not the vector the index holds (another
        length or CRC-32: a row damaged since it was loaded). Keys the index does not
        hold are ignored."""
        d = self._dimensions
        q = check_query(query, k, d, None)
        keys: list[str] = []
        blobs: list[bytes] = []
        bad: dict[str, str] = {}
        crcs, step = self._crcs, 4 * d
        for key, blob in vectors:
            p = self._positions.get(key)
            if p is None:
                continue
            held = crcs[p] if crcs is not None else crc32(_blob_at(self._flat, p, d))
            if len(blob) != step or crc32(blob) != held:
                bad[key] = (
                    "the vector's bytes no longer match the ones its index was loaded with; "
                    "the row is corrupt: re-embed it with reindex()"
                )
                continue
            keys.append(key)
            blobs.append(blob)
        if k == 0 or not keys:
            return [], bad
        return score_exactly(floats(b"".join(blobs)), d, keys, q, None, k, newer), bad

    # -- internals -------------------------------------------------------------------

    def _prefix(self, code: int) -> bytes:
        """The first ``len(self._columns)`` bytes of a sign code (its leading dimensions)."""
        width = len(self._columns)
        return (code >> (self._dimensions - 8 * width)).to_bytes(width, "big")

    def _append_prefixes(self, rows: bytes, stride: int) -> None:
        """Append new vectors' prefixes to the columns: ``rows`` holds ``stride`` bytes per
        vector, its prefix first."""
        for j, column in enumerate(self._columns):
            column += rows[j::stride]

    def _set_prefix(self, position: int, prefix: bytes) -> None:
        for column, byte in zip(self._columns, prefix, strict=True):
            column[position] = byte

    def _eligible(self, allowed: Container[str] | None) -> list[int] | None:
        return eligible_positions(allowed, self._keys, self._positions)

    def _pick(
        self,
        q: list[float],
        k: int,
        exact: bool,
        allowed: Container[str] | None,
        candidates: int | None,
    ) -> list[int] | None:
        """The positions a search scores exactly (None: all; [] finds nothing)."""
        if k == 0 or not self._keys:
            return []
        positions = self._eligible(allowed)
        n = len(self._keys) if positions is None else len(positions)
        if n == 0:
            return []
        c = rules.candidates_for(n, k) if candidates is None else max(candidates, k)
        if exact or rules.use_exact(n, c, k):
            return positions
        return self._approximate(q, positions, k, c)

    def _score(
        self, q: list[float], positions: list[int] | None, k: int, newer: Newer | None = None
    ) -> list[tuple[str, float]]:
        """Score ``positions`` (None: all) exactly; return the best ``k`` (key, similarity)."""
        if not rules.CHEAP_EXACT:
            if len(self._keys) <= rules.ALL_CANDIDATES:
                return self._score_decoded(q, positions, k, newer)
            if self._decoded:  # grown past that size: free the decoded copies
                self._decoded = {}
        return self._score_view(q, positions, k, newer)

    def _score_view(
        self, q: list[float], positions: list[int] | None, k: int, newer: Newer | None = None
    ) -> list[tuple[str, float]]:
        """:meth:`_score` from ``memoryview`` slices of the float32 array."""
        return score_exactly(self._flat, self._dimensions, self._keys, q, positions, k, newer)

    def _score_decoded(
        self, q: list[float], positions: list[int] | None, k: int, newer: Newer | None = None
    ) -> list[tuple[str, float]]:
        """:meth:`_score` from the decoded tuples (built here where missing), by
        ``math.dist``: ``q . v = (|q|^2 + |v|^2 - dist^2) / 2``, with the squared norms
        of the stored float32 values (which differ from 1 by up to about 1e-7), so the
        similarity is their dot product, as :meth:`_score_view` gives on Python 3.12+."""
        d = self._dimensions
        decoded = self._decoded
        flat = self._flat
        picked: Sequence[int] = range(len(self._keys)) if positions is None else positions
        for p in [p for p in picked if p not in decoded]:
            t = tuple(flat[p * d : (p + 1) * d])
            decoded[p] = (t, math.fsum([x * x for x in t]))
        keys = self._keys if positions is None else [self._keys[p] for p in positions]
        qt = tuple(q)
        qq = math.fsum([x * x for x in qt])
        dist = math.dist
        # dist^2 - |v|^2 = |q|^2 - 2 q.v: smaller is nearer.
        scores = [dist(qt, t) ** 2 - vv for t, vv in map(decoded.__getitem__, picked)]
        best = _smallest(scores, k, keys, newer, lambda s: _clamp((qq - s) / 2.0))
        return [(keys[i], similarity) for i, similarity in best]

    def _approximate(
        self, q: list[float], positions: list[int] | None, k: int, c: int
    ) -> list[int] | None:
        """The positions the approximate path scores exactly (None: all)."""
        eligible = len(self._keys) if positions is None else len(positions)
        if c >= eligible:  # every eligible vector is a candidate
            picked: list[int] | None = positions
        else:
            qcode = sign_code(encode_f32(q))
            picked = self._nearest_by_prefix(qcode, c, positions)
            if picked is None:
                codes = self._codes if positions is None else [self._codes[p] for p in positions]
                picked = nearest_codes(qcode, codes, c)
                if positions is not None:
                    picked = [positions[i] for i in picked]
        keep = rules.rerank_for(k, eligible)
        if (eligible if picked is None else len(picked)) > keep:
            scores = self._nibble_scores(q, picked)
            if len(scores) <= 20 * keep:  # a sort is cheaper then (both keep ties in order)
                best = sorted(range(len(scores)), key=scores.__getitem__)[:keep]
            else:
                best = heapq.nsmallest(keep, range(len(scores)), key=scores.__getitem__)
            picked = best if picked is None else [picked[i] for i in best]
        return picked

    def _nibble_scores(self, q: list[float], picked: list[int] | None) -> list[int]:
        """Rank ``picked`` (None: every vector) by their 4-bit copies against the query's
        4-bit copy: smaller is nearer.

        A 4-bit value ``u`` (0..15) stands for about ``16 * (u - 7.5) / S``, so for the
        query's values ``v`` the dot product is, up to a positive factor and a term that
        depends on the query only, ``sum(u * v) - 7.5 * sum(u)``; this returns
        ``15 * sum(u) - 2 * sum(u * v)``. ``sum(u * v)`` is the sum over the planes i of
        the vector and j of the query of ``2 ** (i + j)`` times the number of components
        with both bits set. A vector's 4-bit copy is one ``4d``-bit integer, a nibble
        per component, so plane i is bit i of every nibble (:func:`nibble_planes`), and
        the query's planes are laid out along its diagonals (:func:`diagonals`: ``y_t``
        holds plane ``t - i`` at bit i of every nibble), so that
        ``(v & y_t).bit_count()`` sums every ``(i, j)`` with ``i + j = t``: 7 ``&`` and
        ``bit_count`` per vector (it was 16 on ``d``-bit planes; 1.7x cheaper in
        Pyodide, about 1.1x on CPython, docs/performance-history.md). A vector's copy is built
        here when first needed.
        """
        d = self._dimensions
        nibbles = self._nibbles
        if picked is None:
            missing = [p for p, planes in enumerate(nibbles) if planes is None]
        else:
            missing = [p for p in picked if nibbles[p] is None]
        if missing:  # build them in bulk from the 4-bit copies kept
            copies = self._four.joined(missing)
            for p, planes in zip(missing, nibble_planes(copies, d), strict=True):
                nibbles[p] = planes
            self._nibbles_built += len(missing)
        built = cast("list[tuple[int, int]]", nibbles)
        y0, y1, y2, y3, y4, y5, y6 = diagonals(quantiser(d).one(q), d)
        rows: Iterable[tuple[int, int]] = (
            built if picked is None else map(built.__getitem__, picked)
        )
        # sum(u * v) = sum over t of 2 ** t times the number of bits set in v & y_t.
        return [
            15 * s
            - (
                (v & y0).bit_count()
                + ((v & y1).bit_count() << 1)
                + ((v & y2).bit_count() << 2)
                + ((v & y3).bit_count() << 3)
                + ((v & y4).bit_count() << 4)
                + ((v & y5).bit_count() << 5)
                + ((v & y6).bit_count() << 6)
                << 1
            )
            for v, s in rows
        ]

    def _nearest_by_prefix(
        self, qcode: int, c: int, positions: list[int] | None
    ) -> list[int] | None:
        """``nearest_by_prefix`` over this index's prefix columns and codes."""
        return nearest_by_prefix(
            self._columns, self._codes, self._prefix(qcode), qcode, c, positions, _PREFIX_POOL
        )


def _crc_of(record: bytes) -> int:
    """The blob's CRC-32 that a vector's index data records (bytes 1-4, little-endian)."""
    return int.from_bytes(record[1:HEADER], "little")


def _blob_at(flat: array[float], position: int, dimensions: int) -> bytes:
    """The little-endian float32 bytes of the vector at ``position`` of ``flat``."""
    part = flat[position * dimensions : (position + 1) * dimensions]
    if _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
        part.byteswap()
    return part.tobytes()


def _consume(iterator: Iterator[object]) -> None:
    """Run ``iterator`` to its end at C speed, keeping nothing."""
    deque(iterator, maxlen=0)
