"""The ``engramdb`` commands that look after a database and run its servers: reindex,
maintain, status, doctor, migrate, clear, demo, mcp, serve (one record each: options,
help and body; see ``_parser``)."""

from __future__ import annotations

import argparse
import importlib
import math
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any
from urllib.parse import quote

from engramdb import EngramError, Maintainer, Memory, __version__
from engramdb.json_format import scope_to_json
from engramdb.settings import (
    DEFAULT_EMBEDDER,
    ENVIRONMENT,
    find_config,
    open_store,
    resolve,
    safe_label,
)
from engramdb.store import (
    DropSpace,
    ListScopes,
    PutVector,
    RepairVectors,
    ScopeSet,
    UnreadableItems,
)
from engramdb.stores import store_kind
from engramdb.transfer import SqliteVectors
from engramdb.vector_check import TOLERANCE, active_space, cosines

from ._commands import Context
from ._parser import BINDING, CliError, UsageError, _positive_int, _seconds, command
from ._progress import Progress
from ._render import print_json, report_dict, unescaped_output

__all__: list[str] = []


def _reindex_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("--full", action="store_true", help="drop the active space's vectors first")


@command(
    "reindex",
    "embed every pending memory (--full: re-embed everything)",
    options=_reindex_options,
    ignores=BINDING,
)
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


def _maintain_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("--watch", action="store_true", help="run passes on a schedule until stopped")
    add(
        "--max-items",
        type=_positive_int,
        default=1000,
        metavar="N",
        help="work per pass (default 1000)",
    )
    add(
        "--interval",
        type=_seconds,
        default=300.0,
        metavar="SECONDS",
        help="between passes with --watch (default 300)",
    )


@command(
    "maintain",
    "run a maintenance pass (--watch: on a schedule until stopped)",
    options=_maintain_options,
    ignores=BINDING,
)
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

    def wait(seconds: float) -> None:
        """Between passes: say how the last one went (stderr), then wait."""
        done = maintainer.snapshot
        shown = round(seconds) if seconds >= 1 else round(seconds, 3)  # whole seconds
        print(
            f"pass {done.runs} done ({done.failures} failed so far); the next in {shown:g} s",
            file=sys.stderr,
        )
        time.sleep(seconds)

    try:
        maintainer.run_forever(sleep=wait)
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


@command(
    "status",
    "counts, pending embeddings, spaces and schema version",
    ignores=frozenset({"session"}),
)
def status(ctx: Context) -> int:
    report = report_dict(ctx.memory.status())
    report["db"] = ctx.settings.db_label
    report["scope"] = scope_to_json(ctx.settings.scope)
    if ctx.json:
        print_json(report)
    else:
        report["scope"] = ctx.scope_text
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


@command(
    "config",
    "the settings in use and where each came from: option, environment, config file or default",
)
def config(ctx: Context) -> int:
    settings = ctx.settings
    db, embedder = safe_label(settings.db), safe_label(settings.embedder or DEFAULT_EMBEDDER)
    reranker = None if settings.reranker is None else safe_label(settings.reranker)
    session = None if settings.session is None else safe_label(settings.session)
    # each setting: its value in JSON, and as text (credentials never shown: the check
    # of the config file refuses what safe_label hides, unless allow_secrets = true)
    shown: dict[str, tuple[Any, str]] = {
        "db": (db, db),
        "embedder": (embedder, embedder),
        "scope": ([safe_label(part) for part in settings.scope], safe_label(ctx.scope_text)),
        "session": (session, session or "none"),
        "redact": (settings.redact, "secrets" if settings.redact else "off"),
        "maintain": (settings.maintain, "on" if settings.maintain else "off"),
        "reranker": (reranker, reranker or "none"),
    }
    sources = {
        name: f"environment {ENVIRONMENT[name]}" if source == "environment" else source
        for name, source in settings.sources.items()
    }
    if ctx.json:
        print_json(
            {
                "config_file": settings.config_file,
                "settings": {
                    name: {"value": value, "from": settings.sources[name]}
                    for name, (value, _) in shown.items()
                },
            }
        )
        return 0
    path, _ = find_config(ctx.args.config, os.environ)
    if settings.config_file is not None:
        print(f"{'config file':>11}: {settings.config_file}")
    elif path is not None:
        print(f"{'config file':>11}: none ({path} does not exist)")
    else:
        print(f"{'config file':>11}: none (no HOME: pass --config or set ENGRAMDB_CONFIG)")
    for name, (_, text) in shown.items():
        print(f"{name:>11}: {text}  ({sources[name]})")
    return 0


