"""``RemoteMemory`` and ``AsyncRemoteMemory``: a remote engramdb, used like a bound view.

A server (``engramdb serve`` or the Worker) binds each token to a scope; a client holds
a URL and a token and gets the bound view's methods over HTTP (docs/http.md, "A Python
client")::

    from engramdb.client import RemoteMemory

    with RemoteMemory("http://127.0.0.1:8080", token) as memory:
        memory.remember("Sam prefers aisle seats")
        hits = memory.recall("seat preference")

Answers come back as engramdb's own types (``MemoryRecord``, ``Hits``) through the one
JSON codec (``engramdb.json_format``), and errors as engramdb's error tree:

- 400, 413, 415 -> ``ValidationError`` (the server's message names the value and the
  fix); 401 -> ``ConfigurationError`` (the token is missing or unknown: the token is
  never in a message); 409 -> ``ConflictError``;
- a memory that is not there is ``None`` (``get``, ``update``, ``history``,
  ``feedback``) or ``False`` (``forget``), as the bound view answers;
- 429 and 5xx are retried with the ``RetryPolicy`` (``retry=``; by default 4 retries,
  0.5 s doubling, never above 20 s), a ``Retry-After`` honoured; past it, 502
  (``embedding_failed``) is a ``ProviderError`` and the others a ``StoreError``, as is a
  server that cannot be reached or does not answer in time.

A write retried after an answer was lost does no harm: ``remember`` of a text its scope
already holds answers the existing memory, and ``forget`` of a memory already deleted
answers ``False``.

The token is held as a ``Secret``: only the ``Authorization`` header carries it, never a
message, a ``repr`` or a log line. Needs ``httpx`` (``pip install 'engramdb[client]'``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, Unpack
from urllib.parse import quote

try:
    import httpx
except ModuleNotFoundError as missing:  # the core installs with no dependency
    raise ImportError(
        "engramdb.client needs httpx, which is not installed; install it with:\n"
        "pip install 'engramdb[client]'"
    ) from missing

from engramdb import (
    ConfigurationError,
    ConflictError,
    EngramError,
    Hits,
    MemoryRecord,
    ProviderError,
    ProviderHTTPError,
    ScopeCount,
    StoreError,
    ValidationError,
)
from engramdb.driver import RetryPolicy
from engramdb.json_format import hits_from_json, record_from_json
from engramdb.providers._flow import Flow, adrive, drive
from engramdb.providers._http import HTTPService
from engramdb.providers._options import ServiceOptions

__all__ = ["AsyncRemoteMemory", "RemoteMemory", "RemoteStatus"]

T = TypeVar("T")
RecallMode = Literal["hybrid", "vector", "lexical"]
MAX_BATCH = 100
"""Most memories one ``POST /v1/memories/batch`` takes: ``remember_many`` sends more in
several requests."""
_MISSING = object()  # what a 404 ``not_found`` answers, for the methods that allow it


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
        **options: Unpack[ServiceOptions],
    ) -> None:
        if not isinstance(token, str) or not token.strip():
            raise ConfigurationError(
                "token must be the bearer token the server's operator gave you (a non-empty string)"
            )
        self._init_http(api_key=token, base_url=url, timeout=timeout, retry=retry, **options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    # --- one request ----------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        missing: Any = _MISSING,
    ) -> Flow[Any]:
        """Flow: the JSON answer of one request, retried as the policy says; a 404
        ``not_found`` answers ``missing`` when given (by default it raises)."""
        request = httpx.Request(
            method,
            self.base_url + path,
            json=body,
            params=params,
            headers={"accept": "application/json", **self._bearer()},
            extensions={"timeout": httpx.Timeout(self.timeout).as_dict()},
        )
        try:
            return (yield from self._send(request, _json))
        except ProviderHTTPError as exc:
            code, message = _error_of(exc.body)
            if exc.status == 404 and code == "not_found" and missing is not _MISSING:
                return missing
            raise _mapped(exc.status, code, message, method, path) from None
        except ProviderError as exc:  # not reached, no answer in time, a damaged answer
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
        answer = yield from self._call("POST", "/v1/memories", body)
        return record_from_json(answer["memory"])

    def _remember_many(self, items: Iterable[Mapping[str, Any]]) -> Flow[list[MemoryRecord]]:
        given = [dict(item) for item in items]
        records: list[MemoryRecord] = []
        for start in range(0, len(given), MAX_BATCH):  # each request is atomic on its own
            body = {"memories": given[start : start + MAX_BATCH]}
            answer = yield from self._call("POST", "/v1/memories/batch", body)
            records += [record_from_json(r) for r in answer["memories"]]
        return records

    def _recall(self, query: str, options: Mapping[str, Any]) -> Flow[Hits]:
        body = {"query": query, **{k: v for k, v in options.items() if v is not None}}
        answer = yield from self._call("POST", "/v1/recall", body)
        return hits_from_json(answer)

    def _get(self, id: str) -> Flow[MemoryRecord | None]:
        answer = yield from self._call("GET", self._item(id), missing=None)
        return None if answer is None else record_from_json(answer["memory"])

    def _update(self, id: str, changes: Mapping[str, Any]) -> Flow[MemoryRecord | None]:
        body = {k: v for k, v in changes.items() if v is not None}
        answer = yield from self._call("PATCH", self._item(id), body, missing=None)
        return None if answer is None else record_from_json(answer["memory"])

    def _forget(self, id: str) -> Flow[bool]:
        answer = yield from self._call("DELETE", self._item(id), missing=None)
        return answer is not None

    def _history(self, id: str, limit: int) -> Flow[list[MemoryRecord] | None]:
        answer = yield from self._call(
            "GET", self._item(id, "/history"), params=_limit(limit), missing=None
        )
        return None if answer is None else [record_from_json(r) for r in answer["revisions"]]

    def _list(self, limit: int, before: str | None) -> Flow[list[MemoryRecord]]:
        params = {**_limit(limit), **({"before": before} if before else {})}
        answer = yield from self._call("GET", "/v1/memories", params=params)
        return [record_from_json(r) for r in answer["memories"]]

    def _list_scopes(self, limit: int, cursor: Sequence[str] | None) -> Flow[list[ScopeCount]]:
        params = {**_limit(limit), **({"cursor": json.dumps(list(cursor))} if cursor else {})}
        answer = yield from self._call("GET", "/v1/scopes", params=params)
        return [ScopeCount(tuple(s["scope"]), int(s["count"])) for s in answer["scopes"]]

    def _forget_all(self) -> Flow[int]:
        answer = yield from self._call("DELETE", "/v1/scope")
        return int(answer["deleted"])

    def _complete(self, selection_id: str, score: float) -> Flow[bool]:
        body = {"selection_id": selection_id, "score": score}
        answer = yield from self._call("POST", "/v1/complete", body)
        return bool(answer["completed"])

    def _feedback(self, memory_id: str, value: float | None) -> Flow[MemoryRecord | None]:
        body = {"memory_id": memory_id, "value": value}
        answer = yield from self._call("POST", "/v1/feedback", body, missing=None)
        return None if answer is None else record_from_json(answer["memory"])

    def _status(self) -> Flow[RemoteStatus]:
        answer = yield from self._call("GET", "/v1/status")
        return RemoteStatus(
            engramdb=str(answer["engramdb"]),
            scope=tuple(answer["scope"]),
            read=tuple(tuple(scope) for scope in answer["read"]),
            items=int(answer["items"]),
            active_space=answer["space"],
            schema_version=answer["schema_version"],
            maintenance=answer["maintenance"],
        )


class RemoteMemory(_Remote):
    """A remote engramdb bound to the scope of ``token``: the methods of
    :class:`~engramdb.BoundMemory` that the HTTP API offers, over ``url``.

    ``timeout`` is per request (seconds); ``retry`` the :class:`~engramdb.driver.RetryPolicy`
    of 429 and 5xx answers and lost connections. ``transport``/``client`` (and the test
    hooks ``sleep``, ``random``, ``clock``) are as for the HTTP embedders. Close it (or
    use ``with``) to close its connections.
    """

    def _run(self, flow: Flow[T]) -> T:
        return drive(flow, self._sync_client(), self._sleep)

    def remember(
        self,
        text: str,
        *,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
    ) -> MemoryRecord:
        """Remember ``text`` in the token's scope (a text the scope holds answers the
        memory that holds it)."""
        return self._run(self._remember(text, metadata, labels, importance))

    def remember_many(self, items: Iterable[Mapping[str, Any]]) -> list[MemoryRecord]:
        """Remember many items (dicts with ``text`` and any of ``metadata``, ``labels``,
        ``importance``), up to 100 per request, each request atomic."""
        return self._run(self._remember_many(items))

    def recall(
        self,
        query: str,
        *,
        top_k: int = 5,
        labels: Mapping[str, list[str]] | None = None,
        mode: RecallMode = "hybrid",
        min_similarity: float | None = None,
        filter: Mapping[str, Any] | None = None,
        rerank: int | None = None,
    ) -> Hits:
        """Recall from the token's scope and its read scopes, as the bound view does."""
        options = _recall_options(top_k, labels, mode, min_similarity, filter, rerank)
        return self._run(self._recall(query, options))

    def get(self, id: str) -> MemoryRecord | None:
        """The memory ``id`` if the token can see it, else None."""
        return self._run(self._get(id))

    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float | None = None,
        expected_revision: int | None = None,
    ) -> MemoryRecord | None:
        """Change the given fields of a memory of the token's scope (None leaves a field
        as it is); the record after it, or None when there is no such memory.
        ``ConflictError`` when ``expected_revision`` names another revision."""
        changes = _fields(
            text=text,
            metadata=metadata,
            labels=labels,
            importance=importance,
            expected_revision=expected_revision,
        )
        return self._run(self._update(id, changes))

    def forget(self, id: str) -> bool:
        """Delete the memory ``id`` of the token's scope; False when there is none."""
        return self._run(self._forget(id))

    def history(self, id: str, limit: int = 10) -> list[MemoryRecord] | None:
        """Earlier revisions of a memory the token can see, newest first; None when it
        cannot see it."""
        return self._run(self._history(id, limit))

    def list_scopes(
        self, limit: int = 100, cursor: Sequence[str] | None = None
    ) -> list[ScopeCount]:
        """The scopes under the token's scope that hold memories, with counts."""
        return self._run(self._list_scopes(limit, cursor))

    def forget_all(self) -> int:
        """Delete every memory of the token's scope; return how many."""
        return self._run(self._forget_all())

    def complete(self, selection_id: str, score: float) -> bool:
        """Apply ``score`` in [-1, 1] to the memories a recall returned, once."""
        return self._run(self._complete(selection_id, score))

    def feedback(self, memory_id: str, value: float | None) -> MemoryRecord | None:
        """Set (``None``: clear) a memory's manual value in [-1, 1]; None when the token's
        scope has no such memory."""
        return self._run(self._feedback(memory_id, value))

    def status(self) -> RemoteStatus:
        """The server's version, the token's scopes and counts (nothing of another
        scope)."""
        return self._run(self._status())

    def list(self, limit: int = 50, before: str | None = None) -> list[MemoryRecord]:
        """Memories of the token's scope, newest first; ``before``: the id to continue
        after."""
        return self._run(self._list(limit, before))


