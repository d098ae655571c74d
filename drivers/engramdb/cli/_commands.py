"""The ``engramdb`` commands that read and write the bound scope: remember (alias add),
recall (alias search), similar, list, scopes, get, history, forget. Each command is one record:
its options (a function beside it), its one-line help and its body (``@command``, see
``_parser``); ``Context`` holds what a command runs with."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from functools import cached_property
from typing import Any

from engramdb import BoundMemory, Memory
from engramdb.json_format import record_to_json, scope_count_to_json, scope_to_json
from engramdb.settings import (
    Settings,
    db_label,
    format_scope,
    resolve,
)
from engramdb.stores import store_kind, unwritable

from ._io import read_text
from ._parser import (
    BINDING,
    COMMANDS,
    CliError,
    UsageError,
    _count,
    _positive_int,
    _seconds,
    command,
)
from ._render import human_record, print_hits, print_json

__all__ = ["Context"]


class Context:
    """The parsed arguments, the resolved settings and, once opened, the memory."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.json: bool = bool(args.json)
        self._memory: Memory | None = None

    @cached_property
    def settings(self) -> Settings:
        """Resolved when a command first needs them (``completion`` never does, so a bad
        config file does not stop it)."""
        args = self.args
        return resolve(
            db=args.db,
            embedder=args.embedder,
            scope=args.scope,
            session=args.session,
            config=args.config,
        )

    @property
    def memory(self) -> Memory:
        if self._memory is None:
            db = self.settings.db
            if not COMMANDS[self.args.command].creates and not store_kind(db).exists(db):
                raise CliError(
                    f"the database {db_label(db)!r} does not exist; check --db or ENGRAMDB_DB "
                    "(remember and import create it)"
                )
            self._memory = self.settings.open(read_only=self.read_only)
        return self._memory

    @property
    def read_only(self) -> bool:
        """Whether to open the database read-only: ``--read-only``, or a SQLite file this
        process cannot write (the file or its folder: ``stores.unwritable``)."""
        db = self.settings.db
        if self.args.read_only:
            return True
        kind = store_kind(db)
        return kind.read_only and kind.is_file and kind.exists(db) and bool(unwritable(db))

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


def _field_options(sub: argparse.ArgumentParser, *, new: bool) -> None:
    """--metadata, --label and --importance: of a new memory (remember), or (update) the
    values that replace a memory's."""
    add = sub.add_argument
    add(
        "--metadata",
        metavar="JSON",
        help='a JSON object, e.g. \'{"src": "chat"}\''
        if new
        else "the new metadata (a JSON object)",
    )
    add(
        "--label",
        metavar="K=V",
        action="append",
        default=[],
        help="a label (repeatable: --label topic=food --label topic=prefs)"
        if new
        else "a new label (repeatable; the labels given replace the memory's)",
    )
    add(
        "--importance",
        type=float,
        metavar="X",
        help="importance in [0, 1] (default 0.5)" if new else "the new importance in [0, 1]",
    )


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    """The fields the options of ``_field_options`` and ``--expires`` give (only those
    given), checked."""
    fields: dict[str, Any] = {}
    if args.metadata is not None:
        fields["metadata"] = _json_object("--metadata", args.metadata)
    if args.label:
        fields["labels"] = _labels(args.label)
    if args.importance is not None:
        fields["importance"] = args.importance
    if args.expires is not None:
        fields["expires_at"] = _expiry(args.expires)
    return fields


def _remember_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("text", help="the text to remember (-: read it from standard input)")
    _field_options(sub, new=True)
    expiry = sub.add_mutually_exclusive_group()
    expiry.add_argument(
        "--ttl", type=_seconds, metavar="SECONDS", help="expire after this many seconds"
    )
    expiry.add_argument(
        "--expires", metavar="ISO8601", help="expire at this time, e.g. 2027-01-31T12:00Z"
    )


def _text(text: str) -> str:
    """``text``, or for ``-`` standard input's text without its final line break."""
    if text != "-":
        return text
    given = read_text("-", "standard input")
    if not given.strip():
        raise CliError(
            "remember - read no text from standard input; pipe the text in, e.g. "
            "echo 'Sam is vegetarian' | engramdb remember -"
        )
    return given.removesuffix("\n").removesuffix("\r")


@command(
    "remember",
    "remember a text in the bound scope",
    options=_remember_options,
    creates=True,
    aliases=("add",),
)
def remember(ctx: Context) -> int:
    args = ctx.args
    fields = _fields(args)  # checked before standard input is read
    text = _text(args.text)  # before the database is opened (or created)
    record = ctx.bound.remember(text, ttl=args.ttl, **fields)
    if ctx.json:
        print_json(record_to_json(record))
    else:
        print(record.id)
    return 0


