"""One function per ``engramdb`` command: ``run(context) -> exit status``."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import re
import signal
import sqlite3
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any
from urllib.parse import quote

from engramdb import BoundMemory, EngramError, Maintainer, Memory, ValidationError
from engramdb.settings import (
    Settings,
    db_label,
    format_scope,
    is_postgres,
    open_store,
    parse_scope,
    resolve,
)
from engramdb.store import DropSpace, PutVector, RegisterSpace, RepairVectors
from engramdb.transfer import SqliteVectors, copy_memories

from . import _io
from ._parser import CliError, UsageError
from ._progress import Progress
from ._render import hit_dict, human_record, print_json, record_dict, report_dict

__all__ = ["COMMANDS", "Context"]


CREATES = ("add", "import", "demo")  # the commands that may create the database file


class Context:
    """The parsed arguments, the resolved settings and, once opened, the memory."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.json: bool = bool(args.json)
        self.settings: Settings = resolve(
            db=args.db, embedder=args.embedder, scope=args.scope, session=args.session
        )
        self._memory: Memory | None = None

    @property
    def memory(self) -> Memory:
        if self._memory is None:
            db = self.settings.db
            exists = db == ":memory:" or is_postgres(db) or os.path.exists(db)
            if self.args.command not in CREATES and not exists:
                raise CliError(
                    f"the database {db!r} does not exist; check --db or ENGRAMDB_DB "
                    "(add and import create it)"
                )
            self._memory = self.settings.open()
        return self._memory

    @property
    def bound(self) -> BoundMemory:
        return self.memory.bind(self.settings.scope, session=self.settings.session)

    @property
    def scope_text(self) -> str:
        return format_scope(self.settings.scope)

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()


def _json_object(option: str, text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{option} {text!r} is not JSON ({exc.msg}); write an object such as "
            '\'{"src": "chat"}\''
        ) from None
    if not isinstance(value, dict):
        raise UsageError(f'{option} {text!r} must be a JSON object such as \'{{"src": "chat"}}\'')
    return value


def _labels(pairs: list[str]) -> dict[str, list[str]] | None:
    labels: dict[str, list[str]] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UsageError(f"--label {pair!r} must be NAME=VALUE, e.g. --label topic=food")
        labels.setdefault(name.strip(), []).append(value.strip())
    return labels or None


def _expiry(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--expires {text!r} is not ISO 8601; write e.g. 2027-01-31T12:00:00Z"
        ) from None
    if value.tzinfo is None:
        raise UsageError(f"--expires {text!r} has no time zone; add one, e.g. Z or +02:00")
    return value


def add(ctx: Context) -> int:
    args = ctx.args
    metadata = _json_object("--metadata", args.metadata)
    labels = _labels(args.label)
    expires_at = _expiry(args.expires)
    options: dict[str, Any] = {"metadata": metadata, "labels": labels}
    if args.importance is not None:
        options["importance"] = args.importance
    record = ctx.bound.remember(args.text, expires_at=expires_at, ttl=args.ttl, **options)
    if ctx.json:
        print_json(record_dict(record))
    else:
        print(record.id)
    return 0


