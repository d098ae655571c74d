"""``engramdb export`` and ``engramdb import`` are exact inverses, and a hostile import
file ends in one line of error that names its line, with nothing stored.

The CLI runs in process (``engramdb.cli.main``) on real SQLite files, with
``ENGRAMDB_EMBEDDER=hash:64`` (offline, deterministic, fast).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from engramdb import HashEmbedder, Memory, MemoryRecord, ValidationError
from engramdb.cli import main
from engramdb.sqlite import SqliteStore

SEPARATORS = ["\u2028", "\u2029", "\x85", "\r", "\n", "\x0b", "\x0c", "\x1c", "\x1e"]


@contextmanager
def cli_environment() -> Iterator[None]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAMDB_")}
    with mock.patch.dict(os.environ, {**clean, "ENGRAMDB_EMBEDDER": "hash:64"}, clear=True):
        yield


def cli(db: Path, *args: str) -> int:
    with cli_environment():
        return main(["--db", str(db), *args])


def import_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, content: str
) -> str:
    """Import a file holding ``content`` into a fresh database: the one line of error it
    prints (after checking exit status 1 and that no database was even created)."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8", newline="")
    db = tmp_path / "target.db"
    capsys.readouterr()
    status = cli(db, "import", str(path))
    err = capsys.readouterr().err
    assert status == 1, err
    assert not db.exists()  # the whole file is read before the database opens
    assert err.count("\n") == 1 and err.startswith(f"engramdb: error: {path} line "), err
    assert err.rstrip().endswith("; nothing was stored"), err
    return err


# --- hostile files: one line of error each ---------------------------------------------


def test_an_import_of_100000_deep_metadata_fails_on_one_line_and_stores_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    content = '{"text": "fine"}\n{"text": "x", "metadata": {"a": ' + deep + "}}\n"
    err = import_error(capsys, tmp_path, "deep.jsonl", content)
    assert "line 2: nested deeper than 64 levels" in err


def test_an_import_of_a_5000_digit_integer_fails_on_one_line_and_stores_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    content = '{"text": "x", "metadata": {"n": ' + "9" * 5000 + "}}\n"
    err = import_error(capsys, tmp_path, "big.jsonl", content)
    assert "line 1: the number 999999999999…(5000 characters) is out of range" in err
    assert "set_int_max_str_digits" not in err  # Python's hint is no fix for a user


@pytest.mark.parametrize("name", ["importance", "ttl"])
def test_an_import_of_a_400_digit_importance_or_ttl_fails_on_one_line_and_stores_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    content = json.dumps({"text": "x"}) + "\n" + f'{{"text": "y", "{name}": -{"9" * 400}}}\n'
    err = import_error(capsys, tmp_path, f"{name}.jsonl", content)
    assert "line 2: the number -99999999999…(401 characters) is out of range" in err


def test_an_import_of_a_versioned_line_with_a_huge_importance_fails_on_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The strict (``"format": 1``) reader refuses it too, by the same check."""
    line = {
        "format": 1, "id": "a", "scope": ["s"], "text": "x", "metadata": {}, "labels": {},
        "importance": 0.5, "created_at": "2026-12-01T23:52:52.123Z",
        "updated_at": "2026-12-01T23:52:52.123Z", "expires_at": None, "revision": 1,
    }  # fmt: skip
    content = json.dumps(line).replace('"importance": 0.5', '"importance": ' + "9" * 400)
    err = import_error(capsys, tmp_path, "versioned.jsonl", content + "\n")
    assert "line 1: the number 999999999999…(400 characters) is out of range" in err


@pytest.mark.parametrize("dimensions", ["²", "4²", "٤", "9" * 5000])
def test_an_import_of_a_space_id_with_non_ascii_digits_fails_on_one_line_and_stores_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, dimensions: str
) -> None:
    """``int()`` and ``str.isdigit`` take superscripts and Arabic-Indic digits: the
    dimensions are read as ASCII digits only (and at most 9 of them)."""
    line = {"text": "x", "space_id": f"hash/bow@{dimensions}", "vector": "AACAPw=="}
    err = import_error(capsys, tmp_path, "space.jsonl", json.dumps(line) + "\n")
    assert "line 1: space_id 'hash/bow@" in err and "is not of the form provider/model@N" in err


def test_an_import_of_a_csv_field_over_128_kib_fails_on_one_line_and_stores_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    content = 'text,importance\nfine,0.5\n"' + "a" * (128 * 1024 + 1) + '",0.5\n'
    err = import_error(capsys, tmp_path, "big.csv", content)
    assert "line 3: not CSV (field larger than field limit (131072))" in err


# --- line splitting agrees with JSON escaping ------------------------------------------


def _records(db: Path, scope: tuple[str, ...]) -> list[MemoryRecord]:
    with Memory(SqliteStore(db), HashEmbedder(64)) as memory:
        return list(reversed(memory.list(scope, limit=1000)))


def test_an_export_line_escapes_every_line_separator_and_imports_back(tmp_path: Path) -> None:
    """A memory holding U+2028, U+2029 and U+0085 exports as one line that no splitter
    breaks (``str.splitlines`` included) and imports back to the same text."""
    text = "a\u2028b\u2029c\x85d\re\nf"
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    with Memory(SqliteStore(source), HashEmbedder(64)) as memory:
        memory.remember(text, scope=("s",), metadata={"k\u2028": "v\x85"})
    out = tmp_path / "out.jsonl"
    assert cli(source, "--scope", "s", "export", "-o", str(out)) == 0
    raw = out.read_text(encoding="utf-8")
    assert len(raw.splitlines()) == 1 and "\\u2028" in raw and "\\u0085" in raw
    assert cli(target, "--scope", "s", "import", str(out)) == 0
    [record] = _records(target, ("s",))
    assert (record.text, record.metadata) == (text, {"k\u2028": "v\x85"})


def imported_texts(tmp_path: Path, name: str, content: str) -> list[str]:
    """Import a file holding ``content`` (its line ends as given) into a fresh scope: the
    texts stored, in order."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8", newline="")
    target = tmp_path / f"{name}.db"
    assert cli(target, "--scope", "s", "import", str(path)) == 0
    return [r.text for r in _records(target, ("s",))]


