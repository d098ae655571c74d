"""A tenant over several Durable Objects (``SHARDS``): each operation goes to its shards.

The Worker has authenticated the request and named the tenant; :func:`forward` sends
each operation (:func:`engramdb.http_api.operation_of`) where its memories are, with
the same grant, and makes one answer of theirs. Which object holds what, and why, is
:mod:`engramdb.shards` (docs/workers.md, "A tenant larger than one object"):

* ``get``, ``update``, ``forget``, ``history`` and ``feedback`` go to the shard the
  memory's id names (``shard_of``): each object makes ids that name it.
* ``remember`` goes to the shard its scope and text name (``placement``, of the text as
  the objects keep it): the same text in the same scope always reaches the same shard,
  so deduplication holds across shards. ``remember_document`` and
  ``remember_document_part`` are refused (a 400 that says why: a document's chunks
  are replaced where they are, but each chunk's id names its own text's shard), and so
  are ``remember_conversation`` and a ``recall`` with ``context`` (a turn's neighbours
  live in the shards of their own texts);
  ``forget_document`` asks every shard and adds up. ``remember_many`` is checked whole
  here (the API's checks, then the core's checks of each item) before
  any shard is asked, so a bad item stores nothing; then each shard stores its items.
  A shard that fails after another stored its part (an embedding call, say) fails the
  request; a retry of the same body stores each text once, as deduplication answers
  those already stored.
* ``recall`` asks every shard and merges by score (``merge_hits``); its
  ``selection_id`` joins the shards' own, and ``complete`` splits it again.
* ``list`` resolves ``before`` on its shard and asks every shard for the page below
  that position; ``list_scopes``, ``forget_all`` and ``status`` ask every shard and
  add up.
* A tenant grown by doubling (``.moving``): the Worker asks each old shard to confirm
  the new count, which starts its move; an id not in the shard it names is asked of the
  shard it named before (where it waits for its move).

A request no operation answers (a 404, a 405) and any request whose body this module
cannot read goes to shard 0, whose answer (the API's own error) is the answer. Every
shard is the tenant's own: a body, an id or a scope chooses among them, never another
tenant's objects.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from engramdb import HashEmbedder, Hits, ValidationError
from engramdb.flows import VIEW_OPS
from engramdb.flows.context import FlowContext
from engramdb.http_api import DEFAULT_TOP_K, MAX_JSON_DEPTH, ApiError, Grant, operation_of
from engramdb.json_format import hit_from_json, hits_to_json, nested_deeper_than, parse_time
from engramdb.shards import merge_hits, placement, shard_of, split_selection

from . import api
from .tenant import envelope, shard_name

__all__ = ["Shards", "forward", "reset"]

Answer = tuple[int, dict[str, str], str]
# (tenant, SHARDS) pairs whose shard 0 has confirmed the count, in this isolate: a
# boolean per tenant, no tenant's data, and nothing another tenant's request can read.
_CONFIRMED: set[tuple[str, int]] = set()


class Shards:
    """The ``count`` objects of one tenant in the namespace ``MEMORY``, and how to ask
    one of them a request."""

    def __init__(self, namespace: Any, tenant: str, count: int, redact: Any) -> None:
        self.namespace = namespace
        self.tenant = tenant
        self.count = count
        self._redact = redact

    @functools.cached_property
    def _texts(self) -> FlowContext:
        """The core's checks of a memory to remember, with the objects' ``redact``."""
        return FlowContext.of(HashEmbedder(), clock=_now, redact=self._redact)

    async def ask(
        self,
        shard: int,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes,
        grant: Grant,
        below: tuple[str, str] | None = None,
    ) -> Answer:
        """Shard ``shard``'s answer to one request: status, headers, JSON text."""
        sent = envelope(
            method,
            url,
            headers,
            grant,
            shard=shard,
            shards=self.count,
            tenant=self.tenant,
            below=below,
        )
        return await self._send(shard, sent, body)

    async def ask_holder(
        self,
        memory_id: str,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes,
        grant: Grant,
    ) -> Answer:
        """The answer of the shard that holds ``memory_id``: the one its id names, or,
        when that one has no such memory and the tenant has grown by doubling, the one
        it named before (where it waits for its move)."""
        shard = shard_of(memory_id, self.count)
        answer = await self.ask(shard, method, url, headers, body, grant)
        if answer[0] == 404 and self.count > 1:
            before = shard_of(memory_id, self.count // 2)
            if before != shard:
                return await self.ask(before, method, url, headers, body, grant)
        return answer

    async def _send(self, shard: int, sent: str, body: bytes) -> Answer:
        stub = self.namespace.get(self.namespace.idFromName(shard_name(self.tenant, shard)))
        status, reply_headers, text = json.loads(str(await stub.handle(sent, body)))
        return int(status), dict(reply_headers), str(text)

    async def confirmed(self) -> Answer | None:
        """None once shard 0 has confirmed, in this isolate, that the tenant's memories
        were placed over ``count`` objects; else its answer (the 500 of a ``SHARDS``
        changed under the tenant's memories). A tenant of one object checks itself."""
        key = (self.tenant, self.count)
        if self.count == 1 or key in _CONFIRMED:
            return None
        answer = await self._check(0)
        if answer[0] == 202:  # grown by doubling: every old shard moves its part out
            answers = await asyncio.gather(*(self._check(n) for n in range(1, self.count // 2)))
            answer = next((a for a in answers if a[0] >= 300 and a[0] != 202), answer)
        if answer[0] >= 300 and answer[0] != 202:
            return answer
        _CONFIRMED.add(key)
        return None

    async def _check(self, shard: int) -> Answer:
        sent = json.dumps(
            {"check": True, "shard": shard, "shards": self.count, "tenant": self.tenant}
        )
        return await self._send(shard, sent, b"")

    def place(self, scope: Sequence[str], text: object) -> int:
        """The shard of a new memory of ``text`` in ``scope``: of its text as the
        objects keep it (checked and redacted as they do it). ``ValidationError`` for a
        text they would refuse."""
        return placement(scope, self._texts.document_text(text), self.count)

    def check(self, item: dict[str, Any], scope: Sequence[str]) -> None:
        """Every check the objects make of a memory to remember (``ValidationError``)."""
        self._texts.record({**item, "scope": tuple(scope)}, _now(), lambda place: "0")


def reset() -> None:
    """Forget which tenants' shard counts were confirmed (a fresh isolate; tests)."""
    _CONFIRMED.clear()


def _now() -> datetime:
    return datetime.now(UTC)


async def forward(
    shards: Shards, method: str, url: str, headers: dict[str, str], body: bytes, grant: Grant
) -> Answer:
    """The tenant's answer to one authenticated request, from the shards that hold it."""

    async def ask(shard: int, sent: bytes = body, at: str = url) -> Answer:
        return await shards.ask(shard, method, at, headers, sent, grant)

    refused = await shards.confirmed()
    if refused is not None:
        return refused
    routed = operation_of(method, url)
    if routed is None or shards.count == 1:
        return await ask(0)
    operation, item_id = routed
    if item_id is not None:  # get, update, forget, history
        return await shards.ask_holder(item_id, method, url, headers, body, grant)
    parsed = _json(body)
    if operation == "feedback":
        memory_id = parsed.get("memory_id") if parsed is not None else None
        if not _text(memory_id):
            return await ask(0)
        return await shards.ask_holder(memory_id, method, url, headers, body, grant)
    if operation == "recall" and parsed is not None and parsed.get("context"):
        operation = "recall(context)"
    if operation in _ONE_OBJECT:
        reply = ApiError("invalid_request", _ONE_OBJECT[operation]).reply()
        return _reply(reply.status, reply.body)
    if operation in _PLACED_BY:
        key = parsed.get(_PLACED_BY[operation]) if parsed is not None else None
        try:
            shard = shards.place(grant.scope, key) if _text(key) else 0
        except ValidationError:
            shard = 0  # its answer is the API's error
        return await ask(shard)
    if operation == "remember_many":
        return await _remember_many(shards, ask, parsed, grant)
    if operation == "recall":
        return await _recall(shards, ask, parsed)
    if operation == "complete":
        return await _complete(shards, ask, parsed)
    if operation == "list":
        return await _list(shards, method, url, headers, grant)
    answers = await _every(shards, ask)
    if operation == "list_scopes":
        return _scopes(answers, url)
    summed = _SUMMED[operation]  # status, forget_all...: shard 0's, with every shard's count
    return _summed(answers, summed)


_PLACED_BY = {"remember": "text"}
"""The operations one shard answers, and the field that names it."""
_DOCUMENTS = (
    "documents are not stored for a tenant over several objects (SHARDS > 1) yet: each "
    "chunk's id names the object of its own text; send its chunks as memories "
    "(POST /v1/memories/batch) or use a tenant of one object"
)
_CONVERSATIONS = (
    "conversations are not stored or recalled with their context for a tenant over "
    "several objects (SHARDS > 1) yet: each turn lives in the object of its own text, so "
    "a turn's neighbours are in others; send the turns as memories "
    "(POST /v1/memories/batch) and recall without context, or use a tenant of one object"
)
_ONE_OBJECT = {
    "remember_document": _DOCUMENTS,
    "remember_document_part": _DOCUMENTS,
    "remember_conversation": _CONVERSATIONS,
    "recall(context)": _CONVERSATIONS,
}
"""What a tenant over one object only serves, and why: a document's chunks are replaced
in the object that holds them, and a conversation's turns are read around a hit in its
object, but each memory lives in the object of its own text."""
_ROUTED = {"get", "update", "forget", "history", "feedback", "remember_many", *_PLACED_BY}
_ROUTED |= set(_ONE_OBJECT)
_ROUTED |= {"recall", "complete", "list", "list_scopes"}
_SUMMED = {
    op.name: op.route.summed
    for op in VIEW_OPS.values()
    if op.route is not None and op.route.summed is not None
}
_UNROUTED = {op.name for op in VIEW_OPS.values() if op.route} - _ROUTED - set(_SUMMED)
if _UNROUTED:  # a new route says how a tenant over several objects answers it
    raise RuntimeError(f"no way over shards for {sorted(_UNROUTED)}: declare Route(summed=...)")


async def _every(shards: Shards, ask: Callable[..., Any], *bodies: bytes) -> list[Answer]:
    """Every shard's answer, asked at once (``bodies``: one body per shard)."""
    asked = [ask(n, bodies[n]) if bodies else ask(n) for n in range(shards.count)]
    return list(await asyncio.gather(*asked))


def _failed(answers: Sequence[Answer]) -> Answer | None:
    """The first shard's answer that is not a success, if any: the request's answer."""
    return next((answer for answer in answers if answer[0] >= 300), None)


def _reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Answer:
    return status, headers or {}, api.dumps(body)


async def _recall(shards: Shards, ask: Callable[..., Any], parsed: dict[str, Any] | None) -> Answer:
    answers = await _every(shards, ask)
    failed = _failed(answers)
    if failed is not None or parsed is None:
        return failed or answers[0]
    top_k = parsed.get("top_k") or DEFAULT_TOP_K
    merged = merge_hits([_hits(json.loads(text)) for _, _, text in answers], top_k)
    return _reply(200, hits_to_json(merged), answers[0][1])


def _hits(body: dict[str, Any]) -> Hits:
    return Hits(
        [hit_from_json(hit) for hit in body["hits"]],
        status=body["status"],
        selection_id=body["selection_id"],
        mode=body["mode"],
        error=body.get("error"),
        coverage=body.get("coverage"),
    )


async def _complete(
    shards: Shards, ask: Callable[..., Any], parsed: dict[str, Any] | None
) -> Answer:
    joined = parsed.get("selection_id") if parsed is not None else None
    own = split_selection(joined, shards.count) if _text(joined) else None
    if parsed is None or own is None:  # not a recall of these shards: shard 0 says so
        return await ask(0)
    bodies = [json.dumps({**parsed, "selection_id": part}).encode() for part in own]
    answers = await _every(shards, ask, *bodies)
    failed = _failed(answers)
    if failed is not None:
        return failed
    completed = any(json.loads(text)["completed"] for _, _, text in answers)
    return _reply(200, {"completed": completed, "selection_id": joined})


async def _remember_many(
    shards: Shards, ask: Callable[..., Any], parsed: dict[str, Any] | None, grant: Grant
) -> Answer:
    try:
        items = api.remember_many_items(parsed)
        places = []
        for position, item in enumerate(items):
            try:
                shards.check(item, grant.scope)
                places.append(shards.place(grant.scope, item["text"]))
            except ValidationError as exc:
                raise ApiError("invalid_request", f"memories[{position}]: {exc}") from None
    except ApiError:
        return await ask(0)  # the API's own error (the same checks: nothing is stored)
    positions: dict[int, list[int]] = {}
    for position, shard in enumerate(places):
        positions.setdefault(shard, []).append(position)
    order = sorted(positions)
    options = {"dedupe": parsed["dedupe"]} if parsed and "dedupe" in parsed else {}
    asked = [
        ask(
            shard,
            json.dumps({"memories": [items[p] for p in positions[shard]], **options}).encode(),
        )
        for shard in order
    ]
    answers = list(await asyncio.gather(*asked))
    failed = _failed(answers)
    if failed is not None:
        return failed
    records: list[Any] = [None] * len(items)
    for shard, (_, _, text) in zip(order, answers, strict=True):
        for position, record in zip(positions[shard], json.loads(text)["memories"], strict=True):
            records[position] = record
    return _reply(201, {"memories": records})


async def _list(
    shards: Shards, method: str, url: str, headers: dict[str, str], grant: Grant
) -> Answer:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    before = next((value for name, value in reversed(query) if name == "before"), "")
    rest = urlunsplit(parts._replace(query=urlencode([q for q in query if q[0] != "before"])))
    below: tuple[str, str] | None = None
    if before:
        item = urlunsplit(parts._replace(path=f"/v1/memories/{quote(before, safe='')}", query=""))
        status, _, text = await shards.ask_holder(before, "GET", item, headers, b"", grant)
        if status == 404:  # not a live memory of the scope: nothing below it, as unsharded
            return await shards.ask(0, method, url, headers, b"", grant)
        if status >= 300:
            return status, {}, text
        record = json.loads(text)["memory"]
        below = (record["created_at"], record["id"])
    answers = list(
        await asyncio.gather(
            *(shards.ask(n, method, rest, headers, b"", grant, below) for n in range(shards.count))
        )
    )
    failed = _failed(answers)
    if failed is not None:
        return failed
    pages = [json.loads(text) for _, _, text in answers]
    limit = _limit(query)
    if limit is None:  # a bad limit: every shard refused it alike
        return answers[0]
    held = {record["id"]: record for page in pages for record in page["memories"]}
    newest = sorted(  # a memory met twice (in flight between two shards) once
        held.values(),
        key=lambda r: (parse_time(r["created_at"], "created_at"), r["id"]),
        reverse=True,
    )
    records, next_before = _page(newest, limit, lambda record: record["id"])
    return _reply(200, {"memories": records, "next_before": next_before})


def _scopes(answers: Sequence[Answer], url: str) -> Answer:
    failed = _failed(answers)
    if failed is not None:
        return failed
    counts: dict[tuple[str, ...], int] = {}
    for _, _, text in answers:
        for entry in json.loads(text)["scopes"]:
            scope = tuple(entry["scope"])
            counts[scope] = counts.get(scope, 0) + int(entry["count"])
    limit = _limit(parse_qsl(urlsplit(url).query, keep_blank_values=True), 100)
    assert limit is not None  # every shard answered, so the limit parsed
    ordered = [{"scope": list(scope), "count": counts[scope]} for scope in sorted(counts)]
    scopes, next_cursor = _page(ordered, limit, lambda entry: entry["scope"])
    return _reply(200, {"scopes": scopes, "next_cursor": next_cursor})


def _page(ordered: list[Any], limit: int, cursor: Callable[[Any], Any]) -> tuple[list[Any], Any]:
    """The first ``limit`` of the shards' entries (in the page's order), and the cursor
    of the last one when the page is full (as one object pages: ``next_before``,
    ``next_cursor``)."""
    page = ordered[:limit]
    return page, cursor(page[-1]) if len(page) == limit else None


def _summed(answers: Sequence[Answer], field: str) -> Answer:
    """Shard 0's answer with ``field`` summed over every shard's."""
    failed = _failed(answers)
    if failed is not None:
        return failed
    bodies = [json.loads(text) for _, _, text in answers]
    first = {**bodies[0], field: sum(int(body[field]) for body in bodies)}
    return _reply(answers[0][0], first, answers[0][1])


def _limit(query: Sequence[tuple[str, str]], default: int = 50) -> int | None:
    values = [value for name, value in query if name == "limit"]
    if not values:
        return default
    try:
        return int(values[-1])
    except ValueError:
        return None


def _json(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, or None (shard 0 then answers the API's error). A body
    nested deeper than the API allows is not parsed: the parser's recursion would
    overflow Pyodide's stack (the API refuses it unparsed, too)."""
    try:
        text = body.decode("utf-8")
        if nested_deeper_than(text, MAX_JSON_DEPTH):
            return None
        parsed = json.loads(text)
    except ValueError:  # UnicodeDecodeError included
        return None
    return parsed if isinstance(parsed, dict) else None


def _text(value: object) -> bool:
    return isinstance(value, str) and value != ""
