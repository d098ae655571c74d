"""Stored text never drives the operator's terminal: every printing command shows the
control characters of texts, metadata, labels and scope parts escaped (ESC as
``\\u001b``, as JSON writes it), ``--json`` stays JSON with the same values and no raw
control character, and ``--raw`` prints the bytes as stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engramdb.cli._render import escape_controls
from engramdb.json_format import dumps_line, loads_line
from engramdb.settings import resolve

HOSTILE = {
    "set title": "\x1b]0;pwned\x07",
    "clear screen": "\x1b[2J",
    "clipboard (OSC 52)": "\x1b]52;c;cHduZWQ=\x07",
    "C1 CSI": "\x9b31m",
    "C1 OSC": "\x9d0;t\x9c",
    "bidi override": "\u202eevil\u202c",
    "bidi isolate": "\u2066x\u2069",
    "carriage return": "over\rwrite",
    "DEL": "\x7f",
    "line separator": "a\u2028b",
}
RAW = set("\x1b\x07\x9b\x9d\x9c\u202e\u202c\u2066\u2069\r\x7f\u2028")
"""The control characters of ``HOSTILE``: none may reach the terminal raw."""
TEXT = "hostile memory " + " ".join(HOSTILE.values()) + "\nsecond line"
SCOPE = ("acme\u202e", "sam\u2028x")  # a scope part may hold these (not C0 or C1)
SCOPE_TEXT = "/".join(SCOPE)

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def stored(tmp_path: Path, cli: Run) -> dict[str, str]:
    """A memory holding every hostile sequence in its text, metadata and labels, in a
    scope whose parts hold a bidi override and a line separator, updated once (so it has
    a history); and a plain one beside it. Stored through the library."""
    assert cli("remember", "seed")[0] == 0  # the cli fixture's database exists
    settings = resolve(db=tmp_path / "cli.db", embedder="hash:64", environ={})
    with settings.open() as memory:
        hostile = memory.remember(
            TEXT + " (first)",
            SCOPE,
            metadata={"note\x1b": "\x1b]0;meta\x07", "c1": "\x9b2J"},
            labels={"tag\x9b": ["\x1b[2J", "\u202eright"]},
        )
        memory.update(hostile.id, text=TEXT)
        plain = memory.remember("hostile memory plain", SCOPE)
    return {"hostile": hostile.id, "plain": plain.id}


COMMANDS = [
    ["list"],
    ["recall", "hostile memory"],
    ["search", "hostile memory", "--explain"],
    ["similar", "{plain}"],
    ["get", "{hostile}"],
    ["history", "{hostile}"],
    ["update", "{hostile}", "--importance", "0.9"],
    ["feedback", "{hostile}", "1"],
    ["scopes"],
    ["status"],
    ["doctor"],
    ["config"],
    ["export"],
    ["backup", "-"],
    ["list", "--scope", "empty\u202e\u2028"],  # a scope of the command line, on stderr
    ["get", "no-such-\x1b[2J-id"],  # an error naming it
]


def _args(command: list[str], ids: dict[str, str]) -> list[str]:
    return [part.format(**ids) for part in command]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_no_printing_command_writes_a_raw_control_character(
    cli: Run, stored: dict[str, str], command: list[str], as_json: bool
) -> None:
    """Whatever a command prints, on standard output and standard error, in text or
    JSON, holds none of the stored control characters raw."""
    status, out, err = cli(
        "--scope", SCOPE_TEXT, *(["--json"] if as_json else []), *_args(command, stored)
    )
    assert status == (1 if "no-such-\x1b[2J-id" in command else 0), err
    assert not RAW & set(out + err), sorted(RAW & set(out + err))
    if as_json:
        for line in out.splitlines():
            json.loads(line)  # still JSON


@pytest.mark.parametrize(
    "command",
    [["list"], ["get", "{hostile}"], ["history", "{hostile}"], ["update", "{hostile}"]],
    ids=lambda c: c[0],
)
def test_a_stored_text_metadata_and_labels_show_escaped(
    cli: Run, stored: dict[str, str], command: list[str]
) -> None:
    """The text reads with each control character as its escape (a multi-line text keeps
    its line break), and so do the metadata and labels."""
    args = _args(command, stored) + (["--importance", "0.9"] if command[0] == "update" else [])
    status, out, _ = cli("--scope", SCOPE_TEXT, *args)
    assert status == 0
    escaped = escape_controls(TEXT)
    assert escaped == (
        "hostile memory \\u001b]0;pwned\\u0007 \\u001b[2J \\u001b]52;c;cHduZWQ=\\u0007 "
        "\\u009b31m \\u009d0;t\\u009c \\u202eevil\\u202c \\u2066x\\u2069 over\\rwrite "
        "\\u007f a\\u2028b\nsecond line"
    )
    assert escaped in out or escape_controls(TEXT + " (first)") in out
    assert '"tag\\u009b":["\\u001b[2J"' in out
    assert '"note\\u001b":"\\u001b]0;meta\\u0007"' in out


def test_a_recall_line_shows_the_texts_line_break_escaped_too(
    cli: Run, stored: dict[str, str]
) -> None:
    """A hit is one line: its text's line break is ``\\n``, so a memory cannot print a
    line that reads like another hit."""
    status, out, _ = cli("--scope", SCOPE_TEXT, "recall", "hostile memory")
    assert status == 0
    first = next(line for line in out.splitlines() if stored["hostile"] in line)
    assert first.startswith("1. ") or first.startswith("2. ")
    assert "\\u001b]0;pwned\\u0007" in first and "\\nsecond line  (" in first
    assert len(out.splitlines()) == 2


def test_scopes_status_and_messages_show_scope_parts_escaped(
    cli: Run, stored: dict[str, str]
) -> None:
    status, out, _ = cli("scopes")
    assert status == 0 and "acme\\u202e/sam\\u2028x" in out
    status, out, _ = cli("--scope", SCOPE_TEXT, "status")
    assert status == 0 and "scope: acme\\u202e/sam\\u2028x" in out
    status, _, err = cli("--scope", "empty\u202e", "list")
    assert status == 0 and "scope empty\\u202e holds no memories" in err
    status, _, err = cli("--scope", SCOPE_TEXT, "get", "no-such-\x1b[2J-id")
    assert status == 1 and "no-such-\\x1b[2J-id" in err  # repr() in the message


@pytest.mark.parametrize(
    "command", [["list"], ["get", "{hostile}"], ["recall", "hostile memory"]], ids=lambda c: c[0]
)
def test_raw_prints_the_stored_bytes(cli: Run, stored: dict[str, str], command: list[str]) -> None:
    """``--raw``: the text as stored, control characters and line break included."""
    status, out, _ = cli("--scope", SCOPE_TEXT, "--raw", *_args(command, stored))
    assert status == 0 and TEXT in out and set(out) >= RAW


@pytest.mark.parametrize("command", [["list"], ["get", "{hostile}"]], ids=lambda c: c[0])
def test_json_output_escapes_every_control_character_and_keeps_the_value(
    cli: Run, stored: dict[str, str], command: list[str]
) -> None:
    """``--json`` output holds no raw C0, DEL, C1, line separator or bidi control (JSON's
    own ``\\u`` escapes), and reads back as the stored values; ``--raw --json`` is the
    codec's JSON as is, the same values."""
    for raw in ([], ["--raw"]):
        status, out, _ = cli("--scope", SCOPE_TEXT, "--json", *raw, *_args(command, stored))
        assert status == 0
        records = [json.loads(line) for line in out.split("\n") if line]  # raw: U+2028
        hostile = next(r for r in records if r["id"] == stored["hostile"])
        assert hostile["text"] == TEXT and hostile["scope"] == list(SCOPE)
        assert hostile["metadata"] == {"note\x1b": "\x1b]0;meta\x07", "c1": "\x9b2J"}
        assert hostile["labels"] == {"tag\x9b": ["\x1b[2J", "\u202eright"]}
        assert bool(RAW & set(out)) == bool(raw)  # ESC is escaped by JSON even then
        assert "\x1b" not in out


