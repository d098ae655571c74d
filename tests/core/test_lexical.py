"""The tokenizer, stemmer and BM25 index agree with SQLite FTS5.

Parity tests run the same input through a real FTS5 table; they need ``sqlite3`` with
FTS5 and are skipped where it is missing (Pyodide). Everything else runs everywhere.

Residual difference, by design: character properties come from Python's
``unicodedata``, FTS5's from tables built from an older Unicode (about 6.1). FTS5 treats
code points unassigned in its tables as token characters, so symbols and marks assigned
since then (for example the emoji 🤔 U+1F914, Unicode 8) are token characters in FTS5
and separators here. Letters and digits are special-cased to agree. The corpora below
use characters that agree; letters and digits of the BMP are checked one by one.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any

import pytest

from engramdb._lexical.bm25 import (
    STOP_WORDS,
    BM25Index,
    _porter,
    query_tokens,
    stem,
    terms,
    tokenize,
)

# Words whose tokenization is pinned against FTS5 and by expected values.
TOKEN_CASES: dict[str, list[str]] = {
    "Café": ["cafe"],
    "naïve": ["naive"],
    "Ångström": ["angstrom"],
    "ß Straße": ["ß", "straße"],
    "İstanbul": ["istanbul"],
    "123 3.14": ["123", "3", "14"],
    "e-mail": ["e", "mail"],
    "don't": ["don", "t"],
    "I ❤ 😀 emoji": ["i", "emoji"],
    "日本語のテキスト 東京": ["日本語のテキスト", "東京"],
    "Ωμέγα ΣΊΣΥΦΟΣ ς": ["ωμέγα", "σίσυφοσ", "σ"],
    "Ø ø Æ ł đ ħ": ["ø", "ø", "æ", "ł", "đ", "ħ"],
    "x²y ① ǅemal": ["x²y", "①", "ǆemal"],
    "ＦＵＬＬｗｉｄｔｈ": ["ｆｕｌｌｗｉｄｔｈ"],
    "Cafe\u0301 a\u0308b \u0301x": ["cafe", "ab", "x"],
    "under_score hy‐phen tab\tnew\nline": ["under", "score", "hy", "phen", "tab", "new", "line"],
    "Привет, МИР!": ["привет", "мир"],
    "": [],
    "  ...  ": [],
}

PARITY_TEXTS = [
    *TOKEN_CASES,
    "The QUICK brown fox jumps over the lazy dog's back, 42 times.",
    "Résumé, façade, jalapeño, crème brûlée, São Paulo, Łódź, Dvořák.",
    "Ελληνικά, русский, العربية, עברית, हिन्दी, ไทย, 한국어, 中文.",
    "email@example.com https://example.org/a?b=c#d C++ C# .NET 1,000.50 v2.0",
    "ﬁnance ﬂow Ⅻ ½ ⅓ ® ™ § ¶ © °C µs",
]

STEM_PAIRS = {
    "caresses": "caress",
    "ponies": "poni",
    "ties": "ti",
    "caress": "caress",
    "cats": "cat",
    "feed": "feed",
    "agreed": "agre",
    "plastered": "plaster",
    "bled": "bled",
    "motoring": "motor",
    "sing": "sing",
    "conflated": "conflat",
    "troubled": "troubl",
    "sized": "size",
    "hopping": "hop",
    "tanned": "tan",
    "falling": "fall",
    "hissing": "hiss",
    "fizzed": "fizz",
    "failing": "fail",
    "filing": "file",
    "happy": "happi",
    "sky": "sky",
    "relational": "relat",
    "conditional": "condit",
    "rational": "ration",
    "valenci": "valenc",
    "digitizer": "digit",
    "conformabli": "conform",
    "radicalli": "radic",
    "differentli": "differ",
    "vileli": "vile",
    "analogousli": "analog",
    "vietnamization": "vietnam",
    "predication": "predic",
    "operator": "oper",
    "feudalism": "feudal",
    "decisiveness": "decis",
    "hopefulness": "hope",
    "callousness": "callous",
    "formaliti": "formal",
    "sensitiviti": "sensit",
    "sensibiliti": "sensibl",
    "triplicate": "triplic",
    "formative": "form",
    "formalize": "formal",
    "electriciti": "electr",
    "electrical": "electr",
    "hopeful": "hope",
    "goodness": "good",
    "revival": "reviv",
    "allowance": "allow",
    "inference": "infer",
    "airliner": "airlin",
    "gyroscopic": "gyroscop",
    "adjustable": "adjust",
    "defensible": "defens",
    "irritant": "irrit",
    "replacement": "replac",
    "adjustment": "adjust",
    "dependent": "depend",
    "adoption": "adopt",
    "homologou": "homolog",
    "communism": "commun",
    "activate": "activ",
    "angulariti": "angular",
    "homologous": "homolog",
    "effective": "effect",
    "bowdlerize": "bowdler",
    "probate": "probat",
    "rate": "rate",
    "cease": "ceas",
    "controll": "control",
    "roll": "roll",
    "generalization": "gener",
    "generalizations": "gener",
    "oscillators": "oscil",
    "running": "run",
    "a": "a",
    "is": "is",
    "straße": "straß",
    "ies": "ie",
}


def _fts5(tokenizer: str) -> Any:
    sqlite3 = pytest.importorskip("sqlite3", exc_type=ImportError)
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{tokenizer}')")
    except sqlite3.OperationalError as exc:  # pragma: no cover - sqlite built without FTS5
        conn.close()
        pytest.skip(f"SQLite FTS5 is not available: {exc}")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    return conn


def _fts5_tokens(tokenizer: str, texts: list[str]) -> list[list[str]]:
    conn = _fts5(tokenizer)
    with conn:
        conn.executemany(
            "INSERT INTO t(rowid, body) VALUES (?, ?)",
            [(i, text) for i, text in enumerate(texts, start=1)],
        )
    out: list[list[str]] = [[] for _ in texts]
    for doc, term in conn.execute("SELECT doc, term FROM v ORDER BY doc, offset"):
        out[doc - 1].append(term)
    conn.close()
    return out


# --- tokenizer -----------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), TOKEN_CASES.items())
def test_tokenize_folds_case_and_diacritics_and_splits_on_non_alphanumerics(
    text: str, expected: list[str]
) -> None:
    """Tokens are L*/N*/Co runs, lower-cased, Latin diacritics removed; the rest splits."""
    assert tokenize(text) == expected


def test_tokenize_matches_fts5_unicode61_remove_diacritics_2() -> None:
    """Every parity text tokenizes exactly as FTS5 ``unicode61 remove_diacritics 2``."""
    expected = _fts5_tokens("unicode61 remove_diacritics 2", PARITY_TEXTS)
    assert [tokenize(text) for text in PARITY_TEXTS] == expected


def test_tokenize_matches_fts5_on_every_bmp_letter_and_digit() -> None:
    """Each BMP letter or digit tokenizes as FTS5 does, alone and between ASCII letters.

    CJK ideographs and Hangul syllables (uniform, unfoldable blocks) are left out for speed.
    """
    texts = [
        f"q{chr(cp)}q {chr(cp)}"
        for cp in range(0x80, 0x10000)
        if unicodedata.category(chr(cp))[0] in "LN"
        and not (0x3400 <= cp < 0xA000 or 0xAC00 <= cp < 0xD7A4)
    ]
    assert [tokenize(text) for text in texts] == _fts5_tokens(
        "unicode61 remove_diacritics 2", texts
    )


def test_tokenize_matches_fts5_on_every_combining_mark_after_a_letter() -> None:
    """U+0300..U+036F: FTS5's diacritics are dropped inside a token, other marks split."""
    texts = [f"xa{chr(cp)}b {chr(cp)}y" for cp in range(0x300, 0x370)]
    assert [tokenize(text) for text in texts] == _fts5_tokens(
        "unicode61 remove_diacritics 2", texts
    )


