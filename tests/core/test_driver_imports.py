"""Drivers import only the public core: the driver kit rule (docs/stores.md, "The driver
kit").

Every import in a ``.py`` file under ``drivers/`` and ``workers/src/`` (inside functions
and under ``TYPE_CHECKING`` too) is resolved to the module it names; one that lives in
``core/engramdb`` and has a private part (``engramdb._base.errors``,
``engramdb.store._sqlite.rows``, ``engramdb.testing._checks``), or a private name taken
from a core module (``from engramdb import _base``), is a violation. Relative imports
count: ``drivers/engramdb`` shares the package ``engramdb`` with the core, so ``from
.._base.errors import StoreError`` in ``drivers/engramdb/postgres/`` reaches the core's
``engramdb._base.errors``. A driver's own
private modules (``engramdb.postgres._sql``, ``engramdb.cli._io``) are the driver's
business and allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core"
DRIVERS = ROOT / "drivers"
CHECKED = (ROOT / "drivers", ROOT / "workers" / "src")


def _module_names(base: Path) -> dict[str, Path]:
    """The dotted module names of the ``.py`` files under ``base`` (a source root)."""
    out = {}
    for path in base.rglob("*.py"):
        parts = path.relative_to(base).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_core_imports(
    source: str, module: str, is_package: bool, driver_modules: set[str]
) -> list[tuple[int, str]]:
    """``(line, name)`` for each import of ``source`` (the text of module ``module``)
    that reaches a private part of the core: a module of the ``engramdb`` package outside
    the drivers' top modules (``engramdb.postgres``, ``engramdb.sqlite``, ... among
    ``driver_modules``) with a private part, or a private name imported from a public
    core module."""
    package = module if is_package else module.rpartition(".")[0]

    def core(target: str) -> bool:  # engramdb itself, or not under a driver's top module
        parts = target.split(".")
        return parts[0] == "engramdb" and ".".join(parts[:2]) not in driver_modules

    def private_module(target: str) -> bool:
        return core(target) and any(_private(part) for part in target.split("."))

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
            bad = [t for t in targets if private_module(t)]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if private_module(target):
                bad = [target]
            elif core(target):  # a private submodule or name of a public core module
                bad = [f"{target}.{a.name}" for a in node.names if _private(a.name)]
            else:
                bad = []
        else:
            continue
        found += [(node.lineno, name) for name in bad]
    return found


def violations() -> list[str]:
    driver_modules = set(_module_names(DRIVERS))
    found = []
    for base in CHECKED:
        for module, path in sorted(_module_names(base).items()):
            source = path.read_text(encoding="utf-8")
            is_package = path.name == "__init__.py"
            for line, name in private_core_imports(source, module, is_package, driver_modules):
                found.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    return found


def test_drivers_and_the_worker_import_no_private_core_module() -> None:
    """No file under drivers/ or workers/src/ imports a private core module or name."""
    assert len(_module_names(DRIVERS)) > 40, "the drivers were not found"
    found = violations()
    assert found == [], "import these from a public module instead:\n" + "\n".join(found)


def _check(module: str, source: str, is_package: bool = False) -> list[str]:
    """What the checker reports in ``source``, read as the driver module ``module``."""
    driver_modules = set(_module_names(DRIVERS)) | {".".join(module.split(".")[:2])}
    return [name for _, name in private_core_imports(source, module, is_package, driver_modules)]


def test_the_check_reports_each_form_of_a_private_import() -> None:
    """Absolute, ``from engramdb import _x``, relative (one and two levels up), inside a
    function and under TYPE_CHECKING: each reaches a private core module and is reported;
    public core modules and a driver's own private modules are not."""
    source = "\n".join(
        [
            "from typing import TYPE_CHECKING",
            "from engramdb._base.errors import StoreError",  # absolute
            "import engramdb.store._sqlite.rows",  # plain import
            "from engramdb import _base",  # a private submodule by name
            "from engramdb.store import _private_helper",  # a private name
            "from .._base.errors import StoreError",  # relative, from a driver sub-package
            "from engramdb import EngramError",  # public: fine
            "from engramdb.store import PutItem",  # public: fine
            "from engramdb.postgres._sql import Query",  # the driver's own: fine
            "from ._sibling import thing",  # the driver's own: fine
            "def late():",
            "    from engramdb._base.clock import to_ms",  # inside a function
            "if TYPE_CHECKING:",
            "    from engramdb._embedders.embedder import Embedder",  # typing only, still an import
        ]
    )
    reported = _check("engramdb.mydriver._impl", source)
    assert reported == [
        "engramdb._base.errors",
        "engramdb.store._sqlite.rows",
        "engramdb._base",
        "engramdb.store._private_helper",
        "engramdb._base.errors",
        "engramdb._base.clock",
        "engramdb._embedders.embedder",
    ]


def test_the_check_passes_a_driver_that_imports_only_public_modules() -> None:
    source = "from engramdb import StoreError\nfrom engramdb.store import Op\nfrom . import x\n"
    assert _check("engramdb.mydriver", source, is_package=True) == []


KIT = (
    "engramdb",
    "engramdb.store",
    "engramdb.store.rows",
    "engramdb.driver",
    "engramdb.validate",
    "engramdb.flows",
    "engramdb.agents",
)


def test_every_kit_module_exports_a_sorted_list_of_names_that_resolve() -> None:
    """The kit's public modules each declare ``__all__`` (ruff's RUF022 keeps it sorted) and
    every name in it resolves; none of them is private."""
    import importlib

    for name in KIT:
        module = importlib.import_module(name)
        exported = list(module.__all__)
        missing = [n for n in exported if not hasattr(module, n)]
        assert missing == [], name
        assert not [n for n in exported if _private(n)], name
        assert len(exported) == len(set(exported)), name
