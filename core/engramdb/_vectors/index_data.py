"""The index data of a vector: its sign code and ``uint8`` copy, the on-disk format.

:class:`~engramdb._vectors.index.VectorIndex` keeps, beside each float32 vector, its sign-bit
code (for the Hamming prefilter) and its ``uint8`` copy (for the cheap re-score).
Computing them costs Python work per component; a store writes them next to the blob
(:func:`index_data_many`, on the write path) so that a cold process loads an index in
bulk (``VectorIndex.load``) and computes nothing. This module holds that format, the one
``uint8`` quantiser and the bulk checks of float32 blobs both paths share.
"""

from __future__ import annotations

import functools
import math
import struct
import sys
from array import array
from binascii import crc32
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import cast

from engramdb._base.errors import CorruptDataError, DimensionMismatchError, ValidationError
from engramdb._vectors.codec import UNIT_TOLERANCE, check_unit_vector, decode_f32, sign_codes

__all__ = [
    "HEADER",
    "INDEX_DATA_VERSION",
    "bad_norms",
    "blob_errors",
    "check_dimensions",
    "checksum_errors",
    "code_bytes",
    "floats",
    "index_data",
    "index_data_is_current",
    "index_data_joined",
    "index_data_many",
    "index_data_size",
    "norm_error",
    "quantiser",
    "row_errors",
    "scrub",
    "stale_rows",
    "unit_index_data",
]

# The uint8 copy clips a component at this many standard deviations of a random unit
# vector's component (1 / sqrt(d)): scale S = 127 * sqrt(d) / _CLIP_SIGMAS.
_CLIP_SIGMAS = 4.0
# Once a process has quantised this many components of one dimension count (1k vectors
# at d=256, in any number of batches) it builds _Quantiser.table() (about 1 MB, in about
# 12 ms) and uses it from then on; until then it computes per component. Measured on
# CPython 3.11.7: about 45 against 90 ns per component, so the table pays for its build
# from about 270k.
_BULK_TABLE_MIN = 1 << 18
_GATHER = 1 << 13  # components per itemgetter call: its ints stay in cache (2x faster than 64k)
_BIG_ENDIAN = sys.byteorder == "big"
_U32 = struct.Struct("<I")
_F32 = struct.Struct("<f")

INDEX_DATA_VERSION = 1
"""The layout version of :func:`index_data`; :meth:`VectorIndex.load` recomputes others."""


def index_data(blob: bytes, dimensions: int) -> bytes:
    """Return the index data of one unit vector: what :class:`VectorIndex` derives from it.

    ``blob`` holds the vector's ``dimensions`` little-endian float32 components, as made by
    ``unit_f32(v)``. The result is ``5 + ceil(d / 8) + d`` bytes (an on-disk format):

    * byte 0: :data:`INDEX_DATA_VERSION` (1);
    * bytes 1-4: the CRC-32 of ``blob`` (``binascii.crc32``), little-endian: a row whose
      blob no longer matches it is corrupt (:func:`checksum_errors`);
    * the next ``ceil(d / 8)`` bytes: ``sign_code(blob)`` as an unsigned big-endian
      integer: bit ``d - 1 - i`` of it is the sign bit of component ``i`` (1 for negative
      and -0.0), and the ``8 * ceil(d / 8) - d`` leading bits are 0;
    * the last ``d`` bytes: the ``uint8`` copy, byte ``i`` being
      ``clamp(floor(x_i * S + 0.5), -127, 127) + 128`` with ``S = 127 * sqrt(d) / 4``
      (computed in float64 exactly as :func:`quantiser` does), so a component clips at
      4 standard deviations of a random unit vector's component.

    :meth:`VectorIndex.load` adds a vector with its index data without recomputing either
    part. Raises ``DimensionMismatchError`` for a blob of the wrong length,
    ``CorruptDataError`` for one with a NaN or infinite component and ``ValidationError``
    for one with a component of magnitude 2 or more (not a unit vector). The norm itself is
    not checked: other vectors get well-defined bytes that the index would never use.
    """
    return index_data_many((blob,), dimensions)[0]


