"""``engramdb import FOLDER``: each .md/.markdown/.txt file below the folder remembered
as a document (``remember_documents``), its path relative to the folder as its source;
a rerun of an unchanged folder adds nothing, a changed file replaces its chunks, and a
file that is not UTF-8 or holds a NUL stops the import before anything is stored, with
one error naming it. Only regular files under the folder are read: a link out of it, a
link to a folder, a FIFO and a name that is not UTF-8 are skipped with a note; any depth
is walked.

The CLI runs in process (the ``cli`` fixture of ``conftest.py``), on real files, links
and FIFOs under ``tmp_path``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

Cli = Callable[..., tuple[int, str, str]]

TRIP = "# Oslo\n\nSam flies out on Monday at 7.\n\n## Hotel\n\nBreakfast is included.\n"


def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    (folder / "travel").mkdir(parents=True)
    (folder / "travel" / "oslo.md").write_text(TRIP, encoding="utf-8")
    (folder / "todo.txt").write_text("Buy a new bike lock.\n", encoding="utf-8")
    (folder / "empty.md").write_text("\n\n", encoding="utf-8")
    (folder / "picture.png").write_bytes(b"\x89PNG")
    (folder / ".hidden").mkdir()
    (folder / ".hidden" / "secret.md").write_text("not for memory", encoding="utf-8")
    return folder


def test_a_folder_becomes_documents_and_a_rerun_adds_nothing(cli: Cli, tmp_path: Path) -> None:
    folder = notes(tmp_path)
    status, out, err = cli("--json", "import", str(folder), "--max-chars", "60")
    assert status == 0, err
    report = json.loads(out)
    assert report == {
        "files": 3,
        "documents": 2,
        "new": 2,
        "unchanged": 0,
        "chunks": 3,
        "skipped": [],
        "scope": ["default"],
    }
    status, out, _ = cli("--json", "recall", "breakfast at the hotel", "--top-k", "1")
    hit = json.loads(out.splitlines()[0])["memory"]  # one hit a line
    assert hit["metadata"]["document_source"] == "travel/oslo.md"
    start, end = hit["metadata"]["document_start"], hit["metadata"]["document_end"]
    assert TRIP[start:end] == hit["text"] == "## Hotel\n\nBreakfast is included."
    status, out, _ = cli("import", str(folder), "--max-chars", "60")
    assert "0 new or changed, 2 unchanged, 3 chunks" in out
    _, listed, _ = cli("--json", "list", "--limit", "100")
    assert len(listed.splitlines()) == 3  # one record a line
    assert "not for memory" not in listed


def test_a_changed_file_replaces_its_chunks(cli: Cli, tmp_path: Path) -> None:
    folder = notes(tmp_path)
    cli("import", str(folder))
    (folder / "todo.txt").write_text("Buy a new bike lock and lights.\n", encoding="utf-8")
    status, out, _ = cli("import", str(folder))
    assert status == 0 and "1 new or changed, 1 unchanged" in out
    _, listed, _ = cli("--json", "list", "--limit", "100")
    texts = [json.loads(line)["text"] for line in listed.splitlines()]
    assert "Buy a new bike lock and lights." in texts and "Buy a new bike lock." not in texts


def test_a_file_that_is_not_utf8_stores_nothing(cli: Cli, tmp_path: Path) -> None:
    folder = notes(tmp_path)
    (folder / "zz-latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    status, _, err = cli("import", str(folder))
    assert status == 1 and "zz-latin1.txt is not UTF-8 text (byte 3)" in err
    assert "nothing was stored" in err
    _, listed, _ = cli("--json", "list")
    assert listed == ""


def listed_texts(cli: Cli) -> list[str]:
    _, listed, _ = cli("--json", "list", "--limit", "1000")
    return [json.loads(line)["text"] for line in listed.splitlines()]


def test_a_link_out_of_the_folder_is_not_imported(cli: Cli, tmp_path: Path) -> None:
    """A link whose file is outside the folder (``notes.md`` to a private file, or to
    /etc/passwd) is skipped with a note naming it and where it leads; its text is
    never stored."""
    folder = notes(tmp_path)
    private = tmp_path / "private"
    private.mkdir()
    (private / "keys.md").write_text("the vault code is 4711", encoding="utf-8")
    (folder / "notes.md").symlink_to(private / "keys.md")
    (folder / "travel" / "up.md").symlink_to("../../private/keys.md")  # relative, out
    (folder / "passwd.txt").symlink_to("/etc/passwd")
    status, out, err = cli("import", str(folder))
    assert status == 0 and "2 new or changed" in out
    for link, target in [
        ("notes.md", private / "keys.md"),
        ("travel/up.md", private / "keys.md"),
        ("passwd.txt", Path("/etc/passwd")),
    ]:
        assert f"skipped {folder / link}: a link to {target}, outside the folder" in err
    texts = " ".join(listed_texts(cli))
    assert "4711" not in texts and "root:" not in texts
    _, out, _ = cli("--json", "import", str(folder))
    assert [s["file"] for s in json.loads(out)["skipped"]] == [
        str(folder / name) for name in ("notes.md", "passwd.txt", "travel/up.md")
    ]


def test_a_link_to_a_file_inside_the_folder_is_imported_under_its_own_path(
    cli: Cli, tmp_path: Path
) -> None:
    """A link whose file is a regular file inside the folder is read like that file,
    under the link's own path (even when the file itself is not a document or is
    hidden): the user made it to be read."""
    folder = notes(tmp_path)
    (folder / "README").write_text("Read me: the notes of Sam.", encoding="utf-8")
    (folder / "readme.md").symlink_to("README")
    (folder / "oslo-link.md").symlink_to(folder / "travel" / "oslo.md")
    status, out, err = cli("--json", "import", str(folder))
    assert status == 0, err
    report = json.loads(out)
    assert (report["documents"], report["skipped"]) == (4, [])
    _, listed, _ = cli("--json", "list", "--limit", "100")
    sources = {json.loads(line)["metadata"]["document_source"] for line in listed.splitlines()}
    assert sources == {"oslo-link.md", "readme.md", "todo.txt", "travel/oslo.md"}


def test_a_link_to_a_folder_is_not_followed(cli: Cli, tmp_path: Path) -> None:
    """A link to a folder is never followed, inside or out: a loop (``again`` to the
    folder itself) cannot make the walk endless, and a folder outside is not read;
    each is skipped with a note. A folder inside is read under its own path."""
    folder = notes(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "far.md").write_text("far away", encoding="utf-8")
    (folder / "again").symlink_to(".")
    (folder / "travel" / "trips").symlink_to(folder / "travel")
    (folder / "far").symlink_to(outside)
    status, out, err = cli("import", str(folder))
    assert status == 0 and "imported 2 documents" in out
    for link in ("again", "far", "travel/trips"):
        assert f"skipped {folder / link}: a link to a folder, not followed" in err
    assert "far away" not in listed_texts(cli)


def test_a_fifo_is_never_opened(cli: Cli, tmp_path: Path) -> None:
    """A FIFO (or socket, or device) named like a document is never opened (a FIFO
    would block the import until someone writes to it): it is skipped with a note, and
    so is a link to it."""
    folder = notes(tmp_path)
    os.mkfifo(folder / "pipe.md")
    (folder / "pipe-link.md").symlink_to("pipe.md")
    status, out, err = cli("import", str(folder))
    assert status == 0 and "imported 2 documents" in out
    assert f"skipped {folder / 'pipe.md'}: not a regular file (a FIFO" in err
    assert f"skipped {folder / 'pipe-link.md'}: a link to nothing that is a regular file" in err


def test_a_file_name_that_is_not_utf8_is_skipped_with_a_note(cli: Cli, tmp_path: Path) -> None:
    """A file or folder whose name is not UTF-8 (it cannot be a source) is skipped
    with a note that shows its bytes and says to rename it; the other files are
    imported. Before, the import ended in a raw UnicodeEncodeError."""
    folder = notes(tmp_path)
    base = os.fsencode(folder)
    with open(base + b"/caf\xe9.md", "wb") as file:
        file.write(b"the cafe note")
    os.mkdir(base + b"/r\xe9sum\xe9s")
    with open(base + b"/r\xe9sum\xe9s/cv.md", "wb") as file:
        file.write(b"the cv")
    status, out, err = cli("import", str(folder))
    assert status == 0 and "imported 2 documents" in out
    assert f"skipped {folder}/caf\\xe9.md: its name is not UTF-8" in err
    assert f"skipped {folder}/r\\xe9sum\\xe9s: its name is not UTF-8" in err
    assert "rename it" in err
    texts = listed_texts(cli)
    assert "the cafe note" not in texts and "the cv" not in texts


def test_a_nul_in_any_file_stores_nothing_and_names_the_file(cli: Cli, tmp_path: Path) -> None:
    """Every file is read and every document checked before anything is stored: a
    NUL in the last file refuses the import with one line naming that file and the
    fix, and not one document of the others is stored (before, the files before it
    were stored and the error named no file)."""
    folder = notes(tmp_path)
    (folder / "zz-binary.md").write_text("a NUL \x00 in text", encoding="utf-8")
    status, out, err = cli("import", str(folder))
    assert status == 1 and out == ""
    assert err.strip().splitlines()[-1] == (
        f"engramdb: error: {folder}: the document 'zz-binary.md' has a NUL character "
        "(U+0000) at position 6; remove it; nothing was stored"
    )
    assert listed_texts(cli) == []


def test_a_folder_1200_deep_is_walked_without_recursion(cli: Cli, tmp_path: Path) -> None:
    """The walk keeps a list of the folders still to read instead of recursing, so a
    tree 1,200 folders deep (deeper than Python's recursion limit) is imported; before,
    it ended in RecursionError."""
    levels = [tmp_path / "deep"]
    for _ in range(1200):
        levels.append(levels[-1] / "d")
    for level in levels:
        level.mkdir()
    (levels[-1] / "bottom.md").write_text("At the very bottom.", encoding="utf-8")
    try:
        status, out, err = cli("--json", "import", str(levels[0]))
        assert status == 0, err
        assert json.loads(out)["documents"] == 1
        _, listed, _ = cli("--json", "list")
        source = json.loads(listed)["metadata"]["document_source"]
        assert source == "d/" * 1200 + "bottom.md"
    finally:  # bottom up: shutil.rmtree (pytest's clean-up of old tmp_paths) recurses
        (levels[-1] / "bottom.md").unlink()
        for level in reversed(levels):
            level.rmdir()


def test_a_provider_failure_names_the_file_and_says_how_to_go_on(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the embedding service fails in the middle, the one-line error names the
    file being stored and says a rerun goes on (what was stored stays)."""
    folder = notes(tmp_path)
    dead = "ollama:nomic-embed-text?host=http://127.0.0.1:9&max_retries=0&dimensions=64"
    monkeypatch.setenv("ENGRAMDB_EMBEDDER", dead)
    status, _, err = cli("import", str(folder))
    assert status == 1
    (line,) = err.strip().splitlines()[-1:]
    assert line.startswith(f"engramdb: error: {folder / 'todo.txt'}: could not reach ollama")
    assert line.endswith("run the import again to go on")
