"""Values between the core's SQLite dialect and a JavaScript SQL binding (D1, a Durable
Object's ``ctx.storage.sql``): both bind numbers as JS doubles, take bytes as a
``Uint8Array`` and hand BLOBs back as something bytes-like."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engramdb import StoreError
from engramdb.driver import Statement

try:  # Pyodide; absent on CPython, where only the pure Python paths are usable
    from pyodide.ffi import JsProxy, to_js
except ImportError:  # pragma: no cover - CPython
    JsProxy = None  # type: ignore[assignment,misc]
    to_js = None  # type: ignore[assignment]

try:
    from pyodide.ffi import jsnull
except ImportError:  # pragma: no cover - older Pyodide or CPython
    jsnull = None

__all__ = ["MAX_SAFE_INT", "bind_value", "is_js", "py_value", "sql_error", "to_py"]

MAX_SAFE_INT = 2**53
"""Integers are bound as JS doubles there: beyond this they would lose precision."""


def is_js(value: Any) -> bool:
    """Whether ``value`` is a raw JavaScript object (not wrapped by the ``workers`` SDK)."""
    return JsProxy is not None and isinstance(value, JsProxy)


def bind_value(value: Any, where: str, *, raw: bool) -> Any:
    """``value`` as a bound parameter (``raw``: for a JS function called directly, so
    ``None`` becomes JS ``null`` and bytes a ``Uint8Array``)."""
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, int) and not -MAX_SAFE_INT < value < MAX_SAFE_INT:
        raise StoreError(
            f"the integer {value} cannot be bound in {where} (numbers are doubles there; "
            f"keep integers below 2**53)"
        )
    if isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    if raw:
        if value is None:
            return jsnull
        if isinstance(value, bytes):
            return to_js(value)  # Uint8Array
    return value


def to_py(value: Any) -> Any:
    """A JS value converted deeply to Python (arrays to lists, buffers to memoryviews)."""
    if is_js(value):
        return value.to_py()
    return value


def py_value(value: Any) -> Any:
    """One column value as the dialect expects it: BLOBs as ``bytes``, NULL as ``None``."""
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    if isinstance(value, list):  # D1 returns a BLOB as an array of byte values
        return bytes(value)
    if jsnull is not None and value is jsnull:
        return None
    if is_js(value):  # an ArrayBuffer left unconverted
        return bytes(value.to_bytes())
    return value


def sql_error(where: str, exc: BaseException, statements: Sequence[Statement]) -> StoreError:
    """The ``StoreError`` for a statement list the binding refused (``where`` names the
    database, e.g. "the D1 database DB"); the list's writes were rolled back."""
    text = str(exc).removeprefix("Error: ")
    first = statements[0].sql.split(" (", 1)[0][:60] if statements else ""
    if "TOOBIG" in text or "too big" in text:
        return StoreError(
            f"{where} refused a row as too big ({text}); it stores at most 2,000,000 bytes "
            "per row, so shorten the text or its metadata"
        )
    running = f"{len(statements)} statements" if len(statements) > 1 else repr(first)
    return StoreError(f"{where} failed ({text}) running {running}; the batch was rolled back")