def index_data_many(blobs: Iterable[bytes], dimensions: int) -> list[bytes]:
    """Return ``[index_data(blob, dimensions) for blob in blobs]``, computed in bulk.

    Raises what :func:`index_data` raises: for the first blob of a wrong length or with a
    NaN or infinity, else for the first one with a component of magnitude 2 or more.
    """
    check_dimensions(dimensions)
    listed = list(blobs)
    errors = blob_errors(listed, dimensions)
    if errors:
        raise errors[min(errors)]
    joined = b"".join(listed)
    large = joined[3::4].translate(_AT_LEAST_TWO).find(1)
    if large != -1:
        raise ValidationError(
            f"component {large % dimensions} of vector {large // dimensions} is "
            f"{_F32.unpack_from(joined, 4 * large)[0]:.6g}, so the vector is not unit "
            "length; pass unit_f32(vector)"
        )
    return index_data_joined(joined, dimensions)


def unit_index_data(vectors: Sequence[object]) -> list[bytes]:
    """The index data of each of ``vectors`` (float32 blobs, of any sizes), after
    checking in bulk that each is a finite unit vector; on any fault, the error that
    ``check_unit_vector`` raises for the first faulty one, in order."""
    by_size: dict[int, list[int]] = {}
    for position, vector in enumerate(vectors):
        if not isinstance(vector, bytes | bytearray | memoryview) or len(vector) % 4 != 0:
            _check_each(vectors)
        by_size.setdefault(len(cast("bytes", vector)) // 4, []).append(position)
    joined: dict[int, bytes] = {}
    for dimensions, positions in by_size.items():
        blobs = [bytes(cast("bytes", vectors[p])) for p in positions]
        joined[dimensions] = b"".join(blobs)
        if (
            not dimensions
            or blob_errors(blobs, dimensions)
            or bad_norms(joined[dimensions], dimensions)
        ):
            _check_each(vectors)
    derived: list[bytes] = [b""] * len(vectors)
    for dimensions, together in joined.items():
        check_dimensions(dimensions)
        # What index_data_many checks besides is checked above: finite unit vectors have
        # no component of magnitude 2 or more.
        data = index_data_joined(together, dimensions)
        for position, one in zip(by_size[dimensions], data, strict=True):
            derived[position] = one
    return derived


def _check_each(vectors: Sequence[object]) -> None:
    """``check_unit_vector`` of each vector in order: the first faulty one's error."""
    for vector in vectors:
        check_unit_vector(vector)


def index_data_joined(joined: bytes, dimensions: int) -> list[bytes]:
    """The index data of each vector in ``joined`` (finite components, all below 2)."""
    d = dimensions
    width = code_bytes(d)
    version = bytes((INDEX_DATA_VERSION,))
    quantised = quantiser(d).many(joined)
    with memoryview(joined) as view:
        checks = [
            crc32(view[4 * o : 4 * (o + d)]).to_bytes(4, "little")
            for o in range(0, len(quantised), d)
        ]
    return [
        b"".join((version, check, code.to_bytes(width, "big"), quantised[o : o + d]))
        for o, check, code in zip(
            range(0, len(quantised), d), checks, sign_codes(joined, d), strict=True
        )
    ]


def code_bytes(dimensions: int) -> int:
    """The length of a sign code in index data: ``ceil(dimensions / 8)``."""
    return -(-dimensions // 8)


def index_data_size(dimensions: int) -> int:
    return HEADER + code_bytes(dimensions) + dimensions


HEADER = 5  # the version byte and the blob's CRC-32


# Bytes of a little-endian float32's high byte (sign and 7 exponent bits) whose exponent
# may be all ones (it is when the next byte's top bit is set too: infinity or NaN), and a
# table marking the high bytes of |x| >= 2 (exponent >= 128), which no unit vector has.
_EXPONENT_HIGH_ONES = (0x7F, 0xFF)
_AT_LEAST_TWO = bytes(b & 0x7F >= 0x40 for b in range(256))


def blob_errors(blobs: Sequence[bytes], dimensions: int) -> dict[int, Exception]:
    """The error of each blob (by index) that is not ``dimensions`` finite float32s."""
    errors = _length_errors(blobs, dimensions)
    kept = [i for i in range(len(blobs)) if i not in errors] if errors else None
    fitting = blobs if kept is None else [blobs[i] for i in kept]
    for row in _non_finite(fitting, dimensions):
        i = row if kept is None else kept[row]
        errors[i] = _decode_error(blobs[i], dimensions)
    return errors


def _non_finite(blobs: Sequence[bytes], dimensions: int) -> set[int]:
    """The indices of the ``blobs`` (each ``4 * dimensions`` bytes) with a NaN or
    infinite component.

    Reads only bytes, in C: the high byte of every component is sliced out and the
    result searched (``bytes.find``) for the two values an all-ones exponent can have.
    """
    highs = b"".join(map(itemgetter(slice(3, None, 4)), blobs))
    found: set[int] = set()
    for high in _EXPONENT_HIGH_ONES:
        at = highs.find(high)
        while at != -1:
            row, component = divmod(at, dimensions)
            if blobs[row][4 * component + 2] & 0x80:
                found.add(row)
            at = highs.find(high, at + 1)
    return found


def _length_errors(blobs: Sequence[bytes], dimensions: int) -> dict[int, Exception]:
    """The error of each blob (by index) that is not bytes of ``4 * dimensions``."""
    size = 4 * dimensions
    try:
        if set(map(len, blobs)) <= {size}:
            return {}
    except TypeError:  # a blob without a length, such as None: found below
        pass
    errors: dict[int, Exception] = {}
    for i, blob in enumerate(blobs):
        if not isinstance(blob, (bytes, bytearray)):
            errors[i] = CorruptDataError(
                f"the vector is {type(blob).__name__}, not float32 bytes; the row is "
                "corrupt: re-embed it with reindex()"
            )
        elif len(blob) != size:
            errors[i] = _decode_error(bytes(blob), dimensions)
    return errors


def _decode_error(blob: bytes, dimensions: int) -> Exception:
    """The error ``decode_f32`` raises for a blob known to be bad."""
    try:
        decode_f32(blob, dimensions)
    except (CorruptDataError, DimensionMismatchError) as exc:
        return exc
    raise AssertionError("the blob decodes")  # pragma: no cover - callers found a fault


def norm_error(key: str, norm: float) -> ValidationError:
    return ValidationError(
        f"the vector for {key!r} has norm {norm:.6g}, not 1; store encode_f32(normalize(vector))"
    )


def bad_norms(joined: bytes, dimensions: int) -> dict[int, float]:
    """The norm of each vector in ``joined`` (finite) further than UNIT_TOLERANCE from 1."""
    d = dimensions
    values = floats(joined)
    hypot = math.hypot
    bad: dict[int, float] = {}
    with memoryview(values) as view:
        for i, o in enumerate(range(0, len(values), d)):
            norm = hypot(*view[o : o + d])
            if abs(norm - 1.0) > UNIT_TOLERANCE:
                bad[i] = norm
    return bad


def row_errors(
    keys: Sequence[str],
    blobs: Sequence[bytes],
    records: Sequence[bytes | None],
    dimensions: int,
    size: int | None = None,
    *,
    finite: bool = False,
) -> tuple[dict[int, Exception], list[int]]:
    """Check loaded rows ``(keys[i], blobs[i], records[i])``: return the error of each
    bad row (by index) and the indices of the good rows without current index data.

    A row is bad when its blob is not ``dimensions`` finite float32s, when it no longer
    matches the CRC-32 its current index data recorded, or, when it has no current
    index data (nothing vouches for it), when its norm is not 1. ``size`` is the length
    of current index data (default :func:`index_data_size`; :data:`HEADER` when the
    records are only their first bytes: the version and the CRC-32). ``finite=True``
    says the caller found every blob ``dimensions`` finite float32s already. Raises
    ``ValidationError`` for a key that is not a ``str``.
    """
    if not set(map(type, keys)) <= {str}:
        for key in keys:
            if not isinstance(key, str):
                raise ValidationError(f"key={key!r} must be a str")
    d = dimensions
    size = index_data_size(d) if size is None else size
    errors = {} if finite else blob_errors(blobs, d)
    stale = [i for i in stale_rows(records, blobs, size) if i not in errors]
    if stale:
        errors.update(checksum_errors(records, blobs, stale, size))
        stale = [i for i in stale if i not in errors]
    if stale:
        bad = bad_norms(b"".join([blobs[i] for i in stale]), d)
        for p, norm in bad.items():
            errors[stale[p]] = norm_error(keys[stale[p]], norm)
        stale = [i for i in stale if i not in errors]
    return errors, stale


def scrub(
    blobs: Sequence[bytes], records: Sequence[bytes | None], dimensions: int
) -> tuple[set[int], list[int]]:
    """Examine stored vectors of one dimension count, in bulk: return the indices of the
    unsound ones and, in order, of the sound ones whose index data is not current.

    A vector is unsound when its blob is not ``dimensions`` float32s of a finite unit
    vector, or when its index data is current (version and length) but no longer
    matches it: another CRC-32, or other bytes than :func:`index_data` derives. Every
    vector is unsound for ``dimensions`` below 1; above 65,536 ``ValidationError``.
    """
    if dimensions < 1:
        return set(range(len(blobs))), []
    check_dimensions(dimensions)
    d = dimensions
    unsound = set(blob_errors(blobs, d))
    fitting = [i for i in range(len(blobs)) if i not in unsound]
    bad = bad_norms(b"".join([blobs[i] for i in fitting]), d)
    unsound.update(fitting[p] for p in bad)
    sound = [i for i in fitting if i not in unsound]
    size = index_data_size(d)
    unsound.update(checksum_errors(records, blobs, sound, size))
    sound = [i for i in sound if i not in unsound]
    old = set(stale_rows([records[i] for i in sound], [blobs[i] for i in sound], size))
    current = [i for p, i in enumerate(sound) if p not in old]
    derived = index_data_joined(b"".join([blobs[i] for i in current]), d)
    unsound.update(i for i, data in zip(current, derived, strict=True) if records[i] != data)
    return unsound, [i for p, i in enumerate(sound) if p in old]


def index_data_is_current(record: bytes | None, blob: bytes, dimensions: int) -> bool:
    """Whether ``record`` is current index data of ``blob`` (version, length and CRC-32
    match): what :meth:`VectorIndex.load` trusts without recomputing."""
    return not stale_rows([record], [blob], index_data_size(dimensions))


def stale_rows(records: Sequence[bytes | None], blobs: Sequence[bytes], size: int) -> list[int]:
    """The indices of ``records`` that are not current index data of ``size`` bytes for
    their blob (the version, the length and the blob's CRC-32 must match)."""
    present = cast("Sequence[bytes]", records)  # len(None) raises TypeError here
    try:
        versions = map(itemgetter(0), present)
        if set(map(len, present)) <= {size} and set(versions) <= {INDEX_DATA_VERSION}:
            stored = b"".join(map(itemgetter(slice(1, HEADER)), present))
            if stored == _crc_bytes(blobs):  # every blob as it was written
                return []
    except TypeError:  # a None (record or blob): found below
        pass
    return [
        i
        for i, (record, blob) in enumerate(zip(records, blobs, strict=True))
        if not (
            isinstance(record, (bytes, bytearray))
            and isinstance(blob, (bytes, bytearray))
            and len(record) == size
            and record[0] == INDEX_DATA_VERSION
            and record[1:HEADER] == crc32(blob).to_bytes(4, "little")
        )
    ]


def checksum_errors(
    records: Sequence[bytes | None], blobs: Sequence[bytes], rows: Iterable[int], size: int
) -> dict[int, Exception]:
    """The error of each of ``rows`` (indices) whose blob does not match the CRC-32 that
    its index data, of the current version and length ``size``, recorded when the vector
    was written.

    Such a blob was changed behind engramdb's back (a flipped bit keeps a vector finite
    and near unit length, so nothing else finds it): it is never scored. Rows without
    index data, or with another version's or length's, have no checksum to trust.
    """
    errors: dict[int, Exception] = {}
    for i in rows:
        record, blob = records[i], blobs[i]
        if (
            isinstance(record, (bytes, bytearray))
            and len(record) == size
            and record[0] == INDEX_DATA_VERSION
            and record[1:HEADER] != crc32(blob).to_bytes(4, "little")
        ):
            errors[i] = CorruptDataError(
                "the vector's bytes do not match the CRC-32 stored with them when it was "
                "written; the row is corrupt: re-embed it with reindex()"
            )
    return errors


def _crc_bytes(blobs: Sequence[bytes]) -> bytes:
    """The little-endian CRC-32 of each blob, concatenated (one C-level pass)."""
    checks = array("I", map(crc32, blobs))  # "I" is 4 bytes on every CPython and Pyodide
    if _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
        checks.byteswap()
    return checks.tobytes()


def floats(joined: bytes) -> array[float]:
    """Little-endian float32 bytes as an ``array('f')`` (no per-component objects)."""
    values = array("f")
    values.frombytes(joined)
    if _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
        values.byteswap()
    return values


def check_dimensions(dimensions: int) -> None:
    if isinstance(dimensions, bool) or not isinstance(dimensions, int):
        raise ValidationError(
            f"dimensions={dimensions!r} must be an int; pass e.g. VectorIndex(384)"
        )
    if not 1 <= dimensions <= 65_536:
        raise ValidationError(f"dimensions={dimensions} is out of range; use 1..65536")


# --- the uint8 quantiser -----------------------------------------------------------------

_bulk_tables: dict[int, tuple[bytes, bytes]] = {}  # dimension count -> _Quantiser.table()
_quantised: dict[int, int] = {}  # dimension count -> components quantised without the table


@functools.lru_cache(maxsize=64)
def quantiser(dimensions: int) -> _Quantiser:
    """The one ``uint8`` quantiser for vectors of ``dimensions`` components."""
    return _Quantiser(dimensions)


class _Quantiser:
    """The ``uint8`` copy of unit vectors' components, for one dimension count.

    Component ``x`` becomes ``exact[int(x * scale + bias)]``, that is
    ``clamp(floor(x * S + 0.5), -127, 127) + 128`` with ``S = 127 * sqrt(d) / 4``
    computed in float64 (``bias`` keeps the index at least 0). Defined for finite
    components below 2 in magnitude; a unit vector's are at most 1.
    """

    __slots__ = ("bias", "dimensions", "exact", "scale")

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.scale = 127.0 * math.sqrt(dimensions) / _CLIP_SIGMAS
        top = math.ceil(2.0 * self.scale) + 1  # int(x * scale + bias) in 1..2*top for |x| < 2
        self.bias = top + 0.5
        self.exact = bytes(min(127, max(-127, i - top)) + 128 for i in range(2 * top + 1))

    def one(self, values: Iterable[float]) -> bytes:
        """The copy of the components ``values``, one at a time."""
        # A list comprehension measured fastest here (faster than chained C-level maps).
        exact, scale, bias = self.exact, self.scale, self.bias
        return bytes([exact[int(x * scale + bias)] for x in values])

    def many(self, joined: bytes) -> bytes:
        """The copy of every component of the little-endian float32 bytes ``joined``.

        Once this process has quantised :data:`_BULK_TABLE_MIN` components of this
        dimension count, through :meth:`table`, indexed by the top 24 bits of each
        float32 (sign, exponent, 15 mantissa bits, the top byte translated to its block):
        one C-level ``map`` instead of Python arithmetic per component. Where the table
        holds 0 (under 1 component in 1,000 in practice: the lowest byte matters) the
        byte is computed exactly.
        """
        d = self.dimensions
        table = _bulk_tables.get(d)
        if table is None:
            done = _quantised[d] = _quantised.get(d, 0) + len(joined) // 4
            if done < _BULK_TABLE_MIN:
                return self.one(floats(joined))
            table = _bulk_tables[d] = self.table()
        blocks, entries = table
        top = bytearray(len(joined))  # little-endian uint32 (b1, b2, block, 0)
        top[0::4] = joined[1::4]
        top[1::4] = joined[2::4]
        top[2::4] = joined[3::4].translate(blocks)
        indexes = array("I")
        indexes.frombytes(top)
        del top
        if _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
            indexes.byteswap()
        # itemgetter(*chunk) over chunks of _GATHER measured about twice as fast as
        # map(entries.__getitem__) or one itemgetter over all: its argument tuple (an
        # int object per component) stays small and in cache.
        out = bytearray()
        for o in range(0, len(indexes), _GATHER):
            chunk = indexes[o : o + _GATHER]
            out += bytes(
                itemgetter(*chunk)(entries)
                if len(chunk) > 1  # one index gives one int
                else map(entries.__getitem__, chunk)
            )
        del indexes
        exact, scale, bias = self.exact, self.scale, self.bias
        at = out.find(0)
        while at != -1:
            out[at] = exact[int(_F32.unpack_from(joined, 4 * at)[0] * scale + bias)]
            at = out.find(0, at + 1)
        return bytes(out)

    def table(self) -> tuple[bytes, bytes]:
        """The lookup table of :meth:`many`: ``(blocks, entries)``. ``blocks`` maps a
        float32's most significant byte ``b3`` to its block ``n``; entry
        ``n << 16 | b2 << 8 | b1`` of ``entries`` is the byte of every float32 whose
        bytes, most significant first, are ``b3``, ``b2``, ``b1`` and any last one, or 0
        where they do not all quantise alike. Equal blocks are kept once (tiny
        components all quantise to 128, and |x| >= 2, infinity and NaN, which unit
        vectors never have, all get 0): about 20 blocks of 64 KiB, not 256.

        Built from runs, in about 10 ms: quantisation is monotonic in ``x``, so
        :meth:`_runs` finds by bisection where the byte changes, first across ``b2``
        under each ``b3``, then across ``b1`` where it changes within one ``(b3, b2)``.
        """
        fills = [bytes((byte,)) * 256 for byte in range(256)]
        unused = bytes(65_536)
        numbers: dict[bytes, int] = {}
        blocks = bytearray()
        for b3 in range(256):
            if _AT_LEAST_TWO[b3]:
                block = unused
            else:
                block = b"".join(
                    [
                        fills[byte] if byte else self._runs(b3 << 16 | b2 << 8, 8)
                        for b2, byte in enumerate(self._runs(b3 << 8, 16))
                    ]
                )
            blocks.append(numbers.setdefault(block, len(numbers)))
        return bytes(blocks), b"".join(numbers)

    def _runs(self, first: int, shift: int) -> bytes:
        """256 entries: entry ``i`` is the byte of every float32 whose bits lie in
        ``(first + i) << shift`` up to ``(first + i + 1) << shift`` (exclusive), or 0
        where they differ. All of them share one sign, so the byte is monotonic in ``i``.
        """
        exact, scale, bias = self.exact, self.scale, self.bias
        last = (1 << shift) - 1

        def byte_at(bits: int) -> int:
            return exact[int(_F32.unpack(_U32.pack(bits))[0] * scale + bias)]

        out = bytearray()
        i = 0
        while i < 256:
            byte = byte_at((first + i) << shift)
            # Cells i .. stop - 1 quantise wholly to byte: the last float of cell stop
            # is the first (in bit order) whose byte differs.
            stop = bisect_left(
                range(256), True, lo=i, key=lambda j: byte_at((first + j) << shift | last) != byte
            )
            out += bytes((byte,)) * (stop - i)
            if stop < 256 and byte_at((first + stop) << shift) == byte:  # changes inside
                out.append(0)
                stop += 1
            i = stop
        return bytes(out)
