"""``ByteRows``: fixed-width rows in chunks answer as one flat bytearray would."""

from __future__ import annotations

import random

import pytest

from engramdb._vectors.rows import CHUNK_ROWS, ByteRows


def test_byte_rows_answer_as_one_flat_bytearray_across_chunk_boundaries() -> None:
    """Appends in uneven batches, replacements, removals from the end and bulk reads
    across chunk boundaries give what a flat bytearray of the same rows gives."""
    width, rng = 5, random.Random(3)
    rows, flat = ByteRows(width), bytearray()

    def row() -> bytes:
        return bytes(rng.randrange(256) for _ in range(width))

    for batch in (1, CHUNK_ROWS - 2, 3, 2 * CHUNK_ROWS + 7, 0, 1):
        new = [row() for _ in range(batch)]
        rows.extend(b"".join(new))
        flat += b"".join(new)
    n = len(flat) // width
    assert len(rows) == n and bytes(rows) == bytes(flat)
    for position in (0, CHUNK_ROWS - 1, CHUNK_ROWS, n - 1):
        replacement = row()
        rows[position] = replacement
        flat[position * width : (position + 1) * width] = replacement
        assert rows[position] == replacement
    picked = rng.sample(range(n), 50)
    assert rows.joined(picked) == b"".join(flat[p * width : (p + 1) * width] for p in picked)
    for _ in range(CHUNK_ROWS + 9):  # back across a chunk boundary
        rows.pop()
        del flat[-width:]
    assert len(rows) == len(flat) // width and bytes(rows) == bytes(flat)
    rows.extend(b"".join(row() for _ in range(CHUNK_ROWS)))  # and forward again
    assert len(rows) == len(flat) // width + CHUNK_ROWS
    with pytest.raises(ValueError, match="7 bytes are not rows of 5"):
        rows.extend(bytes(7))
