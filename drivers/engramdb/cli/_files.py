"""The ``engramdb`` commands that move memories: import, export, copy, backup, restore
(one record each: options, help and body; see ``_parser``)."""

from __future__ import annotations

import argparse
import functools
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from engramdb import EngramError, Memory, ValidationError, redact_secrets
from engramdb.backup import backup as write_backup
from engramdb.backup import read_backup
from engramdb.backup import restore as restore_backup
from engramdb.documents import DEFAULT_MAX_CHARS
from engramdb.json_format import scope_to_json
from engramdb.settings import (
    db_label,
    open_store,
    parse_scope,
)
from engramdb.store import GetVectors, PutVector, RegisterSpace
from engramdb.transfer import copy_memories
from engramdb.vector_check import TOLERANCE, active_space, cosines

from . import _io
from ._commands import Context
from ._folder import import_folder
from ._parser import BINDING, CliError, _positive_int, command
from ._progress import Progress
from ._render import print_json

__all__: list[str] = []


def _import_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add(
        "file",
        help="the file to import ('-': standard input), or a folder: each .md, .markdown "
        "and .txt file in it (and below; no link out of it) is remembered as a document, "
        "in chunks",
    )
    add(
        "--format",
        choices=["auto", "jsonl", "csv", "text"],
        default="auto",
        help=(
            "auto (default) goes by the extension: .jsonl, .ndjson or .json, .csv, else "
            "text; for - (standard input), JSON Lines if the first line is an object, "
            "else text"
        ),
    )
    add(
        "--batch-size",
        type=_positive_int,
        default=256,
        metavar="N",
        help="memories per atomic batch (default 256)",
    )
    vectors = sub.add_mutually_exclusive_group()
    vectors.add_argument(
        "--no-vectors",
        action="store_true",
        help="ignore the file's vectors and embed its texts, as for a file without vectors",
    )
    vectors.add_argument(
        "--trust-vectors",
        action="store_true",
        help=(
            "store the file's vectors as they are, unchecked and in any space (only for a "
            "file you made yourself); by default each is checked against its text"
        ),
    )
    add(
        "--max-chars",
        type=functools.partial(_positive_int, low=50),
        default=DEFAULT_MAX_CHARS,
        metavar="N",
        help=f"for a folder: the most characters of a chunk (default {DEFAULT_MAX_CHARS})",
    )


