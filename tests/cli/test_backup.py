"""``engramdb backup`` and ``engramdb restore``: a full backup restores every scope as it
was (ids, times, revisions, history, expiry, labels, importance, evidence, vectors in
every space), byte for byte; a target holding the backup's ids is refused unless told
what to do; a bad backup line is one line of error, with nothing written.

The CLI runs in process (``engramdb.cli.main``) on real SQLite files, with
``ENGRAMDB_EMBEDDER=hash:64``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest
from test_import_export import cli, cli_environment

from backup_files import backup_text, split_backup
from engramdb import HashEmbedder, InMemoryStore, Memory
from engramdb.backup import backup, restore
from engramdb.cli import main
from engramdb.sqlite import SqliteStore
from engramdb.store import unit_f32


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
    header, *lines, end = first.decode("utf-8").split("\n")[:-1]
    assert json.loads(header) == {
        "format": 2,
        "kind": "engramdb-backup",
        "spaces": ["hash/bow@32", "hash/bow@64"],
    }
    assert len(lines) == 12
    items = [json.loads(line) for line in lines]
    assert sum(len(item["history"]) for item in items) == 2
    assert sum(item["utility"] is not None for item in items) >= 3
    assert all({v["space_id"] for v in item["vectors"]} == {"hash/bow@32"} or
               len(item["vectors"]) == 2 for item in items)  # fmt: skip
    assert json.loads(end) == {
        "kind": "engramdb-backup-end",
        "items": 12,
        "unreadable": [],
        "sha256": hashlib.sha256(first[: first.index(end.encode())]).hexdigest(),
    }
    assert "\u2028" not in first.decode("utf-8")  # escaped: no reader splits a line
    assert cli(target, "restore", str(tmp_path / "first.jsonl"), "--trust-vectors") == 0
    assert "restored 12 memories" in capsys.readouterr().out
    assert _backup_of(target, tmp_path, "second.jsonl") == first


def test_a_backup_under_a_prefix_holds_only_its_scopes(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    _fill(source)
    out = tmp_path / "acme.jsonl"
    assert cli(source, "backup", str(out), "--prefix", "acme/user/sam") == 0
    scopes = {
        tuple(json.loads(line)["record"]["scope"]) for line in out.read_text().split("\n")[1:-2]
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
    held = [line for line in lines[1:-2] if json.loads(line)["record"]["id"] in ids[4:6]]
    part = tmp_path / "part.jsonl"
    part.write_text(backup_text(lines[0], held), encoding="utf-8")
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
    assert cli(target, "restore", str(file), "--on-conflict", "replace", "--trust-vectors") == 0
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
    newer = good[0].replace('"format":2', '"format":3')
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
    report = restore(memory_store, text.split("\n"), trust_vectors=True)
    assert (report.restored, report.skipped, report.spaces) == (12, 0, 2)
    out = io.StringIO()
    backup(memory_store, out)
    assert out.getvalue() == text


# -- vectors from outside, scopes of other memories, rows that do not read ---------------

_PIN = "the vault PIN is 4921"


def _forged_backup(tmp_path: Path) -> Path:
    """A backup of one memory of scope b holding ``_PIN``, its vector replaced by the
    vector of an unrelated query (the line's own checks all pass)."""
    source = tmp_path / "forged-source.db"
    with Memory(SqliteStore(source), HashEmbedder(64)) as memory:
        memory.remember(_PIN, scope=("b",))
    out = io.StringIO()
    with closing(SqliteStore(source)) as store:
        backup(store, out)
    header, items, _end = split_backup(out.getvalue())
    line = json.loads(items[0])
    forged = HashEmbedder(64).embed(["an unrelated query"], "document")[0]
    line["vectors"][0]["vector"] = base64.b64encode(unit_f32(forged)).decode()
    path = tmp_path / "forged.jsonl"
    path.write_text(backup_text(header, [json.dumps(line, separators=(",", ":"))]))
    return path


def _unrelated_query_finds_nothing_in_a(db: Path) -> None:
    """Scope a stores the same text: the unrelated query does not find it by meaning."""
    with Memory(SqliteStore(db), HashEmbedder(64)) as memory:
        mine = memory.remember(_PIN, scope=("a",))
        found = memory.recall("an unrelated query", [("a",)], mode="vector")
        assert all(hit.similarity is not None and hit.similarity < 0.5 for hit in found)
        (hit,) = memory.recall(_PIN, [("a",)], mode="vector")
        assert hit.memory.id == mine.id and hit.similarity is not None and hit.similarity > 0.999


def test_a_restored_forged_vector_is_refused_and_never_ranks_another_scopes_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.2.0 stored a backup's vectors unchecked, so a forged one decided another
    scope's ranking (a's memory of the same text found by an unrelated query at 1.0).
    Now restore checks every vector of the active space against its text: the forged
    line refuses the file, nothing written; and a's recall is its text's own."""
    path, db = _forged_backup(tmp_path), tmp_path / "target.db"
    capsys.readouterr()
    assert cli(db, "restore", str(path)) == 1
    err = capsys.readouterr().err
    assert "line 2: its vector in hash/bow@64 does not belong to its text" in err, err
    assert "nothing was restored" in err
    with Memory(SqliteStore(db), HashEmbedder(64)) as memory:
        assert memory.status().items == 0
    _unrelated_query_finds_nothing_in_a(db)


def test_a_restore_without_an_embedder_leaves_every_vector_out(tmp_path: Path) -> None:
    """The Python API without ``embedder`` (and without ``trust_vectors``) stores no
    vector of the file: its memories are pending, and the forged one decides nothing."""
    db = tmp_path / "target.db"
    with closing(SqliteStore(db)) as store:
        report = restore(store, _forged_backup(tmp_path).read_text().split("\n"))
    assert (report.restored, report.vectors, report.vectors_left_out) == (1, 0, 1)
    with Memory(SqliteStore(db), HashEmbedder(64)) as memory:
        assert memory.status().pending == 1
    _unrelated_query_finds_nothing_in_a(db)


def test_one_forged_line_among_a_thousand_honest_ones_refuses_the_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.2.0 embedded a sample of 16 of an import file's vectors again: one forged line
    among 1,000 honest ones passed 10 times of 10. Every vector is checked now."""
    texts = [f"honest note number {n}" for n in range(1000)]
    embedder = HashEmbedder(64)
    vectors = [v for n in range(0, 1001, 250) for v in embedder.embed(
        [*texts, "an unrelated query"][n : n + 250], "document")]  # fmt: skip
    rows = [
        {"text": text, "space_id": "hash/bow@64", "vector": base64.b64encode(unit_f32(v)).decode()}
        for text, v in zip(texts, vectors, strict=False)
    ]
    rows.insert(700, {**rows[0], "text": _PIN, "vector": rows[0]["vector"]})
    rows[700]["vector"] = base64.b64encode(unit_f32(vectors[-1])).decode()
    path = tmp_path / "mostly-honest.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    db = tmp_path / "target.db"
    capsys.readouterr()
    assert cli(db, "--scope", "b", "import", str(path)) == 1
    err = capsys.readouterr().err
    assert "line 701: its vector does not belong to its text" in err, err
    if db.exists():
        with Memory(SqliteStore(db), HashEmbedder(64)) as memory:
            assert memory.status().items == 0
    _unrelated_query_finds_nothing_in_a(db)