def test_export_and_backup_to_standard_output_are_the_files_bytes(
    tmp_path: Path, cli: Run, stored: dict[str, str]
) -> None:
    """``export`` and ``backup -`` print exactly what they write to a file (their lines
    escape every control character themselves), and the export imports back exactly."""
    status, printed, _ = cli("--scope", SCOPE_TEXT, "export")
    assert cli("--scope", SCOPE_TEXT, "export", "-o", str(tmp_path / "e.jsonl"))[0] == 0
    assert status == 0 and printed == (tmp_path / "e.jsonl").read_text(encoding="utf-8")
    assert not RAW & set(printed)
    assert cli("--db", str(tmp_path / "copy.db"), "import", str(tmp_path / "e.jsonl"))[0] == 0
    status, out, _ = cli("--db", str(tmp_path / "copy.db"), "--json", "list")
    assert TEXT in [json.loads(line)["text"] for line in out.splitlines()]
    status, printed, _ = cli("backup", "-")
    assert cli("backup", str(tmp_path / "b.jsonl"))[0] == 0
    assert status == 0 and printed == (tmp_path / "b.jsonl").read_text(encoding="utf-8")
    assert not RAW & set(printed)


def test_the_installed_command_writes_no_escape_byte(tmp_path: Path) -> None:
    """The real ``engramdb`` process: its standard output bytes hold no ESC, BEL or C1
    control of a stored text, and hold them with ``--raw``."""
    db = tmp_path / "real.db"
    with resolve(db=db, embedder="hash:64", environ={}).open() as memory:
        memory.remember(TEXT, ("default",))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAMDB_")}
    env |= {"ENGRAMDB_EMBEDDER": "hash:64", "XDG_CONFIG_HOME": str(tmp_path / "none")}
    command = [sys.executable, "-m", "engramdb.cli", "--db", str(db), "list"]
    out = subprocess.run(command, env=env, capture_output=True, check=True).stdout
    assert b"\x1b" not in out and b"\x07" not in out and "\x9b".encode() not in out
    assert b"\\u001b]0;pwned\\u0007" in out
    out = subprocess.run([*command, "--raw"], env=env, capture_output=True, check=True).stdout
    assert b"\x1b]0;pwned\x07" in out and "\x9b31m".encode() in out


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("tab\tand\nline feed", "tab\tand\nline feed"),  # kept: they lay text out
        ("é ü 漢字 🙂 zero\u200dwidth joiner, \u200fRLM", None),  # printable text as is
        ("\x00\x1b\x07\x08\x0b\x0c\x1f", "\\u0000\\u001b\\u0007\\u0008\\u000b\\u000c\\u001f"),
        ("cr\r", "cr\\r"),
        ("\x7f\x80\x85\x9b\x9f", "\\u007f\\u0080\\u0085\\u009b\\u009f"),
        ("\u2028\u2029", "\\u2028\\u2029"),
        ("\u202a\u202b\u202c\u202d\u202e", "\\u202a\\u202b\\u202c\\u202d\\u202e"),
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),
        ("\udc80", "\\udc80"),  # a lone surrogate: no terminal shows one
    ],
)
def test_what_the_cli_escapes_and_what_it_keeps(text: str, shown: str | None) -> None:
    """C0 but tab and line feed, DEL, C1, the line and paragraph separators, the bidi
    embeddings, overrides and isolates and lone surrogates are escaped; printable text
    (accents, CJK, emoji, joiners, bidi marks) is kept."""
    assert escape_controls(text) == (text if shown is None else shown)
    assert escape_controls("a\nb", line_breaks=True) == "a\\nb"


def test_an_escaped_line_is_json_with_the_same_value() -> None:
    """The CLI's escapes are JSON's: escaping a JSON line changes no value, and what
    ``dumps_line`` writes the CLI prints unchanged (so exports print as they are)."""
    value = {"text": "".join(map(chr, range(0x20, 0x3000))) + TEXT, "k\u202e": ["\x9b"]}
    line = dumps_line(value)
    assert escape_controls(line) == line and loads_line(line) == value
    raw = json.dumps(value, ensure_ascii=False)
    assert json.loads(escape_controls(raw)) == value