def search(ctx: Context) -> int:
    args = ctx.args
    filter_ = _json_object("--filter", args.filter)
    hits = ctx.bound.recall(args.query, top_k=args.top_k, mode=args.mode, filter=filter_)
    if hits.status != "used":
        coverage = "" if hits.coverage is None else f", coverage {hits.coverage:.0%}"
        error = "" if hits.error is None else f", {hits.error}"
        print(f"recall status: {hits.status}{coverage}{error}", file=sys.stderr)
    for rank, hit in enumerate(hits, 1):
        if ctx.json:
            print_json(hit_dict(hit))
            continue
        print(f"{rank}. {hit.score:.4f}  {hit.memory.text}  ({hit.memory.id})")
        if args.explain:
            data = hit_dict(hit)
            similarity = "-" if hit.similarity is None else f"{hit.similarity:.4f}"
            bm25 = "-" if hit.bm25 is None else f"{hit.bm25:.4g}"
            print(
                f"   vector rank {hit.vector_rank or '-'}, lexical rank "
                f"{hit.lexical_rank or '-'}, similarity {similarity}, bm25 {bm25}, "
                f"boosts {json.dumps(data['boosts'], sort_keys=True)}"
            )
            evidence = data["evidence"]
            print(
                f"   evidence: scope {evidence['scope']}, revision {evidence['revision']}, "
                f"space {evidence['space_id']}, embedded {evidence['embedded_at']}, "
                f"sha256 {evidence['content_sha256'][:16]}"
            )
    if not hits and not ctx.json:
        print(f"no memory of scope {ctx.scope_text} matches", file=sys.stderr)
    return 0


def list_(ctx: Context) -> int:
    records = ctx.memory.list(ctx.settings.scope, limit=ctx.args.limit)
    for record in records:
        if ctx.json:
            print_json(record_dict(record))
        else:
            print(human_record(record))
    if not records and not ctx.json:
        print(f"scope {ctx.scope_text} holds no memories", file=sys.stderr)
    return 0


def scopes(ctx: Context) -> int:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = ctx.memory.list_scopes(limit=100, cursor=cursor)
        found.extend({"scope": format_scope(s.scope), "items": s.items} for s in page)
        if len(page) < 100:
            break
        cursor = page[-1].scope
    if ctx.json:
        print_json(found)
    else:
        for entry in found:
            print(f"{entry['items']:>8}  {entry['scope']}")
    return 0


def _visible(ctx: Context, id: str) -> Any:
    record = ctx.bound.get(id)
    if record is None:
        raise CliError(
            f"no memory {id!r} in scope {ctx.scope_text}; check the id, or pass the "
            "memory's --scope (engramdb scopes lists them)"
        )
    return record


def get(ctx: Context) -> int:
    record = _visible(ctx, ctx.args.id)
    if ctx.json:
        print_json(record_dict(record))
    else:
        print(human_record(record))
    return 0


def history(ctx: Context) -> int:
    _visible(ctx, ctx.args.id)
    revisions = ctx.memory.history(ctx.args.id, limit=100)
    if ctx.json:
        print_json([record_dict(r) for r in revisions])
    else:
        for record in revisions:
            print(human_record(record))
        if not revisions:
            print(f"{ctx.args.id} has no earlier revisions", file=sys.stderr)
    return 0


def forget(ctx: Context) -> int:
    args = ctx.args
    if args.id is not None:
        if not ctx.bound.forget(args.id):
            _visible(ctx, args.id)  # raises: not found in the bound scope
        result: dict[str, Any] = {"forgotten": 1, "id": args.id}
        text = f"forgot {args.id}"
    else:
        if not args.confirm:
            raise UsageError(
                f"forget without an ID deletes every memory of scope {ctx.scope_text}; "
                "add --confirm to do it"
            )
        count = ctx.memory.forget_scope(ctx.settings.scope)
        result = {"forgotten": count, "scope": ctx.scope_text}
        text = f"forgot {count} memories of scope {ctx.scope_text}"
    print_json(result) if ctx.json else print(text)
    return 0


def import_(ctx: Context) -> int:
    args = ctx.args
    data = _io.read_import(args.file, args.format)
    scope = ctx.settings.scope
    items = [{**item, "scope": scope} for item in data.items]
    memory = ctx.memory
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
    distinct = len({record.id for record in records})
    result = {
        "read": len(items),
        "memories": distinct,
        "vectors": vectors,
        "scope": format_scope(scope),
    }
    if data.vectors:
        result["pending"] = memory.status().pending
    if ctx.json:
        print_json(result)
    else:
        print(
            f"imported {len(items)} lines into scope {result['scope']}: {distinct} distinct "
            f"memories" + (f", {vectors} vectors" if data.vectors else "")
        )
        if result.get("pending"):
            print(
                f"{result['pending']} memories have no vector in the active space: run "
                "`engramdb maintain` to embed them",
                file=sys.stderr,
            )
    return 0