def _recall_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("query", help="what to look for")
    add("--top-k", type=_positive_int, default=5, metavar="N", help="hits (default 5)")
    add(
        "--mode",
        choices=["hybrid", "vector", "lexical"],
        default="hybrid",
        help="which legs rank (default hybrid)",
    )
    add("--filter", metavar="JSON", help='e.g. \'{"labels": {"topic": "food"}}\'')
    add(
        "--rerank",
        type=_count,
        default=None,
        metavar="N",
        help="re-score the first N hits with ENGRAMDB_RERANKER's reranker (default 30 "
        "with one; 0: off)",
    )
    add(
        "--context",
        type=_count,
        default=0,
        metavar="N",
        help="show the N turns before and after each hit that is a turn of a conversation "
        "(default 0)",
    )
    add(
        "--explain",
        action="store_true",
        help="show each hit's ranks, similarity, bm25, boosts and evidence",
    )


@command(
    "recall",
    "recall memories of the bound scope by meaning and by words",
    options=_recall_options,
    aliases=("search",),
)
def recall(ctx: Context) -> int:
    args = ctx.args
    filter_ = _json_object("--filter", args.filter)
    hits = ctx.bound.recall(
        args.query,
        top_k=args.top_k,
        mode=args.mode,
        filter=filter_,
        rerank=args.rerank,
        context=args.context,
    )
    print_hits(hits, list(hits), as_json=ctx.json, explain=args.explain, raw=args.raw)
    if not hits and not ctx.json:
        print(f"no memory of scope {ctx.scope_text} matches", file=sys.stderr)
    return 0


def _similar_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("id", help="the memory id")
    add("--top-k", type=_positive_int, default=5, metavar="N", help="hits (default 5)")
    add(
        "--explain",
        action="store_true",
        help="show each hit's ranks, similarity, boosts and evidence",
    )


@command(
    "similar",
    "the memories of the bound scope most similar in meaning to memory ID",
    options=_similar_options,
)
def similar(ctx: Context) -> int:
    args = ctx.args
    record = _visible(ctx, args.id)
    hits = ctx.bound.recall(record.text, top_k=args.top_k + 1, mode="vector")
    shown = [hit for hit in hits if hit.memory.id != record.id][: args.top_k]
    print_hits(hits, shown, as_json=ctx.json, explain=args.explain, raw=args.raw)
    if not shown and not ctx.json:
        print(f"no other memory of scope {ctx.scope_text} is similar to it", file=sys.stderr)
    return 0


def _list_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("--limit", type=_positive_int, default=50, metavar="N", help="at most N (default 50)")


@command("list", "list the memories of the bound scope, newest first", options=_list_options)
def list_(ctx: Context) -> int:
    records = ctx.bound.list(limit=ctx.args.limit)
    for record in records:
        if ctx.json:
            print_json(record_to_json(record))
        else:
            print(human_record(record))
    if not records and not ctx.json:
        print(f"scope {ctx.scope_text} holds no memories", file=sys.stderr)
    return 0


@command("scopes", "list every scope that holds memories, with counts", ignores=BINDING)
def scopes(ctx: Context) -> int:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = ctx.memory.list_scopes(limit=100, cursor=cursor)
        found.extend(scope_count_to_json(s) for s in page)  # as every face writes it
        if len(page) < 100:
            break
        cursor = page[-1].scope
    if ctx.json:
        print_json(found)
    else:
        for entry in found:
            print(f"{entry['count']:>8}  {format_scope(entry['scope'])}")
    return 0


def _visible(ctx: Context, id: str) -> Any:
    record = ctx.bound.get(id)
    if record is None:
        raise CliError(
            f"no memory {id!r} in scope {ctx.scope_text}; check the id, or pass the "
            "memory's --scope (engramdb scopes lists them)"
        )
    return record


def _get_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("id", help="the memory id")


@command("get", "show one memory of the bound scope", options=_get_options)
def get(ctx: Context) -> int:
    record = _visible(ctx, ctx.args.id)
    if ctx.json:
        print_json(record_to_json(record))
    else:
        print(human_record(record))
    return 0


def _history_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("id", help="the memory id")


@command(
    "history",
    "show the earlier revisions of a memory of the bound scope",
    options=_history_options,
)
def history(ctx: Context) -> int:
    revisions = ctx.bound.history(ctx.args.id, limit=100)
    if revisions is None:
        _visible(ctx, ctx.args.id)  # raises: not a memory of the bound scope
        revisions = []
    if ctx.json:
        print_json([record_to_json(r) for r in revisions])
    else:
        for record in revisions:
            print(human_record(record))
        if not revisions:
            print(f"{ctx.args.id} has no earlier revisions", file=sys.stderr)
    return 0


def _forget_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("id", nargs="?", help="the memory id; without it, forget the whole bound scope")
    add("--confirm", action="store_true", help="needed to forget the whole bound scope")


@command(
    "forget",
    "delete one memory, or with --confirm every memory of the bound scope",
    options=_forget_options,
)
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
        count = ctx.bound.forget_all()
        result = {"forgotten": count, "scope": scope_to_json(ctx.settings.scope)}
        text = f"forgot {count} memories of scope {ctx.scope_text}"
    print_json(result) if ctx.json else print(text)
    return 0
