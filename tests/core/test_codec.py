"""The float32 codec: little-endian bytes, sign-bit codes and the errors for bad data."""

from __future__ import annotations

import math
import struct

import pytest

from engramdb._base.errors import CorruptDataError, DimensionMismatchError, ValidationError
from engramdb._vectors.codec import decode_f32, encode_f32, sign_code, sign_codes


def test_golden_bytes_are_little_endian_float32() -> None:
    """The on-disk format is pinned: 4 bytes per component, little-endian, no header."""
    assert encode_f32([1.0, -2.0, 0.5, 0.0]).hex() == "0000803f000000c00000003f00000000"


def test_golden_bytes_decode_back() -> None:
    blob = bytes.fromhex("0000803f000000c00000003f00000000")
    assert list(decode_f32(blob, 4)) == [1.0, -2.0, 0.5, 0.0]


def test_sign_code_golden() -> None:
    """Component 0 is the most significant bit; a set bit means a negative sign."""
    assert sign_code(encode_f32([1.0, -2.0, 0.5, 0.0])) == 0b0100
    assert sign_code(encode_f32([-1.0, -1.0, 1.0, -1.0])) == 0b1101
    assert sign_code(encode_f32([-0.0, 1.0])) == 0b10
    assert sign_code(b"") == 0


@pytest.mark.parametrize("d", [1, 5, 8, 13])
def test_sign_codes_of_joined_vectors_equal_each_sign_code(d: int) -> None:
    """The bulk form reads the vectors joined in one blob, one code per vector, in order."""
    vectors = [[(-1.0) ** (i * j + j // 3) * (j + 1) for j in range(d)] for i in range(7)]
    blobs = [encode_f32(v) for v in vectors] + [encode_f32([-0.0] * d)]
    assert sign_codes(b"".join(blobs), d) == [sign_code(blob) for blob in blobs]
    assert sign_codes(b"", d) == []


def test_sign_code_hamming_distance_counts_sign_flips() -> None:
    a = sign_code(encode_f32([1.0, -1.0, 1.0, -1.0, 1.0]))
    b = sign_code(encode_f32([-1.0, -1.0, 1.0, 1.0, 1.0]))
    assert (a ^ b).bit_count() == 2


def test_round_trip_property() -> None:
    """Any finite float32 values survive encode then decode exactly."""
    hypothesis = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")

    @hypothesis.settings(max_examples=200, deadline=None)
    @hypothesis.given(
        st.lists(
            st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=0, max_size=64
        )
    )
    def check(values: list[float]) -> None:
        blob = encode_f32(values)
        assert len(blob) == 4 * len(values)
        assert blob == struct.pack(f"<{len(values)}f", *values)
        assert list(decode_f32(blob, len(values))) == values

    check()


def test_round_trip_seeded() -> None:
    """The same property on fixed data, for environments without hypothesis."""
    values = [struct.unpack("<f", struct.pack("<f", x / 7.0))[0] for x in range(-50, 50)]
    assert list(decode_f32(encode_f32(values), len(values))) == values


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 1537])
def test_blob_length_not_multiple_of_four_is_corrupt(size: int) -> None:
    with pytest.raises(CorruptDataError, match="multiple of 4"):
        decode_f32(b"\x00" * size)


def test_dimension_mismatch_names_both_sizes() -> None:
    with pytest.raises(DimensionMismatchError) as info:
        decode_f32(encode_f32([1.0, 2.0, 3.0]), 4)
    assert info.value.expected == 4
    assert info.value.actual == 3
    assert isinstance(info.value, ValidationError)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_blob_is_corrupt(bad: float) -> None:
    blob = struct.pack("<3f", 1.0, bad, 0.0)
    with pytest.raises(CorruptDataError, match="NaN or infinite"):
        decode_f32(blob, 3)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e39])
def test_encode_rejects_non_finite_values(bad: float) -> None:
    with pytest.raises(ValidationError, match="finite"):
        encode_f32([0.5, bad])


def test_encode_rejects_non_numbers() -> None:
    with pytest.raises(ValidationError):
        encode_f32(["a", "b"])  # type: ignore[list-item]


def test_decode_without_dimensions_accepts_any_length() -> None:
    assert len(decode_f32(encode_f32([0.25] * 9))) == 9
