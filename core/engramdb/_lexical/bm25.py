"""Lexical search: a tokenizer and stemmer that agree with SQLite FTS5, and BM25.

The SQL stores index words with an FTS5 table declared with
``tokenize='porter unicode61 remove_diacritics 2'`` and compute ``bm25()``'s formula over
its term occurrences, with the statistics of the scopes a search selects. The in-memory
store uses :class:`BM25Index` (one per scope, :func:`search_many`), which produces the
same terms and the same scores, so a recall ranks the same way on every backend.

Tokenizer (:func:`tokenize`), as FTS5 ``unicode61 remove_diacritics 2``:

* token characters are those of Unicode general category ``L*``, ``N*`` or ``Co``, and
  unassigned code points (FTS5 always counts those as token characters); everything
  else separates tokens (``"e-mail"`` → ``e``, ``mail``; ``"3.14"`` → ``3``, ``14``;
  ``"don't"`` → ``don``, ``t``; emoji separate);
* the combining marks in U+0300..U+0331 that FTS5 calls diacritics continue a token
  (never start one) and are dropped; other combining marks separate;
* letters are case-folded (``ς`` → ``σ``; ``ß`` stays ``ß``; characters outside the
  Basic Multilingual Plane are not folded, except Deseret), and a letter that decomposes
  into an ASCII letter plus marks becomes that ASCII letter (``Ångström`` →
  ``angstrom``, ``İ`` → ``i``); ``ø``, ``ł``, ``đ`` do not decompose and stay, and
  non-Latin letters keep their accents (``έ`` stays ``έ``).

Residual difference: character properties come from Python's :mod:`unicodedata`, FTS5's
from tables built from an older Unicode (about 6.1). Symbols and marks assigned since
then (such as the emoji 🤔 U+1F914) are token characters in FTS5 but separators here,
and case pairs added since then are not folded by FTS5 (the letters among them, up to
Unicode 14, are special-cased to match). On SQLite 3.40 with Python 3.11 that leaves
about 3,200 of the code points below U+30000 (under 400 in the BMP, none of them
letters or digits), all assigned after Unicode 6.1; text in common scripts tokenizes
identically, as a test pins.

Stemmer (:func:`stem`): FTS5's ``porter`` tokenizer, the original Porter (1980) algorithm
as SQLite implements it, applied to the UTF-8 bytes of each token; tokens shorter than 3
or longer than 64 bytes are left as they are.

BM25 (:class:`BM25Index`): FTS5's ``bm25()`` with k1 = 1.2, b = 0.75 and one column::

    idf(t)   = ln((N - n(t) + 0.5) / (n(t) + 0.5)), or 1e-6 when that is <= 0
    score(d) = sum over query terms t of
               idf(t) * f(t, d) * (k1 + 1) / (f(t, d) + k1 * (1 - b + b * |d| / avgdl))

where N is the number of documents, n(t) how many contain t, f(t, d) how often t occurs
in d, |d| the number of tokens of d and avgdl the mean over all documents. FTS5 returns
``-score`` (lower is better); engramdb reports ``score`` (higher is better). A query
matches the documents that contain *any* of its terms (an OR query). English stop words
(:data:`STOP_WORDS`) are left out of a query unless they are all it has: they match
almost every document and only add noise to the ranking (documents keep them).
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Callable, Container, Sequence
from typing import Any

from engramdb.ranking._ties import ranked_pairs

__all__ = [
    "STOP_WORDS",
    "BM25Index",
    "bm25_ceiling",
    "query_tokens",
    "search_many",
    "stem",
    "term_statistics",
    "terms",
    "token_count",
    "tokenize",
]

# Combining marks that FTS5's unicode61 tokenizer treats as diacritics: they continue a
# token and are removed by remove_diacritics (sqlite3Fts5UnicodeIsdiacritic).
_DIACRITICS = frozenset(
    {
        0x300, 0x301, 0x302, 0x303, 0x304, 0x306, 0x307, 0x308, 0x309, 0x30A, 0x30B, 0x30C,
        0x30F, 0x311, 0x31B, 0x323, 0x324, 0x325, 0x326, 0x327, 0x328, 0x32D, 0x32E, 0x330,
        0x331,
    }
)  # fmt: skip
_DESERET_UPPER = range(0x10400, 0x10428)
# 'ǡ' (and 'Ǡ', folded to it): FTS5's diacritic table lacks this one Latin letter.
_KEEPS_DIACRITICS = frozenset((0x1E0, 0x1E1))
# Letters FTS5 leaves as they are because its tables predate their case pairs: the
# Cherokee and Georgian Mtavruli scripts and letters added in Unicode 7.0 and later.
_UNFOLDED = frozenset(
    {
        *range(0x13A0, 0x1400), *range(0xAB70, 0xABC0), *range(0x1C90, 0x1CC0),
        0x37F, 0x528, 0x52A, 0x52C, 0x52E, *range(0x1C80, 0x1C89), 0x2C2F, 0xA698, 0xA69A,
        0xA796, 0xA798, 0xA79A, 0xA79C, 0xA79E, *range(0xA7AB, 0xA7AF), *range(0xA7B0, 0xA7B5),
        0xA7B6, 0xA7B8, 0xA7BA, 0xA7BC, 0xA7BE, 0xA7C0, 0xA7C2, *range(0xA7C4, 0xA7C8),
        0xA7C9, 0xA7D0, 0xA7D6, 0xA7D8, 0xA7F5,
        # Unicode 16.0 (Python 3.14): Cyrillic TJE and four Latin capitals.
        0x1C89, 0xA7CB, 0xA7CC, 0xA7DA, 0xA7DC,
    }
)  # fmt: skip
# Letters that were combining marks in FTS5's tables (New Tai Lue, Vedic): separators.
_SEPARATOR_LETTERS = frozenset({*range(0x19B0, 0x19C1), 0x19C8, 0x19C9, 0x1CF2, 0x1CF3})
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")
_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

# English function words: pronouns, determiners, auxiliaries, prepositions, conjunctions,
# question words and the fragments the tokenizer leaves of contractions ("don't" ->
# "don", "t"). A query's tokens among them are left out of the lexical query unless
# they are all it has (see :func:`query_tokens`); documents keep every word.
STOP_WORDS: frozenset[str] = frozenset(
    {
        "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any",
        "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below",
        "between", "both", "but", "by", "can", "couldn", "d", "did", "didn", "do", "does",
        "doesn", "doing", "don", "down", "during", "each", "few", "for", "from", "further",
        "had", "hadn", "has", "hasn", "have", "haven", "having", "he", "her", "here", "hers",
        "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "isn", "it",
        "its", "itself", "just", "ll", "m", "ma", "me", "mightn", "more", "most", "mustn", "my",
        "myself", "needn", "no", "nor", "not", "now", "o", "of", "off", "on", "once", "only",
        "or", "other", "our", "ours", "ourselves", "out", "over", "own", "re", "s", "same",
        "shan", "she", "should", "shouldn", "so", "some", "such", "t", "than", "that", "the",
        "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this",
        "those", "through", "to", "too", "under", "until", "up", "ve", "very", "was", "wasn",
        "we", "were", "weren", "what", "when", "where", "which", "while", "who", "whom", "why",
        "will", "with", "won", "would", "wouldn", "y", "you", "your", "yours", "yourself",
        "yourselves"
    }
)  # fmt: skip

# Character classes for the tokenizer loop.
_SEPARATOR = 0
_TOKEN = 1
_DIACRITIC = 2

# Per-character (class, folded text) cache; filled lazily, never at import time beyond
# this empty dict. Its size is bounded by the number of distinct characters seen.
_char_cache: dict[str, tuple[int, str]] = {}


def _classify(ch: str) -> tuple[int, str]:
    """Return the tokenizer class of ``ch`` and its folded form."""
    cp = ord(ch)
    if cp in _DIACRITICS:
        return _DIACRITIC, ""
    category = unicodedata.category(ch)
    if category[0] not in "LN" and category not in ("Co", "Cn"):
        return _SEPARATOR, ""
    if cp in (0xFFFE, 0xFFFF) or cp in _SEPARATOR_LETTERS:  # FTS5 reads U+FFFE/F as U+FFFD
        return _SEPARATOR, ""
    if cp >= 0x10000:
        return _TOKEN, chr(cp + 40) if cp in _DESERET_UPPER else ch
    if cp in _UNFOLDED:
        lower = ch
    else:
        # FTS5 folds with Unicode simple case folding (ς → σ, but ß stays ß).
        lower = ch.casefold()
        if len(lower) != 1:
            lower = ch.lower()
            if len(lower) != 1:  # U+0130 'İ' lowers to two characters; FTS5 keeps it
                lower = ch
    decomposed = unicodedata.normalize("NFD", lower)
    if (
        cp not in _KEEPS_DIACRITICS
        and len(decomposed) > 1
        and decomposed[0] in _ASCII_LETTERS
        and all(unicodedata.combining(mark) for mark in decomposed[1:])
    ):
        return _TOKEN, decomposed[0].lower()
    return _TOKEN, lower


def _char_class(ch: str) -> tuple[int, str]:
    entry = _char_cache.get(ch)
    if entry is None:
        entry = _char_cache[ch] = _classify(ch)
    return entry


def tokenize(text: str) -> list[str]:
    """Split ``text`` into folded tokens exactly as FTS5 ``unicode61 remove_diacritics 2``.

    Tokens are runs of letters, digits and private-use characters, lower-cased, with
    diacritics removed from Latin letters. ``tokenize("Café e-mail, don't!")`` is
    ``["cafe", "e", "mail", "don", "t"]``. See the module docstring for the exact rules.
    """
    if text.isascii():
        return _ASCII_TOKEN.findall(text.lower())
    tokens: list[str] = []
    parts: list[str] = []
    in_token = False
    for ch in text:
        if ch.isascii():
            if ch.isalnum():
                parts.append(ch.lower())
                in_token = True
                continue
            kind, folded = _SEPARATOR, ""
        else:
            kind, folded = _char_class(ch)
        if kind == _TOKEN:
            parts.append(folded)
            in_token = True
        elif kind == _DIACRITIC and in_token:
            continue
        elif in_token:
            tokens.append("".join(parts))
            parts.clear()
            in_token = False
    if in_token:
        tokens.append("".join(parts))
    return tokens


# --- Porter stemmer, as FTS5's porter tokenizer applies it -----------------------------
#
# The stemmer works on bytes (the UTF-8 encoding of a token) like FTS5 does: only ASCII
# vowels are vowels, every other byte is a consonant. ``y`` is a vowel after a
# consonant when measuring m; in the "*v*" test FTS5 counts ``y`` as a vowel anywhere but
# at the start.

_PORTER_MIN = 3
_PORTER_MAX = 64
_VOWELS = frozenset(b"aeiou")
_Y = ord("y")


def _is_vowel(byte: int, y_is_vowel: bool) -> bool:
    return byte in _VOWELS or (y_is_vowel and byte == _Y)


def _measure(word: bytes | bytearray) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``[C](VC)^m[V]``."""
    m = 0
    prev_consonant = False
    seen_vowel = False
    for byte in word:
        consonant = not _is_vowel(byte, prev_consonant)
        if consonant and seen_vowel:
            m += 1
            seen_vowel = False
        elif not consonant:
            seen_vowel = True
        prev_consonant = consonant
    return m


