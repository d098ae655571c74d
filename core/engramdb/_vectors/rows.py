"""Fixed-width byte rows kept a thousand or so to a bytearray: an index's 4-bit copies.

One bytearray holding every row would be reallocated ever larger as rows arrive (tens
of MB for 50,000 vectors at d=768), and in Pyodide the hole each move leaves behind stays
in the wasm memory, which never shrinks (with ``VectorIndex.reserve``, this took a cold
load of 50,000 vectors at d=768 from 179 to 124 MiB of it: docs/workers.md, "One budget
per object"). Reads cost about what slicing one bytearray costs.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["CHUNK_ROWS", "ByteRows"]

CHUNK_ROWS = 1024
"""Rows per bytearray: 384 KiB of 4-bit copies at d=768."""


class ByteRows:
    """Rows of ``width`` bytes, by position; appended at the end, removed from the end."""

    __slots__ = ("_chunks", "_width")

    def __init__(self, width: int) -> None:
        self._width = width
        self._chunks: list[bytearray] = []  # all full but the last

    def __len__(self) -> int:
        if not self._chunks:
            return 0
        return (len(self._chunks) - 1) * CHUNK_ROWS + len(self._chunks[-1]) // self._width

    def __bytes__(self) -> bytes:
        return b"".join(self._chunks)

    def __getitem__(self, position: int) -> bytearray:
        chunk, row = divmod(position, CHUNK_ROWS)
        return self._chunks[chunk][row * self._width : (row + 1) * self._width]

    def __setitem__(self, position: int, row: bytes | bytearray) -> None:
        chunk, at = divmod(position, CHUNK_ROWS)
        self._chunks[chunk][at * self._width : (at + 1) * self._width] = row

    def extend(self, rows: bytes | bytearray) -> None:
        """Append ``rows``, given joined (``width`` bytes each), a chunk's worth at a time."""
        chunks, width = self._chunks, self._width
        if len(rows) % width:
            raise ValueError(f"{len(rows)} bytes are not rows of {width}")
        view = memoryview(rows)
        at = 0
        while at < len(rows):
            if not chunks or len(chunks[-1]) == CHUNK_ROWS * width:
                chunks.append(bytearray())
            room = CHUNK_ROWS * width - len(chunks[-1])
            chunks[-1] += view[at : at + room]
            at += room

    def pop(self) -> None:
        """Remove the last row."""
        tail = self._chunks[-1]
        del tail[-self._width :]
        if not tail:
            self._chunks.pop()

    def joined(self, positions: Iterable[int]) -> bytes:
        """The rows at ``positions``, concatenated (a search's candidates, in bulk)."""
        chunks, width, rows = self._chunks, self._width, CHUNK_ROWS
        return b"".join(
            [chunks[p // rows][p % rows * width : (p % rows + 1) * width] for p in positions]
        )
