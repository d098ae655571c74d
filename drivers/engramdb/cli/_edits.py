"""The ``engramdb`` commands that change one memory of the bound scope in place: update
and feedback (one record each: options, help and body; see ``_parser``)."""

from __future__ import annotations

import argparse
import math

from engramdb import ConflictError
from engramdb.json_format import record_to_json

from ._commands import Context, _field_options, _fields, _visible
from ._parser import RevisionConflict, UsageError, _positive_int, command
from ._render import human_record, print_json

__all__: list[str] = []


def _update_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("id", help="the memory id")
    add("text", nargs="?", help="the new text (default: keep the text)")
    _field_options(sub, new=False)
    add("--expires", metavar="ISO8601", help="the new expiry, e.g. 2027-01-31T12:00Z")
    add(
        "--expected-revision",
        type=_positive_int,
        metavar="N",
        help="change it only if it is at revision N (else exit 3 and change nothing)",
    )


@command(
    "update",
    "change the text, metadata, labels, importance or expiry of a memory of the bound scope",
    options=_update_options,
)
def update(ctx: Context) -> int:
    args = ctx.args
    changes = _fields(args)
    if args.text is not None:
        changes["text"] = args.text
    if not changes:
        raise UsageError(
            f"update {args.id} names nothing to change; give a new TEXT, --metadata, "
            "--label, --importance or --expires"
        )
    try:
        record = ctx.bound.update(args.id, expected_revision=args.expected_revision, **changes)
    except ConflictError as exc:
        actual = "another revision" if exc.actual is None else f"revision {exc.actual}"
        raise RevisionConflict(
            f"memory {args.id} is at {actual}, not revision {args.expected_revision}: "
            f"nothing was changed; read it again (engramdb get {args.id}) and retry with "
            "--expected-revision set to its revision"
        ) from exc
    if record is None:
        record = _visible(ctx, args.id)  # raises: not a memory of the bound scope
    print_json(record_to_json(record)) if ctx.json else print(human_record(record))
    return 0


def _feedback_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not -1.0 <= value <= 1.0:  # NaN fails this too
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number from -1 to 1; pass e.g. 1 (it helped), 0 or -1 "
            "(it was wrong)"
        )
    return value


def _feedback_options(sub: argparse.ArgumentParser) -> None:
    add = sub.add_argument
    add("id", help="the memory id")
    add(
        "value",
        type=_feedback_value,
        help="how useful the memory is, from -1 (wrong) to 1 (it helped): its manual value "
        "in the memory policy (docs/policy.md)",
    )


@command(
    "feedback",
    "set the manual value (-1 to 1) of a memory of the bound scope",
    options=_feedback_options,
)
def feedback(ctx: Context) -> int:
    record = ctx.bound.feedback(ctx.args.id, ctx.args.value)
    if record is None:
        _visible(ctx, ctx.args.id)  # raises: not a memory of the bound scope
    elif ctx.json:
        print_json(record_to_json(record))
    else:
        print(f"{record.id}: manual value {ctx.args.value:g}")
    return 0
