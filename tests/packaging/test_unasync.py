"""``tools/unasync.py``: the rules that make a sync face from its async source (the lint
env runs ``--check``, which holds the committed sync faces to them)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("unasync", ROOT / "tools" / "unasync.py")
assert _spec is not None and _spec.loader is not None
unasync = importlib.util.module_from_spec(_spec)
sys.modules["unasync"] = unasync
_spec.loader.exec_module(unasync)


def test_the_rules_turn_an_async_face_into_its_sync_twin() -> None:
    source = '''"""The async face."""
from engramdb.flows._bound_async import AsyncBoundMemory
from engramdb.flows._memory import _AsyncMemoryBase
from engramdb.flows._effects import adrive
from engramdb.flows._trampoline import arun


class AsyncMemory(_AsyncMemoryBase):
    async def get(self, id: str) -> AsyncBoundMemory:
        """As awaited."""
        async with self.lock:
            return await self._run(self._flows.get(id))
'''
    made = unasync.unasync(source, Path("_memory_async.py"))
    assert made.startswith('"""Generated from ``_memory_async.py`` by ``tools/unasync.py``')
    assert "The async face" not in made
    body = made.split('"""', 2)[2]
    assert (
        body
        == '''
from engramdb.flows._bound_sync import BoundMemory
from engramdb.flows._memory import _MemoryBase
from engramdb.flows._effects import drive
from engramdb.flows._trampoline import run


class Memory(_MemoryBase):
    def get(self, id: str) -> BoundMemory:
        """As awaited."""
        with self.lock:
            return self._run(self._flows.get(id))
'''
    )


def test_each_source_has_its_generated_twin() -> None:
    for source in unasync.SOURCES:
        twin = unasync.target(source)
        assert twin.is_file(), twin
        assert twin.read_text(encoding="utf-8").startswith(f'"""Generated from ``{source.name}``')