PROBE_PHRASE = "engramdb doctor probe: a short fixed phrase"


def _doctor_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add(
        "--probe",
        action="store_true",
        help="embed one fixed phrase: print the space, dimensions, finiteness and norm",
    )
    add(
        "--verify-vectors",
        type=_positive_int,
        metavar="N",
        help=(
            "embed the texts of N stored vectors of the active space (picked at random) "
            "again and report the memories whose vector does not belong to their text"
        ),
    )
    add(
        "--repair",
        action="store_true",
        help="with --verify-vectors: put the vectors embedded now in place of those",
    )


@command(
    "doctor",
    "check the database: integrity, vectors, pending, schema",
    options=_doctor_options,
    ignores=BINDING,
)
def doctor(ctx: Context) -> int:
    kind = store_kind(ctx.settings.db)
    if not kind.is_file:
        raise CliError(
            f"doctor checks a SQLite file, not {kind.name}; for PostgreSQL run `engramdb "
            "status` and the server's own checks (amcheck, pg_dump)"
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
    unread = _unreadable_items(memory)
    result: dict[str, Any] = {
        "engramdb": __version__,
        "db": ctx.settings.db_label,
        "schema_version": report.schema_version,
        "integrity": integrity,
        "corrupt_vectors": corrupt,
        "unreadable_memories": unread,
        "pending": report.pending,
        "active_space": report.active_space,
        "embedded": report.embedded,
    }
    if ctx.args.probe:
        result["probe"] = _probe(memory)
    if ctx.args.repair and not ctx.args.verify_vectors:
        raise CliError("--repair goes with --verify-vectors N; add it")
    if ctx.args.verify_vectors:
        result["foreign_vectors"] = _verify_vectors(ctx, ctx.args.verify_vectors)
    problems = []
    if integrity != "ok":
        problems.append(f"integrity check: {integrity}")
    if corrupt:
        problems.append(f"{corrupt} corrupt vectors (`engramdb maintain` repairs them)")
    if unread:
        problems.append(
            f"{len(unread)} memories whose stored row does not read "
            f"({', '.join(unread[:10])}): every listing, search and backup leaves them "
            "out; `engramdb forget ID` removes one (or restore it from a backup)"
        )
    foreign = result.get("foreign_vectors")
    if foreign is not None and foreign["ids"] and not foreign["repaired"]:
        problems.append(
            f"{len(foreign['ids'])} memories hold a vector that does not belong to their "
            f"text ({', '.join(foreign['ids'][:10])}): `engramdb doctor --verify-vectors "
            f"{ctx.args.verify_vectors} --repair` puts the vectors embedded now in their "
            "place (`engramdb reindex --full` embeds every text again)"
        )
    probe = result.get("probe")
    if probe is not None and not probe["finite"]:
        problems.append("the embedder returned a vector that is not finite")
    result["problems"] = problems
    if ctx.json:
        print_json(result)
    else:
        for key in (
            "engramdb",
            "db",
            "schema_version",
            "integrity",
            "corrupt_vectors",
            "pending",
            "active_space",
        ):
            print(f"{key:>15}: {result[key]}")
        print(f"{'unreadable':>15}: {len(unread)} memories")
        for space, count in report.embedded.items():
            print(f"{'embedded':>15}: {count} in {space}")
        if probe is not None:
            print(
                f"{'probe':>15}: space {probe['space']}, {probe['dimensions']} dimensions, "
                f"finite {probe['finite']}, norm {probe['norm']:.4f}"
            )
        if foreign is not None:
            print(
                f"{'verified':>15}: {foreign['checked']} vectors in {foreign['space']}, "
                f"{len(foreign['ids'])} memories with a vector of another text"
                + (" (repaired)" if foreign["repaired"] and foreign["ids"] else "")
            )
    if problems:
        raise CliError("doctor found a problem: " + "; ".join(problems))
    return 0


def _unreadable_items(memory: Memory) -> list[str]:
    """The ids of the live memories whose stored row does not decode, scope by scope."""
    now = datetime.now(UTC)
    found: list[str] = []
    after: tuple[str, ...] | None = None
    while True:
        (page,) = memory.store.batch([ListScopes((), 100, now, after)])
        if page:
            found += [
                item_id
                for ids in memory.store.batch(
                    [UnreadableItems(ScopeSet.of(entry.scope), now) for entry in page]
                )
                for item_id in ids
            ]
        if len(page) < 100:
            return found
        after = page[-1].scope


def _verify_vectors(ctx: Context, limit: int) -> dict[str, Any]:
    """Embed the texts of up to ``limit`` stored vectors of the active space again: the
    ids of the memories whose vector is below ``TOLERANCE`` of its text's (never the
    texts), and with ``--repair`` the fresh vectors put in their place."""
    memory = ctx.memory
    space = active_space(memory.embedder)
    sampled = SqliteVectors(ctx.settings.db).sample(space, limit)
    _, found = cosines(memory.embedder, [(text, raw) for _, raw, text, _ in sampled])
    bad = [
        (sha, fresh, ids)
        for (sha, _, _, ids), (cosine, fresh) in zip(sampled, found, strict=True)
        if cosine < TOLERANCE
    ]
    if ctx.args.repair and bad:
        now = datetime.now(UTC)
        memory.store.batch(
            [PutVector(space, sha, fresh, now, replace=True) for sha, fresh, _ in bad if fresh]
        )
    return {
        "space": space,
        "checked": len(sampled),
        "ids": [id for _, _, ids in bad for id in ids],
        "repaired": bool(ctx.args.repair),
    }


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


@command(
    "migrate",
    "bring the database to the current schema",
    ignores=BINDING | {"embedder"},
    read_only=False,
)
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


def _clear_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("--confirm", action="store_true", help="needed: without it nothing is deleted")
    add(
        "--all",
        action="store_true",
        help="delete every memory of every scope too, not only the vectors",
    )


@command(
    "clear",
    "delete every stored vector (the memories stay, to embed again; --all: every memory "
    "too); needs --confirm",
    options=_clear_options,
    ignores=BINDING,
)
def clear(ctx: Context) -> int:
    args = ctx.args
    db = ctx.settings.db_label
    if not args.confirm:
        what = (
            f"every memory of every scope of {db} and every vector"
            if args.all
            else f"every vector of {db} (the memories stay, without vectors, until "
            "`engramdb reindex` or `engramdb maintain` embeds them again)"
        )
        raise UsageError(f"clear{' --all' if args.all else ''} deletes {what}; add --confirm")
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
    elif args.all:
        print(f"deleted {forgotten} memories and {dropped} vectors; {db} holds no memory")
    else:
        kept = memory.status().items
        print(
            f"deleted {dropped} vectors; the {kept} memories stay, without vectors (recall "
            "finds them by words only) until `engramdb reindex` or `engramdb maintain` "
            "embeds them again"
        )
    return 0


@command(
    "demo",
    "remember a few facts in two scopes and recall them",
    creates=True,
    ignores=BINDING | {"json"},
    read_only=False,
)
def demo(ctx: Context) -> int:
    from engramdb.demo import run_demo

    # Its own file unless --db names one: the demo's facts stay out of your database.
    args = ctx.args
    return run_demo(
        resolve(db=args.db or "engramdb-demo.db", embedder=args.embedder, config=args.config)
    )


# Each server: its module and the optional package it cannot start without (a missing
# one is reported as every command reports it: the install line, from _errors.EXTRAS).
# Its options are its own (``argument_parser``), shown and checked by the command's
# parser; the global options it defines too (``--db`` ...; ``serve`` binds each request
# to its token's scope, so it defines no ``--scope``) are passed on from ours.
SERVERS = {"mcp": ("engramdb.mcp_server", "mcp"), "serve": ("engramdb.server", "uvicorn")}


# Registered in this order (a decorator applies from the bottom up): mcp, then serve.
# A server prints no stored text and no JSON of ours: it has no use for --json and --raw.
@command(
    "serve",
    "run the HTTP server (engramdb.server)",
    server=SERVERS["serve"][0],
    ignores=BINDING | {"json", "raw"},
    read_only=False,
)
@command(
    "mcp",
    "run the MCP server over stdio (engramdb.mcp_server)",
    server=SERVERS["mcp"][0],
    ignores=frozenset({"json", "raw"}),
    read_only=False,
)
def server(ctx: Context) -> int:
    args = ctx.args
    module_name, package = SERVERS[args.command]
    try:
        importlib.import_module(package)
    except ModuleNotFoundError as exc:
        raise ImportError(
            f"`engramdb {args.command}` needs {package}, which is not installed"
        ) from exc
    module = importlib.import_module(module_name)
    main: Callable[[list[str]], int | None] = module.main
    with unescaped_output():  # the server's protocol (mcp's standard output) and logs
        return main(_server_argv(module.argument_parser(), args)) or 0


def _server_argv(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The options of ``parser`` (a server's) that ``args`` sets to other than their
    defaults, as the server's command line."""
    argv: list[str] = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or value is None or value == action.default:
            continue
        flag = max(action.option_strings, key=len)
        argv += [flag] if action.nargs == 0 else [flag, str(value)]
    return argv
