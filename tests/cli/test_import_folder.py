"""``engramdb import FOLDER``: each .md/.markdown/.txt file below the folder remembered
as a document (``remember_document``), its path relative to the folder as its source;
a rerun of an unchanged folder adds nothing, a changed file replaces its chunks, and a
file that is not UTF-8 stops the import before anything is stored.

The CLI runs in process (the ``cli`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

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