# --- stemmer -------------------------------------------------------------------------


@pytest.mark.parametrize(("word", "expected"), STEM_PAIRS.items())
def test_stem_follows_porter(word: str, expected: str) -> None:
    """The Porter stemmer, as FTS5's porter tokenizer applies it, gives the known stems."""
    assert stem(word) == expected


def test_stem_matches_fts5_porter_on_a_word_list() -> None:
    """Every word of a vocabulary stems as FTS5 ``porter unicode61 remove_diacritics 2``."""
    candidates = set(STEM_PAIRS) | set(tokenize(" ".join(PARITY_TEXTS) + _VOCABULARY))
    words = sorted(word for word in candidates if tokenize(word) == [word])
    expected = _fts5_tokens("porter unicode61 remove_diacritics 2", words)
    assert [[stem(word)] for word in words] == expected


def test_stem_leaves_short_and_very_long_tokens_alone() -> None:
    """Tokens under 3 or over 64 UTF-8 bytes pass through, as in FTS5."""
    at_limit = "b" * 58 + "ending"  # 64 bytes: stemmed
    over_limit = "b" + at_limit  # 65 bytes: kept
    assert stem("is") == "is"
    assert stem(at_limit) == "b" * 58 + "end"
    assert stem(over_limit) == over_limit
    assert stem("é" * 30 + "ings") == "é" * 30 + "ing"  # 64 bytes; "ing" needs a vowel


