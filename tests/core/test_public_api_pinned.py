"""The exact public API, pinned: every public module's ``__all__``, each function's
signature and each public class's methods and their signatures, compared with
``tests/core/public_api.txt``. A change of the public surface shows up here first; when
it is intended, regenerate the file and say so in CHANGELOG.md::

    ENGRAMDB_WRITE_API=1 python -m pytest tests/core/test_public_api_pinned.py
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import inspect
import os
import re
from pathlib import Path

import pytest

PINNED = Path(__file__).with_name("public_api.txt")

ROOT = Path(__file__).resolve().parents[2]


def public_modules(tree: Path) -> tuple[str, ...]:
    """The public modules under ``tree/engramdb``: each module or package with no ``_``
    part in its path."""
    found = []
    for path in sorted((tree / "engramdb").rglob("*.py")):
        parts = path.relative_to(tree).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if parts[-1] != "__main__" and not any(part.startswith("_") for part in parts):
            found.append(".".join(parts))
    return tuple(found)


DRIVER_MODULES = public_modules(ROOT / "drivers")
MODULES = public_modules(ROOT / "core") + DRIVER_MODULES

# The modules an extra brings (its import raises ImportError naming the extra where it
# is missing). Each is compared in an environment that has it: tox's langgraph env runs
# this file too (tox.ini).
NEEDS_EXTRA = frozenset({"engramdb.langgraph", "engramdb.postgres"})


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


def _own_members(cls: type) -> set[str]:
    """A class's members, those of its engramdb bases included (a face's lifecycle base
    holds ``close``): what a user of the class can call."""
    return {
        name
        for klass in cls.__mro__
        if klass.__module__.split(".")[0] == "engramdb"
        for name in vars(klass)
    }


def _describe(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    lines = [f"module {module_name}"]
    for name in sorted(getattr(module, "__all__", ())):
        value = getattr(module, name)
        if inspect.isclass(value):
            lines.append(f"  class {name}{_signature(value)}")
            for attr in sorted(_own_members(value)):
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


def _sections(text: str) -> dict[str, list[str]]:
    """The pinned file's sections, by module."""
    sections: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("module "):
            current = sections.setdefault(line.removeprefix("module "), [])
        current.append(line)
    return sections


def _importable(name: str) -> bool:
    """Whether this environment can describe ``name``: the core-only environments (the
    Pyodide ones) have no drivers, and an extra's module needs its extra."""
    if name in DRIVER_MODULES and importlib.util.find_spec("engramdb.sqlite") is None:
        return False
    try:
        importlib.import_module(name)
    except ImportError as error:
        if name in NEEDS_EXTRA and "pip install" in str(error):
            return False
        raise
    return True


@pytest.fixture(scope="module")
def pinned() -> dict[str, list[str]]:
    """The pinned sections; with ``ENGRAMDB_WRITE_API=1`` first rewritten from this
    environment (a module it cannot import keeps its pinned section)."""
    sections = _sections(PINNED.read_text(encoding="utf-8"))
    if os.environ.get("ENGRAMDB_WRITE_API"):
        current = {
            name: _describe(name) if _importable(name) else sections.get(name, [])
            for name in MODULES
        }
        PINNED.write_text(
            "".join(f"{line}\n" for name in MODULES for line in current[name]), encoding="utf-8"
        )
        sections = _sections(PINNED.read_text(encoding="utf-8"))
    return sections


@pytest.mark.parametrize("name", MODULES)
def test_the_public_api_is_exactly_the_pinned_one(name: str, pinned: dict[str, list[str]]) -> None:
    if not _importable(name):
        pytest.skip(f"{name}: this environment lacks the drivers or its extra")
    assert _describe(name) == pinned.get(name), (
        f"the public API of {name} changed; if that is intended, regenerate "
        "tests/core/public_api.txt (see this module's docstring) and note the change in "
        "CHANGELOG.md"
    )


def test_every_public_module_is_pinned(pinned: dict[str, list[str]]) -> None:
    """The file pins exactly the public modules there are, drivers included."""
    assert {"engramdb.sqlite", "engramdb.client", "engramdb.store.rows"} <= set(MODULES)
    assert sorted(pinned) == sorted(MODULES)
