"""``RemoteMemory`` and ``AsyncRemoteMemory``: a remote engramdb, used like a bound view.

A server (``engramdb serve`` or the Worker) binds each token to a scope; a client holds
a URL and a token and gets the bound view's methods over HTTP (docs/http.md, "A Python
client")::

    from engramdb.client import RemoteMemory

    with RemoteMemory("http://127.0.0.1:8080", token) as memory:
        memory.remember("Sam prefers aisle seats")
        hits = memory.recall("seat preference")

Answers come back as engramdb's own types (``MemoryRecord``, ``Hits``) through the one
JSON codec (``engramdb.json_format``), once each is checked against the API's own
description of it (``_answers``), and errors as engramdb's error tree:

- 400, 413, 415 -> ``ValidationError`` (the server's message names the value and the
  fix); 401 -> ``ConfigurationError`` (the token is missing or unknown: the token is
  never in a message); 409 -> ``ConflictError``;
- a memory that is not there is ``None`` (``get``, ``update``, ``history``,
  ``feedback``) or ``False`` (``forget``), as the bound view answers; ``forget`` and
  ``complete`` answer the answer's own field (``deleted``, ``completed``);
- 429 and 5xx are retried with the ``RetryPolicy`` (``retry=``; by default 4 retries,
  0.5 s doubling, never above 20 s), a ``Retry-After`` honoured; past it, 502
  (``embedding_failed``) is a ``ProviderError`` and the others a ``StoreError``, as is a
  server that cannot be reached;
- ``timeout=`` (30 s) is the deadline of a call, its retries and their waits included,
  and ``max_answer_bytes=`` (64 MiB, after decompression) the largest answer read
  (``_exchange``): past either, a ``StoreError`` that names it;
- an answer that is not the API's (not JSON, a field missing, unknown or of the wrong
  type, ``1e999``, nested too deep) is a ``StoreError`` naming the field.

A write retried after an answer was lost does no harm: ``remember`` of a text its scope
already holds answers the existing memory, and ``forget`` of a memory already deleted
answers ``False``.

The token is held as a ``Secret``: only the ``Authorization`` header carries it, never a
message, a ``repr`` or a log line. Needs ``httpx`` (``pip install 'engramdb[client]'``).
"""

from __future__ import annotations

try:  # before any module of the package imports it (or httpcore, which comes with it)
    import httpx  # noqa: F401
except ModuleNotFoundError as missing:  # the core installs with no dependency
    raise ImportError(
        "engramdb.client needs httpx, which is not installed; install it with:\n"
        "pip install 'engramdb[client]'"
    ) from missing

from ._exchange import DEFAULT_MAX_ANSWER_BYTES
from ._faces import AsyncRemoteMemory, RemoteMemory
from ._remote import RemoteStatus

__all__ = ["DEFAULT_MAX_ANSWER_BYTES", "AsyncRemoteMemory", "RemoteMemory", "RemoteStatus"]