def _put_vectors(memory: Memory, data: _io.Import) -> int:
    """Store imported vectors as they are (registering their spaces): no embedder call."""
    if not data.vectors:
        return 0
    now = datetime.now(UTC)
    memory.store.batch([RegisterSpace(space, now) for space in data.spaces.values()])
    ops = [PutVector(space, sha, raw, now) for (space, sha), raw in data.vectors.items()]
    for start in range(0, len(ops), 500):
        memory.store.batch(ops[start : start + 500])
    return len(ops)


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
        if is_postgres(ctx.settings.db):
            raise CliError(
                "export --with-vectors reads a SQLite file; export from PostgreSQL without "
                "it (the target embeds again with `engramdb maintain`)"
            )
        stored = SqliteVectors(ctx.settings.db).read(space, [r.content_sha256 for r in records])
        vectors = {sha: raw for sha, (raw, _at) in stored.items()}
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


def copy(ctx: Context) -> int:
    args = ctx.args
    prefix = parse_scope(args.prefix) if args.prefix else ()
    source = ctx.memory.store
    vectors = None if is_postgres(ctx.settings.db) else SqliteVectors(ctx.settings.db)
    with Progress("copy", None) as progress, open_store(args.target) as target:
        report = copy_memories(source, target, prefix=prefix, vectors=vectors, progress=progress)
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
    if vectors is None:
        print(
            "vectors are not copied from PostgreSQL: run `engramdb maintain` on the target "
            "to embed the memories",
            file=sys.stderr,
        )
    return 0


def reindex(ctx: Context) -> int:
    memory = ctx.memory
    dropped = 0
    space = memory.status().active_space
    if ctx.args.full and space is not None:
        (dropped,) = memory.store.batch([DropSpace(space)])
    with Progress("reindex", memory.status().pending) as progress:
        embedded = memory.reindex(progress=progress)  # progress(embedded so far)
    result = {"embedded": embedded, "dropped": dropped, "space": memory.status().active_space}
    if ctx.json:
        print_json(result)
    else:
        print(
            f"embedded {embedded} texts in space {result['space']}"
            + (f" (dropped {dropped} vectors first)" if ctx.args.full else "")
        )
    return 0


class _Stop(BaseException):
    """SIGTERM arrived: stop the watch loop (a BaseException, like KeyboardInterrupt, so
    that the Maintainer does not count it as a failed pass and go on)."""


def maintain(ctx: Context) -> int:
    args = ctx.args
    memory = ctx.memory
    if not args.watch:
        report = memory.maintain(max_items=args.max_items)
        if ctx.json:
            print_json(report_dict(report))
        else:
            print(
                f"embedded {report.embedded}, repaired {report.repaired}, purged "
                f"{report.purged}, pending {report.pending}"
            )
        return 0
    maintainer = Maintainer(
        memory, interval=timedelta(seconds=args.interval), max_items=args.max_items
    )

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise _Stop

    previous = signal.signal(signal.SIGTERM, on_term)
    print(
        f"maintaining {ctx.settings.db_label} every {args.interval:g} s; Ctrl-C stops",
        file=sys.stderr,
    )
    try:
        maintainer.run_forever()
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    snapshot = maintainer.snapshot
    result = {
        "runs": snapshot.runs,
        "successes": snapshot.successes,
        "failures": snapshot.failures,
        "last_error": snapshot.last_error,
    }
    print_json(result) if ctx.json else print(
        f"stopped after {snapshot.runs} passes ({snapshot.failures} failed)"
    )
    return 0


