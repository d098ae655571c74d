"""Recall by meaning with the static table that ships with engramdb, on every host (this
file also runs inside Pyodide): the vector leg alone finds facts that share no word with
the question, and the hybrid recall keeps them first."""

from __future__ import annotations

from pathlib import Path

import pytest

import engramdb
from engramdb import InMemoryStore, Memory, StaticEmbedder

TABLE = Path(engramdb.__file__).parent / StaticEmbedder.SHIPPED_FILE
SAM = ("acme", "user", "sam")
FACTS = [
    "Sam is vegetarian and loves mushroom risotto",
    "The car needs new tyres before winter",
    "Sam's daughter Mia starts school in September",
    "Sam prefers meetings after 10am",
]


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return StaticEmbedder.from_bytes(TABLE.read_bytes(), name=StaticEmbedder.SHIPPED_NAME)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("a dinner without meat", FACTS[0]),
        ("favourite dish", FACTS[0]),
        ("vehicle maintenance", FACTS[1]),
        ("when does the school year begin?", FACTS[2]),
    ],
)
def test_the_shipped_table_recalls_by_meaning(
    embedder: StaticEmbedder, query: str, expected: str
) -> None:
    """No word of the question is in the fact it should find (stop words aside)."""
    memory = Memory(InMemoryStore(), embedder)
    memory.remember_many({"text": text, "scope": SAM} for text in FACTS)
    assert embedder.semantic
    hits = memory.recall(query, scopes=[SAM], mode="vector", top_k=2)
    assert hits.status == "used"
    assert hits[0].memory.text == expected, [(h.memory.text, h.score) for h in hits]
    hybrid = memory.recall(query, scopes=[SAM], top_k=1)
    assert hybrid[0].memory.text == expected


def test_the_shipped_table_is_in_the_package_with_its_space(embedder: StaticEmbedder) -> None:
    assert embedder.space.id.startswith("static/minilm-l6-256@256#")
    assert embedder.space.id.endswith(embedder.sha256[:12])


# Every fact names its person; each question shares no word with its fact but the name.
NAMED = [
    ("Nadia stopped eating meat and fish three years ago", "What does Nadia have for dinner?"),
    ("Nadia drives an old blue Volvo estate", "Which car does Nadia own?"),
    ("Nadia's mother lives in Lisbon near the river", "Where is Nadia's mum based?"),
    ("Nadia plays cello in an amateur orchestra on Thursdays", "Which instrument is Nadia into?"),
    ("Nadia is allergic to penicillin", "Which antibiotic can Nadia not take?"),
    ("Nadia works as a nurse on the children's ward", "What is Nadia's job?"),
]


def test_a_word_in_every_memory_does_not_outvote_meaning(embedder: StaticEmbedder) -> None:
    """The name is in every memory, so the lexical leg's scores differ only by length:
    hybrid recall (the default) puts first what the vector leg puts first, and a hit's
    lexical share stays near 0 (0.2.0 stretched those differences into a full vote for
    the shortest memory: hybrid found 2 of these 6 where the vector leg found 6)."""
    memory = Memory(InMemoryStore(), embedder)
    memory.remember_many({"text": fact, "scope": SAM} for fact, _ in NAMED)
    for fact, question in NAMED:
        (vector,) = memory.recall(question, scopes=[SAM], mode="vector", top_k=1)
        hybrid = memory.recall(question, scopes=[SAM], top_k=3)
        assert vector.memory.text == fact, question
        assert hybrid[0].memory.text == fact, [(h.memory.text, h.score) for h in hybrid]
        for hit in hybrid:
            assert (hit.evidence.get("lexical_share") or 0.0) < 0.01, hit


def test_a_hybrid_score_is_comparable_between_queries(embedder: StaticEmbedder) -> None:
    """A hit's score is on one scale in every query: a memory that answers the question
    in its own words scores far above the best of a question about nothing stored (0.2.0
    gave the best hit of any query the full weight of each leg that found it), and its
    evidence's shares add up to it."""
    memory = Memory(InMemoryStore(), embedder)
    memory.remember_many({"text": fact, "scope": SAM} for fact, _ in NAMED)
    strong = memory.recall("Nadia's allergy to penicillin", scopes=[SAM], top_k=1)[0]
    weak = memory.recall("quarterly tax filing deadlines", scopes=[SAM], top_k=1)
    assert strong.memory.text == NAMED[4][0] and strong.score > 0.4
    assert all(hit.score < strong.score / 4 for hit in weak), [
        (h.memory.text, h.score) for h in weak
    ]
    shares = (strong.evidence.get("vector_share") or 0.0) + (
        strong.evidence.get("lexical_share") or 0.0
    )
    assert strong.score == pytest.approx(shares, abs=1e-8)


