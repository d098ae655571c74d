"""``engramdb import FOLDER``: the document files below a folder, read, then remembered
with ``remember_documents`` (docs/documents.md, "Importing a folder").

What is read: each regular file whose name ends in ``.md``, ``.markdown`` or ``.txt``
(any case) in the folder and below it, but not in hidden folders and not hidden files
(a name starting with ``.``). The folder is walked with a list of folders still to
read, not by recursion, so any depth the system's paths allow is walked. Nothing leaves
the folder:

* a link to a file is read only when the file it leads to is a regular file inside the
  folder (its source is the link's own path); a link leading outside is skipped with a
  note, so a ``notes.md`` that leads to ``/etc/passwd`` is never stored;
* a link to a folder is never followed (inside or out): the files of a folder inside
  are imported under their own path, and no link loop can make the walk endless;
* a FIFO, socket or device is never opened (a FIFO would block the import): skipped
  with a note when its name is that of a document;
* a name that is not UTF-8 (a file or a folder) cannot be a source: skipped with a
  note (rename it).

A file is opened without following a link (``O_NOFOLLOW``) and without blocking
(``O_NONBLOCK``), and read only if the opened file is a regular file, so a file swapped
for a link or a FIFO during the walk is refused too. Every file is read (and decoded)
before anything is stored, and ``remember_documents`` checks every document before it
stores one: a file that cannot be read, is not UTF-8 or holds a NUL refuses the import
with one error naming it, and nothing is stored.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from engramdb import IngestError, ProviderError, ValidationError
from engramdb.json_format import scope_to_json

from ._commands import Context
from ._parser import CliError
from ._progress import Progress
from ._render import print_json

__all__ = ["DOCUMENT_SUFFIXES", "import_folder", "shown_path"]

DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)  # a link swapped in after the walk is not followed
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in does not block the open
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


@dataclass
class Found:
    """The document files of a folder: ``(source, path to read)`` in source order,
    and ``(path, why)`` of each entry skipped with a note."""

    files: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def shown_path(path: str) -> str:
    """``path`` as a message shows it: bytes that are not UTF-8 as ``\\xNN`` and
    characters that are not printable escaped, so a file name cannot drive the terminal."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def document_files(folder: str) -> Found:
    """Every document file below ``folder`` (see the module's docstring), walked with
    a stack of the folders still to list; ``CliError`` when a folder cannot be listed."""
    root = os.path.realpath(folder)
    found = Found()
    pending = [""]  # the folders still to list, relative to ``folder``
    while pending:
        relative = pending.pop()
        here = os.path.join(folder, relative) if relative else folder
        try:
            with os.scandir(here) as listing:
                entries = list(listing)
        except OSError as exc:
            raise CliError(
                f"cannot list the folder {shown_path(here)} ({exc.strerror}); check its "
                "permissions or move it out of the folder; nothing was stored"
            ) from None
        for entry in entries:
            if entry.name.startswith("."):
                continue  # hidden: .git, .obsidian, .DS_Store ...
            source = f"{relative}/{entry.name}" if relative else entry.name
            what, detail = _what_to_do(entry, root)
            if what == "list":
                pending.append(source)
            elif what == "read":
                found.files.append((source, detail))
            elif what == "skip":
                found.skipped.append((entry.path, detail))
    found.files.sort()
    found.skipped.sort()
    return found


def _what_to_do(entry: os.DirEntry[str], root: str) -> tuple[str, str]:
    """``("list", "")`` for a folder to walk, ``("read", path)`` for a document file,
    ``("skip", why)`` for an entry skipped with a note, ``("", "")`` for anything else."""
    document = os.path.splitext(entry.name)[1].lower() in DOCUMENT_SUFFIXES
    folder = entry.is_dir(follow_symlinks=False)
    try:
        entry.name.encode("utf-8")
    except UnicodeEncodeError:
        why = "its name is not UTF-8, so it cannot name a document; rename it"
        return ("skip", why) if folder or document else ("", "")
    if entry.is_symlink():
        target = os.path.realpath(entry.path)
        if os.path.isdir(target):
            return "skip", "a link to a folder, not followed (a folder inside is read as itself)"
        if not document:
            return "", ""
        if os.path.commonpath([root, target]) != root:
            return "skip", f"a link to {shown_path(target)}, outside the folder; not followed"
        if not os.path.isfile(target):
            return "skip", "a link to nothing that is a regular file; not followed"
        return "read", target
    if folder:
        return "list", ""
    if not document:
        return "", ""
    if not entry.is_file(follow_symlinks=False):
        return "skip", "not a regular file (a FIFO, socket or device); not read"
    return "read", entry.path


def read_document(path: str) -> str:
    """The text of the regular file ``path`` (opened without following a link and
    without blocking); ``CliError`` naming it otherwise."""
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
        with open(descriptor, "rb") as file:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise CliError(
                    f"{shown_path(path)} is no longer a regular file (it changed during the "
                    "import); import again; nothing was stored"
                )
            data = file.read()
    except OSError as exc:
        raise CliError(
            f"cannot read {shown_path(path)} ({exc.strerror}); check its permissions or "
            "move it out of the folder; nothing was stored"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{shown_path(path)} is not UTF-8 text (byte {exc.start}); convert it or move "
            "it out of the folder; nothing was stored"
        ) from None


def import_folder(ctx: Context, folder: Path) -> int:
    """Remember each document file below ``folder`` with ``remember_documents``, its
    path relative to ``folder`` as its source: a file imported again unchanged adds
    nothing, a changed one replaces its chunks. Every file is read and every document
    checked before anything is stored."""
    found = document_files(str(folder))
    texts: dict[str, str] = {}
    for source, path in found.files:
        text = read_document(path)
        if text.strip():
            texts[source] = text
    sources = list(texts)
    done = 0

    def progress(count: int, total: int) -> None:
        nonlocal done
        done = count
        bar(count, total)

    shown = shown_path(str(folder))
    with Progress("import", len(texts)) as bar:
        try:
            documents = ctx.bound.remember_documents(
                texts, max_chars=ctx.args.max_chars, progress=progress
            )
        except ValidationError as exc:  # every document is checked before one is stored
            raise CliError(f"{shown}: {exc}; nothing was stored") from None
        except ProviderError as exc:  # while the chunks of sources[done] were embedded
            cause = exc.__cause__ if isinstance(exc, IngestError) else exc
            raise CliError(
                f"{shown_path(os.path.join(folder, sources[done]))}: {cause}; the {done} "
                "documents before it are stored, it and those after it are not: run the "
                "import again to go on"
            ) from None
    added = sum(document.added for document in documents)
    chunks = sum(len(document.chunk_ids) for document in documents)
    skipped = [{"file": shown_path(path), "why": why} for path, why in found.skipped]
    result = {
        "files": len(found.files),
        "documents": len(texts),
        "new": added,
        "unchanged": len(texts) - added,
        "chunks": chunks,
        "skipped": skipped,
        "scope": scope_to_json(ctx.settings.scope),
    }
    if ctx.json:
        print_json(result)
        return 0
    empty = len(found.files) - len(texts)
    print(
        f"imported {len(texts)} documents of {shown} into scope {ctx.scope_text}: "
        f"{added} new or changed, {len(texts) - added} unchanged, {chunks} chunks"
        + (f" ({empty} empty files left out)" if empty else "")
    )
    for item in skipped:
        print(f"skipped {item['file']}: {item['why']}", file=sys.stderr)
    return 0
