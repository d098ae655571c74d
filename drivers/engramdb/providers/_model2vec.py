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

A damaged folder is one ``ConfigurationError`` naming the folder, the file and what is
wrong, whatever it holds: a missing or unreadable file, JSON that is not an object or
nests too deeply, a field of the wrong type, and every lie a safetensors header can tell
(a header length past the end of the file, an unknown dtype, offsets outside the data, a
shape whose size is not the bytes its offsets give, a zero or a huge dimension). The
header is checked by arithmetic before a value is decoded or a row is cut, so a shape
``[10**12, 0]`` is refused at once. ``config.json`` is not read (engramdb normalises
every vector anyway).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engramdb import ConfigurationError, EngramError, build_static_table
from engramdb.json_format import loads_line

__all__ = ["model2vec_table"]

_FLOATS = {"F32": ("<f", 4), "F16": ("<e", 2), "F64": ("<d", 8)}
_INTEGERS = {"I64": ("<q", 8), "I32": ("<i", 4)}
_WIDTHS = {dtype: width for dtype, (_, width) in (_FLOATS | _INTEGERS).items()}


def model2vec_table(folder: Path) -> bytes:
    """The engramdb table of the model2vec model in ``folder``."""
    tensors = _safetensors(folder / "model.safetensors")
    vocabulary = _wordpiece_vocabulary(folder / "tokenizer.json")
    embeddings = tensors.get("embeddings") or tensors.get("embedding.weight")
    if embeddings is None:
        raise _refused(folder, "model.safetensors has no 'embeddings' tensor")
    if len(embeddings.shape) != 2 or 0 in embeddings.shape:
        raise _refused(
            folder,
            f"its 'embeddings' tensor has shape {list(embeddings.shape)}; it needs two "
            "dimensions (tokens, dimensions), neither zero",
        )
    rows, dims = embeddings.shape
    values = embeddings.floats(folder)
    mapping = tensors.get("mapping")
    index = mapping.integers(folder, len(vocabulary)) if mapping else range(len(vocabulary))
    weights = tensors.get("weights")
    weight = weights.floats(folder, len(vocabulary)) if weights else [1.0] * len(vocabulary)
    if mapping is None and rows < len(vocabulary):
        raise _refused(
            folder,
            f"its 'embeddings' tensor has {rows} rows for the {len(vocabulary)} tokens of "
            "tokenizer.json",
        )
    if any(not 0 <= i < rows for i in index):
        raise _refused(folder, "'mapping' points outside 'embeddings'")
    matrix = [values[i * dims : (i + 1) * dims] for i in index]
    return build_static_table(vocabulary, weight, matrix)


def _refused(folder: Path, why: str) -> ConfigurationError:
    return ConfigurationError(
        f"{folder} is not a model2vec model engramdb can read: {why}; give a folder written "
        "by model2vec (model.safetensors, tokenizer.json) with a BERT WordPiece tokenizer"
    )


