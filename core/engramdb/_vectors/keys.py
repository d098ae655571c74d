"""Keys held compactly: the ids of a packed segment in the vector cache, and the keys
of the numpy kernel's index in row order.

engramdb's ids are 26 ASCII characters. As ``str`` objects in a list, each costs about 88
bytes: 8.8 MB at 100,000 memories, a twentieth of a cold start's own memory.
:class:`CompactKeys` holds keys that are all ASCII and of one length in one
``bytearray``, as many bytes as characters (2.6 MB), and spells a key again when asked
for it. The first key of another length (or not ASCII) turns it into a plain list for
good, with the same answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import overload

__all__ = ["CompactKeys"]


class CompactKeys(Sequence[str]):
    """A list of ``str`` keys: ``len``, indexing, iteration, ``extend``, ``append``,
    ``pop`` of the last and assignment to one position; :meth:`at` spells many at once.
    ``CompactKeys.of(keys)`` is one holding ``keys``."""

    __slots__ = ("_listed", "_packed", "_width")

    def __init__(self) -> None:
        self._packed = bytearray()  # key i at [i * _width, (i + 1) * _width)
        self._width = 0  # 0: no key yet
        self._listed: list[str] | None = None  # once a key does not fit the packing

    @classmethod
    def of(cls, keys: Iterable[str]) -> CompactKeys:
        held = cls()
        held.extend(keys)
        return held

    def __len__(self) -> int:
        if self._listed is not None:
            return len(self._listed)
        return len(self._packed) // self._width if self._width else 0

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if self._listed is not None:
            return self._listed[index]
        if isinstance(index, slice):
            return list(self)[index]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("key index out of range")
        start = index * self._width
        return self._packed[start : start + self._width].decode("ascii")

    def at(self, positions: Sequence[int]) -> list[str]:
        """The keys at ``positions`` (each from 0 to ``len - 1``), in their order: what
        ``[keys[p] for p in positions]`` answers, without a method call per key (a
        vector search spells its best hundred this way)."""
        n = len(self)
        if positions and not (min(positions) >= 0 and max(positions) < n):
            bad = next(p for p in positions if not 0 <= p < n)
            raise IndexError(f"key position {bad} is out of range (0 to {n - 1})")
        if self._listed is not None:
            listed = self._listed
            return [listed[p] for p in positions]
        packed, w = self._packed, self._width
        return [packed[p * w : p * w + w].decode("ascii") for p in positions]

    def __iter__(self) -> Iterator[str]:
        if self._listed is not None:
            return iter(self._listed)
        if not self._width:
            return iter(())
        text, w = self._packed.decode("ascii"), self._width
        return (text[i : i + w] for i in range(0, len(text), w))

    def extend(self, keys: Iterable[str]) -> None:
        """Add ``keys`` after the last."""
        keys = keys if isinstance(keys, list) else list(keys)
        width = self._fits(keys) if self._listed is None and keys else 0
        if width:
            self._width = width
            self._packed += "".join(keys).encode("ascii")
        elif keys:
            self._as_list().extend(keys)

    def append(self, key: str) -> None:
        self.extend([key])

    def pop(self) -> str:
        """Remove and answer the last key."""
        last = self[-1]
        if self._listed is not None:
            self._listed.pop()
        else:
            del self._packed[-self._width :]
        return last

    def __setitem__(self, index: int, key: str) -> None:
        if not -len(self) <= index < len(self):
            raise IndexError("key index out of range")
        if self._listed is None and self._fits([key]):
            start = (index % len(self)) * self._width
            self._packed[start : start + self._width] = key.encode("ascii")
        else:
            self._as_list()[index] = key

    def _fits(self, keys: Sequence[str]) -> int:
        """The width of the packed keys if ``keys`` (not empty) can join them: all
        ``str``, ASCII and of that width (the first keys set it); else 0."""
        if set(map(type, keys)) != {str}:
            return 0
        widths = set(map(len, keys))
        width = self._width or min(widths)
        return width if widths == {width} and width > 0 and "".join(keys).isascii() else 0

    def _as_list(self) -> list[str]:
        """The keys as a plain list, from now on."""
        if self._listed is None:
            self._listed = list(self)
            self._packed = bytearray()
        return self._listed