def status(ctx: Context) -> int:
    report = report_dict(ctx.memory.status())
    report["db"] = ctx.settings.db_label
    report["scope"] = ctx.scope_text
    if ctx.json:
        print_json(report)
    else:
        for key in (
            "db",
            "scope",
            "items",
            "expired",
            "scopes",
            "pending",
            "vectors",
            "active_space",
            "semantic",
            "schema_version",
        ):
            print(f"{key:>15}: {report[key]}")
        for space, count in report["embedded"].items():
            print(f"{'embedded':>15}: {count} in {space}")
        if report["pending"]:
            print(
                f"\n{report['pending']} memories have no vector in {report['active_space']} "
                "yet (the embedder changed, or embedding failed or was deferred): recall "
                "finds them by words only and says 'partial' until `engramdb reindex` "
                "embeds them"
            )
    return 0


PROBE_PHRASE = "engramdb doctor probe: a short fixed phrase"


def doctor(ctx: Context) -> int:
    if is_postgres(ctx.settings.db):
        raise CliError(
            "doctor checks a SQLite file; for PostgreSQL run `engramdb status` and the "
            "server's own checks (amcheck, pg_dump)"
        )
    integrity = _integrity(ctx.settings.db)
    try:
        version, head = _schema_versions(ctx.settings.db)
    except EngramError as exc:  # not SQLite, damaged, or a schema this engramdb cannot read
        unreadable: dict[str, object] = {
            "db": ctx.settings.db_label,
            "integrity": integrity,
            "problems": [str(exc)],
        }
        print_json(unreadable) if ctx.json else print(
            f"{ctx.settings.db_label}: integrity {integrity}"
        )
        raise CliError(f"doctor found a problem: {exc}") from exc
    if version is not None and version < head:  # report it; opening would migrate it
        found = {"db": ctx.settings.db_label, "schema_version": version, "integrity": integrity}
        print_json(found) if ctx.json else print(
            f"{ctx.settings.db_label}: schema version {version}, integrity {integrity}"
        )
        raise CliError(
            f"the database has schema version {version} and this engramdb needs {head}: "
            "run `engramdb migrate`"
        )
    memory = ctx.memory
    report = memory.status()
    corrupt = 0
    for space in report.spaces:
        after = ""
        while True:
            (repair,) = memory.store.batch([RepairVectors(space, 1000, after)])
            corrupt += len(repair.corrupt)
            if repair.last is None:
                break
            after = repair.last
    result: dict[str, Any] = {
        "db": ctx.settings.db_label,
        "schema_version": report.schema_version,
        "integrity": integrity,
        "corrupt_vectors": corrupt,
        "pending": report.pending,
        "active_space": report.active_space,
        "embedded": report.embedded,
    }
    if ctx.args.probe:
        result["probe"] = _probe(memory)
    problems = []
    if integrity != "ok":
        problems.append(f"integrity check: {integrity}")
    if corrupt:
        problems.append(f"{corrupt} corrupt vectors (`engramdb maintain` repairs them)")
    probe = result.get("probe")
    if probe is not None and not probe["finite"]:
        problems.append("the embedder returned a vector that is not finite")
    result["problems"] = problems
    if ctx.json:
        print_json(result)
    else:
        for key in (
            "db",
            "schema_version",
            "integrity",
            "corrupt_vectors",
            "pending",
            "active_space",
        ):
            print(f"{key:>15}: {result[key]}")
        for space, count in report.embedded.items():
            print(f"{'embedded':>15}: {count} in {space}")
        if probe is not None:
            print(
                f"{'probe':>15}: space {probe['space']}, {probe['dimensions']} dimensions, "
                f"finite {probe['finite']}, norm {probe['norm']:.4f}"
            )
    if problems:
        raise CliError("doctor found a problem: " + "; ".join(problems))
    return 0


def _schema_versions(db: str) -> tuple[int | None, int]:
    """The database's schema version (None for ``:memory:`` or a missing file) and the
    version this engramdb writes."""
    from engramdb import driver
    from engramdb.sqlite import SqliteStore

    head = len(driver.MIGRATIONS)
    if db == ":memory:" or not os.path.exists(db):
        return None, head
    with SqliteStore(db, migrate=False) as store:
        return store.schema_version, head


