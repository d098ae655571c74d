"""BERT's uncased tokenizer (basic tokenizer + WordPiece) in the standard library.

It gives the same tokens as ``BertTokenizer(do_lower_case=True)`` and the ``tokenizers``
``BertNormalizer`` + ``BertPreTokenizer`` + ``WordPiece`` pipeline of uncased BERT models
such as all-MiniLM-L6-v2 (``tests/core/test_wordpiece.py`` compares them on a corpus):

1. **clean**: drop NUL, U+FFFD and control characters (Unicode category ``C*`` except
   tab, newline and carriage return); every whitespace character (those three, space and
   category ``Zs``) becomes a space;
2. **CJK**: put spaces around every CJK ideograph, so that each is a word of its own;
3. **lower-case and strip accents**: ``str.lower``, then NFD and drop every combining
   mark (category ``Mn``);
4. **split** on whitespace, then split every punctuation character off as a word of its
   own (ASCII ``!``-``/``, ``:``-``@``, ``[``-`````, ``{``-``~`` and category ``P*``);
5. **WordPiece** each word: a word of more than 100 characters is the unknown token;
   otherwise take the longest vocabulary entry that starts the word, then the longest
   ``##``-prefixed entry that starts the rest, and so on; a word with a piece that
   matches nothing is the unknown token as a whole.

Nothing here does I/O: the vocabulary is given as a sequence of strings.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

__all__ = ["WordPieceTokenizer", "basic_tokenize"]

MAX_WORD_CHARS = 100
"""A longer word is the unknown token (BERT's ``max_input_chars_per_word``)."""

_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# ASCII text takes a fast path: drop the control characters, lower-case, then a word is
# a run of letters and digits and every other printable character is punctuation.
_ASCII_CONTROLS = {c: None for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F]}
_ASCII_WORDS = re.compile(r"[a-z0-9]+|[^a-z0-9\t\n\r ]")


def _is_cjk(cp: int) -> bool:
    return any(low <= cp <= high for low, high in _CJK_RANGES)


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _clean(text: str) -> str:
    """Steps 1 and 2 of the module docstring."""
    out: list[str] = []
    for char in text:
        if char in " \t\n\r":
            out.append(" ")
            continue
        category = unicodedata.category(char)
        if category == "Zs":
            out.append(" ")
        elif char == "\ufffd" or category.startswith("C"):  # NUL is category Cc
            continue
        elif _is_cjk(ord(char)):
            out.append(f" {char} ")
        else:
            out.append(char)
    return "".join(out)


def _strip_accents(word: str) -> str:
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


def basic_tokenize(text: str) -> list[str]:
    """The words of ``text`` after steps 1-4 of the module docstring, in order."""
    if text.isascii():
        return _ASCII_WORDS.findall(text.translate(_ASCII_CONTROLS).lower())
    words: list[str] = []
    for chunk in _clean(text).split(" "):
        if not chunk:
            continue
        chunk = _strip_accents(chunk.lower())
        start = 0
        for i, char in enumerate(chunk):
            if _is_punctuation(char):
                if start < i:
                    words.append(chunk[start:i])
                words.append(char)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    # Stripping accents can leave an empty word (a lone combining mark) or, rarely,
    # whitespace; BERT splits on whitespace once more.
    return [piece for word in words for piece in word.split()]


class WordPieceTokenizer:
    """Text to vocabulary ids with BERT's uncased tokenizer (see the module docstring).

    ``vocabulary`` lists the tokens; a token's id is its index. It must hold
    ``unknown`` (``"[UNK]"`` by default). ``ids`` remembers the pieces of up to
    ``cache_size`` words and starts again when full.
    """

    __slots__ = ("_cache", "_cache_size", "_ids", "_longest", "unknown_id")

    def __init__(
        self, vocabulary: Sequence[str], *, unknown: str = "[UNK]", cache_size: int = 65_536
    ) -> None:
        self._ids = {token: i for i, token in enumerate(vocabulary)}
        if unknown not in self._ids:
            raise ValueError(f"the vocabulary has no unknown token {unknown!r}")
        self.unknown_id = self._ids[unknown]
        self._longest = max(len(token) for token in vocabulary)
        self._cache: dict[str, tuple[int, ...]] = {}
        self._cache_size = cache_size

    def word_ids(self, word: str) -> tuple[int, ...]:
        """The ids of one word's pieces (step 5 of the module docstring)."""
        if len(word) > MAX_WORD_CHARS:
            return (self.unknown_id,)
        vocab = self._ids
        whole = vocab.get(word)
        if whole is not None:
            return (whole,)
        longest = self._longest
        pieces: list[int] = []
        start = 0
        n = len(word)
        while start < n:
            prefix = "##" if start else ""
            end = min(n, start + longest)
            while end > start:
                found = vocab.get(prefix + word[start:end])
                if found is not None:
                    pieces.append(found)
                    break
                end -= 1
            else:
                return (self.unknown_id,)
            start = end
        return tuple(pieces)

    def ids(self, text: str) -> list[int]:
        """The token ids of ``text``, in order (no ``[CLS]``/``[SEP]``)."""
        cache = self._cache
        out: list[int] = []
        for word in basic_tokenize(text):
            pieces = cache.get(word)
            if pieces is None:
                if len(cache) >= self._cache_size:
                    cache.clear()
                pieces = cache[word] = self.word_ids(word)
            out += pieces
        return out

    def tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` as strings (for tests and debugging)."""
        by_id = {i: token for token, i in self._ids.items()}
        return [by_id[i] for i in self.ids(text)]
