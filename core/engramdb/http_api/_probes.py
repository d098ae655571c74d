"""The HTTP API's probes: ``/healthz`` (liveness) and ``/readyz`` (readiness).

A load balancer or an orchestrator asks them without a token, so they are answered
before authorization and say nothing about any scope or tenant: no names, no counts, no
memory data. ``/healthz`` answers whenever the process does and touches nothing.
``/readyz`` asks the host's readiness check (a :data:`ReadinessCheck`): each check is a
name and one short word, ``"ok"`` or why not (``"unreachable"``, ``"misconfigured"``,
``"failing"`` ...); the details of a failure go to the host's log (``Reply.log``), never
to the caller. Both are ``GET`` (or ``HEAD``) only and read no body. :func:`probe` also
answers ``GET /openapi.json``, the API's OpenAPI document, which holds nothing about any
tenant either.

The host does the probing (it knows its stores); this module holds what every host
shares: the routes and replies (:func:`probe`), one cheap read through a store
(:func:`check_store`) and the maintainer's state in a coarse, tenant-free form
(:func:`maintainer_summary`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from engramdb import __version__ as engramdb_version
from engramdb._base.clock import Clock, system_clock
from engramdb._base.errors import ConfigurationError, SchemaTooNewError
from engramdb.flows._maintainer import MaintenanceSnapshot
from engramdb.flows._redact import redact_secrets
from engramdb.http_api._spec import OPENAPI_PATH, OPERATIONS, cached_document
from engramdb.http_api._wire import Reply, method_not_allowed
from engramdb.json_format import format_time
from engramdb.store._ops import GetItems

__all__ = [
    "MAINTAINER_FAILURES_UNREADY",
    "PROBE_PATHS",
    "Readiness",
    "ReadinessCheck",
    "check_store",
    "maintainer_summary",
    "probe",
]

_OPEN: dict[str, frozenset[str]] = {
    path: frozenset(op.method for op in OPERATIONS if op.path == path)
    for path in {op.path for op in OPERATIONS if not op.token}
}  # the paths answered without a token (the probes and the document) -> their methods
PROBE_PATHS = frozenset(_OPEN) - {OPENAPI_PATH}
"""The probes' paths, answered without a token (as ``/openapi.json`` is)."""
MAINTAINER_FAILURES_UNREADY = 3
"""Failed maintenance passes in a row after which ``/readyz`` answers 503: one failed
pass (an embedder's blip) does not take a server out of its load balancer."""

_PROBE_ID = "engramdb-readyz-probe"  # an id no memory has: the read finds nothing


@dataclass(frozen=True, slots=True)
class Readiness:
    """What a host's readiness check found. ``checks``: a name -> ``"ok"`` or a short,
    non-secret word saying why not; ready when every check is ``"ok"``. ``maintainer``:
    :func:`maintainer_summary` (None: the host has none to show). ``log``: the details
    of a failure, for the host's log only."""

    checks: Mapping[str, str] = field(default_factory=dict)
    maintainer: Mapping[str, Any] | None = None
    log: str | None = field(default=None, compare=False)

    @property
    def ready(self) -> bool:
        return all(value == "ok" for value in self.checks.values())


ReadinessCheck = Callable[[], Awaitable[Readiness]]
"""A host's readiness check: cheap, asked on every ``GET /readyz``; it should not raise
(if it does, the probe answers 503 and the error goes to the log)."""


async def probe(method: str, url: str, *, ready: ReadinessCheck | None = None) -> Reply | None:
    """The reply to a probe (``/healthz``, ``/readyz``) or to ``GET /openapi.json`` (the
    API's OpenAPI document, built once), or None for any other path (the host then
    authorizes the request as usual). ``ready``: the host's check (None: the process
    answering is all there is to check). Never raises."""
    path = urlsplit(url).path.rstrip("/") or "/"
    allowed = _OPEN.get(path)
    if allowed is None:
        return None
    method = method.upper()
    if method not in allowed:
        return method_not_allowed(method, path, allowed).reply()
    if path == OPENAPI_PATH:
        return Reply(200, cached_document())
    if path == "/healthz":
        return Reply(200, {"status": "ok", "engramdb": engramdb_version})
    try:
        found = Readiness() if ready is None else await ready()
    except Exception as exc:
        found = Readiness(
            {"probe": "failed"},
            log=redact_secrets(f"engramdb: readiness check failed: {type(exc).__name__}: {exc}"),
        )
    body: dict[str, Any] = {
        "status": "ready" if found.ready else "unavailable",
        "engramdb": engramdb_version,
        "checks": dict(found.checks),
    }
    if found.maintainer is not None:
        body["maintainer"] = dict(found.maintainer)
    return Reply(200 if found.ready else 503, body, log=found.log)


async def check_store(
    open_store: Callable[[], Any], *, clock: Clock = system_clock
) -> tuple[str, str | None]:
    """One cheap read through the store ``open_store()`` returns (a lookup of an id no
    memory has, through the store's ``abatch`` or ``batch``: the store's connection,
    schema and tables answer it): ``("ok", None)``, or a short word and a log line —
    ``"schema_too_new"``, ``"misconfigured"`` or ``"unreachable"`` (anything else).
    ``clock``: the time the lookup is made at (the host's, as its memories')."""
    try:
        store = open_store()
        ops = [GetItems((_PROBE_ID,), clock())]
        abatch = getattr(store, "abatch", None)
        if abatch is not None:
            await abatch(ops)
        else:
            store.batch(ops)
    except SchemaTooNewError as exc:
        return "schema_too_new", _log("store", exc)
    except ConfigurationError as exc:
        return "misconfigured", _log("store", exc)
    except Exception as exc:
        return "unreachable", _log("store", exc)
    return "ok", None


def _log(what: str, exc: Exception) -> str:
    return redact_secrets(f"engramdb: readiness: {what}: {type(exc).__name__}: {exc}")


def maintainer_summary(
    snapshots: Iterable[MaintenanceSnapshot], *, enabled: bool = True
) -> tuple[str, dict[str, Any]]:
    """The state of a host's maintainers (one per tenant on ``engramdb serve``) as one
    tenant-free summary, and its readiness word.

    ``state``: ``"off"`` (none runs), ``"idle"`` (none has finished a pass yet, or all
    wait for their next one), ``"running"`` (one runs a pass), ``"failing"`` (one has
    failed its last :data:`MAINTAINER_FAILURES_UNREADY` passes or more: not ready) or
    ``"backing_off"`` (one failed fewer passes than that: still ready);
    ``last_pass_at``/``last_success_at``: the latest pass finished, and succeeded, of
    any of them. No counts: how many maintainers there are would count the tenants.
    """
    if not enabled:
        return "ok", {"state": "off", "last_pass_at": None, "last_success_at": None}
    seen = list(snapshots)
    failures = max((s.consecutive_failures for s in seen), default=0)
    if failures >= MAINTAINER_FAILURES_UNREADY:
        state = "failing"
    elif failures > 0:
        state = "backing_off"
    elif any(s.state == "running" for s in seen):
        state = "running"
    else:
        state = "idle"
    finished = [s.last_finished_at for s in seen if s.last_finished_at is not None]
    succeeded = [s.last_success_at for s in seen if s.last_success_at is not None]
    summary = {
        "state": state,
        "last_pass_at": format_time(max(finished, default=None)),
        "last_success_at": format_time(max(succeeded, default=None)),
    }
    return ("failing" if state == "failing" else "ok"), summary
