"""Names in a question (``engramdb.ranking._names``): which words count, and what a
lexical hit that holds one gains in a hybrid recall."""

from __future__ import annotations

import pytest

from engramdb import HashEmbedder, InMemoryStore, Memory
from engramdb.ranking._names import NAMED_WEIGHT, named, query_names
from engramdb.store import bm25_ceiling


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("Where does Hugo live?", ("hugo",)),
        ("What is Kestrel's backend written in?", ("kestrel",)),
        ("Did Zoé meet Tomasz in Kraków?", ("zoe", "tomasz", "krakow")),
        ("Which devices did Quarry fail on?", ("quarri",)),  # stemmed as the index stems
        ("Tell me about Hugo", ("tell", "hugo")),  # a first word counts too
        ("where does hugo live", ()),  # no capital, no name
        ("WHERE DOES HUGO LIVE", ()),  # shouted: the capitals say nothing
        ("Where Does Hugo Live", ()),  # title case: idem
        ("Hugo?", ()),
        ("東京に住んでいる人は誰", ()),  # a script without case
    ],
)
def test_the_names_of_a_question_are_its_capitalised_query_terms(
    query: str, names: tuple[str, ...]
) -> None:
    assert query_names(query) == names


def test_a_name_gains_its_saturated_idf_whatever_the_length_of_the_memory() -> None:
    """A memory holding the name gains NAMED_WEIGHT times the name's idf at saturation
    (its part of the ceiling), a short one as much as a long one; the ceiling grows by
    as much, so every scaled score stays within [0, 1]; one without it gains nothing."""
    found = (12, 3)  # "hugo" in 12 of 144 items, "live" in 3
    names = named("Where does Hugo live?", 144, found)
    part = bm25_ceiling(144, (12,))
    assert names.parts == {"hugo": pytest.approx(part)}
    assert names.ceiling == pytest.approx(NAMED_WEIGHT * part)
    assert names.gain("Hugo's birthday is in July") == pytest.approx(NAMED_WEIGHT * part)
    long = "Hugo rents a top-floor apartment in Marseille with a view of the harbour"
    assert names.gain(long) == names.gain("Hugo's birthday is in July")
    assert names.gain("Ingrid lives in a red wooden cabin") == 0.0
    assert named("where does hugo live", 144, found).ceiling == 0.0
    assert named(None, 144, found).parts == {}


def _people(memory: Memory, scope: tuple[str, ...]) -> None:
    texts = [f"Hugo likes {thing}" for thing in ("tea", "chess", "jazz", "rain")]
    texts += [f"{name} lives near the {place}" for name, place in (("Ingrid", "fjord"),)]
    texts += [f"{name} owns a {pet}" for name in ("Mei", "Omar", "Lena") for pet in ("cat", "dog")]
    memory.remember_many({"text": text, "scope": scope} for text in texts)


def test_in_a_hybrid_recall_a_name_outweighs_a_rarer_word_of_another_persons_memory() -> None:
    """Pooled facts about several people: "live" is rarer than "Hugo", so BM25 alone
    puts Ingrid's memory first; in a hybrid recall Hugo's memories come first, and the
    lexical mode, which has no names, is unchanged."""
    memory = Memory(InMemoryStore(), HashEmbedder(64))
    scope = ("acme", "people")
    _people(memory, scope)
    question = "Where does Hugo live?"
    lexical = memory.recall(question, scopes=[scope], mode="lexical", top_k=3)
    assert lexical[0].memory.text.startswith("Ingrid")
    hybrid = memory.recall(question, scopes=[scope], top_k=5)
    assert [h.memory.text.split()[0] for h in hybrid[:4]] == ["Hugo"] * 4, [
        (h.memory.text, h.score) for h in hybrid
    ]
    for hit in hybrid:
        assert 0.0 <= hit.score <= 1.0
        shares = (hit.evidence.get("vector_share") or 0.0) + (
            hit.evidence.get("lexical_share") or 0.0
        )
        assert hit.score == pytest.approx(shares, abs=1e-8)
    # without the capital there is no name: the rarer word wins again
    plain = memory.recall(question.lower(), scopes=[scope], top_k=1)
    assert plain[0].memory.text.startswith("Ingrid")
