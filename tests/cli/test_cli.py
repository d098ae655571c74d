"""The ``engramdb`` console script, run for real in a subprocess, command by command.

Every test uses a fresh database under ``tmp_path`` and ``ENGRAMDB_EMBEDDER=hash:64``
(offline, deterministic, fast).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import engramdb
from engramdb import HashEmbedder, Memory
from engramdb.sqlite import SqliteStore
from engramdb.store import PutVector, RegisterSpace

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = shutil.which("engramdb", path=str(Path(sys.executable).parent))
COMMAND = [SCRIPT] if SCRIPT else [sys.executable, "-m", "engramdb.cli"]


def environment(**extra: str) -> dict[str, str]:
    """No ENGRAMDB_* variable and no config file of the user (a config home that does
    not exist), with the hash embedder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAMDB_")}
    env.update({"ENGRAMDB_EMBEDDER": "hash:64", "PYTHONUNBUFFERED": "1"}, **extra)
    env.setdefault("XDG_CONFIG_HOME", str(ROOT / "no-such-config-home"))
    return env


def run(
    db: Path, *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, "--db", str(db), *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=environment(**env),
        timeout=60,
        check=False,
    )


def ok(db: Path, *args: str) -> str:
    done = run(db, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def as_json(db: Path, *args: str) -> Any:
    return json.loads(ok(db, "--json", *args))


def lines(db: Path, *args: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ok(db, "--json", *args).splitlines()]


def status(db: Path) -> dict[str, Any]:
    result: dict[str, Any] = as_json(db, "status")
    return result


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


def test_add_then_search_list_get_and_scopes_in_the_bound_scope(db: Path) -> None:
    """add stores metadata, labels, importance and expiry in --scope; search, list, get
    and scopes show it there and nowhere else."""
    added = as_json(
        db,
        "--scope", "acme/user/sam",
        "add", "Sam is vegetarian",
        "--metadata", '{"src": "chat"}',
        "--label", "topic=food", "--label", "topic=prefs",
        "--importance", "0.9",
        "--expires", "2099-01-31T12:00:00Z",
    )  # fmt: skip
    assert (added["scope"], added["metadata"], added["labels"], added["importance"]) == (
        ["acme", "user", "sam"],
        {"src": "chat"},
        {"topic": ["food", "prefs"]},
        0.9,
    )
    assert added["expires_at"] == "2099-01-31T12:00:00.000Z"
    ok(db, "--scope", "acme/user/ana", "add", "Ana is vegetarian too")

    hits = lines(db, "search", "vegetarian", "--scope", "acme/user/sam")  # options after
    assert [h["memory"] for h in hits] == [added]  # the JSON codec's record, as add gave it
    assert set(hits[0]) == {
        "memory", "score", "similarity", "vector_rank", "lexical_rank", "bm25", "boosts",
        "retention", "evidence",
    }  # fmt: skip
    assert hits[0]["evidence"]["scope"] == ["acme", "user", "sam"]
    assert hits[0]["evidence"]["space_id"] == "hash/bow@64"
    explained = ok(db, "--scope", "acme/user/sam", "search", "vegetarian", "--explain")
    assert "lexical rank 1" in explained and "evidence: scope acme/user/sam," in explained

    listed = lines(db, "--scope", "acme/user/sam", "list")
    assert [r["text"] for r in listed] == ["Sam is vegetarian"]
    assert (
        as_json(db, "--scope", "acme/user/sam", "get", added["id"])["text"] == "Sam is vegetarian"
    )
    assert as_json(db, "scopes") == [
        {"scope": ["acme", "user", "ana"], "count": 1},
        {"scope": ["acme", "user", "sam"], "count": 1},
    ]


def test_add_and_search_are_aliases_of_remember_and_recall(db: Path) -> None:
    """remember and recall are the commands' names; add and search run the same commands
    with the same options and give the same output; the help shows the names first."""
    remembered = as_json(db, "remember", "Sam is vegetarian", "--label", "topic=food")
    added = as_json(db, "add", "Sam plays the cello", "--label", "topic=music")
    assert set(remembered) == set(added) and added["labels"] == {"topic": ["music"]}
    recalled = ok(db, "--json", "recall", "vegetarian", "--top-k", "1", "--mode", "lexical")
    searched = ok(db, "--json", "search", "vegetarian", "--top-k", "1", "--mode", "lexical")
    assert json.loads(recalled)["memory"] == remembered
    assert json.loads(searched)["memory"] == remembered
    assert "remember (add)" in ok(db, "--help") and "recall (search)" in ok(db, "--help")
    assert ok(db, "search", "--help").startswith("usage: engramdb recall ")


def test_search_filter_and_mode_reach_the_recall(db: Path) -> None:
    """--filter keeps only matching memories; --mode lexical uses the lexical leg only."""
    ok(db, "add", "deploy on Tuesday", "--label", "team=ops")
    ok(db, "add", "deploy the docs on Friday", "--label", "team=docs")
    hits = lines(db, "search", "deploy", "--filter", '{"labels": {"team": "ops"}}')
    assert [h["memory"]["text"] for h in hits] == ["deploy on Tuesday"]
    lexical = lines(db, "search", "deploy", "--mode", "lexical", "--top-k", "1")
    assert len(lexical) == 1 and lexical[0]["similarity"] is None


def test_history_shows_earlier_revisions_and_forget_deletes_one(db: Path) -> None:
    """history lists the revisions before the current one; forget ID deletes it, and a
    second forget is an error naming the id."""
    memory_id = as_json(db, "add", "the deploy window is Tuesday")["id"]
    with Memory(SqliteStore(db), HashEmbedder(64)) as memory:
        memory.update(memory_id, text="the deploy window is Thursday")
    assert [r["text"] for r in as_json(db, "history", memory_id)] == [
        "the deploy window is Tuesday"
    ]
    assert as_json(db, "forget", memory_id) == {"forgotten": 1, "id": memory_id}
    again = run(db, "forget", memory_id)
    assert again.returncode == 1
    assert again.stderr.startswith("engramdb: error: no memory") and memory_id in again.stderr


def test_get_is_limited_to_the_bound_scope(db: Path) -> None:
    """A memory of another scope is answered as missing (exit 1, one line, no traceback)."""
    memory_id = as_json(db, "--scope", "a", "add", "in scope a")["id"]
    done = run(db, "--scope", "b", "get", memory_id)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_forget_a_whole_scope_needs_confirm(db: Path) -> None:
    """forget without an ID and without --confirm exits 2 and deletes nothing; with
    --confirm it deletes every memory of the bound scope and no other."""
    for text in ("one", "two"):
        ok(db, "--scope", "a", "add", text)
    ok(db, "--scope", "b", "add", "three")
    refused = run(db, "--scope", "a", "forget")
    assert refused.returncode == 2 and "--confirm" in refused.stderr
    assert status(db)["items"] == 3
    assert as_json(db, "--scope", "a", "forget", "--confirm") == {"forgotten": 2, "scope": ["a"]}
    assert as_json(db, "scopes") == [{"scope": ["b"], "count": 1}]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["add", "x", "--metadata", "{bad"], "--metadata '{bad' is not JSON"),
        (["add", "x", "--metadata", "[1]"], "must be a JSON object"),
        (["add", "x", "--label", "nolabel"], "--label 'nolabel' must be NAME=VALUE"),
        (["add", "x", "--expires", "tomorrow"], "--expires 'tomorrow' is not ISO 8601"),
        (["search", "x", "--top-k", "zero"], "'zero' is not a whole number"),
        (["clear"], "add --confirm"),
    ],
)
def test_bad_usage_exits_2_with_one_clear_line_and_changes_nothing(
    db: Path, args: list[str], needle: str
) -> None:
    """Each usage error names the bad value and the fix, exits 2, and stores nothing."""
    ok(db, "add", "keep me")
    done = run(db, *args)
    assert done.returncode == 2
    assert needle in done.stderr and done.stderr.startswith("engramdb: error: ")
    assert status(db)["items"] == 1 and status(db)["vectors"] == 1


