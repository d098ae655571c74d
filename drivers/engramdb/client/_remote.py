"""What both clients share: the requests, as flows, the answers read back, and the
lifecycles (``_RemoteMemoryBase``, ``_AsyncRemoteMemoryBase``) the faces in
``_faces_async.py`` and ``_faces_sync.py`` stand on."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, Unpack
from urllib.parse import quote

import httpx

from engramdb import (
    ConfigurationError,
    EngramError,
    Hits,
    MemoryRecord,
    ProviderError,
    ProviderHTTPError,
    ScopeCount,
    StoreError,
    ValidationError,
)
from engramdb.driver import RetryPolicy, arun, run
from engramdb.flows import UNSET, VIEW_OPS, ViewOp
from engramdb.http_api import ERRORS, error_code
from engramdb.json_format import hits_from_json, record_from_json
from engramdb.providers import Flow, HTTPService, ServiceOptions
from engramdb.validate import shown, validate_scope

from ._answers import NotTheAPI, error_of, read_answer
from ._exchange import (
    ACCEPT_ENCODING,
    DEFAULT_MAX_ANSWER_BYTES,
    Exchange,
    deadline_transport,
    perform_async,
    perform_sync,
)

T = TypeVar("T")
RecallMode = Literal["hybrid", "vector", "lexical"]
Fusion = Literal["convex", "rrf"]
MAX_BATCH = 100
"""Most memories one ``POST /v1/memories/batch`` takes: ``remember_many`` sends more in
several requests."""


class _Raise:
    """The ``missing`` of a call for which a 404 ``not_found`` is an error."""


_RAISE = _Raise()


@dataclass(frozen=True, slots=True)
class RemoteStatus:
    """``GET /v1/status``: the server's engramdb version, the token's scope and read
    scopes, how many memories the scope holds, the active embedding space, the schema
    version, and the server's maintainer (its JSON snapshot, or None)."""

    engramdb: str
    scope: tuple[str, ...]
    read: tuple[tuple[str, ...], ...]
    items: int
    active_space: str | None
    schema_version: int | None
    maintenance: Mapping[str, Any] | None


class _Remote(HTTPService):
    """What both clients share: the requests, as flows (driven sync or async), and the
    reading of their answers."""

    provider = "engramdb"

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        **options: Unpack[ServiceOptions],
    ) -> None:
        if not isinstance(token, str) or not token.strip():
            raise ConfigurationError(
                "token must be the bearer token the server's operator gave you (a non-empty string)"
            )
        if (
            isinstance(max_answer_bytes, bool)
            or not isinstance(max_answer_bytes, int)
            or max_answer_bytes < 1
        ):
            raise ConfigurationError(
                f"max_answer_bytes={shown(max_answer_bytes)} must be a whole number of bytes "
                f"from 1, e.g. {DEFAULT_MAX_ANSWER_BYTES} (the default, 64 MiB)"
            )
        self.max_answer_bytes = max_answer_bytes
        self._init_http(api_key=token, base_url=url, timeout=timeout, retry=retry, **options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    def _exchange(self) -> Exchange:
        return Exchange(self.timeout, self.max_answer_bytes)

    def _sync_client(self) -> httpx.Client:
        if self._client is None:
            transport = self._transport or deadline_transport()
            self._client = httpx.Client(transport=transport, timeout=self.timeout)
        return self._client

    # --- one request ----------------------------------------------------------------------

    def _call(
        self,
        method: str,
        template: str,
        path: str,
        build: Callable[[Any], T],
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        missing: T | _Raise = _RAISE,
    ) -> Flow[T]:
        """Flow: what ``build`` makes of the answer to one request (``template``: the
        API's path of ``path``), retried as the policy says and checked against the API
        (``_answers``); a 404 ``not_found`` answers ``missing`` when given (by default it
        raises)."""
        request = httpx.Request(
            method,
            self.base_url + path,
            json=body,
            params=params,
            headers={
                "accept": "application/json",
                "accept-encoding": ACCEPT_ENCODING,
                **self._bearer(),
            },
        )
        try:
            return (
                yield from self._send(
                    request, lambda answer: read_answer(answer, method, template, build)
                )
            )
        except ProviderHTTPError as exc:
            code, message = error_of(exc.body)
            if exc.status == 404 and code == "not_found" and not isinstance(missing, _Raise):
                return missing
            raise _mapped(exc.status, code, message, method, path) from None
        except ProviderError as exc:  # not reached, a lost connection, a damaged body
            raise StoreError(str(exc)) from None

    # --- the bound view's operations, as their declarations say ------------------------

    def _flow(self, name: str, given: Mapping[str, Any]) -> Flow[Any]:
        """Flow: the answer to the view operation ``name`` (:data:`VIEW_OPS`) with the
        arguments ``given`` (``UNSET`` ones left out), asked over its route."""
        if name == "remember_many":
            return (yield from self._remember_many(given["items"], given.get("dedupe")))
        op = VIEW_OPS[name]
        route = op.route
        assert route is not None
        args = {key: value for key, value in given.items() if value is not UNSET}
        path = route.path
        if "{id}" in path:
            path = path.replace("{id}", self._item(args["id"]))
        wire = _wire(op, args)
        build = _BUILDS[name](args) if name in _BUILDS else _read(op, args)
        missing = op.absent if op.has_absent else _RAISE
        if route.method in ("POST", "PATCH", "PUT"):
            call = self._call(route.method, route.path, path, build, body=wire, missing=missing)
        else:
            params = {key: _query_value(value) for key, value in wire.items()}
            call = self._call(route.method, route.path, path, build, params=params, missing=missing)
        return (yield from call)

    def _item(self, id: str) -> str:
        if not isinstance(id, str) or not id:
            raise ValidationError(f"id={id!r} must be a memory's id (a non-empty string)")
        return quote(id, safe="")

    def _remember_many(
        self, items: Iterable[Mapping[str, Any]], dedupe: bool | None
    ) -> Flow[list[MemoryRecord]]:
        remember = VIEW_OPS["remember"]
        given = [_wire(remember, dict(item)) for item in items]
        records: list[MemoryRecord] = []
        path = VIEW_OPS["remember_many"].route.path  # type: ignore[union-attr]
        for start in range(0, len(given), MAX_BATCH):  # each request is atomic on its own
            batch = given[start : start + MAX_BATCH]
            body = {"memories": batch, **({} if dedupe in (None, True) else {"dedupe": dedupe})}
            build = _records(exactly=len(batch))
            records += yield from self._call("POST", path, path, build, body=body)
        return records


class _RemoteMemoryBase(_Remote):
    """A remote engramdb bound to the scope of ``token``: the methods of
    :class:`~engramdb.BoundMemory` that the HTTP API offers, over ``url``.

    ``timeout`` is the deadline of a call in seconds (each request of ``remember_many``
    has its own), its connects, reads, retries and their waits included; ``retry`` the
    :class:`~engramdb.driver.RetryPolicy` of 429 and 5xx answers and lost connections;
    ``max_answer_bytes`` the largest answer read, after decompression
    (:data:`DEFAULT_MAX_ANSWER_BYTES`, 64 MiB). ``transport``/``client`` (and the test
    hooks ``sleep``, ``random``, ``clock``) are as for the HTTP embedders; with either,
    the deadline is checked between reads rather than inside them. Close it (or use
    ``with``) to close its connections.
    """

    def _run(self, flow: Flow[T]) -> T:
        return run(flow, perform_sync(self._exchange(), self._sync_client(), self._sleep))


class _AsyncRemoteMemoryBase(_Remote):
    """:class:`RemoteMemory` with ``await``: the same methods, arguments and answers."""

    async def _run(self, flow: Flow[T]) -> T:
        client = self._async_http_client()
        return await arun(flow, perform_async(self._exchange(), client, self._asleep))


# --- reading answers (each checked against the API's schema first: _answers) -------------


def _memory(answer: Any) -> MemoryRecord:
    return record_from_json(answer["memory"])


def _memory_of(id: str) -> Callable[[Any], MemoryRecord]:
    """The answer's memory, which must be the one ``id`` names."""

    def build(answer: Any) -> MemoryRecord:
        record = _memory(answer)
        _same_id("$.memory.id", record.id, id)
        return record

    return build


def _same_id(where: str, answered: str, asked: str) -> None:
    if answered != asked:
        raise NotTheAPI(where, f"{shown(answered)} is not the id asked for, {shown(asked)}")


def _page(answer: Any) -> Any:
    return answer["memories"]


def _records(
    *, exactly: int | None = None, at_most: int | None = None, key: Callable[[Any], Any] = _page
) -> Callable[[Any], list[MemoryRecord]]:
    """The answer's records: ``exactly`` as many as were sent, or ``at_most`` the limit."""

    def build(answer: Any) -> list[MemoryRecord]:
        found = key(answer)
        if exactly is not None and len(found) != exactly:
            raise NotTheAPI("$.memories", f"{len(found)} memories answer {exactly} sent")
        if at_most is not None and len(found) > at_most:
            raise NotTheAPI("$.memories", f"{len(found)} memories is more than limit={at_most}")
        return [record_from_json(record) for record in found]

    return build


def _revisions(id: str, limit: int) -> Callable[[Any], list[MemoryRecord]]:
    """A history's revisions: of the memory ``id``, at most ``limit``."""
    read = _records(at_most=limit, key=lambda answer: answer["revisions"])

    def build(answer: Any) -> list[MemoryRecord]:
        _same_id("$.id", answer["id"], id)
        records = read(answer)
        for record in records:
            _same_id("$.revisions[].id", record.id, id)
        return records

    return build


def _hits(top_k: object) -> Callable[[Any], Hits]:
    def build(answer: Any) -> Hits:
        hits = hits_from_json(answer)
        if isinstance(top_k, int) and len(hits) > top_k:
            raise NotTheAPI("$.hits", f"{len(hits)} hits is more than top_k={top_k}")
        return hits

    return build


def _deleted(id: str) -> Callable[[Any], bool]:
    """``forget``: the answer's ``deleted``, for the memory ``id``."""

    def build(answer: Any) -> bool:
        _same_id("$.id", answer["id"], id)
        deleted: bool = answer["deleted"]
        return deleted

    return build


def _deleted_count(answer: Any) -> int:
    deleted: int = answer["deleted"]
    return deleted


def _completed(selection_id: str) -> Callable[[Any], bool]:
    """``complete``: the answer's ``completed``, for the selection sent."""

    def build(answer: Any) -> bool:
        if answer["selection_id"] != selection_id:
            raise NotTheAPI("$.selection_id", f"{shown(answer['selection_id'])} was not sent")
        completed: bool = answer["completed"]
        return completed

    return build


def _scopes(limit: int) -> Callable[[Any], list[ScopeCount]]:
    def build(answer: Any) -> list[ScopeCount]:
        found = answer["scopes"]
        if len(found) > limit:
            raise NotTheAPI("$.scopes", f"{len(found)} scopes is more than limit={limit}")
        return [ScopeCount(validate_scope(tuple(s["scope"])), s["count"]) for s in found]

    return build


def _remote_status(answer: Any) -> RemoteStatus:
    return RemoteStatus(
        engramdb=answer["engramdb"],
        scope=validate_scope(tuple(answer["scope"])),
        read=tuple(validate_scope(tuple(scope)) for scope in answer["read"]),
        items=answer["items"],
        active_space=answer["space"],
        schema_version=answer["schema_version"],
        maintenance=answer["maintenance"],
    )


_BUILDS: dict[str, Callable[[Mapping[str, Any]], Callable[[Any], Any]]] = {
    "remember": lambda args: _memory,
    "recall": lambda args: _hits(args.get("top_k")),
    "get": lambda args: _memory_of(args["id"]),
    "update": lambda args: _memory_of(args["id"]),
    "forget": lambda args: _deleted(args["id"]),
    "history": lambda args: _revisions(args["id"], args.get("limit", 10)),
    "list": lambda args: _records(at_most=args.get("limit", 50)),
    "list_scopes": lambda args: _scopes(args.get("limit", 100)),
    "complete": lambda args: _completed(args["selection_id"]),
    "feedback": lambda args: _memory_of(args["memory_id"]),
    "status": lambda args: _remote_status,
}
"""The answers the client checks beyond the API's schema (the id asked for, no more than
the limit...); any other operation's answer is read as its declaration says."""


def _read(op: ViewOp, args: Mapping[str, Any]) -> Callable[[Any], Any]:
    assert op.read is not None
    read = op.read
    return lambda answer: read(answer, args)


def _wire(op: ViewOp, args: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON an operation's arguments are sent as: each field given, encoded; a None
    only where it is a value (else the server's default applies)."""
    wire: dict[str, Any] = {}
    for f in op.fields:
        if f.name == "id" or f.name not in args or args[f.name] is UNSET:
            continue
        value = args[f.name]
        if value is None and not f.null_is_value:
            continue
        wire[f.key] = f.encoded(value)
    unknown = set(args) - {f.name for f in op.fields}
    if unknown:
        raise ValidationError(f"{op.name} does not take {', '.join(sorted(unknown))} over HTTP")
    return wire


def _query_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        return json.dumps(value)
    return str(value)


def _mapped(status: int, code: str, message: str, method: str, path: str) -> EngramError:
    """The engramdb error of an error answer that is final (not retried, or retried to
    the end of the policy): the one ``engramdb.http_api.ERRORS`` names for its code (a
    code this version does not know: the first of its status; else a ``StoreError``)."""
    said = f"{message} ({code}, HTTP {status})" if code else f"HTTP {status}: {message}"
    row = error_code(code) or next((e for e in ERRORS if e.status == status), None)
    if row is None:
        return StoreError(f"the server failed: {said}")
    told = row.told.format(said=said, method=method, path=path)
    if issubclass(row.raised, ProviderError):
        return row.raised(told, provider="engramdb")
    return row.raised(told)