def _integrity(db: str) -> str:
    if db == ":memory:":
        return "ok"
    try:
        conn = sqlite3.connect(f"file:{quote(os.path.abspath(db))}?mode=ro", uri=True)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"cannot run ({exc})"
    return "; ".join(str(row[0]) for row in rows)


def _probe(memory: Memory) -> dict[str, Any]:
    """Embed the fixed phrase: only the space and the vector's shape are reported."""
    (vector,) = memory.embedder.embed([PROBE_PHRASE], "document")
    values = [float(x) for x in vector]
    finite = all(math.isfinite(x) for x in values)
    return {
        "space": memory.embedder.space.id,
        "dimensions": len(values),
        "finite": finite,
        "norm": math.sqrt(sum(x * x for x in values)) if finite else None,
    }


def migrate(ctx: Context) -> int:
    with open_store(ctx.settings.db, migrate=False) as store:
        before = store.schema_version
        ran = store.migrate()
        after = store.schema_version
    result = {"db": ctx.settings.db_label, "from": before, "to": after, "steps": ran}
    if ctx.json:
        print_json(result)
    else:
        print(f"{ctx.settings.db_label}: schema version {before} -> {after} ({ran} steps)")
    return 0


def clear(ctx: Context) -> int:
    args = ctx.args
    what = "every vector and every memory" if args.all else "every vector"
    if not args.confirm:
        raise UsageError(f"clear deletes {what} of {ctx.settings.db_label}; add --confirm to do it")
    memory = ctx.memory
    spaces = memory.status().spaces
    dropped = sum(memory.store.batch([DropSpace(space) for space in spaces])) if spaces else 0
    forgotten = 0
    if args.all:
        while True:
            page = memory.list_scopes(limit=100)
            if not page:
                break
            for entry in page:
                forgotten += memory.forget_scope(entry.scope)
    result = {"vectors": dropped, "memories": forgotten}
    if ctx.json:
        print_json(result)
    else:
        print(f"deleted {dropped} vectors" + (f" and {forgotten} memories" if args.all else ""))
    return 0


def demo(ctx: Context) -> int:
    from engramdb.demo import run_demo

    # Its own file unless --db names one: the demo's facts stay out of your database.
    args = ctx.args
    return run_demo(resolve(db=args.db or "engramdb-demo.db", embedder=args.embedder))


# Each server: its module, the extra that brings it, and the global options it takes
# (``serve`` binds each request to its token's scope, so it takes no scope of ours).
SERVERS = {
    "mcp": ("engramdb.mcp_server", "mcp", ("db", "embedder", "scope", "session")),
    "serve": ("engramdb.server", "server", ("db", "embedder")),
}


def server(ctx: Context) -> int:
    args = ctx.args
    module_name, extra, options = SERVERS[args.command]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise CliError(
            f"`engramdb {args.command}` needs {module_name} (missing: {exc.name}); "
            f"pip install 'engramdb[{extra}]'"
        ) from None
    forwarded: list[str] = []
    for option in options:
        value = getattr(args, option)
        if value is not None:
            forwarded += [f"--{option}", value]
    main: Callable[[list[str]], int | None] = module.main
    return main([*forwarded, *args.args]) or 0


COMMANDS: dict[str, Callable[[Context], int]] = {
    "add": add,
    "search": search,
    "list": list_,
    "scopes": scopes,
    "get": get,
    "history": history,
    "forget": forget,
    "import": import_,
    "export": export,
    "copy": copy,
    "reindex": reindex,
    "maintain": maintain,
    "status": status,
    "doctor": doctor,
    "migrate": migrate,
    "clear": clear,
    "demo": demo,
    "mcp": server,
    "serve": server,
}
