"""Damaged databases: each gives a clear error or a documented degraded answer, never a
wrong one, and ``engramdb doctor`` (the real CLI) reports each.

A damaged vector row (flipped bits in the float32 blob or in its index data, a truncated
or emptied blob) is never scored: ``recall`` leaves its item out of the vector leg and
answers ``status="degraded"``, ``error="CorruptDataError"``, and every similarity it
does return is the true cosine of the query and that memory's text. ``doctor`` counts
the row and exits 1; ``engramdb maintain`` embeds its text again, after which doctor
passes and the memory is recalled at similarity 1. A damaged file (truncated, not
SQLite, a schema version too new or negative) raises a named error whose message says
what to do, leaves the file as it was, and doctor reports it and exits 1.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import sqlite3
import struct
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from crash_processes import engramdb_cli

from engramdb import (
    CorruptDataError,
    HashEmbedder,
    Memory,
    MigrationError,
    SchemaTooNewError,
    StoreError,
)
from engramdb.sqlite import SqliteStore
from engramdb.store import RepairVectors

D = 16
SAM = ("acme", "user", "sam")
TEXTS = [
    "Sam is vegetarian and never eats meat",
    "Sam plays the cello on Thursdays",
    "Sam moved to Lisbon in March",
    "Sam drinks green tea every morning",
    "the office wifi password rotates every Monday",
    "Sam takes the train to the office",
    "Sam grows tomatoes in a small garden",
    "Sam practises the piano on Sundays",
]
DAMAGED = TEXTS[1]  # the memory whose vector row is damaged


def embedder() -> HashEmbedder:
    return HashEmbedder(dimensions=D)


def stock(path: Path) -> None:
    with Memory(SqliteStore(path), embedder()) as memory:
        memory.remember_many([{"text": text, "scope": SAM} for text in TEXTS])


def first_nonzero(blob: bytearray) -> int:
    """The byte offset of the first component that is not 0."""
    return next(o for o in range(0, len(blob), 4) if any(blob[o : o + 4]))


def flipped(offset: Callable[[bytearray], int], mask: int) -> Callable[[bytearray], bytes]:
    def damage(data: bytearray) -> bytes:
        data[offset(data)] ^= mask
        return bytes(data)

    return damage


# Each damages one vector row's blob (column "vector") or index data ("index_data").
DAMAGES: dict[str, tuple[str, Callable[[bytearray], bytes]]] = {
    "blob: a NaN component": ("vector", lambda b: struct.pack("<f", math.nan) + b[4:]),
    "blob: an infinite component": ("vector", lambda b: struct.pack("<f", math.inf) + b[4:]),
    "blob: a sign bit flipped": ("vector", flipped(lambda b: first_nonzero(b) + 3, 0x80)),
    "blob: the lowest mantissa bit flipped": ("vector", flipped(first_nonzero, 0x01)),
    "blob: an exponent bit flipped": ("vector", flipped(lambda b: first_nonzero(b) + 3, 0x40)),
    "blob: truncated mid-component": ("vector", lambda b: bytes(b[:-3])),
    "blob: truncated by one component": ("vector", lambda b: bytes(b[:-4])),
    "blob: emptied": ("vector", lambda b: b""),
    "index data: its CRC-32 flipped": ("index_data", flipped(lambda b: 1, 0xFF)),
    "index data: its sign code flipped": ("index_data", flipped(lambda b: 5, 0x01)),
    "index data: its uint8 copy flipped": ("index_data", flipped(lambda b: len(b) - 1, 0x80)),
}
# Damage that only the derived copy holds: the blob is sound and still scored (exactly).
DERIVED_ONLY = {"index data: its sign code flipped", "index data: its uint8 copy flipped"}


def damage_vector(
    path: Path, column: str, damage: Callable[[bytearray], bytes], text: str = DAMAGED
) -> None:
    """Rewrite one column of the vector row of the memory holding ``text``."""
    with sqlite3.connect(path) as conn:
        (sha,) = conn.execute("SELECT content_sha256 FROM items WHERE text = ?", (text,)).fetchone()
        (stored,) = conn.execute(
            f"SELECT {column} FROM vectors WHERE content_sha256 = ?", (sha,)
        ).fetchone()
        changed = damage(bytearray(stored))
        assert changed != bytes(stored)
        conn.execute(f"UPDATE vectors SET {column} = ? WHERE content_sha256 = ?", (changed, sha))
    conn.close()


def true_similarity(query: str, text: str) -> float:
    (q,) = embedder().embed([query], "query")
    (v,) = embedder().embed([text], "document")
    return sum(a * b for a, b in zip(q, v, strict=True)) / math.hypot(*q) / math.hypot(*v)


def doctor(path: Path) -> tuple[int, dict[str, object], str]:
    done = engramdb_cli(path, "doctor", "--json")
    return done.returncode, json.loads(done.stdout) if done.stdout else {}, done.stderr


@pytest.mark.parametrize("name", list(DAMAGES))
def test_a_damaged_vector_is_never_scored_and_doctor_reports_it(name: str, tmp_path: Path) -> None:
    """Recall never returns the damaged row with a made-up score: each similarity equals
    the true cosine, and a damaged blob leaves its item out of the vector leg with
    ``status="degraded"``. Doctor counts one corrupt vector and exits 1; after
    ``engramdb maintain`` it passes and the memory is recalled at similarity 1."""
    path = tmp_path / "memory.db"
    stock(path)
    damage_vector(path, *DAMAGES[name])

    with Memory(SqliteStore(path), embedder()) as memory:
        for mode in ("vector", "hybrid"):
            hits = memory.recall(DAMAGED, scopes=[SAM], mode=mode, top_k=len(TEXTS))
            scored = {h.memory.text: h.similarity for h in hits if h.similarity is not None}
            assert scored == {
                text: pytest.approx(true_similarity(DAMAGED, text), abs=1e-5) for text in scored
            }
            if name in DERIVED_ONLY:  # found exactly, from its sound float32 blob
                assert (hits.status, scored[DAMAGED]) == ("used", pytest.approx(1.0))
            else:
                assert (hits.status, hits.error) == ("degraded", "CorruptDataError")
                assert DAMAGED not in scored and len(scored) > 0

    status, report, stderr = doctor(path)
    assert (status, report["corrupt_vectors"]) == (1, 1)
    assert "1 corrupt vectors (`engramdb maintain` repairs them)" in stderr

    assert engramdb_cli(path, "maintain").returncode == 0
    status, report, _ = doctor(path)
    assert (status, report["corrupt_vectors"], report["problems"]) == (0, 0, [])
    with Memory(SqliteStore(path), embedder()) as memory:
        hits = memory.recall(DAMAGED, scopes=[SAM], mode="vector", top_k=1)
        assert hits.status == "used"
        assert [(h.memory.text, h.similarity) for h in hits] == [(DAMAGED, pytest.approx(1.0))]


def test_an_undamaged_database_passes_doctor(tmp_path: Path) -> None:
    """The control for the cases here: nothing damaged, doctor exits 0 with no problem."""
    path = tmp_path / "memory.db"
    stock(path)
    status, report, stderr = doctor(path)
    assert (status, report["integrity"], report["corrupt_vectors"]) == (0, "ok", 0)
    assert (report["problems"], stderr) == ([], "")


def truncate(path: Path, aligned: bool) -> None:
    """Cut the file to about half, on a page boundary or mid-page."""
    size = os.path.getsize(path) // 2
    os.truncate(path, size - size % 8192 if aligned else size + 100)


def set_version(path: Path, version: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {version}")
    conn.close()


# Each damages a whole file: (the damage, the error type, words of its fix).
FILE_DAMAGES: dict[str, tuple[Callable[[Path], None], type[StoreError], str]] = {
    "truncated on a page boundary": (
        lambda p: truncate(p, aligned=True),
        CorruptDataError,
        "restore it from a backup, or save what is left with `sqlite3",
    ),
    "truncated mid-page": (
        lambda p: truncate(p, aligned=False),
        CorruptDataError,
        "restore it from a backup, or save what is left with `sqlite3",
    ),
    "not SQLite": (
        lambda p: p.write_bytes(b"these are my notes, not a database\n" * 300),
        StoreError,
        "is not a SQLite database",
    ),
    "a schema version too new": (
        lambda p: set_version(p, 99),
        SchemaTooNewError,
        "upgrade engramdb (the database was left untouched)",
    ),
    "a negative schema version": (
        lambda p: set_version(p, -1),
        MigrationError,
        "restore the file from a backup (it was left untouched)",
    ),
}


@pytest.mark.parametrize("name", list(FILE_DAMAGES))
def test_a_damaged_file_raises_a_named_error_and_doctor_reports_it(
    name: str, tmp_path: Path
) -> None:
    """Opening raises the named error (and only it: a damaged file is not opened as an
    empty or partial database), its message names the fix, the file is left as it
    was, and doctor prints the integrity check and the same message and exits 1."""
    damage, error, fix = FILE_DAMAGES[name]
    path = tmp_path / "memory.db"
    stock(path)
    with sqlite3.connect(path) as conn:  # one file, no WAL beside it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    damage(path)
    before = path.read_bytes()

    with pytest.raises(StoreError) as raised:
        Memory(SqliteStore(path), embedder())
    assert type(raised.value) is error
    assert fix in str(raised.value)
    assert path.read_bytes() == before

    status, report, stderr = doctor(path)
    assert status == 1
    assert report["problems"] == [str(raised.value)]
    assert "integrity" in report
    assert json.loads(stderr) == {  # under --json an error is the HTTP API's error shape
        "error": {"code": "cli_error", "message": f"doctor found a problem: {raised.value}"}
    }
    assert path.read_bytes() == before


def test_random_byte_flips_in_vector_rows_never_give_a_made_up_score(
    tmp_path: Path, long_factor: int
) -> None:
    """30 times (x ``long_factor``), one byte at a seeded random place of a random vector
    row gets a random flip. Every similarity a recall returns is the true cosine. A flip
    in the blob or in the CRC-32 of its index data leaves the row out of the vector leg
    (``degraded``) and the scan doctor runs reports it; a flip in the sign code or uint8
    copy leaves the row scored exactly from its sound blob and is reported too; a flip of
    the version byte is index data of another version, computed again from the blob."""
    rng = random.Random(1515)
    stocked = tmp_path / "stocked.db"
    stock(stocked)
    with sqlite3.connect(stocked) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = conn.execute(
            "SELECT items.text, vectors.content_sha256, length(vector), length(index_data) "
            "FROM items JOIN vectors USING (content_sha256)"
        ).fetchall()
    conn.close()
    tally: Counter[str] = Counter()
    for round_ in range(30 * long_factor):
        path = tmp_path / f"flipped-{round_}.db"
        shutil.copyfile(stocked, path)
        text, sha, blob_size, data_size = rng.choice(rows)
        column = rng.choice(("vector", "index_data"))
        offset = rng.randrange(blob_size if column == "vector" else data_size)
        damage_vector(path, column, flipped(lambda _, at=offset: at, rng.randrange(1, 256)), text)
        if column == "vector":
            where = "blob"
        else:  # index data: a version byte, the blob's CRC-32, then what it derives
            where = "version" if offset == 0 else "crc" if offset < 5 else "derived"
        tally[where] += 1
        with Memory(SqliteStore(path), embedder()) as memory:
            for query in TEXTS:
                hits = memory.recall(query, scopes=[SAM], mode="vector", top_k=len(TEXTS))
                scored = {h.memory.text: h.similarity for h in hits}
                assert scored == {
                    t: pytest.approx(true_similarity(query, t), abs=1e-5) for t in scored
                }
                left_out = where in ("blob", "crc")
                if query == text:
                    assert (text not in scored) is left_out
                assert hits.status == ("degraded" if left_out else "used")
                tally["recalls checked"] += 1
            (space,) = memory.status().spaces
            (repair,) = memory.store.batch([RepairVectors(space, 100, "")])
            reported = [s for s, _ in repair.corrupt]
            assert reported == ([] if where == "version" else [sha])
    print(f"\ncorruption figures: {dict(tally)}")
