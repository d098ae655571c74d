"""A context block budgeted in tokens: ``format_context(hits, budget_tokens=...)`` is never
longer than its budget, counted by ``count_tokens`` or else by ``estimate_tokens`` (the
WordPiece tokens of the static table that ships with engramdb), with the cutting rules of
a budget in characters. This file also runs inside Pyodide."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb import HashEmbedder, Hit, InMemoryStore, Memory, MemoryRecord, ValidationError
from engramdb.agents import estimate_tokens, format_context

SAM = ("acme", "user", "sam")
HEADER = "Relevant memories (cite by [id]):"
# words, punctuation, accents, a combining mark, CJK, an emoji, "…" and odd whitespace
ALPHABET = st.sampled_from(
    [*"abcxyz019 .,'-([|<>", "é", "\u0301", "東", "京", "🙂", "…", "\n", "\t", "\u2028"]
)


def hits_of(texts: Sequence[str], scores: Sequence[float] | None = None) -> list[Hit]:
    """Hits as a recall returns them (the block reads ids, texts and scores only)."""
    scores = scores if scores is not None else [1.0 - i / 100 for i in range(len(texts))]
    return [
        Hit(
            memory=MemoryRecord(id=f"m{i}", scope=SAM, text=text),
            score=score,
            similarity=None,
            vector_rank=None,
            lexical_rank=None,
            bm25=None,
            evidence={
                "id": f"m{i}",
                "scope": SAM,
                "revision": 1,
                "content_sha256": "",
                "space_id": None,
                "embedded_at": None,
            },
        )
        for i, (text, score) in enumerate(zip(texts, scores, strict=True))
    ]


def lines_of(hits: Sequence[Hit]) -> list[tuple[str, str]]:
    """Each hit's line as (lead, text), best score first."""
    ranked = sorted(hits, key=lambda hit: -hit.score)
    return [(f"- [{h.memory.id}] ", " ".join(h.memory.text.split())) for h in ranked]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("Sam likes aisle seats", 4),
        ("Naïve CAFÉ", 2),  # lower-cased, accents stripped: naive, cafe
        ("01HX", 3),  # 01, ##h, ##x
        ("don't", 3),  # don, ', t
        ("東京", 2),  # each CJK ideograph is a word
        ("🙂 emoji", 4),  # [UNK], em, ##oj, ##i
        (HEADER, 10),
    ],
)
def test_the_estimate_counts_the_shipped_wordpiece_tokens(text: str, tokens: int) -> None:
    """BERT's uncased WordPiece over the shipped table's vocabulary, no [CLS]/[SEP]."""
    assert estimate_tokens(text) == tokens


@pytest.mark.parametrize("wrong", [None, 42, b"Sam likes aisle seats", ["Sam"]])
def test_the_estimate_of_what_is_not_a_text_is_one_error_naming_it(wrong: object) -> None:
    message = rf"counts a text \(a str\), not {re.escape(repr(wrong))}$"
    with pytest.raises(ValidationError, match=message):
        estimate_tokens(wrong)


@settings(max_examples=100, deadline=None)
@given(a=st.text(alphabet=ALPHABET, max_size=60), b=st.text(alphabet=ALPHABET, max_size=60))
def test_the_estimate_of_two_texts_on_two_lines_is_their_sum(a: str, b: str) -> None:
    """WordPiece splits words on whitespace first, so a block counts line by line."""
    assert estimate_tokens(f"{a}\n{b}") == estimate_tokens(a) + estimate_tokens(b)


def check_block(
    block: str, hits: Sequence[Hit], budget: int, count: Callable[[str], int], monotone: bool
) -> None:
    """``block`` is within ``budget``, holds the best hits' lines in order (all whole, or
    the first cut with "…" keeping at least one character), and, for a count that grows
    with the text, is as long as the budget allows."""
    lines = lines_of(hits)
    whole = [lead + text for lead, text in lines]
    if not block:
        if monotone and lines:
            lead, text = lines[0]
            assert count(f"{HEADER}\n{whole[0]}") > budget
            assert len(text) < 2 or count(f"{HEADER}\n{lead}{text[:1]}…") > budget
        return
    assert count(block) <= budget
    header, *kept = block.split("\n")
    assert header == HEADER and kept
    if kept == whole[: len(kept)]:
        if monotone and len(kept) < len(whole):
            assert count(f"{block}\n{whole[len(kept)]}") > budget
        return
    (cut,) = kept
    lead, text = lines[0]
    assert cut.endswith("…") and whole[0].startswith(cut[:-1]) and len(cut) - 1 > len(lead)
    if monotone:
        assert count(f"{HEADER}\n{whole[0]}") > budget
        shown = len(cut) - 1 - len(lead)
        if shown + 1 < len(text):
            assert count(f"{HEADER}\n{lead}{text[: shown + 1]}…") > budget


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=120), max_size=6),
    budget=st.integers(min_value=1, max_value=150),
)
def test_a_token_budget_is_never_exceeded(texts: list[str], budget: int) -> None:
    """Counted by the estimate, the block never passes its budget, keeps the best lines
    whole while they fit, cuts only a first line that does not, and is as long as it can
    be."""
    hits = hits_of(texts)
    block = format_context(hits, budget_tokens=budget)
    check_block(block, hits, budget, estimate_tokens, monotone=True)


def utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def words(text: str) -> int:
    return len(text.split())


def jumpy(text: str) -> int:
    """A count that does not grow with the text (a BPE's may shrink as a word grows)."""
    return len(text) // 3 + (len(text) % 7) * 2


@pytest.mark.parametrize(
    ("count", "monotone"), [(utf8_bytes, True), (words, False), (jumpy, False)]
)
@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=120), max_size=6),
    budget=st.integers(min_value=1, max_value=400),
)
def test_a_budget_holds_for_any_count_given(
    count: Callable[[str], int], monotone: bool, texts: list[str], budget: int
) -> None:
    """``count_tokens`` is what measures the block, whatever it counts: the block is
    within the budget even for a count that sometimes shrinks as the text grows."""
    hits = hits_of(texts)
    block = format_context(hits, budget_tokens=budget, count_tokens=count)
    check_block(block, hits, budget, count, monotone=monotone)


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=120), max_size=6),
    budget=st.integers(min_value=1, max_value=400),
)
def test_counting_characters_as_tokens_is_the_character_budget(
    texts: list[str], budget: int
) -> None:
    """One mechanism cuts both budgets: tokens counted by ``len`` give the block of the
    same budget in characters."""
    hits = hits_of(texts)
    assert format_context(hits, budget_tokens=budget, count_tokens=len) == format_context(
        hits, budget_chars=budget
    )


def test_a_recalled_block_fits_its_token_budget_and_cuts_only_a_long_first_line() -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    view = memory.bind(SAM)
    view.remember("Sam prefers aisle seats on long flights")
    view.remember("Sam's passport expires in March, renew it before the Oslo trip")
    hits = view.recall("Sam aisle seats")
    assert len(hits) == 2
    first = f"- [{hits[0].memory.id}] {hits[0].memory.text}"
    roomy = format_context(hits, budget_tokens=1000)
    assert roomy.splitlines()[1] == first and len(roomy.splitlines()) == 3
    assert estimate_tokens(roomy) < 1000
    one = format_context(hits, budget_tokens=estimate_tokens(f"{HEADER}\n{first}"))
    assert one.splitlines() == [HEADER, first]  # the second line is left out whole
    cut = format_context(hits, budget_tokens=estimate_tokens(f"{HEADER}\n{first}") - 2)
    assert cut.splitlines()[1].endswith("…") and first.startswith(cut.splitlines()[1][:-1])
    assert estimate_tokens(cut) <= estimate_tokens(f"{HEADER}\n{first}") - 2
    assert format_context(hits, budget_tokens=estimate_tokens(HEADER)) == ""
    assert format_context([], budget_tokens=1000) == ""


def test_without_a_budget_the_block_keeps_its_2000_characters() -> None:
    hits = hits_of(["x" * 900, "y" * 900, "z" * 900])
    block = format_context(hits)
    assert block == format_context(hits, budget_chars=2000)
    assert len(block.splitlines()) == 3 and len(block) <= 2000


def test_both_budgets_are_one_error_naming_both() -> None:
    with pytest.raises(ValidationError, match=r"budget_chars=2000 and budget_tokens=500"):
        format_context(hits_of(["a"]), budget_chars=2000, budget_tokens=500)


@pytest.mark.parametrize("bad", [0, -5, True, 2.5, "500", [3]])
def test_a_bad_token_budget_is_one_error_naming_it(bad: Any) -> None:
    with pytest.raises(ValidationError, match=r"^budget_tokens=.+ must be a positive int$"):
        format_context(hits_of(["a"]), budget_tokens=bad)
    with pytest.raises(ValidationError, match=r"^budget_tokens=.+ must be a positive int$"):
        format_context([], budget_tokens=bad)


def test_a_count_without_a_token_budget_is_an_error() -> None:
    """A counter given with a budget in characters (or none) would be ignored; it is
    refused instead."""
    for budget in ({}, {"budget_chars": 300}):
        with pytest.raises(ValidationError, match=r"count_tokens=.*give budget_tokens= too"):
            format_context(hits_of(["a"]), count_tokens=len, **budget)


def test_a_count_that_is_not_a_function_is_an_error_naming_it() -> None:
    with pytest.raises(ValidationError, match=r"count_tokens='cl100k_base' must be a function"):
        format_context(hits_of(["a"]), budget_tokens=50, count_tokens="cl100k_base")


@pytest.mark.parametrize("answer", [-1, 2.0, "3", None, True])
def test_a_count_that_answers_no_number_of_tokens_is_an_error_naming_the_answer(
    answer: object,
) -> None:
    with pytest.raises(ValidationError, match=rf"count_tokens returned {answer!r} for a text"):
        format_context(hits_of(["a"]), budget_tokens=50, count_tokens=lambda text: answer)