class AsyncRemoteMemory(_Remote):
    """:class:`RemoteMemory` with ``await``: the same methods, arguments and answers."""

    async def _run(self, flow: Flow[T]) -> T:
        return await adrive(flow, self._async_http_client(), self._asleep)

    async def remember(
        self,
        text: str,
        *,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
    ) -> MemoryRecord:
        """As :meth:`RemoteMemory.remember`."""
        return await self._run(self._remember(text, metadata, labels, importance))

    async def remember_many(self, items: Iterable[Mapping[str, Any]]) -> list[MemoryRecord]:
        """As :meth:`RemoteMemory.remember_many`."""
        return await self._run(self._remember_many(items))

    async def recall(
        self,
        query: str,
        *,
        top_k: int = 5,
        labels: Mapping[str, list[str]] | None = None,
        mode: RecallMode = "hybrid",
        min_similarity: float | None = None,
        filter: Mapping[str, Any] | None = None,
        rerank: int | None = None,
    ) -> Hits:
        """As :meth:`RemoteMemory.recall`."""
        options = _recall_options(top_k, labels, mode, min_similarity, filter, rerank)
        return await self._run(self._recall(query, options))

    async def get(self, id: str) -> MemoryRecord | None:
        """As :meth:`RemoteMemory.get`."""
        return await self._run(self._get(id))

    async def update(
        self,
        id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float | None = None,
        expected_revision: int | None = None,
    ) -> MemoryRecord | None:
        """As :meth:`RemoteMemory.update`."""
        changes = _fields(
            text=text,
            metadata=metadata,
            labels=labels,
            importance=importance,
            expected_revision=expected_revision,
        )
        return await self._run(self._update(id, changes))

    async def forget(self, id: str) -> bool:
        """As :meth:`RemoteMemory.forget`."""
        return await self._run(self._forget(id))

    async def history(self, id: str, limit: int = 10) -> list[MemoryRecord] | None:
        """As :meth:`RemoteMemory.history`."""
        return await self._run(self._history(id, limit))

    async def list_scopes(
        self, limit: int = 100, cursor: Sequence[str] | None = None
    ) -> list[ScopeCount]:
        """As :meth:`RemoteMemory.list_scopes`."""
        return await self._run(self._list_scopes(limit, cursor))

    async def forget_all(self) -> int:
        """As :meth:`RemoteMemory.forget_all`."""
        return await self._run(self._forget_all())

    async def complete(self, selection_id: str, score: float) -> bool:
        """As :meth:`RemoteMemory.complete`."""
        return await self._run(self._complete(selection_id, score))

    async def feedback(self, memory_id: str, value: float | None) -> MemoryRecord | None:
        """As :meth:`RemoteMemory.feedback`."""
        return await self._run(self._feedback(memory_id, value))

    async def status(self) -> RemoteStatus:
        """As :meth:`RemoteMemory.status`."""
        return await self._run(self._status())

    async def list(self, limit: int = 50, before: str | None = None) -> list[MemoryRecord]:
        """As :meth:`RemoteMemory.list`."""
        return await self._run(self._list(limit, before))


