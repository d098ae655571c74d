"""The Worker's JSON HTTP API: :mod:`engramdb.http_api`, re-exported, and
:func:`answer`, which writes a reply's log line to the Worker's console.

The API lives in the core so that the Worker and ``engramdb serve`` (CPython, uvicorn)
answer every request the same way; this module keeps the Worker's old import path.
"""

from __future__ import annotations

from engramdb.http_api import *  # noqa: F403
from engramdb.http_api import Reply, dumps
from engramdb.http_api import __all__ as _API

__all__ = [*_API, "answer"]


def answer(reply: Reply) -> tuple[int, dict[str, str], str]:
    """The reply's status, headers and JSON text; its log line (if any) to the console
    (the core does no I/O: ``wrangler tail`` shows what it would have printed)."""
    if reply.log:
        print(reply.log)
    return reply.status, dict(reply.headers), dumps(reply.body)
