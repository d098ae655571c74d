"""Published model2vec models as engramdb static tables, read with the standard library.

A model2vec folder (what ``StaticModel.save_pretrained`` writes) holds
``model.safetensors`` (an ``embeddings`` matrix, one row per token id; optionally
``weights``, one per token, and ``mapping``, a row per token when the vocabulary was
quantised), ``tokenizer.json`` (a Hugging Face tokenizer) and ``config.json``.
:func:`model2vec_table` turns such a folder into the bytes of an engramdb table (int8
rows, the format of :func:`engramdb.build_static_table`), so ``embedder_from_url("static:DIR")``
embeds with it. Only tokenizers engramdb reproduces exactly are accepted: BERT's
normaliser (lower-casing) and pre-tokeniser with a WordPiece model, as in the BERT-based
``potion`` models; anything else is refused with a ``ConfigurationError`` rather than
tokenised differently from the model's training.
"""

from __future__ import annotations

import json
import struct
from array import array
from pathlib import Path
from typing import Any

from engramdb import ConfigurationError, build_static_table

__all__ = ["model2vec_table"]

_DTYPES = {"F32": ("<f", 4), "F16": ("<e", 2), "F64": ("<d", 8)}


def model2vec_table(folder: Path) -> bytes:
    """The engramdb table of the model2vec model in ``folder``."""
    tensors = _safetensors(folder / "model.safetensors")
    vocabulary = _wordpiece_vocabulary(folder / "tokenizer.json")
    embeddings = tensors.get("embeddings") or tensors.get("embedding.weight")
    if embeddings is None:
        raise _refused(folder, "model.safetensors has no 'embeddings' tensor")
    values, (rows, dims) = embeddings
    matrix = [values[i * dims : (i + 1) * dims] for i in range(rows)]
    mapping = tensors.get("mapping")
    index = [int(v) for v in mapping[0]] if mapping else list(range(len(vocabulary)))
    weights = tensors.get("weights")
    weight = [float(v) for v in weights[0]] if weights else [1.0] * len(vocabulary)
    if len(index) != len(vocabulary) or len(weight) != len(vocabulary):
        raise _refused(folder, "the tensors do not have one row and weight per token")
    if any(not 0 <= i < rows for i in index):
        raise _refused(folder, "'mapping' points outside 'embeddings'")
    return build_static_table(vocabulary, weight, [matrix[i] for i in index])


def _refused(folder: Path, why: str) -> ConfigurationError:
    return ConfigurationError(
        f"{folder} is not a model2vec model engramdb can read: {why}; give a folder written "
        "by model2vec (model.safetensors, tokenizer.json) with a BERT WordPiece tokenizer"
    )


def _safetensors(path: Path) -> dict[str, tuple[Any, tuple[int, ...]]]:
    """Every tensor of a safetensors file: (flat values, shape)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _refused(path.parent, f"cannot read {path.name} ({exc.strerror or exc})") from None
    try:
        (size,) = struct.unpack_from("<Q", data)
        header = json.loads(data[8 : 8 + size])
    except (struct.error, ValueError, UnicodeDecodeError):
        raise _refused(path.parent, f"{path.name} is not a safetensors file") from None
    body = memoryview(data)[8 + size :]
    out: dict[str, tuple[Any, tuple[int, ...]]] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        shape = tuple(spec["shape"])
        chunk = body[start:end]
        if spec["dtype"] in _DTYPES:
            code, width = _DTYPES[spec["dtype"]]
            values: Any = [v for (v,) in struct.iter_unpack(code, chunk)]
            count = len(chunk) // width
        elif spec["dtype"] in ("I64", "I32"):
            values = array("q" if spec["dtype"] == "I64" else "i", bytes(chunk))
            count = len(values)
        else:
            raise _refused(path.parent, f"tensor {name!r} has dtype {spec['dtype']}")
        expected = 1
        for dim in shape:
            expected *= dim
        if count != expected:
            raise _refused(path.parent, f"tensor {name!r} holds {count} values for {shape}")
        out[name] = (values, shape)
    return out


def _wordpiece_vocabulary(path: Path) -> list[str]:
    """The tokens of a BERT-style WordPiece ``tokenizer.json``, in id order."""
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _refused(path.parent, f"cannot read {path.name} ({exc})") from None
    model = spec.get("model") or {}
    normalizer = spec.get("normalizer") or {}
    pre = spec.get("pre_tokenizer") or {}
    if model.get("type") != "WordPiece" or model.get("continuing_subword_prefix", "##") != "##":
        raise _refused(path.parent, f"its tokenizer model is {model.get('type')!r}")
    if normalizer.get("type") != "BertNormalizer" or not normalizer.get("lowercase", True):
        raise _refused(path.parent, f"its normalizer is {normalizer.get('type')!r}")
    if pre.get("type") != "BertPreTokenizer":
        raise _refused(path.parent, f"its pre-tokenizer is {pre.get('type')!r}")
    vocab: dict[str, int] = model.get("vocab") or {}
    ordered = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in ordered] != list(range(len(ordered))) or "[UNK]" not in vocab:
        raise _refused(path.parent, "its vocabulary ids are not 0..n-1 with an [UNK] token")
    return [token for token, _ in ordered]
