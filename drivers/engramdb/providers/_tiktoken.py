"""An exact token count through tiktoken, for ``format_context(budget_tokens=...)``.

``tiktoken_counter()`` returns a function from a text to its number of tokens in one of
tiktoken's encodings (``cl100k_base`` by default). tiktoken is imported when a counter
is made, never with ``engramdb.providers``; without it the error says
``pip install tiktoken``. An encoding given by name is tiktoken's own: it downloads its
BPE file on first use into its cache (``TIKTOKEN_CACHE_DIR``); an ``Encoding`` object,
built from ranks you hold, needs no download.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from engramdb import ProviderError, ValidationError
from engramdb.validate import shown

__all__ = ["TIKTOKEN_HINT", "tiktoken_counter"]

TIKTOKEN_HINT = "pip install tiktoken"


def tiktoken_counter(encoding: Any = "cl100k_base") -> Callable[[str], int]:
    """A token counter for ``format_context(hits, budget_tokens=..., count_tokens=...)``:
    the number of tokens of a text in ``encoding``, a tiktoken encoding's name
    (``"cl100k_base"``, ``"o200k_base"``...) or a ``tiktoken.Encoding``. Every text is
    ordinary text: a memory that reads ``<|endoftext|>`` is counted, not refused."""
    try:
        tiktoken: Any = importlib.import_module("tiktoken")
    except ImportError as exc:
        raise ImportError(
            "tiktoken_counter() needs tiktoken, which is not installed; install it with:\n"
            f"{TIKTOKEN_HINT}"
        ) from exc
    if isinstance(encoding, str):
        encoding = _named(tiktoken, encoding)
    elif not isinstance(encoding, tiktoken.Encoding):
        raise ValidationError(
            f"encoding={shown(encoding)} must be a tiktoken encoding's name, such as "
            "'cl100k_base', or a tiktoken.Encoding"
        )
    encode = encoding.encode_ordinary

    def count_tokens(text: str) -> int:
        return len(encode(text))

    return count_tokens


def _named(tiktoken: Any, name: str) -> Any:
    """tiktoken's encoding ``name``, or the error that says what to do."""
    names = tiktoken.list_encoding_names()
    if name not in names:
        raise ValidationError(
            f"encoding={shown(name)} is not one of tiktoken's encodings; use one of "
            f"{names} or pass a tiktoken.Encoding"
        )
    try:
        return tiktoken.get_encoding(name)
    except (OSError, ValueError) as exc:  # a failed download, a corrupt one
        raise ProviderError(
            f"tiktoken could not load the encoding {name!r} ({type(exc).__name__}): it "
            "downloads its BPE file on first use; allow that download once, set "
            "TIKTOKEN_CACHE_DIR to a folder that holds the file, or pass a tiktoken.Encoding"
        ) from exc