def test_a_word_not_ending_in_a_to_z_is_never_stemmed() -> None:
    """The stemmer's shortcut: the full Porter pass leaves such words unchanged too."""
    endings = ["0", "9", "é", "ß", "_", "ς", "用", "\U0001f600"]
    words = [
        f"{stem_part}{end}" for stem_part in ("relational", "ponies", "abc", "x") for end in endings
    ]
    words += ["1234", "2026", "cafe\u0301"]
    for word in words:
        assert stem(word) == word
        assert _porter(bytearray(word.encode())).decode() == word


def test_terms_stems_each_token_unless_stemming_is_off() -> None:
    """``terms`` is ``tokenize`` followed by ``stem`` when stemming is on."""
    assert terms("Running runners RAN") == ["run", "runner", "ran"]
    assert terms("Running runners", stemming=False) == ["running", "runners"]


# --- query terms --------------------------------------------------------------------


def _match(text: str) -> str:
    """The FTS5 MATCH expression of the terms engramdb searches for (quoted tokens, OR):
    the reference against which BM25Index is compared with FTS5's own bm25()."""
    return " OR ".join(f'"{token}"' for token, _term in query_tokens(text))


def test_query_tokens_are_distinct_terms_in_first_seen_order() -> None:
    """One pair per distinct term (by stem), the first form kept; none without tokens."""
    assert query_tokens("Running shoes, run! SHOES") == [("running", "run"), ("shoes", "shoe")]
    assert query_tokens("Running run", stemming=False) == [
        ("running", "running"),
        ("run", "run"),
    ]
    assert query_tokens("Café") == [("cafe", "cafe")]
    for text in ["", "   ", "!!! ??? ---", '""', "()"]:
        assert query_tokens(text) == []


def test_a_query_leaves_its_stop_words_out_unless_they_are_all_it_has() -> None:
    """English stop words (matched on the folded token) are not searched for, so they
    cannot outrank a query's content words; a query of only stop words keeps them."""
    assert query_tokens("What did Sam paint?") == [("sam", "sam"), ("paint", "paint")]
    asked = [token for token, _ in query_tokens("When did Caroline go to the LGBTQ group?")]
    assert asked == ["caroline", "go", "lgbtq", "group"]
    assert [token for token, _ in query_tokens("what did the")] == ["what", "did", "the"]
    assert query_tokens("Don't stop") == [("stop", "stop")]  # "don", "t": a contraction
    assert query_tokens("What did Sam paint?", stop_words=()) == [
        ("what", "what"),
        ("did", "did"),
        ("sam", "sam"),
        ("paint", "paint"),
    ]
    assert {"the", "what", "did", "t", "don"} <= STOP_WORDS
    assert all(word == word.lower() and tokenize(word) == [word] for word in STOP_WORDS)


def test_bm25_search_ranks_by_the_content_words_of_a_query() -> None:
    """BM25Index searches the terms of query_tokens: a document that shares only stop
    words with the query is not found."""
    index = BM25Index()
    index.add("content", "Sam painted a sunrise")
    index.add("noise", "what did the one over there do")
    assert [doc for doc, _ in index.search("What did Sam paint?")] == ["content"]
    assert [doc for doc, _ in index.search("what did the")] == ["noise"]


# --- BM25 ----------------------------------------------------------------------------

