"""``engramdb serve``'s Prometheus metrics, at ``GET /metrics`` behind their own token.

Off unless the operator sets ``ENGRAMDB_METRICS_TOKEN`` (or ``--metrics-token-file``): a
scraper sends it as ``Authorization: Bearer <token>``; the API's tokens do not open it,
nor does it open the API. Without it ``/metrics`` is an unknown path like any other.

Exposed (``prometheus_client``, its text format; ``pip install 'engramdb[server]'``):

- ``engramdb_http_requests_total{route, method, status}`` and
  ``engramdb_http_request_duration_seconds{route, method}`` (a histogram), where
  ``route`` is the path with a memory's id written ``{id}`` (``/v1/memories/{id}``), and
  ``other`` for a path the API does not answer; ``method`` is one of :data:`METHODS`
  and ``status`` one of :data:`STATUSES`, else ``other``. Every label takes its value
  from a fixed list, whatever clients send, so no request adds a series beyond
  :func:`series_bound`;
- ``engramdb_memories``, ``engramdb_pending_embeddings``: summed over the tenants this
  server has opened (a scrape opens no store);
- ``engramdb_maintainer_state{state}`` (1 for the summary's state, as ``/readyz``
  reports it: ``off``, ``idle``, ``running``, ``backing_off``, ``failing``),
  ``engramdb_maintainer_passes`` and ``engramdb_maintainer_failures`` (since the
  server started, summed), and
  ``engramdb_maintainer_last_success_timestamp_seconds``.

No metric names a tenant, a scope or a token; the counts are the operator's, who holds
every tenant's files anyway.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import importlib
from collections.abc import Callable, Mapping
from typing import Any

from engramdb import AsyncMemory, ConfigurationError
from engramdb.http_api import maintainer_summary, openapi_document

__all__ = [
    "METHODS",
    "STATUSES",
    "Metrics",
    "method_label",
    "route_label",
    "routes",
    "series_bound",
    "status_label",
]

STATES = ("off", "idle", "running", "backing_off", "failing")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OTHER = "other"
METHODS = ("CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE")
"""The ``method`` label's values, besides ``other``: HTTP's methods (RFC 9110 and PATCH).
A client may send any token as a method; the others are all ``other``."""
STATUSES = (200, 201, 400, 401, 404, 405, 408, 409, 413, 415, 429, 500, 502, 503)
"""The ``status`` label's values, besides ``other``: every status the server answers
(the OpenAPI document's, 404 and 405 for a path or method it does not answer, 408 for
a body that did not arrive in time)."""


@functools.cache
def _templates() -> tuple[tuple[str, ...], ...]:
    """The API's path templates (its OpenAPI document's, ``{id}`` for a memory's id)
    and ``/metrics``, each as its parts; fixed paths first, so they win."""
    paths = [*openapi_document()["paths"], "/metrics"]
    return tuple(tuple(p.split("/")) for p in sorted(paths, key=lambda p: "{" in p))


def routes() -> tuple[str, ...]:
    """The ``route`` label's values: the API's path templates, ``/metrics`` and ``other``."""
    return (*sorted("/".join(template) for template in _templates()), OTHER)


def route_label(path: str) -> str:
    """The ``route`` label of a request path: the API's path template it matches, else
    ``other`` (bounded, whatever paths clients send)."""
    parts = (path.split("?", 1)[0].rstrip("/") or "/").split("/")
    for template in _templates():
        if len(template) == len(parts) and all(
            want == got or (want.startswith("{") and got != "")
            for want, got in zip(template, parts, strict=True)
        ):
            return "/".join(template)
    return OTHER


def method_label(method: str) -> str:
    """The ``method`` label of a request's method: itself if one of :data:`METHODS`."""
    return method if method in METHODS else OTHER


def status_label(status: int) -> str:
    """The ``status`` label of an answer's status: itself if one of :data:`STATUSES`."""
    return str(status) if status in STATUSES else OTHER


def series_bound() -> int:
    """The most series ``/metrics`` can hold, whatever was asked: each label's values
    multiplied. A counter's label set is two series (``_total``, ``_created``), a
    histogram's one per bucket (``+Inf`` too) and ``_count``, ``_sum``, ``_created``;
    the gauges are one each (the maintainer's state one per state)."""
    pairs = len(routes()) * (len(METHODS) + 1)
    buckets = len(_buckets())
    return pairs * (len(STATUSES) + 1) * 2 + pairs * (buckets + 3) + 5 + len(STATES)