def test_an_engramdb_error_is_one_line_and_debug_adds_the_traceback(tmp_path: Path) -> None:
    """A file that is not a database: exit 1, one line; --debug shows the traceback."""
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"this is not sqlite" * 100)
    done = run(bad, "status")
    assert done.returncode == 1
    assert done.stderr.startswith("engramdb: error: ") and done.stderr.count("\n") == 1
    debug = run(bad, "status", "--debug")
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_import_of_a_missing_file_is_an_error_naming_it(db: Path) -> None:
    done = run(db, "import", "no/such/file.jsonl")
    assert done.returncode == 1
    assert "'no/such/file.jsonl' does not exist" in done.stderr


def test_a_bad_import_line_names_the_line_and_stores_nothing(db: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine"}\n{"text": "also fine"}\n{not json}\n')
    done = run(db, "import", str(path))
    assert done.returncode == 1 and "bad.jsonl line 3: not JSON" in done.stderr
    assert not db.exists()  # the file is read before the database is opened


def test_import_reads_jsonl_csv_and_text_and_a_rerun_adds_nothing(db: Path, tmp_path: Path) -> None:
    """The three formats land in the bound scope with their fields; importing the same
    files again stores no duplicate, and says that none of their memories was new."""
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text(
        json.dumps({"text": "from jsonl", "metadata": {"n": 1}, "labels": {"k": ["v"]},
                    "importance": 0.7}) + "\n"
    )  # fmt: skip
    csv_file = tmp_path / "b.csv"
    csv_file.write_text('text,importance\n"from csv, with a comma",0.2\n')
    text = tmp_path / "c.txt"
    text.write_text("from text one\n\nfrom text two\n")
    reports = [
        as_json(db, "--scope", "imp", "import", str(path))
        for _ in range(2)
        for path in (jsonl, csv_file, text)
    ]
    assert [(r["read"], r["memories"], r["new"], r["existing"]) for r in reports] == [
        (1, 1, 1, 0), (1, 1, 1, 0), (2, 2, 2, 0), (1, 1, 0, 1), (1, 1, 0, 1), (2, 2, 0, 2),
    ]  # fmt: skip
    again = ok(db, "--scope", "imp", "import", str(text))
    assert (
        again == "imported 2 lines into scope imp: 2 distinct memories, 0 new and 2 already there\n"
    )
    records = {r["text"]: r for r in lines(db, "--scope", "imp", "list")}
    assert sorted(records) == [
        "from csv, with a comma", "from jsonl", "from text one", "from text two",
    ]  # fmt: skip
    assert (records["from jsonl"]["metadata"], records["from jsonl"]["labels"]) == (
        {"n": 1},
        {"k": ["v"]},
    )
    assert records["from csv, with a comma"]["importance"] == 0.2


def _export_fields(line: dict[str, Any]) -> tuple[Any, ...]:
    return (line["text"], line["metadata"], line["labels"], line["importance"], line["expires_at"])


def test_export_then_import_round_trips_without_vectors(db: Path, tmp_path: Path) -> None:
    """Texts, metadata, labels, importance and expiry come back the same, in order."""
    ok(db, "add", "first", "--metadata", '{"a": [1, 2]}', "--label", "t=x", "--importance", "0.8")
    ok(db, "add", "second", "--expires", "2099-05-01T00:00:00+02:00")
    ok(db, "add", "third, ünïcode")
    exported = tmp_path / "out.jsonl"
    ok(db, "export", "--output", str(exported))
    other = tmp_path / "other.db"
    ok(other, "--scope", "copy", "import", str(exported))
    again = [json.loads(line) for line in ok(other, "--scope", "copy", "export").splitlines()]
    original = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [_export_fields(x) for x in again] == [_export_fields(x) for x in original]
    assert [x["text"] for x in original] == ["first", "second", "third, ünïcode"]
    assert "vector" not in original[0]


def test_export_lines_are_versioned_records_and_older_lines_still_import(
    db: Path, tmp_path: Path
) -> None:
    """An export line is the JSON codec's record with "format": 1; a line without
    "format" (as exports were written before, "+00:00" times and no scope) still
    imports, and a line of a newer format is refused naming the upgrade."""
    added = as_json(db, "--scope", "a/b", "add", "first", "--expires", "2099-05-01T00:00:00Z")
    (line,) = lines(db, "--scope", "a/b", "export")
    assert line == {"format": 1, **added}
    older = {
        "id": "01KDVDNGTR7ECJACDR43KZ4YPR", "text": "from an older export",
        "metadata": {"k": 1}, "labels": {"t": ["x"]}, "importance": 0.3,
        "expires_at": "2099-01-31T12:00:00+00:00", "created_at": "2026-01-01T00:00:07+00:00",
        "revision": 2,
    }  # fmt: skip
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(older) + "\n")
    ok(db, "--scope", "copy", "import", str(path))
    copied = {r["text"]: r for r in lines(db, "--scope", "copy", "list")}
    assert _export_fields(copied["first"]) == _export_fields(line)
    assert _export_fields(copied["from an older export"]) == (
        "from an older export", {"k": 1}, {"t": ["x"]}, 0.3, "2099-01-31T12:00:00.000Z",
    )  # fmt: skip
    assert copied["first"]["scope"] == ["copy"]  # an import stores in the bound scope
    path.write_text(json.dumps({**line, "format": 2}) + "\n")
    done = run(db, "--scope", "copy", "import", str(path))
    assert done.returncode == 1
    assert "line 1: export format 2 is not 1; it was written by a newer engramdb" in done.stderr


