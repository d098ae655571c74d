"""Provider modules imported on first use, with the install hint when httpx is missing.

``engramdb.providers`` itself needs only the core, so ``embedder_from_url("hash:256")``
and ``"st:..."`` work with the ``local`` extra alone; the HTTP embedders need httpx
(extra ``http``) and load it when one of them is first asked for.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["HTTP_HINT", "load"]

HTTP_HINT = "pip install 'engramdb[http]'"


def load(module: str, wanted: str) -> ModuleType:
    """Import ``engramdb.providers.<module>`` (e.g. ``"._openai"``) for ``wanted`` (what
    the caller asked for, named in the error); a missing httpx is an ``ImportError``
    that says what to install."""
    try:
        return importlib.import_module(module, __package__)
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("httpx", "httpcore"):
            raise
        raise ImportError(
            f"{wanted} needs httpx, which is not installed; install it with:\n{HTTP_HINT}"
        ) from exc