def test_replace_never_deletes_a_memory_of_another_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.2.0 looked conflicts up by id alone, so ``--on-conflict replace`` of alice's
    backup deleted bob's memory of the same id, history and all. An id the target holds
    in another scope is a conflict whatever --on-conflict says: refused, nothing
    written, bob's memory as it was."""
    source, target = tmp_path / "alice.db", tmp_path / "target.db"
    with Memory(SqliteStore(source), HashEmbedder(64)) as memory:
        shared = memory.remember("alice's note", scope=("alice",), id="note-1").id
    with Memory(SqliteStore(target), HashEmbedder(64)) as memory:
        memory.remember("bob's note", scope=("bob",), id=shared)
        memory.update(shared, text="bob's note, revised")
    file = tmp_path / "alice.jsonl"
    assert cli(source, "backup", str(file)) == 0
    for how in ("replace", "skip", "refuse"):
        capsys.readouterr()
        assert cli(target, "restore", str(file), "--on-conflict", how) == 1
        err = capsys.readouterr().err
        assert "'note-1'" in err and "another scope" in err and "nothing was restored" in err
    with Memory(SqliteStore(target), HashEmbedder(64)) as memory:
        kept = memory.get(shared)
        assert kept is not None and (kept.scope, kept.text) == (("bob",), "bob's note, revised")
        assert len(memory.history(shared)) == 1


def test_a_backup_names_the_memories_it_cannot_read_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.2.0 left a memory whose stored row does not decode out of the backup with exit
    0 and "backed up 2 memories" (status counted 3), and the rest of its page's scope
    with it when the page came back short. Now the file holds every readable memory,
    its end marker and the report name the unreadable one, the exit status is 1, doctor
    finds it, and a restore of the file says the source had one it could not read."""
    db = tmp_path / "damaged.db"
    with Memory(SqliteStore(db), HashEmbedder(64)) as memory:
        records = [memory.remember(f"note {n}", scope=("s",)) for n in range(7)]
    bad = records[5].id  # in the first page of 3, so that page comes back short
    raw = sqlite3.connect(db)
    with raw:
        raw.execute("UPDATE items SET metadata = '{not json' WHERE id = ?", (bad,))
    raw.close()
    out = tmp_path / "b.jsonl"
    capsys.readouterr()
    with cli_environment():
        status = main(["--db", str(db), "backup", str(out)])
    err = capsys.readouterr().err
    assert status == 1 and "backed up 6 memories" in err and bad in err, err
    assert "1 memories could not be read and are NOT in the backup" in err
    _header, items, end = split_backup(out.read_text())
    assert sorted(json.loads(line)["record"]["id"] for line in items) == sorted(
        r.id for r in records if r.id != bad
    )
    assert json.loads(end)["unreadable"] == [bad]
    assert cli(db, "doctor") == 1
    assert bad in capsys.readouterr().err
    assert cli(tmp_path / "restored.db", "restore", str(out), "--trust-vectors") == 0
    assert f"not in it (ids {bad})" in capsys.readouterr().err


def test_a_backup_pages_past_a_short_page(tmp_path: Path) -> None:
    """The Python API with small pages: a page short of an unreadable row is not the
    last (0.2.0 stopped there and left the rest of the scope out)."""
    db = tmp_path / "damaged.db"
    with Memory(SqliteStore(db), HashEmbedder(64)) as memory:
        records = [memory.remember(f"note {n}", scope=("s",)) for n in range(7)]
    raw = sqlite3.connect(db)
    with raw:
        raw.execute("UPDATE items SET labels = 'nope' WHERE id = ?", (records[6].id,))
    raw.close()
    out = io.StringIO()
    with closing(SqliteStore(db)) as store:
        report = backup(store, out, page_size=3)
    assert (report.items, report.unreadable) == (6, (records[6].id,))
