"""The Worker's JSON HTTP API: :mod:`engramdb.http_api`, re-exported.

The API lives in the core so that the Worker and ``engramdb serve`` (CPython, uvicorn)
answer every request the same way; this module keeps the Worker's old import path.
"""

from __future__ import annotations

from engramdb.http_api import *  # noqa: F403
from engramdb.http_api import __all__ as __all__
