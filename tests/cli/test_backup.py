"""``engramdb backup`` and ``engramdb restore``: a full backup restores every scope as it
was (ids, times, revisions, history, expiry, labels, importance, evidence, vectors in
every space), byte for byte; a target holding the backup's ids is refused unless told
what to do; a bad backup line is one line of error, with nothing written.

The CLI runs in process (``engramdb.cli.main``) on real SQLite files, with
``ENGRAMDB_EMBEDDER=hash:64``.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
from test_import_export import cli

from engramdb import HashEmbedder, InMemoryStore, Memory
from engramdb.backup import backup, restore
from engramdb.sqlite import SqliteStore


def _fill(db: Path) -> list[str]:
    """Memories in three scopes with history, evidence, expiry, labels, importance and
    vectors in two spaces; answer their ids, oldest first."""
    store = SqliteStore(db)
    with Memory(store, HashEmbedder(64)) as memory:
        ids = []
        for n in range(12):
            scope = ("acme", "user", "sam" if n % 2 else "kim") if n < 10 else ("other",)
            record = memory.remember(
                f"note {n}: line\u2028separator and émoji 🎉",
                scope=scope,
                labels={"topic": [f"t{n % 3}"]},
                importance=round(0.05 * n, 2),
                metadata={"n": n, "deep": {"x": [1, 2.5, None]}},
                ttl=timedelta(days=30) if n % 4 == 0 else None,
            )
            ids.append(record.id)
        memory.update(ids[1], text="note 1, revised")
        memory.update(ids[1], importance=0.9)
        sam = memory.bind(("acme", "user", "sam"))
        hits = sam.recall("note", top_k=3, labels={"topic": ["t1"]})
        assert hits.selection_id is not None
        sam.complete(hits.selection_id, 0.8)
        sam.feedback(ids[3], -0.5)
    with Memory(SqliteStore(db), HashEmbedder(32)) as other:
        other.reindex()  # a second space
    return ids


def _backup_of(db: Path, tmp_path: Path, name: str) -> bytes:
    out = tmp_path / name
    assert cli(db, "backup", str(out)) == 0
    return out.read_bytes()


def test_a_backup_restored_into_a_fresh_database_backs_up_to_the_same_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    _fill(source)
    first = _backup_of(source, tmp_path, "first.jsonl")
    header, *lines = first.decode("utf-8").split("\n")[:-1]
    assert json.loads(header) == {
        "format": 1,
        "kind": "engramdb-backup",
        "spaces": ["hash/bow@32", "hash/bow@64"],
    }
    assert len(lines) == 12
    items = [json.loads(line) for line in lines]
    assert sum(len(item["history"]) for item in items) == 2
    assert sum(item["utility"] is not None for item in items) >= 3
    assert all({v["space_id"] for v in item["vectors"]} == {"hash/bow@32"} or
               len(item["vectors"]) == 2 for item in items)  # fmt: skip
    assert "\u2028" not in first.decode("utf-8")  # escaped: no reader splits a line
    assert cli(target, "restore", str(tmp_path / "first.jsonl")) == 0
    assert "restored 12 memories" in capsys.readouterr().out
    assert _backup_of(target, tmp_path, "second.jsonl") == first


def test_a_backup_under_a_prefix_holds_only_its_scopes(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    _fill(source)
    out = tmp_path / "acme.jsonl"
    assert cli(source, "backup", str(out), "--prefix", "acme/user/sam") == 0
    scopes = {
        tuple(json.loads(line)["record"]["scope"]) for line in out.read_text().split("\n")[1:-1]
    }
    assert scopes == {("acme", "user", "sam")}


def test_a_restore_over_held_ids_is_refused_whole_unless_told_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The target holds two of the backup's ids (one changed since): the restore is
    refused with one line naming them and the fix, and writes nothing; --on-conflict
    skip keeps the target's versions and restores the rest; replace restores the
    backup's."""
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    ids = _fill(source)
    file = tmp_path / "b.jsonl"
    assert cli(source, "backup", str(file)) == 0
    full = file.read_bytes()
    lines = full.decode("utf-8").split("\n")
    held = [line for line in lines[1:-1] if json.loads(line)["record"]["id"] in ids[4:6]]
    part = tmp_path / "part.jsonl"
    part.write_text("\n".join([lines[0], *held]) + "\n", encoding="utf-8")
    assert cli(target, "restore", str(part)) == 0
    with Memory(SqliteStore(target), HashEmbedder(64)) as memory:
        memory.update(ids[4], text="changed in the target")
    capsys.readouterr()
    assert cli(target, "restore", str(file)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already holds 2 of the 12 memories" in err, err
    assert ids[4] in err and ids[5] in err and "--on-conflict skip" in err, err
    assert "nothing was restored" in err
    with Memory(SqliteStore(target), HashEmbedder(64)) as memory:
        assert memory.status().items == 2  # nothing written
        assert memory.get(ids[4]).text == "changed in the target"  # type: ignore[union-attr]
    assert cli(target, "restore", str(file), "--on-conflict", "skip") == 0
    assert "(2 already there, kept)" in capsys.readouterr().out
    with Memory(SqliteStore(target), HashEmbedder(64)) as memory:
        assert memory.status().items == 12
        assert memory.get(ids[4]).text == "changed in the target"  # type: ignore[union-attr]
    assert cli(target, "restore", str(file), "--on-conflict", "replace") == 0
    assert "(12 replaced)" in capsys.readouterr().out
    assert _backup_of(target, tmp_path, "again.jsonl") == full


def _restore_error(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str) -> str:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8", newline="")
    db = tmp_path / "fresh.db"
    capsys.readouterr()
    assert cli(db, "restore", str(path)) == 1
    err = capsys.readouterr().err
    assert not db.exists()  # the whole file is checked before the database opens
    assert err.count("\n") == 1 and err.startswith(f"engramdb: error: {path} line "), err
    assert err.rstrip().endswith("; nothing was restored"), err
    return err


@pytest.fixture
def good(tmp_path: Path) -> list[str]:
    source = tmp_path / "good.db"
    _fill(source)
    return _backup_of(source, tmp_path, "good.jsonl").decode("utf-8").split("\n")


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda line: line.replace('"n":', '"n":' + "[" * 100_000), "nested deeper than 64"),
        (lambda line: line.replace('"n":', '"n":' + "9" * 5000 + ',"m":'), "is out of range"),
        (lambda line: line.replace('"revision":', '"revision":-'), "revisions start at 1"),
        (lambda line: line.replace('"history":[', '"history":7,"x":['), "exactly record"),
        (lambda line: line.replace('"vector":"', '"vector":"AAAA'), "float32 bytes"),
        (lambda line: line.replace('"space_id":"hash/bow@32"', '"space_id":"x/y@3"'), "header"),
        (lambda line: line.replace('"exposures":', '"exposures":-'), "from 0 up"),
        (lambda line: line.replace('"text":"', '"text":"forged '), "SHA-256"),
    ],
)
def test_a_bad_backup_line_is_one_line_of_error_and_nothing_is_restored(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    good: list[str],
    mangle: object,
    message: str,
) -> None:
    header, *lines = good
    target = next(n for n, line in enumerate(lines) if '"exposures"' in line and '"n":' in line)
    bad = list(lines)
    bad[target] = mangle(bad[target])  # type: ignore[operator]
    assert bad[target] != lines[target]
    err = _restore_error(capsys, tmp_path, "\n".join([header, *bad]))
    assert f" line {target + 2}: " in err and message in err, err


def test_a_file_that_is_not_a_backup_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, good: list[str]
) -> None:
    export = '{"format": 1, "id": "a"}\n'
    assert "an export is read back with `engramdb import`" in _restore_error(
        capsys, tmp_path, export
    )
    newer = good[0].replace('"format":1', '"format":2')
    assert "upgrade engramdb" in _restore_error(capsys, tmp_path, newer + "\n")
    twice = "\n".join([good[0], good[1], good[1]])
    assert "is on an earlier line too" in _restore_error(capsys, tmp_path, twice)


def test_the_python_api_round_trips_an_in_memory_store(tmp_path: Path) -> None:
    """backup() and restore() on InMemoryStore (the reference semantics) give the bytes
    the SQLite store gives for the same data."""
    source = tmp_path / "source.db"
    _fill(source)
    text = _backup_of(source, tmp_path, "b.jsonl").decode("utf-8")
    memory_store = InMemoryStore()
    report = restore(memory_store, text.split("\n"))
    assert (report.restored, report.skipped, report.spaces) == (12, 0, 2)
    out = io.StringIO()
    backup(memory_store, out)
    assert out.getvalue() == text