CORPUS = [
    "The cat sat on the mat.",
    "A cat and a dog play in the garden; the cat wins.",
    "Dogs are loyal. Dogs are friendly. Dogs bark.",
    "Vegetarian food: lentils, beans and rice.",
    "She prefers vegetarian restaurants in Berlin.",
    "The café serves crème brûlée and a naïve latte.",
    "Cafe culture in Paris: coffee, croissants, cafés everywhere.",
    "Running every morning keeps the runner healthy.",
    "He runs; she ran; they are running a marathon.",
    "Python is a programming language. Python programs run everywhere.",
    "SQLite FTS5 ranks documents with the bm25 function.",
    "Ranking functions: bm25, tf-idf and reciprocal rank fusion.",
    "The user's favourite colour is blue.",
    "Blue whales are the largest animals; whales sing.",
    "Meeting on Tuesday at 10:00 about the quarterly report.",
    "Quarterly reports are due every quarter.",
    "Ångström is a unit of length; angstrom units are tiny.",
    "Straße means street in German; die Straße ist lang.",
    "Allergies: peanuts, shellfish. Avoid peanuts!",
    "The project deadline moved to Friday.",
    "Friday is pizza day at the office.",
    "Memory for agents: remember, recall, forget.",
    "Agents remember facts and recall them later.",
    "a a a a a a a a a a cat",
    "Cat cat cat cat.",
    "Nothing relevant here at all.",
    "Caresses and ponies, relational generalizations.",
    "Hopping, hoped, hopes and hopeful hopefulness.",
    "Emoji 😀 are separators; numbers like 42 and 3.14 are tokens.",
    "日本語のテキスト and 東京 in one document.",
]

QUERIES = [
    "cat",
    "dogs and cats",
    "vegetarian food",
    "cafe crème",
    "running runner",
    "bm25 ranking",
    "quarterly report Friday",
    "angstrom Straße",
    "peanut allergy",
    "remember recall agents",
    "hope",
    "東京 42",
    "the",
]


def _fts5_ranking(queries: list[str]) -> list[list[tuple[str, float]]]:
    conn = _fts5("porter unicode61 remove_diacritics 2")
    with conn:
        conn.executemany(
            "INSERT INTO t(rowid, body) VALUES (?, ?)",
            [(i, text) for i, text in enumerate(CORPUS)],
        )
    results: list[list[tuple[str, float]]] = []
    for query in queries:
        expression = _match(query)
        rows = conn.execute(
            "SELECT rowid, -bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t), rowid DESC",
            (expression,),
        ).fetchall()
        results.append([(f"d{rowid:02d}", score) for rowid, score in rows])
    conn.close()
    return results


def _index() -> BM25Index:
    index = BM25Index()
    for i, text in enumerate(CORPUS):
        index.add(f"d{i:02d}", text)
    return index


def test_bm25_scores_match_sqlite_fts5_bm25_on_a_fixed_corpus() -> None:
    """Same documents, same order, scores equal to ``-bm25(t)`` within 1e-9 relative."""
    index = _index()
    expected = _fts5_ranking(QUERIES)
    for query, fts5_hits in zip(QUERIES, expected, strict=True):
        hits = index.search(query)
        assert [doc for doc, _ in hits] == [doc for doc, _ in fts5_hits], query
        for (_, score), (_, fts5_score) in zip(hits, fts5_hits, strict=True):
            assert math.isclose(score, fts5_score, rel_tol=1e-9), query


def test_bm25_matches_fts5_after_removals_and_replacements() -> None:
    """Statistics follow ``remove`` and re-``add``, as FTS5 DELETE/UPDATE do."""
    sqlite3 = pytest.importorskip("sqlite3", exc_type=ImportError)
    assert sqlite3 is not None
    index = _index()
    conn = _fts5("porter unicode61 remove_diacritics 2")
    with conn:
        conn.executemany(
            "INSERT INTO t(rowid, body) VALUES (?, ?)",
            [(i, text) for i, text in enumerate(CORPUS)],
        )
        for i in (1, 3, 24):
            conn.execute("DELETE FROM t WHERE rowid = ?", (i,))
            index.remove(f"d{i:02d}")
        conn.execute("UPDATE t SET body = ? WHERE rowid = 0", ("dogs dogs cat",))
        index.add("d00", "dogs dogs cat")
    for query in ("cat", "dogs and cats", "vegetarian"):
        expression = _match(query)
        rows = conn.execute(
            "SELECT rowid, -bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t), rowid DESC",
            (expression,),
        ).fetchall()
        hits = index.search(query)
        assert [doc for doc, _ in hits] == [f"d{rowid:02d}" for rowid, _ in rows]
        for (_, score), (_, fts5_score) in zip(hits, rows, strict=True):
            assert math.isclose(score, fts5_score, rel_tol=1e-9)
    conn.close()