def test_export_with_vectors_round_trips_the_bytes_without_the_embedder(
    db: Path, tmp_path: Path
) -> None:
    """The import stores the file's vector bytes as they are, once a sample of them
    (here all three) matched their texts embedded again: a second export gives the same
    bytes, and nothing is pending."""
    for text in ("alpha beta", "gamma delta", "epsilon"):
        ok(db, "add", text)
    exported = tmp_path / "v.jsonl"
    ok(db, "export", "--with-vectors", "-o", str(exported))
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert {r["space_id"] for r in rows} == {"hash/bow@64"}
    raw = base64.b64decode(rows[0]["vector"])
    assert len(raw) == 64 * 4
    assert raw == struct.pack("<64f", *HashEmbedder(64).embed(["alpha beta"])[0])
    other = tmp_path / "other.db"
    result = as_json(other, "import", str(exported))
    assert (result["memories"], result["vectors"], result["pending"]) == (3, 3, 0)
    back = [json.loads(line) for line in ok(other, "export", "--with-vectors").splitlines()]
    assert [(r["text"], r["vector"]) for r in back] == [(r["text"], r["vector"]) for r in rows]


def test_an_import_of_a_forged_vector_is_refused_and_stores_nothing(
    db: Path, tmp_path: Path
) -> None:
    """A vector swapped in the file (the vector of another text) does not belong to its
    text: the import refuses the whole file on one line naming the line and the fix, and
    stores nothing; with --no-vectors the same file imports, its texts embedded anew."""
    for text in ("alpha beta", "gamma delta", "epsilon"):
        ok(db, "add", text)
    exported = tmp_path / "v.jsonl"
    ok(db, "export", "--with-vectors", "-o", str(exported))
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    rows[0]["vector"], rows[1]["vector"] = rows[1]["vector"], rows[0]["vector"]
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_text("".join(json.dumps(r) + "\n" for r in rows))
    other = tmp_path / "other.db"
    done = run(other, "import", str(swapped))
    assert done.returncode == 1 and done.stdout == ""
    (message,) = done.stderr.strip().splitlines()
    assert message.startswith(f"engramdb: error: {swapped} line ")
    assert "does not belong to its text" in message and "--no-vectors" in message
    assert "nothing was stored" in message
    with Memory(SqliteStore(str(other)), HashEmbedder(64)) as memory:
        status = memory.status()
        assert (status.items, status.vectors) == (0, 0)
    result = as_json(other, "import", "--no-vectors", str(swapped))
    assert (result["memories"], result["vectors"], result["pending"]) == (3, 0, 0)
    back = [json.loads(line) for line in ok(other, "export", "--with-vectors").splitlines()]
    assert [r["vector"] for r in back] == [
        base64.b64encode(struct.pack("<64f", *HashEmbedder(64).embed([r["text"]])[0])).decode()
        for r in back
    ]