def _has_vowel(word: bytes | bytearray) -> bool:
    """FTS5's ``*v*``: a vowel anywhere, ``y`` counting as one except in first place."""
    return any(_is_vowel(byte, index > 0) for index, byte in enumerate(word))


def _ends_cvc(word: bytes | bytearray) -> bool:
    """Porter's ``*o``: ends consonant-vowel-consonant, the last not w, x or y."""
    if not word or word[-1] in b"wxy":
        return False
    pattern = 0
    consonant = False
    for byte in word:
        consonant = not _is_vowel(byte, consonant)
        pattern = (pattern << 1) | consonant
    return pattern & 0b111 == 0b101


def _m_gt0(stem: bytearray) -> bool:
    return _measure(stem) > 0


def _m_gt1(stem: bytearray) -> bool:
    return _measure(stem) > 1


def _m_gt1_s_or_t(stem: bytearray) -> bool:
    return stem.endswith((b"s", b"t")) and _measure(stem) > 1


_Rule = tuple[bytes, bytes]
_STEP2: tuple[_Rule, ...] = (
    (b"ational", b"ate"), (b"tional", b"tion"), (b"enci", b"ence"), (b"anci", b"ance"),
    (b"izer", b"ize"), (b"logi", b"log"), (b"bli", b"ble"), (b"alli", b"al"),
    (b"entli", b"ent"), (b"eli", b"e"), (b"ousli", b"ous"), (b"ization", b"ize"),
    (b"ation", b"ate"), (b"ator", b"ate"), (b"alism", b"al"), (b"iveness", b"ive"),
    (b"fulness", b"ful"), (b"ousness", b"ous"), (b"aliti", b"al"), (b"iviti", b"ive"),
    (b"biliti", b"ble"),
)  # fmt: skip
_STEP3: tuple[_Rule, ...] = (
    (b"ical", b"ic"), (b"ness", b""), (b"icate", b"ic"), (b"iciti", b"ic"), (b"ful", b""),
    (b"ative", b""), (b"alize", b"al"),
)  # fmt: skip
# Step 4 removes these when m > 1 of the rest ("ion" also needs the rest to end in s/t).
# Where one suffix ends another, the longer comes first: only the first match is tried.
_STEP4: tuple[bytes, ...] = (
    b"al", b"ance", b"ence", b"er", b"ic", b"able", b"ible", b"ant", b"ement", b"ment",
    b"ent", b"ion", b"ou", b"ism", b"ate", b"iti", b"ous", b"ive", b"ize",
)  # fmt: skip


