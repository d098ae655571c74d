"""The local cross-encoder reranker.

Its wrapper is tested with a stand-in ``sentence_transformers`` module (the pairs it
passes, the scores it reads back, what it refuses), so it runs where the ``local``
extra is not installed. A real model runs only when sentence-transformers is installed
and ``ENGRAMDB_CROSS_ENCODER`` names a model on disk (no cross-encoder weights ship with
this repository or its test machines; see docs/quality.md, "Rerank stage").
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import types
from typing import Any, ClassVar

import pytest

from engramdb import ConfigurationError, HashEmbedder, InMemoryStore, Memory, ProviderError
from engramdb.providers import CrossEncoderReranker, reranker_from_url


class StandIn:
    """Scores a pair by the query words its text holds; records its calls."""

    calls: ClassVar[list[tuple[str, list[tuple[str, str]], int]]] = []
    answer: ClassVar[Any] = None

    def __init__(self, model: str, **options: Any) -> None:
        self.model = model

    def predict(self, pairs: list[tuple[str, str]], batch_size: int, **options: Any) -> Any:
        StandIn.calls.append((self.model, pairs, batch_size))
        if StandIn.answer is not None:
            return StandIn.answer
        return [float(sum(w in text.split() for w in query.split())) for query, text in pairs]


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> type[StandIn]:
    module = types.ModuleType("sentence_transformers")
    module.CrossEncoder = StandIn  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    StandIn.calls = []
    StandIn.answer = None
    return StandIn


def test_the_wrapper_scores_query_text_pairs(stand_in: type[StandIn]) -> None:
    reranker = reranker_from_url(
        "sentence-transformers:cross-encoder/ms-marco-MiniLM-L-6-v2?batch_size=8"
    )
    assert isinstance(reranker, CrossEncoderReranker)
    assert reranker.id == "sentence-transformers/cross-encoder/ms-marco-MiniLM-L-6-v2"
    assert reranker.rerank("cat dog", ["a cat", "dog cat", "none"]) == [1.0, 2.0, 0.0]
    ((model, pairs, batch),) = stand_in.calls
    assert model == "cross-encoder/ms-marco-MiniLM-L-6-v2" and batch == 8
    assert pairs == [("cat dog", "a cat"), ("cat dog", "dog cat"), ("cat dog", "none")]
    assert reranker.rerank("q", []) == []


@pytest.mark.parametrize("answer", [[1.0], [math.nan, 1.0, 2.0]])
def test_a_wrong_answer_is_a_provider_error(stand_in: type[StandIn], answer: Any) -> None:
    stand_in.answer = answer
    with pytest.raises(ProviderError):
        CrossEncoderReranker().rerank("q", ["a", "b", "c"])


def test_a_folder_needs_a_model_id(stand_in: type[StandIn], tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match="model_id"):
        CrossEncoderReranker(tmp_path)
    named = CrossEncoderReranker(tmp_path, model_id="cross-encoder/x")
    assert named.id == "sentence-transformers/cross-encoder/x"


def test_without_sentence_transformers_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match="engramdb\\[local\\]"):
        CrossEncoderReranker()


MODEL = os.environ.get("ENGRAMDB_CROSS_ENCODER", "")


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None or not os.path.isdir(MODEL),
    reason="needs sentence-transformers and ENGRAMDB_CROSS_ENCODER naming a cross-encoder "
    "folder on disk; none is available offline on the test machines",
)
def test_a_real_cross_encoder_puts_the_answer_first() -> None:
    reranker = CrossEncoderReranker(MODEL, model_id="local-cross-encoder")
    memory = Memory(InMemoryStore(), HashEmbedder(dimensions=64), reranker=reranker)
    scope = ("acme", "travel")
    memory.remember("Sam's flight to Lisbon leaves on Friday at nine", scope)
    memory.remember("Sam likes flights with a window seat to Lisbon and Porto", scope)
    memory.remember("Lisbon Lisbon Lisbon flight flight", scope)
    hits = memory.recall("When does Sam's flight to Lisbon leave?", [scope])
    assert hits.status == "used"
    assert hits[0].memory.text.startswith("Sam's flight to Lisbon leaves")
