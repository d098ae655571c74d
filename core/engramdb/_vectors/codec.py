"""The float32 vector codec and sign-bit codes.

A vector is stored as little-endian IEEE-754 float32, 4 bytes per dimension, no header
(see ``docs/storage-format.md``). The same bytes give a *sign-bit code*: one Python
``int`` whose bit ``d - 1 - i`` is the sign bit of component ``i``, used by the
approximate search's Hamming prefilter.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Iterable

from engramdb._base.errors import CorruptDataError, DimensionMismatchError, ValidationError

__all__ = [
    "UNIT_TOLERANCE",
    "check_unit_vector",
    "decode_f32",
    "encode_f32",
    "sign_code",
    "sign_codes",
]

_BIG_ENDIAN = sys.byteorder == "big"
UNIT_TOLERANCE = 1e-3
"""A stored vector whose L2 norm is further than this from 1 was not normalised."""
# Maps each high byte of a little-endian float32 to "1" if its sign bit is set.
_SIGN_TABLE = bytes(0x31 if b & 0x80 else 0x30 for b in range(256))


def encode_f32(vector: Iterable[float]) -> bytes:
    """Encode ``vector`` as little-endian float32 bytes.

    Raises ``ValidationError`` if a component is not finite or does not fit in float32.
    """
    try:
        values = array("f", vector)
    except (TypeError, OverflowError) as exc:
        raise ValidationError(
            f"cannot encode the vector as float32 ({exc}); pass a sequence of finite floats"
        ) from exc
    # float32 values summed in float64 cannot overflow: the sum is finite exactly when
    # every component is.
    if not math.isfinite(sum(values)):
        raise ValidationError("the vector has a NaN or infinite component; pass finite floats only")
    if _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
        values.byteswap()
    return values.tobytes()


def decode_f32(blob: bytes, dimensions: int | None = None) -> array[float]:
    """Decode little-endian float32 ``blob`` into an ``array('f')``.

    Raises ``CorruptDataError`` if the length is not a multiple of 4 or a value is not
    finite, and ``DimensionMismatchError`` if ``dimensions`` is given and differs.
    """
    size = len(blob)
    if size % 4:
        raise CorruptDataError(
            f"a float32 vector blob of {size} bytes is not a multiple of 4; "
            "the row is corrupt: re-embed it with reindex()"
        )
    if dimensions is not None and size // 4 != dimensions:
        raise DimensionMismatchError(
            f"the vector has {size // 4} dimensions but its space has {dimensions}; "
            "re-embed it with reindex()",
            expected=dimensions,
            actual=size // 4,
        )
    values = array("f")
    values.frombytes(blob)
    if _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
        values.byteswap()
    # float32 values summed in float64 cannot overflow, so the sum is finite exactly
    # when every component is.
    if not math.isfinite(sum(values)):
        raise CorruptDataError(
            "a stored float32 vector has a NaN or infinite component; "
            "the row is corrupt: re-embed it with reindex()"
        )
    return values


def sign_code(blob: bytes) -> int:
    """Return the sign-bit code of a little-endian float32 ``blob``.

    Component 0 is the most significant bit. Negative components (and -0.0) give 1.
    """
    if not blob:
        return 0
    return int(blob[3::4].translate(_SIGN_TABLE), 2)


def sign_codes(joined: bytes, dimensions: int) -> list[int]:
    """Return ``[sign_code(v) for v in vectors]`` for vectors of ``dimensions`` components
    joined in one little-endian float32 ``joined`` (one C-level pass over the sign bytes).
    """
    signs = joined[3::4].translate(_SIGN_TABLE)
    return [int(signs[o : o + dimensions], 2) for o in range(0, len(signs), dimensions)]


def check_unit_vector(blob: object, dimensions: int | None = None) -> None:
    """Raise ``ValidationError`` unless ``blob`` holds the little-endian float32 bytes of
    a finite unit vector (of ``dimensions`` components, when given)."""
    if not isinstance(blob, bytes | bytearray | memoryview) or not len(blob) or len(blob) % 4:
        size = len(blob) if isinstance(blob, bytes | bytearray | memoryview) else None
        raise ValidationError(
            f"a vector must be non-empty float32 bytes (a multiple of 4), not "
            f"{type(blob).__name__} of {size} bytes; store encode_f32(normalize(vector))"
        )
    count = len(blob) // 4
    if dimensions is not None and count != dimensions:
        raise DimensionMismatchError(
            f"the vector has {count} dimensions but its space has {dimensions}; embed it "
            "with the space's model",
            expected=dimensions,
            actual=count,
        )
    values = array("f")
    values.frombytes(bytes(blob))
    if _BIG_ENDIAN:  # pragma: no cover - no big-endian CI host
        values.byteswap()
    norm = math.hypot(*values)
    if not math.isfinite(norm) or abs(norm - 1.0) > UNIT_TOLERANCE:
        raise ValidationError(
            f"the vector has norm {norm:.6g}, not 1 (or a NaN/infinite component); store "
            "encode_f32(normalize(vector))"
        )