def _replace_suffix(word: bytearray, rules: tuple[_Rule, ...]) -> None:
    """Apply the first rule whose suffix ends ``word`` (with a non-empty stem), if m > 0."""
    for suffix, replacement in rules:
        if len(word) > len(suffix) and word.endswith(suffix):
            stem_part = word[: len(word) - len(suffix)]
            if _m_gt0(stem_part):
                word[len(stem_part) :] = replacement
            return


def _porter(word: bytearray) -> bytearray:
    # Step 1a: plurals.
    if word[-1:] == b"s":
        if word[-2:-1] == b"e":
            if (len(word) > 4 and word.endswith(b"sses")) or (
                len(word) > 3 and word.endswith(b"ies")
            ):
                del word[-2:]
            else:
                del word[-1:]
        elif word[-2:-1] != b"s":
            del word[-1:]

    # Step 1b: -eed, -ed, -ing.
    removed = False
    if len(word) > 3 and word.endswith(b"eed"):
        if _m_gt0(word[:-3]):
            del word[-1:]
    elif len(word) > 2 and word.endswith(b"ed"):
        if _has_vowel(word[:-2]):
            del word[-2:]
            removed = True
    elif len(word) > 3 and word.endswith(b"ing") and _has_vowel(word[:-3]):
        del word[-3:]
        removed = True
    if removed:
        if len(word) > 2 and word.endswith((b"at", b"bl", b"iz")):
            word.append(ord("e"))
        elif (
            len(word) >= 2
            and not _is_vowel(word[-1], False)
            and word[-1] not in b"lsz"
            and word[-1] == word[-2]
        ):
            del word[-1:]
        elif _measure(word) == 1 and _ends_cvc(word):
            word.append(ord("e"))

    # Step 1c: y -> i when the rest has a vowel.
    if word[-1:] == b"y" and _has_vowel(word[:-1]):
        word[-1] = ord("i")

    # Steps 2 and 3: double and single suffixes.
    _replace_suffix(word, _STEP2)
    _replace_suffix(word, _STEP3)

    # Step 4: remove a suffix when m > 1.
    for suffix in _STEP4:
        if len(word) > len(suffix) and word.endswith(suffix):
            stem_part = word[: len(word) - len(suffix)]
            condition = _m_gt1_s_or_t if suffix == b"ion" else _m_gt1
            if condition(stem_part):
                del word[len(stem_part) :]
            break

    # Step 5a: a final e.
    if word[-1:] == b"e":
        rest = word[:-1]
        m = _measure(rest)
        if m > 1 or (m == 1 and not _ends_cvc(rest)):
            del word[-1:]

    # Step 5b: -ll -> -l when m > 1.
    if len(word) > 1 and word.endswith(b"ll") and _measure(word[:-1]) > 1:
        del word[-1:]
    return word


