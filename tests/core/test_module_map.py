"""The core's layout by concern (docs/architecture.md, "Module map"): at most 15 modules at
the top of ``core/engramdb``, each named in the module map of the docs and of
``engramdb``'s docstring, and no public module with a private twin."""

from __future__ import annotations

from pathlib import Path

import engramdb

CORE = Path(__file__).resolve().parents[2] / "core" / "engramdb"
ARCHITECTURE = CORE.parents[1] / "docs" / "architecture.md"


def top_level(core: Path = CORE) -> list[str]:
    """The modules and packages at the top of the core (``__init__`` aside)."""
    names = [p.stem for p in core.glob("*.py") if p.stem != "__init__"]
    names += [p.name for p in core.iterdir() if (p / "__init__.py").is_file()]
    return sorted(names)


def test_the_core_has_at_most_15_top_level_modules() -> None:
    found = top_level()
    assert {"store", "flows", "ranking", "http_api", "_base"} <= set(found)
    assert len(found) <= 15, found


def test_the_module_maps_name_every_top_level_module() -> None:
    table = ARCHITECTURE.read_text(encoding="utf-8").split("## Module map", 1)[1]
    docstring = engramdb.__doc__ or ""
    assert [name for name in top_level() if f"| `{name}` |" not in table] == []
    assert [name for name in top_level() if f"``{name}``" not in docstring] == []


def test_no_public_module_has_a_private_twin() -> None:
    """``x`` and ``_x`` side by side (``flows`` and ``_flows``) is one concern written in
    two places; a package keeps its private parts inside it."""
    twins = []
    for folder in [CORE, *(p for p in CORE.rglob("*") if (p / "__init__.py").is_file())]:
        names = {p.stem for p in folder.glob("*.py")} | {
            p.name for p in folder.iterdir() if (p / "__init__.py").is_file()
        }
        twins += [f"{folder.name}/{n}" for n in names if not n.startswith("_") and f"_{n}" in names]
    assert twins == []


def test_the_count_sees_a_module_and_a_package(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "one.py").write_text("")
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "__init__.py").write_text("")
    (tmp_path / "data").mkdir()  # a folder of data, not a package
    assert top_level(tmp_path) == ["one", "two"]
