"""A model2vec folder (model.safetensors, tokenizer.json, config.json, as model2vec's
save_pretrained writes them) loads as a static table: its tokens, its rows (int8 after
loading), its weights and vocabulary mapping; a tokenizer engramdb cannot reproduce is
refused."""

from __future__ import annotations

import json
import math
import signal
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from engramdb import ConfigurationError
from engramdb.cli import main
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


def header_file(header: object, body: bytes = b"", *, size: int | None = None) -> bytes:
    """A safetensors file with ``header`` as it is (lies included) and ``body``."""
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) if size is None else size) + text + body


ROW_BYTES = struct.pack("<30f", *[v for row in ROWS for v in row])  # embeddings [10, 3]
ONES = struct.pack("<10f", *([1.0] * 10))


def tensor(dtype: str, shape: list[Any], offsets: list[Any]) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


def model_bytes(**tensors: Any) -> bytes:
    """embeddings [10, 3] (bytes 0..120) and weights [10] (120..160), each replaced or
    joined by ``tensors``; None removes one."""
    header: dict[str, Any] = {
        "__metadata__": {"format": "pt"},
        "embeddings": tensor("F32", [10, 3], [0, 120]),
        "weights": tensor("F32", [10], [120, 160]),
    }
    header |= tensors
    header = {name: spec for name, spec in header.items() if spec is not None}
    return header_file(header, ROW_BYTES + ONES + struct.pack("<10q", *range(10)))


def tokenizer(**changes: Any) -> str:
    spec = tokenizer_json()
    for path, value in changes.items():
        *parents, key = path.split("__")
        place = spec
        for parent in parents:
            place = place[parent]
        place[key] = value
    return json.dumps(spec)