# --- reading answers ----------------------------------------------------------------------


def _json(response: httpx.Response) -> Any:
    """A 2xx answer's JSON object (an answer that is not one is the server's failure)."""
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise StoreError(
            f"{response.request.url.host} answered HTTP {response.status_code} without a "
            "JSON object: is the URL an engramdb server?"
        )
    return answer


def _error_of(body: str) -> tuple[str, str]:
    """The ``code`` and ``message`` of an error answer (empty when it is not one)."""
    try:
        error = json.loads(body)["error"]
        return str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        return "", body[:200]


def _mapped(status: int, code: str, message: str, method: str, path: str) -> EngramError:
    """The engramdb error of an error answer that is final (not retried, or retried to
    the end of the policy)."""
    said = f"{message} ({code}, HTTP {status})" if code else f"HTTP {status}: {message}"
    if status == 401:
        return ConfigurationError(f"the server refused the token: {said}")
    if status == 409:
        return ConflictError(said)
    if status in (400, 413, 415):
        return ValidationError(said)
    if status in (404, 405):
        return ConfigurationError(
            f"{method} {path}: {said}; is the URL an engramdb server of this version?"
        )
    if status == 502:
        return ProviderError(f"the server's embedding model failed: {said}", provider="engramdb")
    return StoreError(f"the server failed: {said}")


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
