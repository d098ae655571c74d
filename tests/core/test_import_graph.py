"""The core's modules import each other without a circle (imports under
``TYPE_CHECKING`` aside, since they never run): each module can be read, tested and
changed after the ones it imports. Imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

# the core's source (an installed wheel merges core/ and drivers/ into one package)
CORE = Path(__file__).resolve().parents[2] / "core" / "engramdb"


def _modules() -> dict[str, Path]:
    out = {}
    for path in CORE.rglob("*.py"):
        parts = ("engramdb", *path.relative_to(CORE).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The core modules ``name`` imports when it runs (a ``from . import x`` of a
    submodule is an import of that submodule, not of the package)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    target = ".".join([*parts, *([child.module] if child.module else [])])
                else:
                    target = child.module or ""
                subs = {f"{target}.{a.name}" for a in child.names} & modules.keys()
                found.update(subs or ({target} & modules.keys()))
            elif isinstance(child, ast.Import):
                found.update({a.name for a in child.names} & modules.keys())
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found - {name}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (empty: none), by depth-first search."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state and (found := walk(start)):
            return found
    return []


def test_the_core_has_no_import_circle() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert len(graph) > 20 and graph["engramdb.flows._operations"], "the graph was not read"
    assert _cycle(graph) == []


def test_the_check_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []
