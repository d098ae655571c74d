"""Date-aware matching (``engramdb.ranking._dates``, ``ranking._hits.dated``): the period a query
names, the days a memory's text names, and a hybrid recall that favours the memories
of that period without moving anything else (this file also runs inside Pyodide)."""

from __future__ import annotations

from datetime import date

import pytest

from engramdb import HashEmbedder, InMemoryStore, Memory
from engramdb.ranking import _dates as dates
from engramdb.ranking._dates import Period, query_period, text_days

SCOPE = ("t", "dates")


@pytest.mark.parametrize(
    ("query", "period"),
    [
        ("What did Mel paint on 8 May, 2023?", Period(2023, 5, 8)),
        ("What did Gina find on May 23rd, 2023?", Period(2023, 5, 23)),
        ("What happened on 2023-05-08?", Period(2023, 5, 8)),
        ("What did Mel do in July 2023?", Period(2023, 7)),
        ("When did Melanie go camping in June?", Period(None, 6)),
        ("How often did she swim in 2022?", Period(2022)),
        ("What may Caroline paint next?", None),  # "may", no date
        ("What did she do on 31 June, 2023?", Period(2023, 6)),  # no such day: the month
        ("Where does Sam live?", None),
    ],
)
def test_the_period_a_query_names(query: str, period: Period | None) -> None:
    assert query_period(query) == period


@pytest.mark.parametrize(
    "query", ["in 0000", "May 0000", "on 0 May, 2023", "2023-13-01", "December 9999", "in 9999"]
)
def test_no_query_breaks_the_reading(query: str) -> None:
    """Years and days out of range are no date (or the coarser period they still name),
    and every period's bounds exist, the last December included."""
    period = query_period(query)
    if period is not None:
        assert period.days_after(date(9999, 12, 31)) >= 0
        assert period.days_after(date(1, 1, 1)) <= 0


@pytest.mark.parametrize(
    ("period", "day", "after"),
    [
        (Period(2023, 5, 8), date(2023, 5, 8), 0),
        (Period(2023, 5, 8), date(2023, 5, 12), 4),
        (Period(2023, 5, 8), date(2023, 5, 5), -3),
        (Period(2023, 7), date(2023, 7, 31), 0),
        (Period(2023, 7), date(2023, 8, 3), 3),
        (Period(2023, 12), date(2024, 1, 2), 2),  # December's end crosses the year
        (Period(None, 6), date(2021, 6, 2), 0),  # any year's June
        (Period(2022), date(2023, 1, 5), 5),
    ],
)
def test_days_after_a_period(period: Period, day: date, after: int) -> None:
    assert period.days_after(day) == after


def test_the_days_a_text_names_in_order() -> None:
    text = "[1:56 pm on 8 May, 2023] Mel: see you on June 2, 2023 or 2023-06-30, not 31 June, 2023"
    assert text_days(text) == (date(2023, 5, 8), date(2023, 6, 2), date(2023, 6, 30))
    assert text_days("Mel: in May 2023 we met") == ()  # a month is not a day


def test_a_text_matches_its_day_and_the_week_after() -> None:
    period = Period(2023, 5, 8)
    assert dates.matches(period, "[8 May, 2023] Mel: painted a lake")
    assert dates.matches(period, f"[{8 + dates.WINDOW} May, 2023] Mel: I painted a lake")
    assert not dates.matches(period, f"[{9 + dates.WINDOW} May, 2023] Mel: painted a lake")
    assert not dates.matches(period, "[7 May, 2023] Mel: painted a lake")
    assert not dates.matches(period, "Mel: painted a lake")


FILLER = list(enumerate(["tennis", "a film", "groceries", "a nap", "chess", "a run"], 1))