def start_import(db: Path, path: Path, batch_size: int) -> subprocess.Popen[str]:
    """An import of ``path`` under way: its first progress line (one batch) was read."""
    process = subprocess.Popen(
        [*COMMAND, "--db", str(db), "import", str(path), "--batch-size", str(batch_size)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=environment(),
        # a job started in the background by a shell ignores SIGINT, and so would the
        # command: give it the default, as a terminal would
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr is not None
    assert process.stderr.readline().startswith(f"import: {batch_size}/20000")
    return process


def test_import_of_20000_lines_shows_progress_and_resumes_after_sigkill(
    db: Path, tmp_path: Path
) -> None:
    """Killed mid-import, a rerun stores the rest: as many memories as distinct lines,
    no text twice; progress lines go to stderr."""
    path = tmp_path / "big.txt"
    path.write_text("".join(f"imported fact {n % 19_000}\n" for n in range(20_000)))
    process = start_import(db, path, batch_size=200)  # a first batch is stored
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL  # it was still importing
    stored = status(db)["items"]
    assert 200 <= stored < 19_000

    done = run(db, "import", str(path))
    assert done.returncode == 0, done.stderr
    assert "import: 20000/20000 (100%)" in done.stderr
    assert f"19000 distinct memories, {19_000 - stored} new and {stored} already there" in (
        done.stdout
    )
    assert status(db)["items"] == 19_000 and status(db)["pending"] == 0
    texts = [r["text"] for r in lines(db, "export")]
    assert len(texts) == len(set(texts)) == 19_000


def test_reindex_full_re_embeds_everything(db: Path) -> None:
    """--full drops the active space's vectors, then embeds every memory again."""
    for text in ("one fact", "two facts", "three facts"):
        ok(db, "add", text)
    assert as_json(db, "reindex") == {"embedded": 0, "dropped": 0, "space": "hash/bow@64"}
    assert as_json(db, "reindex", "--full") == {"embedded": 3, "dropped": 3, "space": "hash/bow@64"}
    assert (status(db)["pending"], status(db)["vectors"]) == (0, 3)


def test_clear_deletes_vectors_and_with_all_every_memory(db: Path) -> None:
    """clear --confirm leaves the memories pending; maintain embeds them again; clear
    --all --confirm leaves nothing."""
    for text in ("one fact", "two facts"):
        ok(db, "add", text)
    assert as_json(db, "clear", "--confirm") == {"vectors": 2, "memories": 0}
    assert (status(db)["items"], status(db)["vectors"], status(db)["pending"]) == (2, 0, 2)
    report = as_json(db, "maintain", "--max-items", "10")
    assert (report["embedded"], report["pending"]) == (2, 0)
    refused = run(db, "clear", "--all")
    assert refused.returncode == 2 and status(db)["items"] == 2
    assert as_json(db, "clear", "--all", "--confirm") == {"vectors": 2, "memories": 2}
    assert status(db)["items"] == 0


def test_clear_says_exactly_what_it_deletes(db: Path) -> None:
    """clear names vectors, and that the memories stay, in its refusal and its report;
    only clear --all names memories as deleted."""
    for text in ("one fact", "two facts"):
        ok(db, "add", text)
    refused = run(db, "clear")
    assert refused.returncode == 2
    assert "clear deletes every vector of " in refused.stderr
    assert "(the memories stay, without vectors, until `engramdb reindex`" in refused.stderr
    cleared = ok(db, "clear", "--confirm")
    assert cleared.startswith("deleted 2 vectors; the 2 memories stay, without vectors")
    assert "memories and" not in cleared
    refused = run(db, "clear", "--all")
    assert "clear --all deletes every memory of every scope of " in refused.stderr
    assert "and every vector; add --confirm" in refused.stderr
    assert ok(db, "clear", "--all", "--confirm").startswith("deleted 2 memories and 0 vectors")
    assert "the memories stay" in ok(db, "clear", "--help")


def test_maintain_watch_stops_cleanly_on_sigterm(db: Path) -> None:
    """--watch runs passes until SIGTERM, then reports them and exits 0."""
    ok(db, "add", "a fact")
    process = subprocess.Popen(
        [*COMMAND, "--db", str(db), "--json", "maintain", "--watch", "--interval", "60"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    assert process.stderr is not None
    assert process.stderr.readline().startswith("maintaining ")
    assert process.stderr.readline() == "pass 1 done (0 failed so far); the next in 60 s\n"
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    report = json.loads(out)
    assert report["runs"] >= 1 and report["failures"] == 0


def test_doctor_reports_health_and_the_probe_shows_no_vector(db: Path) -> None:
    """doctor: engramdb's version, schema version, integrity, no corrupt vector,
    per-space counts; --probe prints the space, dimensions, finiteness and norm, never
    the vector or its text."""
    ok(db, "add", "a fact")
    report = as_json(db, "doctor", "--probe")
    assert report["engramdb"] == engramdb.__version__
    assert (report["schema_version"], report["integrity"], report["corrupt_vectors"]) == (
        status(db)["schema_version"],
        "ok",
        0,
    )
    assert report["embedded"] == {"hash/bow@64": 1} and report["problems"] == []
    probe = report["probe"]
    assert set(probe) == {"space", "dimensions", "finite", "norm"}
    assert (probe["space"], probe["dimensions"], probe["finite"]) == ("hash/bow@64", 64, True)
    assert abs(probe["norm"] - 1.0) < 1e-6
    human = ok(db, "doctor", "--probe")
    assert "probe" in human and "fixed phrase" not in human
    assert f"engramdb: {engramdb.__version__}" in human


def test_migrate_upgrades_an_old_database(tmp_path: Path) -> None:
    """migrate reports the version it found and brings the file to the current one."""
    old = tmp_path / "old.db"
    shutil.copy(ROOT / "tests" / "fixtures" / "schema-v1.db", old)
    result = as_json(old, "migrate")
    assert result["from"] == 1 and result["to"] > 1 and result["steps"] == result["to"] - 1
    assert as_json(old, "migrate")["steps"] == 0


def test_demo_shows_isolation_and_a_rerun_adds_nothing(tmp_path: Path) -> None:
    """The demo names its embedder, says by-meaning needs a semantic embedder when given
    the hash one, shows no fact of the other scope, and stores nothing on a rerun."""
    demo_db = tmp_path / "demo.db"
    first = ok(demo_db, "demo")
    assert "embedder hash/bow@64" in first and "needs a semantic one" in first
    assert "6 memories, 6 new" in first and "0 of Ana's facts" in first
    assert "evidence of the best hit" in first
    assert "6 memories, 0 new" in ok(demo_db, "demo")
    module = subprocess.run(
        [sys.executable, "-m", "engramdb.demo", str(demo_db)],
        capture_output=True, text=True, env=environment(), check=True,
    )  # fmt: skip
    assert "6 memories, 0 new" in module.stdout


def test_the_demo_says_what_its_status_marker_means(tmp_path: Path) -> None:
    """Each question of the demo ends with its recall's status (``[used]``); the output
    says what that means and names the docs section on the others, which exists."""
    out = ok(tmp_path / "demo.db", "demo")
    assert "?" in out and "[used]" in out
    note = "[used] after a question is its recall's status: both legs searched every memory"
    assert note in out and 'docs/concepts.md, "Recall status"' in out
    concepts = (ROOT / "docs" / "concepts.md").read_text()
    assert "\n### Recall status\n" in concepts
    for status in ("used", "partial", "degraded", "lexical_only"):
        assert f"\n| `{status}` |" in concepts


def test_the_demo_recalls_by_meaning_out_of_the_box(tmp_path: Path) -> None:
    """With no embedder configured the demo uses the shipped static table, names it, and
    its vector leg alone answers "what does Sam like to eat?" with the vegetarian fact
    first (the question shares no content word with it)."""
    done = run(tmp_path / "demo.db", "demo", ENGRAMDB_EMBEDDER="")
    assert done.returncode == 0, done.stderr
    assert "embedder static/minilm-l6-256@256#" in done.stdout
    assert "needs a semantic one" not in done.stdout and "notice" not in done.stderr
    by_meaning = done.stdout.split("by meaning (vector leg)", 1)[1].splitlines()
    assert "Sam is vegetarian and loves mushroom risotto" in by_meaning[1], by_meaning[:3]


def test_no_command_prints_an_embedder_notice_and_status_and_doctor_name_it(
    tmp_path: Path,
) -> None:
    """With no embedder configured, commands use the shipped static table and say nothing
    about it on standard error, run after run; status and doctor name its space."""
    db = tmp_path / "quiet.db"
    for args in (["remember", "Sam is vegetarian"], ["recall", "vegetarian"], ["list"]) * 2:
        done = run(db, *args, ENGRAMDB_EMBEDDER="")
        assert (done.returncode, done.stderr) == (0, ""), args
    for command in ("status", "doctor"):
        done = run(db, "--json", command, ENGRAMDB_EMBEDDER="")
        assert (done.returncode, done.stderr) == (0, "")
        assert json.loads(done.stdout)["active_space"].startswith("static/minilm-l6-256@256#")


def test_status_says_when_memories_wait_for_the_new_default_embedder(tmp_path: Path) -> None:
    """A database of an earlier default (hash): with the static default its memories are
    pending, status says so and names the fix, and reindex embeds them."""
    db = tmp_path / "old.db"
    ok(db, "add", "Sam is vegetarian")
    status = run(db, "status", ENGRAMDB_EMBEDDER="")
    assert status.returncode == 0, status.stderr
    assert "1 memories have no vector in static/minilm-l6-256@256#" in status.stdout
    assert "engramdb reindex" in status.stdout
    assert run(db, "reindex", ENGRAMDB_EMBEDDER="").returncode == 0
    assert "no vector" not in run(db, "status", ENGRAMDB_EMBEDDER="").stdout


# Runs main() with a stand-in server module in sys.modules (the real module's options,
# a main that prints its argv): the forwarding is what is checked, whichever extras this
# installation has.
FAKE_SERVER = """
import importlib, json, sys, types
import engramdb.cli
real = importlib.import_module(sys.argv[1])
module = types.ModuleType(sys.argv[1])
module.argument_parser = real.argument_parser
module.main = lambda argv: print(json.dumps([module.__name__, argv]))
sys.modules[module.__name__] = module
sys.exit(engramdb.cli.main(sys.argv[2:]))
"""


@pytest.mark.parametrize(
    ("command", "module", "given", "forwarded"),
    [
        ("mcp", "engramdb.mcp_server", ["--no-maintain"], ["--scope", "a/b", "--no-maintain"]),
        (
            "serve",
            "engramdb.server",
            ["--tokens-file", "t.json", "--port", "0", "--host", "::1"],
            ["--host", "::1", "--port", "0", "--tokens-file", "t.json"],
        ),
    ],
)
def test_servers_get_their_options_and_the_global_options_as_argv(
    db: Path, command: str, module: str, given: list[str], forwarded: list[str]
) -> None:
    """mcp and serve import their module lazily and pass it the options of its own parser
    that were given, the global ones it defines included (serve binds each request to its
    token's scope, so it gets no --scope); an option it does not define is a usage error."""
    done = subprocess.run(
        [sys.executable, "-c", FAKE_SERVER, module, "--db", str(db), "--scope", "a/b", command,
         *given],
        capture_output=True, text=True, env=environment(), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [module, ["--db", str(db), *forwarded]]
    unknown = subprocess.run(
        [sys.executable, "-c", FAKE_SERVER, module, command, "--frobnicate"],
        capture_output=True, text=True, env=environment(), check=False,
    )  # fmt: skip
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert "unrecognized arguments: --frobnicate" in unknown.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("engramdb.mcp_server") is not None, reason="the MCP server exists"
)
def test_a_missing_server_names_the_extra(db: Path) -> None:
    done = run(db, "mcp")
    assert done.returncode == 1
    assert "pip install 'engramdb[mcp]'" in done.stderr and done.stderr.count("\n") == 1


def test_python_dash_m_runs_the_same_cli(db: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "engramdb.cli", "--db", str(db), "--json", "add", "via -m"],
        capture_output=True, text=True, env=environment(), check=False,
    )  # fmt: skip
    assert done.returncode == 0 and json.loads(done.stdout)["text"] == "via -m"
    assert status(db)["items"] == 1


def test_a_bad_import_item_names_its_line_and_stores_nothing(db: Path, tmp_path: Path) -> None:
    """An item the core refuses (importance out of range) is reported with its line."""
    path = tmp_path / "items.jsonl"
    path.write_text('{"text": "fine"}\n\n{"text": "too important", "importance": 5}\n')
    done = run(db, "import", str(path))
    assert done.returncode == 1
    assert "items.jsonl line 3:" in done.stderr and "importance" in done.stderr
    assert status(db)["items"] == 0


def test_reading_commands_refuse_a_missing_database_and_create_none(tmp_path: Path) -> None:
    """A mistyped --db is an error naming it, not a new empty database."""
    missing = tmp_path / "typo.db"
    for command in (["status"], ["list"], ["search", "x"], ["export"], ["doctor"]):
        done = run(missing, *command)
        assert done.returncode == 1 and "typo.db' does not exist" in done.stderr
    assert not missing.exists()


def test_doctor_reports_an_old_schema_without_migrating_it(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    shutil.copy(ROOT / "tests" / "fixtures" / "schema-v1.db", old)
    done = run(old, "doctor")
    assert done.returncode == 1 and "run `engramdb migrate`" in done.stderr
    with SqliteStore(old, migrate=False) as store:
        assert store.schema_version == 1


def test_doctor_finds_a_corrupt_vector_and_maintain_repairs_it(db: Path) -> None:
    """A vector whose bytes are not a unit vector is a problem (exit 1) until maintain."""
    ok(db, "add", "a fact")
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE vectors SET vector = zeroblob(256)")
    conn.close()
    done = run(db, "--json", "doctor")
    assert done.returncode == 1 and "1 corrupt vectors" in done.stderr
    assert json.loads(done.stdout)["corrupt_vectors"] == 1
    assert as_json(db, "maintain")["repaired"] == 1
    assert as_json(db, "doctor")["problems"] == []


def test_one_scopes_import_of_a_forged_vector_never_ranks_another_scopes_memory(
    db: Path, tmp_path: Path
) -> None:
    """The outside reproduction: scope b imports one line whose vector is that of an
    unrelated query; the import is refused (a file this small is checked whole), so when
    scope a later stores the same text, the unrelated query does not find it."""
    text = "the vault PIN is 4921"
    forged = struct.pack("<64f", *HashEmbedder(64).embed(["an unrelated query"])[0])
    line = {"text": text, "space_id": "hash/bow@64", "vector": base64.b64encode(forged).decode()}
    path = tmp_path / "forged.jsonl"
    path.write_text(json.dumps(line) + "\n")
    done = run(db, "--scope", "b", "import", str(path))
    assert done.returncode == 1 and "line 1: its vector does not belong to its text" in done.stderr
    ok(db, "--scope", "a", "add", text)
    found = lines(db, "--scope", "a", "search", "an unrelated query", "--mode", "vector")
    assert all(hit["similarity"] < 0.5 for hit in found)
    (mine,) = lines(db, "--scope", "a", "search", text, "--mode", "vector")
    assert mine["similarity"] > 0.999


def test_a_forged_vector_planted_through_the_store_is_found_by_doctor_and_repaired(
    db: Path,
) -> None:
    """A vector planted for a text straight through the store (scope B's memory of it,
    deferred) decides B's recall until doctor --verify-vectors, which embeds the texts
    again, reports the memories holding it by id (never their text), exit 1; --repair
    puts the text's own vector in its place, after which the memory scores 1.0 for its
    own text again. (Another scope that stores the same text replaces such a vector
    itself: tests/contract/test_own_vectors_contract.py.)"""
    text, query = "the vault PIN is 4921", "the vault PIN is 4921"
    embedder = HashEmbedder(64)
    forged = struct.pack("<64f", *embedder.embed(["an unrelated query"])[0])
    with Memory(SqliteStore(str(db)), embedder) as memory:
        planted = memory.remember(text, scope=("b",), defer_embedding=True)
        space = embedder.space
        now = planted.created_at
        memory.store.batch([RegisterSpace(space, now)])
        memory.store.batch([PutVector(space.id, planted.content_sha256, forged, now)])
        (hit,) = memory.recall("an unrelated query", scopes=[("b",)], mode="vector")
        assert hit.memory.id == planted.id and hit.score > 0.99  # the forged vector decides
    done = run(db, "--json", "doctor", "--verify-vectors", "10")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["foreign_vectors"]["ids"] == [planted.id]
    assert report["foreign_vectors"]["checked"] == 1
    assert "does not belong to their text" in done.stderr and "--repair" in done.stderr
    assert "4921" not in done.stdout + done.stderr
    repaired = as_json(db, "doctor", "--verify-vectors", "10", "--repair")
    assert repaired["problems"] == [] and repaired["foreign_vectors"]["repaired"]
    assert as_json(db, "doctor", "--verify-vectors", "10")["foreign_vectors"]["ids"] == []
    with Memory(SqliteStore(str(db)), HashEmbedder(64)) as memory:
        (hit,) = memory.recall(query, scopes=[("b",)], mode="vector")
        assert hit.memory.id == planted.id and hit.score == pytest.approx(1.0, abs=1e-5)
        assert len(memory.recall("an unrelated query", scopes=[("b",)], mode="vector")) == 0


@pytest.mark.parametrize(
    ("vector", "space_id", "needle"),
    [
        ("not base64!", "hash/bow@64", "vector is not base64"),
        (base64.b64encode(b"\0" * 256).decode(), "hash/bow@64", "norm 0"),
        (base64.b64encode(struct.pack("<2f", 1, 0)).decode(), "hash/bow@64", "2 dimensions"),
        (base64.b64encode(struct.pack("<2f", 1, 0)).decode(), "no-model", "provider/model@N"),
    ],
)
def test_a_bad_vector_in_an_import_names_its_line_and_stores_nothing(
    db: Path, tmp_path: Path, vector: str, space_id: str, needle: str
) -> None:
    """Vectors are checked with the rest of the file, before anything is stored."""
    path = tmp_path / "vectors.jsonl"
    line = {"text": "bad vector", "space_id": space_id, "vector": vector}
    path.write_text('{"text": "fine"}\n' + json.dumps(line) + "\n")
    done = run(db, "import", str(path))
    assert done.returncode == 1
    assert "vectors.jsonl line 2:" in done.stderr and needle in done.stderr, done.stderr
    assert not db.exists()


def test_ctrl_c_during_an_import_exits_130_and_a_rerun_finishes_it(
    db: Path, tmp_path: Path
) -> None:
    """SIGINT is one line and status 130, not a traceback; the rerun completes."""
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"interrupted fact {n}\n" for n in range(20_000)))
    process = start_import(db, path, batch_size=100)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and "engramdb: interrupted" in err and "Traceback" not in err
    ok(db, "import", str(path))
    assert status(db)["items"] == 20_000


def test_copy_into_another_sqlite_file_keeps_every_record_and_vector(tmp_path: Path) -> None:
    """``copy`` moves every scope (records exactly as they were, vectors included, so
    nothing is pending), and a second run copies nothing."""
    source, target = tmp_path / "a.db", tmp_path / "b.db"
    with Memory(SqliteStore(source), HashEmbedder(dimensions=64)) as memory:
        for scope in [("acme", "user", "sam"), ("acme", "user", "kim"), ("solo",)]:
            for i in range(3):
                memory.remember(f"{scope[-1]} fact {i}", scope=scope, metadata={"i": i})
    report = as_json(source, "copy", str(target))
    assert (report["scopes"], report["copied"], report["vectors"]) == (3, 9, 9)
    with (
        Memory(SqliteStore(source), HashEmbedder(dimensions=64)) as before,
        Memory(SqliteStore(target), HashEmbedder(dimensions=64)) as after,
    ):
        for entry in before.list_scopes():
            assert after.list(entry.scope) == before.list(entry.scope)
        assert after.status().pending == 0
    again = as_json(source, "copy", str(target))
    assert (again["copied"], again["skipped"]) == (0, 9)


def test_import_from_standard_input_recognises_json_lines(tmp_path: Path) -> None:
    """``export | import -``: JSON Lines on standard input are read as such (not as nine
    texts that happen to hold JSON)."""
    source, target = tmp_path / "a.db", tmp_path / "b.db"
    ok(source, "add", "the deploy window is Tuesday", "--metadata", '{"src": "chat"}')
    done = run(target, "import", "-", stdin=ok(source, "export"))
    assert done.returncode == 0, done.stderr
    record = as_json(target, "list")  # one JSON line
    assert (record["text"], record["metadata"]) == ("the deploy window is Tuesday", {"src": "chat"})


def test_add_stores_no_key_unless_redaction_is_turned_off(db: Path) -> None:
    """A key pasted into `engramdb add` is redacted before anything is embedded or
    stored; ENGRAMDB_REDACT=off keeps the text as given."""
    key = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0A1s2"
    ok(db, "add", f"deploy with {key}")
    done = run(db, "add", f"raw {key}", ENGRAMDB_REDACT="off")
    assert done.returncode == 0, done.stderr
    texts = sorted(record["text"] for record in lines(db, "list"))
    assert texts == ["deploy with [REDACTED:openai_key]", f"raw {key}"]
    refused = run(db, "add", "x", ENGRAMDB_REDACT="maybe")
    assert refused.returncode == 1 and "ENGRAMDB_REDACT='maybe'" in refused.stderr


HUGE = "1" + "0" * 400  # float() of this integer raises OverflowError


def test_numbers_no_float_holds_are_one_line_errors_in_main(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """main() answers an importance or ttl of 400 digits (on add and in an import line,
    JSON or CSV) and a space_id whose dimensions are a non-ASCII digit with a one-line
    error and exit 1, never a traceback; nothing is stored."""
    from engramdb.cli import main

    monkeypatch.setenv("ENGRAMDB_EMBEDDER", "hash:64")
    db = str(tmp_path / "cli.db")
    assert main(["--db", db, "add", "kept"]) == 0
    files = {
        "a.jsonl": f'{{"text": "x", "importance": {HUGE}}}\n',
        "b.jsonl": f'{{"text": "x", "ttl": -{HUGE}}}\n',
        "c.jsonl": '{"text": "x", "vector": "AACAPw==", "space_id": "hash/bow@\u00b2"}\n',
        "d.csv": f"text,importance\nx,{HUGE}\n",
    }
    commands = [["add", "--importance", HUGE, "x"], ["add", "--ttl", HUGE, "x"]]
    for name, content in files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
        commands.append(["import", str(tmp_path / name)])
    capsys.readouterr()
    for command in commands:
        assert main(["--db", db, *command]) == 1, command
        err = capsys.readouterr().err
        assert err.startswith("engramdb: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err and len(err) < 300
    assert main(["--db", db, "--json", "status"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == 1


def test_search_rerank_goes_through_the_reranker_engramdb_reranker_names(db: Path) -> None:
    """With ``ENGRAMDB_RERANKER`` naming a TEI server on 127.0.0.1, ``search`` re-scores
    the first hits with it (``--rerank N``, default 30; ``--explain`` shows the score);
    ``--rerank 0`` is off; without a reranker ``--rerank 3`` fails with a message."""
    from rerank_server import tei

    for text in ("the cat sat", "a dog and a cat", "nothing here", "cat dog bird"):
        ok(db, "add", text)
    plain = [h["memory"]["text"] for h in lines(db, "search", "cat dog", "--top-k", "4")]
    with tei() as server:
        url = f"tei:{server.url}"
        hits = [
            json.loads(line)
            for line in run(
                db, "--json", "search", "cat dog", "--top-k", "2", ENGRAMDB_RERANKER=url
            ).stdout.splitlines()
        ]
        assert [h["evidence"]["rerank_score"] for h in hits] == [2.0, 2.0]
        assert {h["memory"]["text"] for h in hits} == {"a dog and a cat", "cat dog bird"}
        assert server.bodies[-1] == {"query": "cat dog", "texts": plain}
        explained = run(db, "search", "cat", "--rerank", "1", "--explain", ENGRAMDB_RERANKER=url)
        assert explained.returncode == 0 and "rerank score 1" in explained.stdout
        assert len(server.bodies[-1]["texts"]) == 1  # --rerank 1: the first hit only
        calls = len(server.bodies)
        off = run(db, "--json", "search", "cat", "--rerank", "0", ENGRAMDB_RERANKER=url)
        assert off.returncode == 0 and len(server.bodies) == calls
    refused = run(db, "search", "cat", "--rerank", "3")
    assert refused.returncode != 0 and "needs a reranker" in refused.stderr
    assert run(db, "search", "cat", "--rerank", "-1").returncode == 2  # a usage error


def test_remember_dash_reads_the_text_from_standard_input(db: Path) -> None:
    """``remember -`` stores standard input's text (without its final line break), as
    ``import -`` reads standard input; it never stores the text "-"."""
    done = run(db, "--json", "remember", "-", stdin="Sam is vegetarian\nand likes tea\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == "Sam is vegetarian\nand likes tea"
    assert [line["text"] for line in lines(db, "list")] == ["Sam is vegetarian\nand likes tea"]


def test_remember_dash_with_empty_input_is_one_error_and_stores_nothing(db: Path) -> None:
    done = run(db, "remember", "-", stdin=" \n")
    assert done.returncode == 1
    assert done.stderr.startswith("engramdb: error: remember - read no text from standard input")
    assert done.stderr.count("\n") == 1
    assert not db.exists()


OSLO = "# Oslo\n\nSam flies out on Monday at 7.\n\n## Hotel\n\nBreakfast is included\nfrom six.\n"


def test_recall_shows_where_in_its_file_a_documents_hit_is(tmp_path: Path) -> None:
    """After ``engramdb import FOLDER``, a hit from a file says which file and which
    lines: ``travel/oslo.md:5-8`` on the hit's line, its chunk and characters with
    ``--explain``, and ``document_lines`` in its metadata with ``--json``; a memory
    that is not a chunk shows none."""
    folder = tmp_path / "notes"
    (folder / "travel").mkdir(parents=True)
    (folder / "travel" / "oslo.md").write_text(OSLO, encoding="utf-8")
    db = tmp_path / "m.db"
    ok(db, "import", str(folder), "--max-chars", "60")
    ok(db, "remember", "Breakfast on the train is not included")

    hits = ok(db, "recall", "breakfast included from six", "--top-k", "2").splitlines()
    assert hits[0].startswith("1. ") and hits[0].endswith(", travel/oslo.md:5-8)")
    assert "Breakfast is included\\nfrom six." in hits[0]
    assert hits[1].startswith("2. ") and hits[1].endswith(")") and ".md" not in hits[1]

    explained = ok(db, "recall", "breakfast included from six", "--top-k", "1", "--explain")
    start = OSLO.index("## Hotel")
    end = start + len("## Hotel\n\nBreakfast is included\nfrom six.")
    assert f"   document: chunk 2 of 2, characters {start}-{end} of its source" in explained

    (hit,) = lines(db, "recall", "breakfast included from six", "--top-k", "1")
    meta = hit["memory"]["metadata"]
    assert (meta["document_source"], meta["document_lines"]) == ("travel/oslo.md", [5, 8])


def test_a_chunk_stored_before_lines_were_recorded_shows_its_characters(tmp_path: Path) -> None:
    """A chunk whose metadata has no ``document_lines`` (stored by an engramdb that did
    not record them) still shows its file, with its character span instead."""
    db = tmp_path / "m.db"
    with Memory(SqliteStore(str(db)), HashEmbedder(64)) as memory:
        meta = {"document_source": "old.md", "document_start": 10, "document_end": 42}
        memory.remember("Breakfast is included", ("default",), metadata=meta)
    (line,) = ok(db, "recall", "breakfast", "--top-k", "1").splitlines()
    assert line.endswith(", old.md, characters 10-42)")
