"""One Durable Object per tenant: the Worker authenticates, the tenant's object answers.

The Worker resolves the bearer token to its grant and names the tenant by the grant's
leading scope parts (``TENANT_PARTS``, default 1: ``["acme", "user", "sam"]`` belongs to
tenant ``acme``). It then hands the request — method, URL, the headers the API reads,
the body's bytes and the grant — to that tenant's object, which runs the shared HTTP
API (:func:`engramdb.http_api.handle_granted`) over ``AsyncMemory`` on its own
:class:`~engramdb_workers.durable.DurableObjectStore`.

So every tenant has its own database: its content-addressed vectors (one tenant storing a
text another holds embeds it anew), its full-text statistics (BM25 scores never move
with another tenant's writes), its row reads and its warm vector index. A grant may read
only scopes of its own tenant; a token whose ``read`` reaches another tenant is a
configuration error. The object is reachable only through the Worker (Durable Objects
have no public address), so the grant it receives is the Worker's word.
"""

from __future__ import annotations

import json
import time
from typing import Any

from engramdb import AsyncMemory, ConfigurationError, MaintenanceReport

from . import api, config
from ._js_values import py_value, to_py
from .durable import DurableObjectStore

__all__ = ["MAINTAIN_AFTER_MS", "TenantMemory", "envelope", "tenant_of"]

_FORWARDED_HEADERS = ("content-type", "content-length")
MAINTAIN_AFTER_MS = 10 * 60 * 1000
"""How long after a write the object's maintenance alarm fires."""


def tenant_of(grant: api.Grant, parts: int) -> str:
    """The name of the grant's tenant: its first ``parts`` scope parts, as JSON.

    Raises ``ConfigurationError`` when the scope is shorter or a ``read`` scope belongs to
    another tenant (its memories live in another object, out of reach by design).
    """
    if len(grant.scope) < parts:
        raise ConfigurationError(
            f"a token's scope has {len(grant.scope)} parts but TENANT_PARTS={parts}; give "
            "every scope at least that many parts (the leading ones name the tenant)"
        )
    head = grant.scope[:parts]
    for scope in grant.read:
        if scope[:parts] != head:
            raise ConfigurationError(
                f"a token may read {list(scope)} but writes tenant {list(head)}: with one "
                "Durable Object per tenant a grant reads only its own tenant's scopes"
            )
    return json.dumps(list(head), ensure_ascii=False)


def envelope(method: str, url: str, headers: dict[str, str], grant: api.Grant) -> str:
    """What the Worker sends its tenant's object with the body: one JSON string."""
    return json.dumps(
        {
            "method": method,
            "url": url,
            "headers": {k: v for k, v in headers.items() if k in _FORWARDED_HEADERS},
            "scope": list(grant.scope),
            "read": [list(scope) for scope in grant.read],
        },
        ensure_ascii=False,
    )


class TenantMemory:
    """What one tenant's object keeps while it is active: its store (with the warm
    vector index) and the ``AsyncMemory`` over it. Built in the object's constructor;
    no I/O until the first request (which runs any pending migration).

    Maintenance is per object too (``MAINTAIN``, on by default): the memory owns a
    ``Maintainer`` (``memory.maintainer``, its snapshot in ``/v1/status``) that the
    object's alarm drives. A successful write makes sure an alarm is set
    (``MAINTAIN_AFTER_MS`` later); the ``alarm`` handler runs one bounded pass (pending
    texts embedded, expired memories purged) and sets the next alarm while work remains
    (at once) or after a failure (when the maintainer's back-off ends). With
    ``MAINTAIN=off`` no alarm is set. The Worker's cron only maintains a D1 database.
    """

    def __init__(self, storage: Any, env: Any) -> None:
        self.store = DurableObjectStore(
            storage, floats_up_to=config.floats_up_to(env), cache_bytes=config.cache_bytes(env)
        )
        self.memory = AsyncMemory(
            self.store,
            config.embedder(env),
            redact=config.redact(env),
            maintain=config.maintenance(env),
            reranker=config.reranker(env),
        )
        self._storage = getattr(storage, "_binding", storage)
        self._alarm_set = False

    async def maintain(self) -> MaintenanceReport | None:
        """The object's ``alarm``: one maintenance pass (None: it failed, or
        ``MAINTAIN=off``); another alarm if work remains or the pass failed."""
        self._alarm_set = False
        maintainer = self.memory.maintainer
        if maintainer is None:
            return None
        report = await maintainer.arun_once()
        due = maintainer.snapshot.next_at
        if report is None and due is not None:  # failed: again when the back-off ends
            await self._set_alarm(due.timestamp() * 1000)
        elif report is not None and report.work_left:
            await self._set_alarm(time.time() * 1000)
        return report

    async def _set_alarm(self, at_ms: float | None = None) -> None:
        """An alarm at ``at_ms`` (default ``MAINTAIN_AFTER_MS`` from now) unless one is set."""
        if self._alarm_set or self.memory.maintainer is None:
            return
        if not hasattr(self._storage, "setAlarm"):
            return
        if py_value(await self._storage.getAlarm()) is None:
            when = time.time() * 1000 + MAINTAIN_AFTER_MS if at_ms is None else at_ms
            await self._storage.setAlarm(when)
        self._alarm_set = True

    async def handle(self, request: str, body: Any) -> str:
        """Answer one forwarded request; returns ``[status, headers, body]`` as JSON."""
        fields = json.loads(request)
        grant = api.Grant(tuple(fields["scope"]), tuple(tuple(scope) for scope in fields["read"]))
        data = py_value(to_py(body)) or b""

        async def read_body() -> bytes:
            return data

        reply = await api.handle_granted(
            fields["method"],
            fields["url"],
            fields["headers"],
            read_body,
            grant=grant,
            memory=lambda _grant: self.memory,
        )
        if fields["method"].upper() != "GET" and reply.status < 300:
            await self._set_alarm()
        return json.dumps(list(api.answer(reply)))
