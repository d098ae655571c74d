"""The exact public API, pinned: every public module's ``__all__``, each function's
signature and each public class's methods and their signatures, compared with
``tests/core/public_api.txt``. A change of the public surface shows up here first; when
it is intended, regenerate the file and say so in CHANGELOG.md::

    ENGRAMDB_WRITE_API=1 python -m pytest tests/core/test_public_api_pinned.py
"""

from __future__ import annotations

import enum
import importlib
import inspect
import os
import re
from pathlib import Path

PINNED = Path(__file__).with_name("public_api.txt")

# The public modules of the core (every environment has them) and of the drivers that
# need no extra (the extras' modules are pinned by their own envs' tests of behaviour).
MODULES = (
    "engramdb",
    "engramdb.agents",
    "engramdb.context",
    "engramdb.driver",
    "engramdb.flows",
    "engramdb.http_api",
    "engramdb.json_format",
    "engramdb.semantics",
    "engramdb.shards",
    "engramdb.store",
    "engramdb.store_rows",
    "engramdb.testing",
    "engramdb.validate",
)


_ALIASES = frozenset({"UnionType", "Union", "_UnionGenericAlias", "GenericAlias", "_GenericAlias"})


def _default(value: object) -> str:
    """A default as the same text on every Python (sets sorted, no addresses)."""
    if isinstance(value, set | frozenset):
        return f"{type(value).__name__}({sorted(map(repr, value))})"
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def _signature(value: object) -> str:
    if inspect.isclass(value) and issubclass(value, enum.Enum):
        return "[" + ", ".join(member.name for member in value) + "]"
    try:
        signature = inspect.signature(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"
    params = []
    for param in signature.parameters.values():
        text = {param.VAR_POSITIONAL: "*", param.VAR_KEYWORD: "**"}.get(param.kind, "")
        text += param.name
        if param.annotation is not param.empty:
            text += f": {param.annotation}"
        if param.default is not param.empty:
            text += f" = {_default(param.default)}"
        params.append((param.kind, text))
    shown = []
    for i, (kind, text) in enumerate(params):
        if kind == inspect.Parameter.KEYWORD_ONLY and (
            i == 0 or params[i - 1][0] not in (kind, inspect.Parameter.VAR_POSITIONAL)
        ):
            shown.append("*")
        shown.append(text)
        if kind == inspect.Parameter.POSITIONAL_ONLY and (
            i + 1 == len(params) or params[i + 1][0] != kind
        ):
            shown.append("/")
    returns = signature.return_annotation
    tail = "" if returns is signature.empty else f" -> {returns}"
    return f"({', '.join(shown)}){tail}"


def _describe(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    lines = [f"module {module_name}"]
    for name in sorted(getattr(module, "__all__", ())):
        value = getattr(module, name)
        if inspect.isclass(value):
            lines.append(f"  class {name}{_signature(value)}")
            for attr in sorted(vars(value)):
                member = inspect.getattr_static(value, attr)
                if attr.startswith("_"):
                    continue
                if isinstance(member, property):
                    lines.append(f"    property {attr}")
                elif isinstance(member, staticmethod | classmethod):
                    lines.append(f"    {type(member).__name__} {attr}{_signature(member.__func__)}")
                elif inspect.isfunction(member):
                    kind = "async def" if inspect.iscoroutinefunction(member) else "def"
                    lines.append(f"    {kind} {attr}{_signature(member)}")
        elif inspect.isfunction(value):
            kind = "async def" if inspect.iscoroutinefunction(value) else "def"
            lines.append(f"  {kind} {name}{_signature(value)}")
        elif inspect.ismodule(value):
            lines.append(f"  module {name}")
        else:
            kind = type(value).__name__
            if kind in _ALIASES:  # Embed | Store, list[str]: named differently by version
                kind = "type alias"
            lines.append(f"  {name}: {kind}")
    return lines


def api() -> str:
    return "\n".join(line for name in MODULES for line in _describe(name)) + "\n"


def test_the_public_api_is_exactly_the_pinned_one() -> None:
    current = api()
    if os.environ.get("ENGRAMDB_WRITE_API"):
        PINNED.write_text(current, encoding="utf-8")
    pinned = PINNED.read_text(encoding="utf-8")
    assert current.splitlines() == pinned.splitlines(), (
        "the public API changed; if that is intended, regenerate tests/core/public_api.txt "
        "(see this module's docstring) and note the change in CHANGELOG.md"
    )


def test_the_description_sees_a_change() -> None:
    lines = _describe("engramdb.json_format")
    assert any(line.startswith("  def record_to_json(") for line in lines)
    assert "module engramdb.json_format" in lines[0]