@dataclass(frozen=True, slots=True)
class _Tensor:
    """One tensor of a safetensors file, checked against its bytes: its name, dtype,
    shape and data (exactly the product of the shape times the dtype's width)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    data: memoryview

    def floats(self, folder: Path, length: int | None = None) -> list[float]:
        """The values of a float tensor (of one dimension of ``length``, when given),
        each finite."""
        values: list[float] = self._values(folder, _FLOATS, length)
        if not all(map(math.isfinite, values)):
            raise _refused(folder, f"tensor {self.name!r} holds a value that is not finite")
        return values

    def integers(self, folder: Path, length: int) -> list[int]:
        """The values of an integer tensor of one dimension of ``length``."""
        values: list[int] = self._values(folder, _INTEGERS, length)
        return values

    def _values(
        self, folder: Path, dtypes: dict[str, tuple[str, int]], length: int | None
    ) -> list[Any]:
        if self.dtype not in dtypes:
            raise _refused(
                folder,
                f"tensor {self.name!r} has dtype {self.dtype}, not one of {', '.join(dtypes)}",
            )
        if length is not None and self.shape != (length,):
            raise _refused(
                folder,
                f"tensor {self.name!r} has shape {list(self.shape)}; it needs one value per "
                f"token of tokenizer.json, [{length}]",
            )
        return [v for (v,) in struct.iter_unpack(dtypes[self.dtype][0], self.data)]


def _safetensors(path: Path) -> dict[str, _Tensor]:
    """Every tensor of a safetensors file, its header checked against the file's bytes
    (arithmetic only: nothing is decoded here)."""
    folder = path.parent
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _refused(folder, f"cannot read {path.name} ({exc.strerror or exc})") from None
    if len(data) < 8:
        raise _refused(folder, f"{path.name} is not a safetensors file ({len(data)} bytes)")
    (size,) = struct.unpack_from("<Q", data)
    if size > len(data) - 8:
        raise _refused(
            folder,
            f"{path.name}'s header is {size} bytes long, past the end of the file "
            f"({len(data)} bytes)",
        )
    try:
        header = loads_line(data[8 : 8 + size].decode("utf-8"))
    except (UnicodeDecodeError, EngramError) as exc:  # not JSON, too deep, a huge number
        raise _refused(folder, f"{path.name}'s header is not JSON engramdb reads ({exc})") from None
    if not isinstance(header, dict):
        raise _refused(folder, f"{path.name}'s header is not a JSON object")
    body = memoryview(data)[8 + size :]
    tensors: dict[str, _Tensor] = {}
    for name, spec in header.items():
        if name != "__metadata__":
            tensors[name] = _tensor(folder, name, spec, body)
    return tensors


def _tensor(folder: Path, name: str, spec: object, body: memoryview) -> _Tensor:
    """The tensor ``name`` of a header: its dtype known, its shape whole numbers from 0,
    its offsets inside the data, and its bytes exactly its shape's size."""
    where = f"tensor {name!r} of model.safetensors"
    if not isinstance(spec, dict):
        raise _refused(folder, f"{where} is not described by a JSON object")
    dtype, shape, offsets = spec.get("dtype"), spec.get("shape"), spec.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in _WIDTHS:
        known = ", ".join(_WIDTHS)
        raise _refused(folder, f"{where} has dtype {_shown(dtype)}, not one of {known}")
    if not isinstance(shape, list) or not all(_whole(d) for d in shape):
        raise _refused(folder, f"{where} has a shape that is not a list of whole numbers")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_whole(o) for o in offsets)
        or not offsets[0] <= offsets[1] <= len(body)
    ):
        raise _refused(
            folder,
            f"{where} has data_offsets {_shown(offsets)}; they must be [start, "
            f"end] with 0 <= start <= end <= {len(body)}, the bytes after the header",
        )
    start, end = offsets
    size = _bytes(shape, _WIDTHS[dtype])
    if size != end - start:
        needs = "more than 2**64" if size is None else f"{size}"
        raise _refused(
            folder,
            f"{where} has shape {_shown(shape)} of {dtype}, but its data_offsets hold "
            f"{end - start} bytes and the shape needs {needs}",
        )
    return _Tensor(name, dtype, tuple(shape), body[start:end])


def _bytes(shape: list[int], width: int) -> int | None:
    """The bytes a tensor of ``shape`` takes, or None as soon as they pass 2**64, which
    no file holds (so a shape of many huge dimensions is never multiplied out)."""
    if 0 in shape:
        return 0
    size = width
    for dim in shape:
        size *= dim
        if size > 2**64:
            return None
    return size


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _wordpiece_vocabulary(path: Path) -> list[str]:
    """The tokens of a BERT-style WordPiece ``tokenizer.json``, in id order."""
    folder = path.parent
    try:
        spec = loads_line(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _refused(folder, f"cannot read {path.name} ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise _refused(folder, f"{path.name} is not UTF-8 (byte {exc.start})") from None
    except EngramError as exc:  # not JSON, nested too deeply, a number out of range
        raise _refused(folder, f"{path.name} is not JSON that engramdb reads ({exc})") from None
    if not isinstance(spec, dict):
        raise _refused(folder, f"{path.name} is not a JSON object")
    model, normalizer, pre = (
        _part(folder, spec, key) for key in ("model", "normalizer", "pre_tokenizer")
    )
    if model.get("type") != "WordPiece" or model.get("continuing_subword_prefix", "##") != "##":
        raise _refused(folder, f"its tokenizer model is {_shown(model.get('type'))}")
    if normalizer.get("type") != "BertNormalizer" or normalizer.get("lowercase", True) is not True:
        raise _refused(folder, f"its normalizer is {_shown(normalizer.get('type'))}")
    if pre.get("type") != "BertPreTokenizer":
        raise _refused(folder, f"its pre-tokenizer is {_shown(pre.get('type'))}")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(
        _whole(i) and "\n" not in token for token, i in vocab.items()
    ):
        raise _refused(
            folder, "its vocabulary is not an object of tokens (without a line break) to ids"
        )
    ordered = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in ordered] != list(range(len(ordered))) or "[UNK]" not in vocab:
        raise _refused(folder, "its vocabulary ids are not 0..n-1 with an [UNK] token")
    return [token for token, _ in ordered]


def _part(folder: Path, spec: dict[str, Any], key: str) -> dict[str, Any]:
    """``spec[key]``: an object, or ``{}`` when it is missing or null."""
    part = spec.get(key)
    if part is None:
        return {}
    if not isinstance(part, dict):
        raise _refused(folder, f"the {key!r} of tokenizer.json is not a JSON object")
    return part


def _shown(value: object) -> str:
    """A value of the file in a message: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