def test_bm25_search_returns_documents_matching_any_term_best_first() -> None:
    """OR semantics: a document with one of the terms matches; higher scores first."""
    index = _index()
    hits = index.search("whales pizza")
    assert {doc for doc, _ in hits} == {"d13", "d20"}
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(score > 0 for score in scores)


def test_bm25_ties_break_newest_first_by_doc_id() -> None:
    """Equal scores are ordered by doc_id descending (ids are time-ordered: newest
    first), whatever the insertion order, before the cut to k."""
    index = BM25Index()
    for doc_id in ("c", "a", "b"):
        index.add(doc_id, "same words")
    index.add("z", "other text")
    assert [doc for doc, _ in index.search("same")] == ["c", "b", "a"]
    assert [doc for doc, _ in index.search("same", 2)] == ["c", "b"]


def test_bm25_ties_break_by_the_newer_key_first() -> None:
    """With ``newer``, equal scores go by its key, greatest first (a store passes its
    items' (created_at, id)); the cut to k keeps the greatest."""
    index = BM25Index()
    for doc_id in ("a", "b", "c"):
        index.add(doc_id, "same words")
    created = {"a": 3, "b": 1, "c": 2}
    found = index.search("same", 2, newer=lambda doc: (created[doc], doc))
    assert [doc for doc, _ in found] == ["a", "c"]


def test_bm25_k_and_allowed_limit_results_but_not_statistics() -> None:
    """``allowed`` filters ids without changing scores; ``k`` truncates the ranking."""
    index = _index()
    full = dict(index.search("cat"))
    allowed = {"d00", "d24", "d05"}
    narrowed = index.search("cat", allowed=allowed)
    assert [doc for doc, _ in narrowed] == [
        doc for doc in sorted(sorted(full, reverse=True), key=lambda d: -full[d]) if doc in allowed
    ]
    assert all(full[doc] == score for doc, score in narrowed)
    assert index.search("cat", 2) == index.search("cat")[:2]
    assert index.search("cat", 0) == []


def test_bm25_index_tracks_membership_and_replacement() -> None:
    """``add`` replaces earlier text of an id; ``remove`` forgets it and its terms."""
    index = BM25Index()
    assert len(index) == 0 and index.search("x") == []
    index.add("a", "alpha beta")
    index.add("b", "beta gamma")
    index.add("a", "delta")
    assert len(index) == 2 and "a" in index and "c" not in index
    assert [doc for doc, _ in index.search("alpha")] == []
    assert [doc for doc, _ in index.search("delta")] == ["a"]
    assert index.remove("a") is True
    assert index.remove("a") is False
    assert "a" not in index and index.search("delta") == []
    assert index.search("...") == []


def test_bm25_without_stemming_matches_exact_tokens_only() -> None:
    """With ``stemming=False`` "running" does not match "run"."""
    index = BM25Index(stemming=False)
    index.add("a", "I run daily")
    index.add("b", "running late")
    assert [doc for doc, _ in index.search("running")] == ["b"]
    stemmed = BM25Index()
    stemmed.add("a", "I run daily")
    stemmed.add("b", "running late")
    assert sorted(doc for doc, _ in stemmed.search("running")) == ["a", "b"]


_VOCABULARY = """
connection connections connective connected connecting generously generalization
national nationality nationalism rationalization conditional conditionally agreement
happiness happily abilities ability argue argued argues arguing argus arguments
organization organizer organized organs relativity relatively electrical electricity
possibly possibility possible university universe universal traditional tradition
misspelled misspelling spelling yelling yell yells skies skiing skied dying lying
tying flying flies cried crying replies replied playing played player plays
beautiful beauty beautify hopefully hoping hopes hoped stopping stopped stops
fishing fished fisher fishes swimming swimmer swims eating eaten eats ate
engineering engineer engineered meeting meetings meet met computing computer computers
computation computational analysis analyses analyzing analyzed analyst analytics
documentation documents documented documenting memory memories memorize memorization
embedding embeddings embedded retrieval retrieve retrieved retrieving semantic semantics
vegetarian vegetarians vegetables tiny tinier tiniest quickly quicker quickest
agreed feed bled sized tanned hissing fizzed filing failing conflated troubled
sensational sensation sensationalism recklessness fearlessness usefulness uselessness
""".strip()
