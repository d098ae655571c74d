"""Names in a question: the words it writes with a capital letter.

"Where does Hugo live?" asks about Hugo. Among memories that all name somebody, a memory
that names Hugo is about him, however long it is, and whatever other word of the
question another person's memory holds ("Ingrid lives in a red wooden cabin"). BM25
alone weighs "hugo" by its idf like any word, and its length normalisation makes the
shortest of Hugo's memories his best match; so in a hybrid recall a lexical hit that
holds a name of the question gains that name's idf again, at saturation and
:data:`NAMED_WEIGHT` times, whatever the hit's length (:class:`Named`), and the query's
ceiling grows by as much, so the lexical leg's scale stays from 0 to 1.

What counts as a name (:func:`query_names`): a query term (``query_tokens``: stop words
left out) of a word whose first letter is an upper-case one, wherever it stands
("Hugo's", "Tomasz", "Kestrel", "Google"; the first word of the query too, so "Tell me
about Hugo" names "tell" as well, which only memories holding "tell" gain). When no word
of the query starts with a lower-case letter (a title-cased or shouted query) none is:
the capitals then say nothing. A word every memory of the scope holds (the name in a
person's own scope) has an idf of almost 0, so it gains almost nothing: the evidence
counts only where the name tells memories apart.

Measured on LoCoMo's development split and on the probes of name-sharing facts
(``docs/quality.md``, "Names in the question"). Scripts without case (Chinese,
Japanese) have no names by this rule, and a language that capitalises every noun
(German) gives most of its terms the same gain, which changes little; an all lower-case
query has none.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from engramdb._lexical.bm25 import bm25_ceiling, query_tokens, stem, terms, tokenize

__all__ = ["NAMED_WEIGHT", "Named", "named", "query_names"]

NAMED_WEIGHT: Final = 2.0
"""How many times more a name of the question counts, at saturation, in a lexical hit
that holds it (``docs/quality.md``: once and twice more measured alike on LoCoMo,
twice won more on the probes, four times lost LoCoMo)."""


def query_names(query: str) -> tuple[str, ...]:
    """The query terms (``query_tokens`` terms, in that order) that ``query`` writes
    with a capital letter: ``query_names("Where does Hugo live?") == ("hugo",)``; none
    when no word of ``query`` starts with a lower-case letter."""
    capitalised: set[str] = set()
    lower = False
    for word in query.split():
        first = next((ch for ch in word if ch.isalpha()), "")
        if first.isupper():
            capitalised.update(stem(token) for token in tokenize(word))
        lower = lower or first.islower()
    if not lower:
        return ()
    return tuple(term for _token, term in query_tokens(query) if term in capitalised)


@dataclass(frozen=True, slots=True)
class Named:
    """The names of one query, each with its saturated BM25 part (idf times k1 + 1,
    from the statistics the store scored with)."""

    parts: dict[str, float] = field(default_factory=dict)

    @property
    def ceiling(self) -> float:
        """What the names add to the query's ceiling: every name held."""
        return NAMED_WEIGHT * sum(self.parts.values())

    def gain(self, text: str) -> float:
        """What a memory of this ``text`` gains: the parts of the names it holds."""
        if not self.parts:
            return 0.0
        held = _held(text)
        return NAMED_WEIGHT * sum(part for name, part in self.parts.items() if name in held)


@functools.lru_cache(maxsize=4096)
def _held(text: str) -> frozenset[str]:
    """The index terms of ``text``: a recall's lexical hits are often the last one's, so
    the last few thousand texts are kept (by their text, in this process; nothing of one
    scope shows in another's ranking or results)."""
    return frozenset(terms(text))


def named(query: str | None, items: int, found: Sequence[int]) -> Named:
    """The names of ``query`` with their parts, given a lexical search's statistics
    (``TermStatistics``: ``found`` in ``query_tokens`` order)."""
    if not query:
        return Named()
    names = query_names(query)
    if not names:
        return Named()
    asked = [term for _token, term in query_tokens(query)]
    counts = dict(zip(asked, found, strict=False))
    return Named({name: bm25_ceiling(items, (counts.get(name, 0),)) for name in names})