# Other people's memories, each sharing one word with one of Nadia's questions.
OTHERS = [
    "Omar cooks dinner for his neighbours every Sunday",
    "Omar sold his car last spring",
    "Lena's mum teaches maths in Oslo",
    "Lena repairs old instruments in a workshop",
    "Omar took antibiotics for a week in May",
    "Lena quit her job at the bank",
    "Omar supports Liverpool and never misses a match",
    "Omar's brother runs a bakery in Leeds",
    "Lena has two cats called Pip and Moss",
    "Lena goes climbing every Tuesday evening",
    "Tariq speaks four languages fluently",
    "Tariq is saving for a house near the coast",
    "Tariq broke his wrist skiing in February",
    "Tariq's birthday is on 3 October",
    "Omar is learning to paint with watercolours",
    "Lena grows tomatoes on her balcony",
    "Tariq volunteers at a food bank on Saturdays",
    "Omar wakes up at 5am to run",
]


def test_a_question_about_one_person_finds_their_memory_among_everyones(
    embedder: StaticEmbedder,
) -> None:
    """Everyone's memories in one scope, and each of Nadia's questions shares one word
    with another person's memory ("Which car does Nadia own?", "Omar sold his car"):
    that word is rarer than her name, so the lexical leg alone puts the other person's
    memory first, and without the names stage hybrid recall did too (0 of 6). The name
    the question writes with a capital counts again in hybrid mode, so Nadia's memory
    comes first (the vector leg alone finds 3 of these 6)."""
    memory = Memory(InMemoryStore(), embedder)
    everyone = ("acme", "people")
    memory.remember_many({"text": text, "scope": everyone} for text in OTHERS)
    memory.remember_many({"text": fact, "scope": everyone} for fact, _ in NAMED)
    for fact, question in NAMED:
        (lexical,) = memory.recall(question, scopes=[everyone], mode="lexical", top_k=1)
        assert not lexical.memory.text.startswith("Nadia"), question
        (hybrid,) = memory.recall(question, scopes=[everyone], top_k=1)
        assert hybrid.memory.text == fact, (question, hybrid.memory.text)


# One project's memories: each question shares no word with its answer, one word (or a
# stem) with another memory of the project.
BASALT = [
    "Basalt is a Django storefront selling handmade ceramics",
    "Basalt's checkout uses Stripe and accepts PayPal since April",
    "Basalt gets most orders from Germany and the Netherlands",
    "Basalt's Black Friday sale starts on 27 November at midnight",
    "Basalt ships parcels with DHL and delivery is free above 60 euros",
    "Basalt's item photos are stored on Cloudinary",
    "Basalt was founded in 2019 by two sisters from Porto",
    "Basalt's returns rate is about 4 percent, mostly broken mugs",
    "Basalt's site went offline for a day during a hosting migration",
    "Basalt has 3,200 newsletter subscribers on Mailchimp",
    "Basalt's page speed score dropped to 58 after the redesign",
    "Basalt runs on a single Hetzner server in Falkenstein",
]


@pytest.mark.parametrize(
    ("question", "answer", "other"),
    [
        ("Which courier does Basalt use for packages?", 4, 1),  # "use" / "uses"
        ("Where are Basalt's images hosted?", 5, 8),  # "hosted" / "hosting"
    ],
)
def test_one_minor_shared_word_does_not_outvote_meaning(
    embedder: StaticEmbedder, question: str, answer: int, other: int
) -> None:
    """The lexical leg finds only a minor word of the question in another memory (one
    word of three, in a long memory): its share of the query's ceiling is below the
    lexical floor, so it no longer tips the vector leg's close call (hybrid put the
    other memory first before the floor)."""
    memory = Memory(InMemoryStore(), embedder)
    project = ("acme", "basalt")
    memory.remember_many({"text": text, "scope": project} for text in BASALT)
    (lexical,) = memory.recall(question, scopes=[project], mode="lexical", top_k=1)
    (vector,) = memory.recall(question, scopes=[project], mode="vector", top_k=1)
    (hybrid,) = memory.recall(question, scopes=[project], top_k=1)
    assert lexical.memory.text == BASALT[other]
    assert vector.memory.text == BASALT[answer]
    assert hybrid.memory.text == BASALT[answer], hybrid.evidence