def _buckets() -> tuple[float, ...]:
    """The duration histogram's buckets (``prometheus_client``'s defaults, ``+Inf`` last)."""
    prometheus: Any = importlib.import_module("prometheus_client")
    return tuple(prometheus.Histogram.DEFAULT_BUCKETS)


class Metrics:
    """The server's metrics: one registry of its own (never the process-global one)."""

    def __init__(self, token: str, memories: Callable[[], Mapping[str, AsyncMemory]]) -> None:
        try:
            prometheus: Any = importlib.import_module("prometheus_client")
        except ImportError:
            raise ConfigurationError(
                "ENGRAMDB_METRICS_TOKEN is set but prometheus_client is not installed: "
                "pip install 'engramdb[server]'"
            ) from None
        if not token.strip():
            raise ConfigurationError(
                "the metrics token is empty; set ENGRAMDB_METRICS_TOKEN to a long random "
                "string (e.g. openssl rand -hex 32), or unset it to turn /metrics off"
            )
        self._digest = hashlib.sha256(token.strip().encode("utf-8")).digest()
        self._memories = memories
        self._prometheus = prometheus
        self.registry = registry = prometheus.CollectorRegistry()
        self.requests = prometheus.Counter(
            "engramdb_http_requests",
            "HTTP requests answered, by route, method and status",
            ["route", "method", "status"],
            registry=registry,
        )
        self.duration = prometheus.Histogram(
            "engramdb_http_request_duration_seconds",
            "Time to answer an HTTP request, by route and method",
            ["route", "method"],
            registry=registry,
        )
        gauge = prometheus.Gauge
        self.items = gauge("engramdb_memories", "Live memories", registry=registry)
        self.pending = gauge(
            "engramdb_pending_embeddings", "Memories waiting for a vector", registry=registry
        )
        self.state = gauge(
            "engramdb_maintainer_state",
            "The maintainers' summary state",
            ["state"],
            registry=registry,
        )
        self.passes = gauge(
            "engramdb_maintainer_passes",
            "Maintenance passes run since the server started",
            registry=registry,
        )
        self.failures = gauge(
            "engramdb_maintainer_failures",
            "Maintenance passes failed since the server started",
            registry=registry,
        )
        self.last_success = gauge(
            "engramdb_maintainer_last_success_timestamp_seconds",
            "When a maintenance pass last succeeded (Unix time; 0: never)",
            registry=registry,
        )

    def allows(self, headers: Mapping[str, str]) -> bool:
        """Whether the request carries the metrics token (compared by digest)."""
        scheme, _, token = headers.get("authorization", "").strip().partition(" ")
        given = hashlib.sha256(token.strip().encode("utf-8")).digest()
        return scheme.lower() == "bearer" and hmac.compare_digest(given, self._digest)

    def observe(self, path: str, method: str, status: int, seconds: float) -> None:
        route, verb = route_label(path), method_label(method)
        self.requests.labels(route, verb, status_label(status)).inc()
        self.duration.labels(route, verb).observe(seconds)

    async def exposition(self, enabled: bool) -> bytes:
        """The metrics in Prometheus' text format, the gauges read now."""
        memories = list(self._memories().values())
        items = pending = passes = failures = 0
        snapshots = []
        for memory in memories:
            status = await memory.status()
            items += status.items
            pending += status.pending
            if memory.maintainer is not None:
                snapshot = memory.maintainer.snapshot
                snapshots.append(snapshot)
                passes += snapshot.runs
                failures += snapshot.failures
        self.items.set(items)
        self.pending.set(pending)
        self.passes.set(passes)
        self.failures.set(failures)
        _, summary = maintainer_summary(snapshots, enabled=enabled)
        for state in STATES:
            self.state.labels(state).set(1 if summary["state"] == state else 0)
        succeeded = [s.last_success_at for s in snapshots if s.last_success_at is not None]
        self.last_success.set(max(succeeded).timestamp() if succeeded else 0)
        body: bytes = self._prometheus.generate_latest(self.registry)
        return body
