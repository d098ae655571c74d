"""A command for each view operation that names one (``engramdb.flows.VIEW_OPS``, its
``cli``) and that no other module writes by hand: its fields become the command's
arguments (a required one positional, the others ``--options``, typed by their JSON
schema), it runs on the bound scope, and it prints the operation's JSON answer (with
``--json``), or the answer's one value when it has one. Declared last, so a hand-written
command of the same name wins."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from engramdb.flows import VIEW_OPS, Field, ViewOp

from ._commands import Context
from ._parser import COMMANDS, CliError, command
from ._render import print_json

__all__: list[str] = []


def _json_value(field: Field) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not JSON ({exc.msg}); pass {field.description}"
            ) from None

    return read


def _argument(sub: argparse.ArgumentParser, field: Field) -> None:
    kind = field.schema.get("type")
    kinds = set(kind if isinstance(kind, list) else [kind]) - {"null"}
    flag = field.name if field.required else "--" + field.name.replace("_", "-")
    options: dict[str, Any] = {"help": field.description}
    if not field.required:
        options["dest"] = field.name
    if kinds == {"boolean"}:
        options["action"] = argparse.BooleanOptionalAction
    elif kinds == {"integer"}:
        options["type"] = int
    elif kinds == {"number"}:
        options["type"] = float
    elif kinds & {"object", "array"}:
        options["type"] = _json_value(field)
    sub.add_argument(flag, **options)


def _options(op: ViewOp) -> Callable[[argparse.ArgumentParser], None]:
    def add(sub: argparse.ArgumentParser) -> None:
        for field in op.fields:
            _argument(sub, field)

    return add


def _run(op: ViewOp) -> Callable[[Context], int]:
    def run(ctx: Context) -> int:
        given = {f.name: getattr(ctx.args, f.name) for f in op.fields}
        args = {f.name: f.decoded(given[f.name]) for f in op.fields if given[f.name] is not None}
        result = getattr(ctx.bound, op.name)(**args)
        if op.has_absent and result is op.absent:
            named = next(iter(args.values()), "")
            raise CliError(f"there is no memory {named!r} in scope {ctx.scope_text}")
        assert op.answer is not None
        answer = op.answer(result, args)
        if not ctx.json and isinstance(answer, dict) and len(answer) == 1:
            (value,) = answer.values()
            if isinstance(value, str | int | float | bool):
                print(value)
                return 0
        print_json(answer)
        return 0

    return run


def _creates(op: ViewOp) -> bool:
    """Whether the command may create the database file: an operation that answers
    ``201 Created`` over HTTP stores memories, as ``remember`` does."""
    return op.route is not None and op.route.status == 201


for _op in VIEW_OPS.values():
    if _op.cli is not None and _op.cli not in COMMANDS:
        summary = _op.summary[:1].lower() + _op.summary[1:]
        command(_op.cli, summary, options=_options(_op), creates=_creates(_op))(_run(_op))