def stem(token: str) -> str:
    """Stem one folded token with the Porter algorithm, exactly as FTS5's ``porter``.

    ``stem("caresses") == "caress"``, ``stem("ponies") == "poni"``,
    ``stem("relational") == "relat"``. Tokens under 3 or over 64 UTF-8 bytes are
    returned unchanged. Only ASCII suffixes are ever removed. Pass tokens from
    :func:`tokenize` (lower case); other input is stemmed the same way but FTS5 never
    sees it. In the rare case where FTS5's byte-wise rule would cut a multi-byte
    character, the undecodable byte is kept as a lone surrogate (``surrogateescape``).
    """
    return _stem_cached(token)


@functools.lru_cache(maxsize=65_536)
def _stem_cached(token: str) -> str:
    raw = token.encode("utf-8", "surrogateescape")
    if len(raw) < _PORTER_MIN or len(raw) > _PORTER_MAX or not 0x61 <= raw[-1] <= 0x7A:
        return token  # every Porter rule needs the word to end in a letter a-z
    return _porter(bytearray(raw)).decode("utf-8", "surrogateescape")


def terms(text: str, *, stemming: bool = True) -> list[str]:
    """Return the index terms of ``text``: its tokens, each stemmed when ``stemming``.

    With ``stemming=True`` this matches FTS5 ``porter unicode61 remove_diacritics 2``.
    """
    tokens = tokenize(text)
    return [_stem_cached(token) for token in tokens] if stemming else tokens


