"""What both clients share: the requests, as flows, the answers read back, and the
lifecycles (``_RemoteMemoryBase``, ``_AsyncRemoteMemoryBase``) the faces in
``_faces_async.py`` and ``_faces_sync.py`` stand on."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
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
MAX_BATCH = 100
"""Most memories one ``POST /v1/memories/batch`` takes: ``remember_many`` sends more in
several requests."""
_MEMORIES = "/v1/memories"  # the API's paths, as its OpenAPI document writes them
_ITEM = "/v1/memories/{id}"
_HISTORY = "/v1/memories/{id}/history"


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

    def _item(self, id: str, tail: str = "") -> str:
        if not isinstance(id, str) or not id:
            raise ValidationError(f"id={id!r} must be a memory's id (a non-empty string)")
        return f"/v1/memories/{quote(id, safe='')}{tail}"

    # --- the flows of the bound view's methods --------------------------------------------

    def _remember(
        self,
        text: str,
        metadata: Mapping[str, object] | None,
        labels: Mapping[str, list[str]] | None,
        importance: float,
    ) -> Flow[MemoryRecord]:
        body = _fields(text=text, metadata=metadata, labels=labels, importance=importance)
        return (yield from self._call("POST", _MEMORIES, "/v1/memories", _memory, body=body))

    def _remember_many(self, items: Iterable[Mapping[str, Any]]) -> Flow[list[MemoryRecord]]:
        given = [dict(item) for item in items]
        records: list[MemoryRecord] = []
        for start in range(0, len(given), MAX_BATCH):  # each request is atomic on its own
            batch = given[start : start + MAX_BATCH]
            build = _records(exactly=len(batch))
            path = "/v1/memories/batch"
            records += yield from self._call("POST", path, path, build, body={"memories": batch})
        return records

    def _recall(self, query: str, options: Mapping[str, Any]) -> Flow[Hits]:
        body = {"query": query, **{k: v for k, v in options.items() if v is not None}}
        build = _hits(options.get("top_k"))
        return (yield from self._call("POST", "/v1/recall", "/v1/recall", build, body=body))

    def _get(self, id: str) -> Flow[MemoryRecord | None]:
        path = self._item(id)
        return (yield from self._call("GET", _ITEM, path, _memory_of(id), missing=None))

    def _update(self, id: str, changes: Mapping[str, Any]) -> Flow[MemoryRecord | None]:
        body = {k: v for k, v in changes.items() if v is not None}
        path = self._item(id)
        build = _memory_of(id)
        return (yield from self._call("PATCH", _ITEM, path, build, body=body, missing=None))

    def _forget(self, id: str) -> Flow[bool]:
        path = self._item(id)
        return (yield from self._call("DELETE", _ITEM, path, _deleted(id), missing=False))

    def _history(self, id: str, limit: int) -> Flow[list[MemoryRecord] | None]:
        path, params = self._item(id, "/history"), _limit(limit)
        build = _revisions(id, limit)
        return (yield from self._call("GET", _HISTORY, path, build, params=params, missing=None))

    def _list(self, limit: int, before: str | None) -> Flow[list[MemoryRecord]]:
        params = {**_limit(limit), **({"before": before} if before else {})}
        build = _records(at_most=limit)
        return (yield from self._call("GET", _MEMORIES, _MEMORIES, build, params=params))

    def _list_scopes(self, limit: int, cursor: Sequence[str] | None) -> Flow[list[ScopeCount]]:
        params = {**_limit(limit), **({"cursor": json.dumps(list(cursor))} if cursor else {})}
        build = _scopes(limit)
        return (yield from self._call("GET", "/v1/scopes", "/v1/scopes", build, params=params))

    def _forget_all(self) -> Flow[int]:
        return (yield from self._call("DELETE", "/v1/scope", "/v1/scope", _deleted_count))

    def _complete(self, selection_id: str, score: float) -> Flow[bool]:
        body = {"selection_id": selection_id, "score": score}
        build = _completed(selection_id)
        return (yield from self._call("POST", "/v1/complete", "/v1/complete", build, body=body))

    def _feedback(self, memory_id: str, value: float | None) -> Flow[MemoryRecord | None]:
        body = {"memory_id": memory_id, "value": value}
        build = _memory_of(memory_id)
        path = "/v1/feedback"
        return (yield from self._call("POST", path, path, build, body=body, missing=None))

    def _status(self) -> Flow[RemoteStatus]:
        return (yield from self._call("GET", "/v1/status", "/v1/status", _remote_status))


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


def _fields(**given: Any) -> dict[str, Any]:
    return {name: value for name, value in given.items() if value is not None}


def _limit(limit: int) -> dict[str, str]:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValidationError(f"limit={limit!r} must be a whole number from 1, e.g. 50")
    return {"limit": str(limit)}


def _recall_options(
    top_k: int,
    labels: Mapping[str, list[str]] | None,
    mode: RecallMode,
    min_similarity: float | None,
    filter: Mapping[str, Any] | None,
    rerank: int | None,
) -> dict[str, Any]:
    return {
        "top_k": top_k,
        "labels": labels,
        "mode": mode,
        "min_similarity": min_similarity,
        "filter": filter,
        "rerank": rerank,
    }