def test_an_older_export_with_raw_separators_still_imports(tmp_path: Path) -> None:
    """Exports written before the escaping hold the separators raw: import splits on
    ``\\n`` only (``\\r\\n`` too), so they are read back as the lines they are."""
    lines = [{"text": f"one{sep}two"} for sep in ("\u2028", "\u2029", "\x85")]
    content = "\r\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\r\n"
    assert imported_texts(tmp_path, "old.jsonl", content) == [x["text"] for x in lines]


def test_a_text_import_splits_on_newlines_only(tmp_path: Path) -> None:
    content = "one\u2028still one\r\ntwo\x85still two\n"
    assert imported_texts(tmp_path, "notes.txt", content) == [
        "one\u2028still one",
        "two\x85still two",
    ]


def test_a_csv_import_keeps_line_breaks_inside_quoted_fields(tmp_path: Path) -> None:
    """The file's own line ends reach the csv module: a quoted ``\\r\\n`` stays."""
    content = 'text\r\n"one\r\ntwo\u2028"\r\nthree\r\n'
    assert imported_texts(tmp_path, "notes.csv", content) == ["one\r\ntwo\u2028", "three"]


# --- the round-trip property -----------------------------------------------------------

_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_text = st.text(st.one_of(_chars, st.sampled_from([*SEPARATORS, "𝄞", "😀", "\U0010fffd"])))
_texts = _text.filter(lambda t: bool(t.strip()))
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
    | st.just([])
    | st.just({}),
    # min_size=1: an extension always draws from ``inner`` (hypothesis warns, now and then,
    # of one that drew an empty list or dict as if it could not recurse)
    lambda inner: (
        st.lists(inner, min_size=1, max_size=3)
        | st.dictionaries(_text, inner, min_size=1, max_size=3)
    ),
    max_leaves=8,
)
_labels = st.dictionaries(_texts, st.lists(_text.filter(bool), min_size=1, max_size=3), max_size=3)
_memory = st.fixed_dictionaries(
    {
        "text": _texts,
        "metadata": st.dictionaries(_text, _json, max_size=4),
        "labels": _labels,
        "importance": st.floats(0.0, 1.0),
    }
)


def _fields(record: MemoryRecord) -> tuple[Any, ...]:
    metadata = json.dumps(record.metadata, sort_keys=True, ensure_ascii=False)
    return record.text, metadata, record.labels, record.importance


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memories=st.lists(_memory, min_size=1, max_size=5, unique_by=lambda m: m["text"]))
def test_export_then_import_gives_back_every_memory_exactly(memories: list[dict[str, Any]]) -> None:
    """Arbitrary Unicode text (line separators, ``\\r``, astral characters), nested JSON
    metadata with finite numbers, labels and importance: remember → export → import into
    a fresh database → the records are equal on text, metadata, labels and importance."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        source, target, out = root / "source.db", root / "target.db", root / "out.jsonl"
        with Memory(SqliteStore(source), HashEmbedder(64)) as memory:
            try:
                memory.remember_many([{**m, "scope": ("src",)} for m in memories])
            except ValidationError:  # e.g. a label name of only whitespace
                reject()
        assert cli(source, "--scope", "src", "export", "-o", str(out)) == 0
        assert len(out.read_bytes().split(b"\n")) == len(memories) + 1
        assert cli(target, "--scope", "dst", "import", str(out)) == 0
        before, after = _records(source, ("src",)), _records(target, ("dst",))
        assert [_fields(r) for r in after] == [_fields(r) for r in before]
        assert len(after) == len(memories)