def token_count(text: str) -> int:
    """How many tokens ``text`` has: its length ``|d|`` in BM25, as FTS5 counts it."""
    return len(tokenize(text))


def query_tokens(
    text: str, *, stemming: bool = True, stop_words: Container[str] = STOP_WORDS
) -> list[tuple[str, str]]:
    """The ``(token, term)`` pairs a query searches for: one per distinct term, in
    first-seen order, leaving out the tokens in ``stop_words`` unless they are all the
    query has (``"what did he do"`` still searches for its words).

    ``query_tokens("What did Sam paint?")`` is ``[("sam", "sam"), ("paint", "paint")]``.
    """
    tokens = tokenize(text)
    content = [token for token in tokens if token not in stop_words]
    seen: set[str] = set()
    out = []
    for token in content or tokens:
        term = stem(token) if stemming else token
        if term not in seen:
            seen.add(term)
            out.append((token, term))
    return out


class BM25Index:
    """An incremental in-memory inverted index ranked with FTS5's BM25.

    ``add(doc_id, text)`` indexes (or re-indexes) a document, ``remove(doc_id)`` drops it,
    ``search(query)`` returns ``(doc_id, score)`` pairs best first, where ``score`` is
    ``-bm25()`` of an FTS5 table with ``tokenize='porter unicode61 remove_diacritics 2'``
    holding the same documents, queried for the terms of :func:`query_tokens` (OR).
    Statistics (document count, document frequencies, average length) are over the whole
    index, also when ``allowed`` narrows the results, as FTS5's ``bm25()`` ignores other
    ``WHERE`` terms. A store keeps one index per scope (:func:`search_many`).

    Not thread-safe; engramdb's core uses no threads.
    """

    __slots__ = ("_docs", "_postings", "_stemming", "_stop_words", "_total_len")

    K1 = 1.2  # FTS5's bm25() constants, which every store's lexical leg uses
    B = 0.75

    def __init__(self, *, stemming: bool = True, stop_words: Container[str] = STOP_WORDS) -> None:
        self._stemming = stemming
        self._stop_words = stop_words  # left out of queries (see query_tokens)
        # term -> {doc_id: term frequency}
        self._postings: dict[str, dict[str, int]] = {}
        # doc_id -> (number of tokens, its distinct terms); the terms make remove() cheap
        self._docs: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._total_len = 0

    @property
    def stemming(self) -> bool:
        """Whether terms are Porter-stemmed (FTS5 ``porter`` wrapper)."""
        return self._stemming

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    def __repr__(self) -> str:
        return (
            f"BM25Index({len(self._docs)} documents, {len(self._postings)} terms, "
            f"stemming={self._stemming})"
        )

    def add(self, doc_id: str, text: str) -> None:
        """Index ``text`` under ``doc_id``, replacing any earlier text of that id."""
        if doc_id in self._docs:
            self.remove(doc_id)
        doc_terms = terms(text, stemming=self._stemming)
        counts: dict[str, int] = {}
        for term in doc_terms:
            counts[term] = counts.get(term, 0) + 1
        for term, tf in counts.items():
            self._postings.setdefault(term, {})[doc_id] = tf
        self._docs[doc_id] = (len(doc_terms), tuple(counts))
        self._total_len += len(doc_terms)

    def remove(self, doc_id: str) -> bool:
        """Drop ``doc_id`` from the index; return whether it was there."""
        entry = self._docs.pop(doc_id, None)
        if entry is None:
            return False
        length, doc_terms = entry
        self._total_len -= length
        for term in doc_terms:
            posting = self._postings[term]
            del posting[doc_id]
            if not posting:
                del self._postings[term]
        return True

    def search(
        self,
        query: str,
        k: int | None = None,
        *,
        allowed: Container[str] | None = None,
        newer: Callable[[str], Any] | None = None,
    ) -> list[tuple[str, float]]:
        """Rank the documents that contain any term of ``query``; best first.

        Returns at most ``k`` pairs ``(doc_id, score)`` (all when ``k`` is None), score
        (rounded down to a multiple of 2**-30: ``_ties.quantised``) descending, equal
        scores newest first before the cut to ``k``: by ``newer(doc_id)`` descending (a
        store passes its items' ``(created_at, id)``), by ``doc_id`` descending when
        ``newer`` is None (ids are time-ordered). Only ids in ``allowed`` are returned
        when it is given. An empty index or a query without
        terms returns ``[]``.
        """
        return search_many([self], query, k, allowed=allowed, newer=newer)


