"""A model2vec folder (model.safetensors, tokenizer.json, config.json, as model2vec's
save_pretrained writes them) loads as a static table: its tokens, its rows (int8 after
loading), its weights and vocabulary mapping; a tokenizer engramdb cannot reproduce is
refused."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest

from engramdb import ConfigurationError
from engramdb.providers import embedder_from_url

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "sam", "likes", "tea", "coffee", "##s", "cars"]
ROWS = [
    [0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0],
    [0.1, 0.9, 0.0],
    [0.2, 0.1, 0.1],
    [0.9, 0.1, 0.2],
    [0.8, 0.0, 0.3],
    [0.0, 0.0, 0.1],
    [0.0, 0.2, 0.9],
]


def tokenizer_json(model_type: str = "WordPiece") -> dict[str, Any]:
    return {
        "normalizer": {"type": "BertNormalizer", "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {
            "type": model_type,
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "vocab": {token: i for i, token in enumerate(VOCAB)},
        },
    }


def safetensors(tensors: dict[str, tuple[str, list[int], bytes]]) -> bytes:
    header: dict[str, Any] = {}
    body = b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [len(body), len(body) + len(data)],
        }
        body += data
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


def write_model(folder: Path, *, half: bool = False, mapping: bool = False) -> Path:
    folder.mkdir()
    code, dtype = ("<e", "F16") if half else ("<f", "F32")
    rows = ROWS
    tensors: dict[str, tuple[str, list[int], bytes]] = {}
    if mapping:  # the rows stored in reverse, each token mapped to its row
        order = list(reversed(range(len(ROWS))))
        rows = [ROWS[i] for i in order]
        index = [order.index(i) for i in range(len(ROWS))]
        tensors["mapping"] = ("I64", [len(index)], struct.pack(f"<{len(index)}q", *index))
    flat = [v for row in rows for v in row]
    tensors["embeddings"] = (
        dtype,
        [len(rows), 3],
        struct.pack(f"{code[0]}{len(flat)}{code[1]}", *flat),
    )
    tensors["weights"] = (
        "F32",
        [len(VOCAB)],
        struct.pack(f"<{len(VOCAB)}f", *([1.0] * len(VOCAB))),
    )
    (folder / "model.safetensors").write_bytes(safetensors(tensors))
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json()))
    (folder / "config.json").write_text(json.dumps({"normalize": True}))
    return folder


def unit(v: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


@pytest.mark.parametrize(("half", "mapping"), [(False, False), (True, False), (False, True)])
def test_a_model2vec_folder_embeds_as_the_mean_of_its_token_rows(
    tmp_path: Path, half: bool, mapping: bool
) -> None:
    folder = write_model(tmp_path / "potion-tiny", half=half, mapping=mapping)
    embedder = embedder_from_url(f"static:{folder}")
    assert embedder.space.id.startswith("static/potion-tiny@3#")
    (vector,) = embedder.embed(["Sam likes teas"])  # sam, likes, tea, ##s
    expected = unit([sum(ROWS[i][d] for i in (4, 5, 6, 8)) for d in range(3)])
    assert all(abs(a - b) < 0.02 for a, b in zip(vector, expected, strict=True))
    tea, coffee, cars = (embedder.embed([w])[0] for w in ("tea", "coffee", "cars"))
    assert sum(map(float.__mul__, tea, coffee)) > sum(map(float.__mul__, tea, cars))


def test_a_tokenizer_engramdb_cannot_reproduce_is_refused(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "unigram")
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json("Unigram")))
    with pytest.raises(ConfigurationError, match="tokenizer model is 'Unigram'"):
        embedder_from_url(f"static:{folder}")


def test_a_folder_without_a_model_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match=r"cannot read model\.safetensors"):
        embedder_from_url(f"static:{tmp_path / 'empty'}")
