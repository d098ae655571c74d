"""How a sentence-transformers model names its space, tested without loading a model:
a stand-in ``sentence_transformers`` module answers the one question asked of a loaded
model (its dimensions), so these tests run where the ``local`` extra is not installed."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from engramdb import ConfigurationError
from engramdb.providers import SentenceTransformerEmbedder, embedder_from_url


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace sentence_transformers with a stand-in; returns the models it "loaded"."""
    loaded: list[str] = []

    class StandIn:
        def __init__(self, model: str, **options: Any) -> None:
            loaded.append(model)

        def get_embedding_dimension(self) -> int:
            return 384

    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = StandIn  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    return loaded


def model_folder(parent: Path, base: str) -> Path:
    """A folder laid out like a saved sentence-transformers model, named ``model``."""
    folder = parent / base / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"_name_or_path": base, "hidden_size": 384}))
    (folder / "modules.json").write_text(json.dumps([{"type": "Transformer", "path": ""}]))
    return folder


def test_two_models_in_folders_of_the_same_name_never_share_a_generic_space(
    tmp_path: Path, loads: list[str]
) -> None:
    """A folder alone is refused before anything is loaded: its name ("model") would be
    the space of every model kept in a folder so named."""
    for base in ("minilm", "e5-small"):
        folder = model_folder(tmp_path, base)
        with pytest.raises(ConfigurationError, match="is a local folder: name the model") as info:
            SentenceTransformerEmbedder(folder)
        assert str(folder) in str(info.value) and "model_id=" in str(info.value)
        with pytest.raises(ConfigurationError, match=r"\?model_id="):
            embedder_from_url(f"st:{folder}")
    assert loads == []


def test_model_id_names_the_space_of_a_local_folder(tmp_path: Path, loads: list[str]) -> None:
    minilm = model_folder(tmp_path, "minilm")
    e5 = model_folder(tmp_path, "e5-small")
    named = SentenceTransformerEmbedder(minilm, model_id="all-MiniLM-L6-v2")
    by_string = embedder_from_url(f"st:{e5}?model_id=intfloat/e5-small-v2")
    assert named.space.id == "sentence-transformers/all-MiniLM-L6-v2@384"
    assert by_string.space.id == "sentence-transformers/intfloat/e5-small-v2@384"
    assert loads == [str(minilm), str(e5)]


def test_a_model_by_name_is_named_by_its_name(loads: list[str]) -> None:
    """The same id as a local copy given that model_id: they share vectors."""
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    assert embedder.space.id == "sentence-transformers/all-MiniLM-L6-v2@384"


@pytest.mark.parametrize("model_id", ["", " ", "model@v2", "a#b"])
def test_a_model_id_that_cannot_name_a_space_is_refused(
    tmp_path: Path, loads: list[str], model_id: str
) -> None:
    with pytest.raises(ConfigurationError, match="model_id="):
        SentenceTransformerEmbedder(model_folder(tmp_path, "m"), model_id=model_id)
    assert loads == []