@command(
    "import",
    "remember every memory of a JSON Lines, CSV or text file, resumably",
    options=_import_options,
    creates=True,
)
def import_(ctx: Context) -> int:
    args = ctx.args
    if args.file != "-" and Path(args.file).is_dir():
        return import_folder(ctx, Path(args.file))
    data = _io.read_import(args.file, args.format)
    scope = ctx.settings.scope
    items = [{**item, "scope": scope} for item in data.items]
    memory = ctx.memory
    unchecked = _keep_checkable(ctx, data)
    _verify_vectors(ctx, data, args.file)
    now = datetime.now(UTC)  # what the memory's clock (the system's) reads, to the ms
    started = now.replace(microsecond=now.microsecond // 1000 * 1000)
    with Progress("import", len(items)) as progress:
        try:
            records = memory.remember_many(
                items,
                batch_size=args.batch_size,
                progress=progress,
                defer_embedding=True if data.vectors else None,
            )
        except ValidationError as exc:  # "item 12: ..." -> "notes.jsonl line 14: ..."
            match = re.match(r"item (\d+): (.*)", str(exc), re.DOTALL)
            if match is None:
                raise
            line = data.lines[int(match[1])]
            raise CliError(f"{args.file} line {line}: {match[2]}; nothing was stored") from None
    vectors = _put_vectors(memory, data)
    distinct = {record.id: record for record in records}.values()
    new = sum(record.created_at >= started for record in distinct)
    result = {
        "read": len(items),
        "memories": len(distinct),
        "new": new,
        "existing": len(distinct) - new,
        "vectors": vectors,
        "scope": scope_to_json(scope),
    }
    if data.vectors or unchecked:
        result["pending"] = memory.status().pending
    if unchecked:
        result["vectors_left_out"] = unchecked
    if ctx.json:
        print_json(result)
    else:
        print(
            f"imported {len(items)} lines into scope {ctx.scope_text}: {len(distinct)} "
            f"distinct memories, {new} new and {len(distinct) - new} already there"
            + (f", {vectors} vectors" if data.vectors else "")
        )
        if unchecked:
            print(
                f"{unchecked} vectors of the file were left out: the active embedder cannot "
                "check them (another space, or a text that redaction changes)",
                file=sys.stderr,
            )
        if result.get("pending"):
            print(
                f"{result['pending']} memories have no vector in the active space: run "
                "`engramdb maintain` to embed them",
                file=sys.stderr,
            )
    return 0


def _keep_checkable(ctx: Context, data: _io.Import) -> int:
    """Leave out (and count) the file's vectors that the active embedder cannot check,
    so that none can decide how a text is ranked: with ``--no-vectors``, all of them;
    else those of another space than the active one, and those of a text that redaction
    changes (a vector of the text before redaction). Their memories stay pending.
    ``--trust-vectors`` keeps those of every space, unchecked."""
    if not data.vectors:
        return 0
    memory = ctx.memory
    active = active_space(memory.embedder)
    redact = redact_secrets if ctx.settings.redact else None
    keep = {
        key: raw
        for key, raw in data.vectors.items()
        if not ctx.args.no_vectors
        and (ctx.args.trust_vectors or key[0] == active)
        and (redact is None or redact(data.vector_lines[key][1]) == data.vector_lines[key][1])
    }
    left_out = len(data.vectors) - len(keep)
    data.vectors = keep
    data.spaces = {space: data.spaces[space] for space, _ in keep}
    return left_out


def _verify_vectors(ctx: Context, data: _io.Import, path: str) -> None:
    """Check every vector of the file against its text embedded now (all of them: a
    sample cannot catch one forged line among thousands) and refuse the whole file when
    one does not belong to its text (cosine below ``TOLERANCE``): nothing is stored. The
    text's own vector, as a write stores it, is the one put. ``--trust-vectors`` checks
    nothing."""
    if ctx.args.trust_vectors or not data.vectors:
        return
    keys = sorted(data.vectors)
    pairs = [(data.vector_lines[key][1], data.vectors[key]) for key in keys]
    _space, found = cosines(ctx.memory.embedder, pairs)
    for key, (cosine, fresh) in zip(keys, found, strict=True):
        if cosine < TOLERANCE:
            raise CliError(
                f"{path} line {data.vector_lines[key][0]}: its vector does not belong to its "
                f"text (cosine {cosine:.3f} to the text embedded now in {key[0]}, below "
                f"{TOLERANCE}); nothing was stored. Import with --no-vectors to embed the "
                "texts again instead"
            )
        data.vectors[key] = fresh


def _put_vectors(memory: Memory, data: _io.Import) -> int:
    """Store the file's checked vectors (registering their spaces), never over a vector
    the store holds: no embedder call."""
    if not data.vectors:
        return 0
    now = datetime.now(UTC)
    memory.store.batch([RegisterSpace(space, now) for space in data.spaces.values()])
    ops = [
        PutVector(space, sha, raw, now, replace=False) for (space, sha), raw in data.vectors.items()
    ]
    for start in range(0, len(ops), 500):
        memory.store.batch(ops[start : start + 500])
    return len(ops)


def _export_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("--output", "-o", metavar="FILE", help="write to FILE instead of standard output")
    add(
        "--with-vectors",
        action="store_true",
        help="add each memory's vector (base64 of little-endian float32) and space",
    )


@command("export", "write the memories of the bound scope as JSON Lines", options=_export_options)
def export(ctx: Context) -> int:
    args = ctx.args
    memory = ctx.memory
    records = []
    before = None
    while True:
        page = memory.list(ctx.settings.scope, limit=1000, before=before)
        records.extend(page)
        if len(page) < 1000:
            break
        before = page[-1].id
    records.reverse()  # oldest first: an import creates them in the same order
    vectors: dict[str, bytes] = {}
    space = memory.status().active_space if args.with_vectors else None
    if space is not None:
        hashes = list(dict.fromkeys(r.content_sha256 for r in records))
        for start in range(0, len(hashes), 1000):
            chunk = tuple(hashes[start : start + 1000])
            (stored,) = memory.store.batch([GetVectors(space, chunk)])
            vectors.update((sha, raw) for sha, (raw, _at) in stored.items())
    out = _io.open_output(args.output)
    try:
        for record in records:
            raw = vectors.get(record.content_sha256)
            vector = None if space is None or raw is None else (space, raw)
            out.write(_io.export_line(record, vector) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    if args.output is not None:
        print(
            f"exported {len(records)} memories of scope {ctx.scope_text} to {args.output}",
            file=sys.stderr,
        )
    return 0


def _copy_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("target", metavar="TARGET", help="a postgresql:// URL or a SQLite file")
    add("--prefix", metavar="SCOPE", help="only the scopes under SCOPE (e.g. acme/user)")


@command(
    "copy",
    "copy every scope's memories and vectors into another database, resumably",
    options=_copy_options,
    ignores=BINDING,
)
def copy(ctx: Context) -> int:
    args = ctx.args
    prefix = parse_scope(args.prefix) if args.prefix else ()
    source = ctx.memory.store
    with Progress("copy", None) as progress, open_store(args.target) as target:
        report = copy_memories(source, target, prefix=prefix, progress=progress)
    result = {
        "from": ctx.settings.db_label,
        "to": db_label(args.target),
        "scopes": report.scopes,
        "copied": report.copied,
        "skipped": report.skipped,
        "vectors": report.vectors,
    }
    if ctx.json:
        print_json(result)
    else:
        print(
            f"copied {report.copied} memories of {report.scopes} scopes and {report.vectors} "
            f"vectors to {result['to']}"
            + (f" ({report.skipped} already there)" if report.skipped else "")
        )
    return 0


def _backup_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("file", metavar="FILE", help="the backup file to write ('-': standard output)")
    add("--prefix", metavar="SCOPE", help="only the scopes under SCOPE (default: every scope)")


@command(
    "backup",
    "write a full backup (ids, times, history, evidence, vectors) of every scope",
    options=_backup_options,
    ignores=BINDING,
)
def backup(ctx: Context) -> int:
    args = ctx.args
    prefix = parse_scope(args.prefix) if args.prefix else ()
    store = ctx.memory.store
    out = _io.open_output(None if args.file == "-" else args.file)
    try:
        report = write_backup(store, out, prefix)
    finally:
        if out is not sys.stdout:
            out.close()
    result = {
        "file": args.file,
        "scopes": report.scopes,
        "memories": report.items,
        "revisions": report.revisions,
        "evidence": report.evidence,
        "vectors": report.vectors,
        "unreadable": list(report.unreadable),
    }
    if ctx.json and args.file != "-":
        print_json(result)
    else:
        print(
            f"backed up {report.items} memories of {report.scopes} scopes "
            f"({report.revisions} earlier revisions, {report.vectors} vectors) to {args.file}",
            file=sys.stderr,
        )
    if report.unreadable:
        raise CliError(
            f"{len(report.unreadable)} memories could not be read and are NOT in the backup "
            f"({_shown_ids(report.unreadable)}): their stored rows are damaged; `engramdb "
            "doctor` lists them, `engramdb forget ID` removes one"
        )
    return 0


def _shown_ids(ids: tuple[str, ...]) -> str:
    more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
    return "ids " + ", ".join(ids[:5]) + more


def _restore_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("file", metavar="FILE", help="the backup file to restore ('-': standard input)")
    add(
        "--on-conflict",
        choices=["refuse", "skip", "replace"],
        default="refuse",
        help=(
            "when the database holds an id of the backup: refuse (default: restore "
            "nothing), skip (keep the database's), replace (overwrite it with the backup's)"
        ),
    )
    add(
        "--trust-vectors",
        action="store_true",
        help=(
            "store the backup's vectors as they are, unchecked (only for a backup you made "
            "yourself); by default those of the active embedder's space are checked by "
            "embedding their texts again, and the others are left out"
        ),
    )
    add(
        "--batch-size",
        type=_positive_int,
        default=None,
        metavar="N",
        help="write N memories per atomic batch (default: all in one, all or nothing)",
    )


@command(
    "restore",
    "restore a backup into its own scopes: ids, times, history, evidence, vectors",
    options=_restore_options,
    creates=True,
    ignores=BINDING,
)
def restore(ctx: Context) -> int:
    args = ctx.args
    text = _io.read_text(args.file, "backup file")
    try:  # the whole file is checked before the database opens
        data = read_backup(text.split("\n"), args.file)
    except EngramError as exc:
        raise CliError(str(exc)) from None
    if not data.ended:
        print(
            f"note: {args.file} is a format-1 backup (engramdb 0.2.0): it has no end marker, "
            "so a file cut short cannot be told from a whole one",
            file=sys.stderr,
        )
    memory = ctx.memory
    embedder = None if args.trust_vectors else memory.embedder
    if embedder is not None and any(item.vectors for item in data.items):
        active_space(embedder)  # an embedder that learns its size learns it now
    report = restore_backup(
        memory.store,
        data,
        args.on_conflict,
        batch_size=args.batch_size,
        source=args.file,
        embedder=embedder,
        trust_vectors=args.trust_vectors,
    )
    result = {
        "file": args.file,
        "restored": report.restored,
        "skipped": report.skipped,
        "replaced": report.replaced,
        "vectors": report.vectors,
        "vectors_checked": report.vectors_checked,
        "vectors_left_out": report.vectors_left_out,
        "spaces": report.spaces,
        "unreadable": list(report.unreadable),
    }
    if ctx.json:
        print_json(result)
    else:
        print(
            f"restored {report.restored} memories and {report.vectors} vectors from {args.file}"
            + (f" ({report.skipped} already there, kept)" if report.skipped else "")
            + (f" ({report.replaced} replaced)" if report.replaced else "")
        )
        how = (
            "stored as they are (--trust-vectors)"
            if args.trust_vectors
            else f"checked against their texts embedded again in {memory.embedder.space.id}"
        )
        left_out = (
            f"; {report.vectors_left_out} of other spaces left out (their memories are "
            "pending: `engramdb maintain` or `reindex` embeds them)"
            if report.vectors_left_out
            else ""
        )
        print(f"vectors: {report.vectors} {how}{left_out}", file=sys.stderr)
    if report.unreadable:
        print(
            f"note: {len(report.unreadable)} memories of the backed-up database could not be "
            f"read when it was taken and are not in it ({_shown_ids(report.unreadable)})",
            file=sys.stderr,
        )
    return 0
