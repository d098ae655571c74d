"""The secret scan's tally, and the other suites' helpers it builds on.

``echoes`` (the encodings a server may echo a key in), the loopback embeddings server and
``texts_of`` live in tests/providers, ``free_port`` in tests/server; they are loaded from
there, not copied.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parents[1]


def suite_helper(folder: str, name: str) -> ModuleType:
    """tests/<folder>/<name>.py, imported once under its own name."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TESTS / folder / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@dataclass
class Scan:
    """Everything captured, by surface, and the forms of the keys to look for."""

    forms: list[str]
    surfaces: dict[str, list[str]] = field(default_factory=dict)

    def add(self, surface: str, *texts: str | bytes) -> None:
        found = self.surfaces.setdefault(surface, [])
        for text in texts:
            found.append(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)

    def hits(self) -> list[tuple[str, str]]:
        return [
            (surface, form)
            for surface, texts in self.surfaces.items()
            for text in texts
            for form in self.forms
            if form in text
        ]

    def size(self) -> int:
        return sum(len(t.encode("utf-8", "replace")) for ts in self.surfaces.values() for t in ts)