DEEP = 5000
NAN_ROWS = struct.pack("<30f", *([math.nan] + [0.5] * 29))
# (case, file name, its new content: bytes, str, "folder" or None to delete it, message)
DAMAGED: list[tuple[str, str, bytes | str | None, str]] = [
    ("no model.safetensors", "model.safetensors", None, "cannot read model.safetensors"),
    ("no tokenizer.json", "tokenizer.json", None, "cannot read tokenizer.json"),
    ("model.safetensors a folder", "model.safetensors", "folder", "cannot read model.safetensors"),
    ("tokenizer.json a folder", "tokenizer.json", "folder", "cannot read tokenizer.json"),
    ("empty safetensors", "model.safetensors", b"", "is not a safetensors file (0 bytes)"),
    (
        "header length past the file",
        "model.safetensors",
        header_file({}, size=10**6),
        "past the end",
    ),
    (
        "header length 2**64 - 1",
        "model.safetensors",
        header_file({}, size=2**64 - 1),
        "past the end",
    ),
    ("header not JSON", "model.safetensors", struct.pack("<Q", 4) + b"nope", "header is not JSON"),
    ("header not UTF-8", "model.safetensors", struct.pack("<Q", 2) + b"\xff\xfe", "not JSON"),
    ("header a list", "model.safetensors", header_file([]), "header is not a JSON object"),
    (
        "header 5,000 deep",
        "model.safetensors",
        struct.pack("<Q", 2 * DEEP) + b"[" * DEEP + b"]" * DEEP,
        "nested deeper than 64",
    ),
    (
        "header number past 64 bits",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [10**30, 3], [0, 120])),
        "out of range",
    ),
    (
        "tensor not an object",
        "model.safetensors",
        model_bytes(embeddings=5),
        "is not described by a JSON object",
    ),
    (
        "unknown dtype",
        "model.safetensors",
        model_bytes(embeddings=tensor("BF16", [10, 3], [0, 120])),
        "has dtype 'BF16'",
    ),
    (
        "dtype not a string",
        "model.safetensors",
        model_bytes(embeddings=tensor(7, [10, 3], [0, 120])),
        "has dtype 7",
    ),
    (
        "negative dimension",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [-10, -3], [0, 120])),
        "not a list of whole numbers",
    ),
    (
        "dimension a string",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", ["10", 3], [0, 120])),
        "not a list of whole numbers",
    ),
    (
        "dimension a boolean",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [True, 3], [0, 120])),
        "not a list of whole numbers",
    ),
    (
        "shape not a list",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", {"rows": 10}, [0, 120])),
        "not a list of whole numbers",
    ),
    (
        "offsets past the data",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [10, 3], [0, 10**9])),
        "has data_offsets [0, 1000000000]",
    ),
    (
        "offsets reversed",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [10, 3], [120, 0])),
        "data_offsets",
    ),
    (
        "one offset",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [10, 3], [120])),
        "data_offsets",
    ),
    (
        "offsets negative",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [10, 3], [-120, 0])),
        "data_offsets",
    ),
    (
        "shape not the byte length",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [10, 4], [0, 120])),
        "hold 120 bytes and the shape needs 160",
    ),
    (
        "dtype not the byte length",
        "model.safetensors",
        model_bytes(embeddings=tensor("F64", [10, 3], [0, 120])),
        "the shape needs 240",
    ),
    (
        "huge shape",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [10**12, 10**12], [0, 120])),
        "the shape needs more than 2**64",
    ),
    (
        "100,000 huge dimensions",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [2**62] * 100_000, [0, 120])),
        "the shape needs more than 2**64",
    ),
    (
        "shape [10**12, 0]",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [10**12, 0], [0, 0])),
        "has shape [1000000000000, 0]; it needs two dimensions",
    ),
    (
        "shape [0, 3]",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [0, 3], [0, 0])),
        "neither zero",
    ),
    (
        "embeddings of one dimension",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [30], [0, 120])),
        "it needs two dimensions",
    ),
    (
        "embeddings of integers",
        "model.safetensors",
        model_bytes(embeddings=tensor("I32", [10, 3], [0, 120])),
        "has dtype I32, not one of F32, F16, F64",
    ),
    (
        "embeddings not finite",
        "model.safetensors",
        header_file({"embeddings": tensor("F32", [10, 3], [0, 120])}, NAN_ROWS),
        "holds a value that is not finite",
    ),
    (
        "no embeddings",
        "model.safetensors",
        model_bytes(embeddings=None),
        "has no 'embeddings' tensor",
    ),
    (
        "fewer rows than tokens",
        "model.safetensors",
        model_bytes(embeddings=tensor("F32", [5, 3], [0, 60])),
        "has 5 rows for the 10 tokens",
    ),
    (
        "weights of the wrong length",
        "model.safetensors",
        model_bytes(weights=tensor("F32", [5], [120, 140])),
        "needs one value per token of tokenizer.json, [10]",
    ),
    (
        "weights of integers",
        "model.safetensors",
        model_bytes(weights=tensor("I32", [10], [120, 160])),
        "'weights' has dtype I32",
    ),
    (
        "mapping of floats",
        "model.safetensors",
        model_bytes(mapping=tensor("F32", [10], [120, 160])),
        "'mapping' has dtype F32, not one of I64, I32",
    ),
    (
        "mapping outside embeddings",
        "model.safetensors",
        model_bytes(
            mapping=tensor("I64", [10], [160, 240]), embeddings=tensor("F32", [2, 3], [0, 24])
        ),
        "'mapping' points outside 'embeddings'",
    ),
    ("tokenizer not JSON", "tokenizer.json", "{", "tokenizer.json is not JSON"),
    (
        "tokenizer not UTF-8",
        "tokenizer.json",
        b'{"model": "\xff"}',
        "tokenizer.json is not UTF-8 (byte 11)",
    ),
    ("tokenizer a list", "tokenizer.json", "[]", "tokenizer.json is not a JSON object"),
    (
        "tokenizer 5,000 deep",
        "tokenizer.json",
        '{"a": ' + "[" * DEEP + "]" * DEEP + "}",
        "nested deeper than 64",
    ),
    (
        "tokenizer id past 64 bits",
        "tokenizer.json",
        tokenizer(model__vocab={"[UNK]": 10**30}),
        "out of range",
    ),
    (
        "model a string",
        "tokenizer.json",
        tokenizer(model="WordPiece"),
        "the 'model' of tokenizer.json is not a JSON object",
    ),
    (
        "normalizer a list",
        "tokenizer.json",
        tokenizer(normalizer=[]),
        "the 'normalizer' of tokenizer.json",
    ),
    (
        "pre-tokenizer a number",
        "tokenizer.json",
        tokenizer(pre_tokenizer=1),
        "the 'pre_tokenizer' of tokenizer.json",
    ),
    (
        "model type missing",
        "tokenizer.json",
        tokenizer(model__type=None),
        "its tokenizer model is None",
    ),
    (
        "lowercase a string",
        "tokenizer.json",
        tokenizer(normalizer__lowercase="yes"),
        "its normalizer is 'BertNormalizer'",
    ),
    (
        "prefix a number",
        "tokenizer.json",
        tokenizer(model__continuing_subword_prefix=2),
        "its tokenizer model is 'WordPiece'",
    ),
    (
        "vocabulary a list",
        "tokenizer.json",
        tokenizer(model__vocab=VOCAB),
        "its vocabulary is not an object of tokens",
    ),
    (
        "vocabulary ids strings",
        "tokenizer.json",
        tokenizer(model__vocab={t: str(i) for i, t in enumerate(VOCAB)}),
        "its vocabulary is not an object",
    ),
    (
        "vocabulary ids booleans",
        "tokenizer.json",
        tokenizer(model__vocab={"[UNK]": False, "a": True}),
        "its vocabulary is not an object",
    ),
    (
        "vocabulary ids with a gap",
        "tokenizer.json",
        tokenizer(model__vocab={"[UNK]": 0, "a": 2}),
        "ids are not 0..n-1",
    ),
    (
        "vocabulary without [UNK]",
        "tokenizer.json",
        tokenizer(model__vocab={"a": 0}),
        "with an [UNK] token",
    ),
    (
        "token with a line break",
        "tokenizer.json",
        tokenizer(model__vocab={t.replace("tea", "te\na"): i for i, t in enumerate(VOCAB)}),
        "(without a line break)",
    ),
]


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in the block after ``seconds`` (SIGALRM; a hang fails the test
    instead of stopping the run)."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(
    ("case", "name", "content", "message"), DAMAGED, ids=[d[0] for d in DAMAGED]
)
def test_every_damaged_model2vec_folder_is_one_configuration_error_at_once(
    tmp_path: Path, case: str, name: str, content: bytes | str | None, message: str
) -> None:
    """A missing file, JSON of the wrong shape or nested 5,000 deep, a field of the wrong
    type, and every lie of a safetensors header (its length, dtype, shape, offsets, a
    zero or huge dimension, a value that is not finite) is one ConfigurationError naming
    the folder and what is wrong, within seconds (the shape [10**12, 0] hung)."""
    folder = write_model(tmp_path / "potion-damaged")
    path = folder / name
    path.unlink()
    if content == "folder":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    started = time.monotonic()
    with deadline(20), pytest.raises(ConfigurationError) as caught:
        embedder_from_url(f"static:{folder}")
    assert time.monotonic() - started < 5  # a damaged folder is refused at once
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"{folder} is not a model2vec model engramdb can read")


def test_the_cli_refuses_a_damaged_folder_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_model(tmp_path / "potion-damaged")
    (folder / "model.safetensors").write_bytes(
        model_bytes(embeddings=tensor("F32", [10**12, 0], [0, 0]))
    )
    status = main(
        ["--db", str(tmp_path / "m.db"), "--embedder", f"static:{folder}", "remember", "x"]
    )
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1 and "it needs two dimensions" in err


def test_a_damaged_config_json_is_not_read(tmp_path: Path) -> None:
    """config.json holds nothing engramdb uses: a broken one changes nothing."""
    folder = write_model(tmp_path / "potion-tiny")
    (folder / "config.json").write_text('{"normalize": "' + "[" * DEEP)
    assert embedder_from_url(f"static:{folder}").embed(["tea"])[0]


def test_the_undamaged_model_bytes_load(tmp_path: Path) -> None:
    """The table's base case is a model that loads (so each case fails for its damage)."""
    folder = write_model(tmp_path / "potion-base")
    (folder / "model.safetensors").write_bytes(model_bytes())
    assert embedder_from_url(f"static:{folder}").embed(["tea"])[0]
    (folder / "model.safetensors").write_bytes(model_bytes(mapping=tensor("I64", [10], [160, 240])))
    assert embedder_from_url(f"static:{folder}").embed(["tea"])[0]
