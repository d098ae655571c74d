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

With ``SHARDS`` above 1 a tenant has that many objects (``.sharding`` routes each
request; the envelope names the object's shard and tenant): each keeps the count its
memories were placed with (:data:`SHARDS_KEY`), refuses a Worker whose ``SHARDS`` is
neither that nor twice that, and after a doubling moves out, on its alarm, the memories
whose ids name a new object (``.moving``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from engramdb import AsyncMemory, ConfigurationError, MaintenanceReport
from engramdb.json_format import parse_time

from . import api, config, moving
from ._js_values import py_value, to_py
from .durable import DurableObjectStore

__all__ = ["MAINTAIN_AFTER_MS", "TenantMemory", "envelope", "shard_name", "tenant_of"]

_FORWARDED_HEADERS = ("content-type", "content-length")
MAINTAIN_AFTER_MS = 10 * 60 * 1000
"""How long after a write the object's maintenance alarm fires."""
SHARDS_KEY = "engramdb:shards"
"""The object's storage key that keeps the ``SHARDS`` its tenant's memories were placed
with: a tenant's memories are where their ids name among that many objects, so a
``SHARDS`` changed afterwards is refused, unless doubled (``.moving``)."""


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


def shard_name(tenant: str, shard: int) -> str:
    """The name of a tenant's object ``shard``: the tenant's for shard 0 (the object of
    a tenant of one shard), ``<tenant>#<shard>`` for the others."""
    return tenant if shard == 0 else f"{tenant}#{shard}"


def envelope(
    method: str,
    url: str,
    headers: dict[str, str],
    grant: api.Grant,
    *,
    shard: int = 0,
    shards: int = 1,
    tenant: str | None = None,
    below: tuple[str, str] | None = None,
) -> str:
    """What the Worker sends its tenant's object with the body: one JSON string. With it
    the object's ``shard`` among its ``tenant``'s ``shards`` (``SHARDS``, ``.sharding``)
    and, for a page of ``GET /v1/memories`` over shards, the position ``below``
    (created_at as the API writes it, id) to list from."""
    fields: dict[str, Any] = {
        "method": method,
        "url": url,
        "headers": {k: v for k, v in headers.items() if k in _FORWARDED_HEADERS},
        "scope": list(grant.scope),
        "read": [list(scope) for scope in grant.read],
        "shard": shard,
        "shards": shards,
        "tenant": tenant,
    }
    if below is not None:
        fields["below"] = list(below)
    return json.dumps(fields, ensure_ascii=False)


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
        self._env = env
        self.shard, self.shards = 0, 1  # which of its tenant's objects: each envelope says
        self.memory = self._memory()
        self._storage = getattr(storage, "_binding", storage)
        self._alarm_set = False
        self._shards_checked = False
        self.tenant: str | None = None  # its tenant's name, as the Worker's envelopes say
        self.in_flight = False  # a page of a move awaits the new object: writes wait

    async def maintain(self) -> MaintenanceReport | None:
        """The object's ``alarm``: one page of its move while one runs (``.moving``),
        else one maintenance pass (None: it failed, or ``MAINTAIN=off``); another alarm
        if work remains or the pass failed."""
        self._alarm_set = False
        move = await moving.load(self._storage) if hasattr(self._storage, "get") else None
        if move is not None:
            self.in_flight = True
            try:
                more = await moving.step(self.store, self._storage, self._send, move)
            finally:
                self.in_flight = False
            if more:
                await self._set_alarm(time.time() * 1000, always=True)
            return None
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

    async def _set_alarm(self, at_ms: float | None = None, *, always: bool = False) -> None:
        """An alarm at ``at_ms`` (default ``MAINTAIN_AFTER_MS`` from now) unless one is
        set; for maintenance only when the memory maintains itself. ``always`` (a move):
        whatever ``MAINTAIN`` says, and sooner than an alarm set for later."""
        if (self._alarm_set and not always) or (self.memory.maintainer is None and not always):
            return
        if not hasattr(self._storage, "setAlarm"):
            return
        when = time.time() * 1000 + MAINTAIN_AFTER_MS if at_ms is None else at_ms
        current = py_value(await self._storage.getAlarm())
        if current is None or (always and float(current) > when):
            await self._storage.setAlarm(when)
        self._alarm_set = True

    def _memory(self) -> AsyncMemory:
        """The memory over the object's store, as one of its tenant's ``self.shards``
        objects (``engramdb.shards``: its recall measures the noise floor of the whole
        tenant)."""
        env = self._env
        return AsyncMemory(
            self.store,
            config.embedder(env),
            redact=config.redact(env),
            maintain=config.maintenance(env),
            reranker=config.reranker(env),
            shards=self.shards,
        )

    async def _check_shards(self) -> None:
        """Once per instance: the Worker's ``SHARDS`` is the count this tenant's memories
        were placed with (kept under :data:`SHARDS_KEY`; an object written before any was
        kept counts as one), else ``ConfigurationError``. The first check of shard 0 is
        the tenant's: the Worker makes it before any other shard is asked."""
        if self._shards_checked or not hasattr(self._storage, "get"):
            return
        kept = py_value(await self._storage.get(SHARDS_KEY))
        if kept is None and self.shards > 1 and (await self.memory.status()).items:
            kept = 1  # memories written before SHARDS was set: placed for one object
        doubled = kept is not None and 2 * int(kept) == self.shards and self.shard < int(kept)
        if doubled and await moving.load(self._storage) is not None:
            raise ConfigurationError(
                f"SHARDS={self.shards}, but this tenant's move to {int(kept)} objects is "
                f"still running: set SHARDS back to {int(kept)} until it ends, then double "
                "it (docs/workers.md)"
            )
        if doubled and self.tenant is not None:  # grown by doubling: move out, then go on
            await moving.begin(self._storage, self.tenant, self.shard, self.shards)
            await self._set_alarm(time.time() * 1000, always=True)
        elif kept is not None and int(kept) != self.shards:
            raise ConfigurationError(
                f"SHARDS={self.shards}, but this tenant's memories were placed over "
                f"{int(kept)} object(s): set SHARDS back to {int(kept)}, or to twice that "
                "to grow the tenant (docs/workers.md)"
            )
        if kept is None or doubled:
            await self._storage.put(SHARDS_KEY, self.shards)
        self._shards_checked = True

    async def _send(self, tenant: str, shard: int, sent: str, body: bytes) -> Any:
        """Ask shard ``shard`` of ``tenant`` (another object of this one's tenant)."""
        namespace = config.var(self._env, "MEMORY")
        stub = namespace.get(namespace.idFromName(shard_name(tenant, shard)))
        status, headers, text = json.loads(str(await stub.handle(sent, body)))
        return int(status), dict(headers), str(text)

    async def handle(self, request: str, body: Any) -> str:
        """Answer one forwarded request; returns ``[status, headers, body]`` as JSON. An
        envelope ``{"check": true, ...}`` only checks ``shards`` (the Worker asks shard 0
        before it lets a tenant's request reach any other, and every old shard after a
        doubling): 204, 202 while this object moves memories out, or the 500. One with
        ``{"receive": true, ...}`` restores a page of a move from another object of the
        tenant (``.moving``)."""
        fields = json.loads(request)
        self.tenant = fields.get("tenant") or self.tenant
        place = (int(fields.get("shard", 0)), int(fields.get("shards", 1)))
        if place != (self.shard, self.shards):  # the object's first request says which
            self.shard, self.shards = place
            self.memory = self._memory()
        try:
            await self._check_shards()
            if fields.get("receive"):  # a page of a move, from another of its tenant's
                data = py_value(to_py(body)) or b""
                return json.dumps([200, {}, json.dumps(moving.receive(self.store, data))])
        except Exception as exc:
            return json.dumps(list(api.answer(api.error_reply(exc))))
        if fields.get("check"):  # 202: this object is moving memories out
            running = hasattr(self._storage, "get") and await moving.load(self._storage)
            return json.dumps([202 if running else 204, {}, ""])
        if self.in_flight and str(fields["method"]).upper() not in ("GET", "HEAD"):
            return json.dumps(list(api.answer(_MOVING.reply())))
        grant = api.Grant(tuple(fields["scope"]), tuple(tuple(scope) for scope in fields["read"]))
        data = py_value(to_py(body)) or b""

        async def read_body() -> bytes:
            return data

        memory: Any = self.memory
        if "below" in fields:  # a sharded page: below the Worker's position
            when, memory_id = fields["below"]
            memory = _ListingBelow(self.memory, (parse_time(when, "below"), memory_id))
        reply = await api.handle_granted(
            fields["method"],
            fields["url"],
            fields["headers"],
            read_body,
            grant=grant,
            memory=lambda _grant: memory,
        )
        if fields["method"].upper() != "GET" and reply.status < 300:
            await self._set_alarm()
        return json.dumps(list(api.answer(reply)))


_MOVING = api.ApiError(
    "store_unavailable",
    "this memory's object is moving a page of memories to a new one; retry in a second",
    {"retry-after": "1"},
)


class _ListingBelow:
    """The object's memory for one page of a sharded ``GET /v1/memories``: its views list
    below the position the Worker resolved (``list(below=...)``), which every shard
    understands; the API's ``before`` is an id, which only its own shard holds."""

    def __init__(self, memory: AsyncMemory, below: tuple[Any, str]) -> None:
        self._memory = memory
        self._below = below

    def bind(self, scope: Any, **options: Any) -> Any:
        return _ViewBelow(self._memory.bind(scope, **options), self._below)


class _ViewBelow:
    def __init__(self, view: Any, below: tuple[Any, str]) -> None:
        self._view = view
        self._below = below

    async def list(self, limit: int = 50, before: str | None = None) -> Any:
        return await self._view.list(limit, before, below=self._below)