def bm25_ceiling(items: int, found: Sequence[int]) -> float:
    """The best BM25 relevance an item could score for a query whose terms ``items``
    items hold ``found`` times each (one count per term, ``TermStatistics``): every
    term at saturation, its idf times ``k1 + 1``, a term no item holds at the idf of a
    term of one half (``ln((n + 0.5) / 0.5)``). A term that half the items or more hold
    adds next to nothing (its idf is floored at 1e-6), so a word found in every memory
    (a person's name in each of their facts) weighs nothing on this scale. Computed
    from the counts alone, so every store gets the same float."""
    k1 = BM25Index.K1
    return math.fsum(_idf(items, count) * (k1 + 1.0) for count in found)


def _idf(items: int, found: int) -> float:
    """BM25's idf as FTS5 computes it, floored at 1e-6."""
    value = math.log((items - found + 0.5) / (found + 0.5))
    return value if value > 0.0 else 1e-6


def term_statistics(indexes: Sequence[BM25Index], query: str) -> tuple[int, tuple[int, ...]]:
    """``(items, found)`` of :func:`search_many` over ``indexes`` for ``query``: how many
    documents its BM25 counts, and for each query term how many of them hold it."""
    first = indexes[0] if indexes else BM25Index()
    items = sum(len(index._docs) for index in indexes)
    found = tuple(
        sum(len(index._postings.get(term, ())) for index in indexes)
        for _token, term in query_tokens(
            query, stemming=first._stemming, stop_words=first._stop_words
        )
    )
    return items, found


def search_many(
    indexes: Sequence[BM25Index],
    query: str,
    k: int | None = None,
    *,
    allowed: Container[str] | None = None,
    newer: Callable[[str], Any] | None = None,
) -> list[tuple[str, float]]:
    """Rank the documents of several indexes as if they were one: BM25's statistics
    (document count, document frequencies, mean length) are summed over ``indexes``.

    A store keeps one index per scope and searches the indexes of the scopes a recall
    selects, so a scope's scores never depend on another scope's texts. The query is
    read with the first index's settings. Otherwise as :meth:`BM25Index.search`.
    """
    if (k is not None and k <= 0) or not indexes:
        return []
    n_docs = sum(len(index._docs) for index in indexes)
    if not n_docs:
        return []
    avgdl = sum(index._total_len for index in indexes) / n_docs
    k1, b = BM25Index.K1, BM25Index.B
    first = indexes[0]
    scores: dict[str, float] = {}
    for _token, term in query_tokens(query, stemming=first._stemming, stop_words=first._stop_words):
        postings = [(index, index._postings.get(term)) for index in indexes]
        found = sum(len(posting) for _, posting in postings if posting)
        if not found:
            continue
        idf = _idf(n_docs, found)
        for index, posting in postings:
            if not posting:
                continue
            docs = index._docs
            for doc_id, tf in posting.items():
                if allowed is not None and doc_id not in allowed:
                    continue
                freq = float(tf)
                length = float(docs[doc_id][0])
                part = idf * ((freq * (k1 + 1.0)) / (freq + k1 * (1 - b + b * length / avgdl)))
                scores[doc_id] = scores.get(doc_id, 0.0) + part
    return ranked_pairs(scores.items(), k, newer)