def _memory() -> Memory:
    memory = Memory(InMemoryStore(), HashEmbedder(dimensions=64))
    memory.remember_many(
        {"text": text, "scope": SCOPE}
        for text in [
            "[2 March, 2023] Mel: I painted a lake at sunrise, a lake painting",
            "[9 May, 2023] Mel: I painted a lake",
            "[20 May, 2023] Mel: I painted the sky",
            "[1 July, 2023] Mel: the lake was cold",
            *(f"[{day} June, 2023] Sam: work, then {thing}" for day, thing in FILLER),
        ]
    )
    return memory


PLAIN = "what lake painting did Mel make?"
DATED = "what lake painting did Mel make on 2023-05-08?"  # "05", "08": in no memory


def _texts(hits: object) -> list[str]:
    return [hit.memory.text for hit in hits]  # type: ignore[attr-defined]


def test_a_hybrid_recall_favours_the_memory_of_the_named_day() -> None:
    """Without a date the March turn, which says "lake" and "painted" more, comes first;
    asked about 8 May it is the turn of the next day, first by the bonus its fused
    score carries (the best possible fused score is 1 here: the lexical leg alone
    weighs), and the other memories keep their order."""
    memory = _memory()
    plain = memory.recall(PLAIN, scopes=[SCOPE])
    dated = memory.recall(DATED, scopes=[SCOPE])
    assert _texts(plain)[0].startswith("[2 March")
    assert _texts(dated)[0].startswith("[9 May")
    march = next(hit for hit in dated if hit.memory.text.startswith("[2 March"))
    assert dated[0].score - dates.BONUS < march.score < dated[0].score <= 1 + dates.BONUS
    found = set(_texts(plain))  # the dated query's "2023" also finds the June turns
    assert [t for t in _texts(dated) if t in found and "9 May" not in t] == [
        t for t in _texts(plain) if "9 May" not in t
    ]


def test_the_lexical_and_vector_modes_are_the_legs_as_they_are() -> None:
    memory = _memory()
    for mode in ("lexical", "vector"):
        plain = memory.recall(PLAIN, scopes=[SCOPE], mode=mode)
        dated = memory.recall(DATED, scopes=[SCOPE], mode=mode)
        found = set(_texts(plain))
        assert [t for t in _texts(dated) if t in found] == _texts(plain), mode


def test_the_first_hits_do_not_depend_on_top_k() -> None:
    memory = _memory()
    question = "what did Mel paint in May 2023?"
    full = [hit.memory.id for hit in memory.recall(question, scopes=[SCOPE], top_k=1000)]
    for k in (1, 2, 3):
        assert [hit.memory.id for hit in memory.recall(question, scopes=[SCOPE], top_k=k)] == (
            full[:k]
        )


def test_a_candidate_past_the_fusion_depth_gains_nothing() -> None:
    """120 memories say "lake" once to three times and name another day; 30 name the
    question's day but not "lake", so the lexical leg ranks them 121st to 150th. Only a
    ``top_k`` past 100 brings them in, and past the legs' 100 they score nothing in
    fusion: the date bonus must not lift them over the ones that do (it did, and a
    dated question changed its first hits between ``top_k`` 10 and 1000 on LoCoMo)."""
    memory = Memory(InMemoryStore(), HashEmbedder(dimensions=64))
    undated = [f"[1 June, 2023] Mel: {'the lake, ' * (1 + n % 3)}note {n}" for n in range(120)]
    named = [f"[8 May, 2023] Mel: note {n}" for n in range(30)]
    memory.remember_many({"text": text, "scope": SCOPE} for text in [*named, *undated])
    question = "what lake did Mel see on 2023-05-08?"
    deep = memory.recall(question, scopes=[SCOPE], top_k=1000)
    assert len(deep) == 150
    assert all("8 May" in hit.memory.text for hit in deep[120:])
    for k in (10, 100):
        shallow = memory.recall(question, scopes=[SCOPE], top_k=k)
        assert [hit.memory.id for hit in deep[:k]] == [hit.memory.id for hit in shallow]
