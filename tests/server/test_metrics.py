"""``engramdb serve``'s Prometheus metrics over real HTTP: only the metrics token opens
them, they count what was asked, and they name no tenant, scope or token."""

from __future__ import annotations

import importlib.util
import random
import string
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from server_helpers import ALEX_TOKEN, SAM_TOKEN, Server, start

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

METRICS_TOKEN = "metrics-secret-for-the-scraper"


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ENGRAMDB_METRICS_TOKEN", METRICS_TOKEN)
        running = start(tmp_path_factory.mktemp("metrics"))
    yield running
    running.stop()


def samples(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = httpx.get(
        server.url + "/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"}
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def test_only_the_metrics_token_opens_metrics(watched: Server) -> None:
    """No token, an API token or a wrong one: 401; the metrics token does not open the
    API either; POST is 405."""
    for token in (None, SAM_TOKEN, "metrics-secret-for-the-scraper-not"):
        headers = {"authorization": f"Bearer {token}"} if token else {}
        answer = httpx.get(watched.url + "/metrics", headers=headers)
        assert answer.status_code == 401 and "engramdb_" not in answer.text
    with watched.client(METRICS_TOKEN) as scraper:
        assert scraper.get("/v1/status").status_code == 401
        assert scraper.post("/metrics").status_code == 405


def test_requests_memories_and_the_maintainer_are_counted(watched: Server) -> None:
    before = samples(watched)
    with watched.client(SAM_TOKEN) as sam, watched.client(ALEX_TOKEN) as alex:
        made = sam.post("/v1/memories", json={"text": "Sam keeps bees"}).json()["memory"]
        alex.post("/v1/memories", json={"text": "Alex keeps goats"})
        for _ in range(3):
            assert sam.post("/v1/recall", json={"query": "bees"}).status_code == 200
        assert sam.get(f"/v1/memories/{made['id']}").status_code == 200
        assert sam.get("/v1/memories/no-such-id").status_code == 404
        assert sam.get("/random/path/12345").status_code == 404
    after = samples(watched)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    recall = {"route": "/v1/recall", "method": "POST"}
    assert grew("engramdb_http_requests_total", status="200", **recall) == 3
    assert grew("engramdb_http_request_duration_seconds_count", **recall) == 3
    assert (
        grew("engramdb_http_requests_total", route="/v1/memories", method="POST", status="201") == 2
    )
    item = {"route": "/v1/memories/{id}", "method": "GET"}
    assert grew("engramdb_http_requests_total", status="200", **item) == 1
    assert grew("engramdb_http_requests_total", status="404", **item) == 1
    assert grew("engramdb_http_requests_total", route="other", method="GET", status="404") == 1
    assert after[("engramdb_memories", ())] == 2  # both tenants, summed
    assert after[("engramdb_pending_embeddings", ())] == 0
    states = {dict(labels)["state"]: value for (name, labels), value in after.items()
              if name == "engramdb_maintainer_state"}  # fmt: skip
    assert sum(states.values()) == 1 and states["failing"] == 0


def test_metrics_name_no_tenant_scope_or_token(watched: Server) -> None:
    text = httpx.get(
        watched.url + "/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"}
    ).text
    for secret in ("acme", "sam", "alex", "bees", SAM_TOKEN, ALEX_TOKEN, METRICS_TOKEN):
        assert secret not in text


def test_without_a_metrics_token_there_is_no_metrics_page(server: Server) -> None:
    with server.client(SAM_TOKEN) as sam:
        assert sam.get("/metrics").status_code == 404


def test_an_empty_metrics_token_is_refused_at_start(tmp_path: Path) -> None:
    from engramdb import ConfigurationError
    from engramdb.server import build

    env = {"ENGRAMDB_TOKENS": '{"t": ["a"]}', "ENGRAMDB_METRICS_TOKEN": " "}
    with pytest.raises(ConfigurationError, match="metrics token is empty"):
        build(["--db", str(tmp_path / "m.db")], env)


def test_metrics_series_stay_bounded_whatever_methods_and_paths_clients_send(
    watched: Server,
) -> None:
    """10,000 requests with made-up methods and paths (some with a token, most without)
    leave ``/metrics`` at most ``series_bound()`` series: each label takes its value
    from a fixed list (routes: the API's path templates, ``/metrics`` and ``other``;
    methods: HTTP's 9 and ``other``; statuses: the 14 the server answers and
    ``other``), so the bound is the product of those lists (routes x 10 x 15 label sets
    of the counter, 2 series each; routes x 10 of the histogram, 18 series each; 10
    gauge series: 9,130 with the API's 17 paths), however many requests come."""
    from engramdb.http_api import openapi_document
    from engramdb.server_metrics import STATUSES, series_bound

    documented = {
        int(status)
        for operations in openapi_document()["paths"].values()
        for operation in operations.values()
        for status in operation["responses"]
    }
    assert documented <= set(STATUSES)  # every status the API documents has its label
    bound = series_bound()
    routes = len(openapi_document()["paths"]) + 2  # and /metrics, and other
    assert bound == routes * 10 * 15 * 2 + routes * 10 * 18 + 10 == 9130
    rng = random.Random(45)
    letters = string.ascii_letters + "!#$%&'*+-.^_`|~"

    def made_up(count: int) -> list[tuple[str, str, dict[str, str]]]:
        requests = []
        for _ in range(count):
            method = "".join(rng.choices(letters, k=rng.randint(1, 12)))
            if rng.random() < 0.1:
                method = rng.choice(["GET", "POST", "PATCH", "DELETE", "PUT", "get"])
            parts = rng.choices(string.ascii_lowercase + string.digits, k=rng.randint(0, 24))
            path = rng.choice(["/", "/v1/memories/", "/v1/", "/metrics/", "/x/"]) + "".join(parts)
            headers = {"authorization": f"Bearer {SAM_TOKEN}"} if rng.random() < 0.2 else {}
            requests.append((method, path, headers))
        return requests

    def send(batch: list[tuple[str, str, dict[str, str]]]) -> int:
        answered = 0
        with httpx.Client(base_url=watched.url, timeout=30) as client:
            for method, path, headers in batch:
                client.request(method, path, headers=headers)
                answered += 1
        return answered

    requests = made_up(10_000)
    with ThreadPoolExecutor(4) as pool:
        assert sum(pool.map(send, [requests[i::4] for i in range(4)])) == 10_000
    answer = httpx.get(
        watched.url + "/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"}
    )
    series = [s for f in text_string_to_metric_families(answer.text) for s in f.samples]
    assert len(series) <= bound
    assert len(answer.content) < 2_000_000
    methods = {s.labels["method"] for s in series if "method" in s.labels}
    assert methods <= {"other", "GET", "POST", "PATCH", "DELETE", "PUT"}
    if importlib.util.find_spec("httptools") is None:  # h11 hands the app any method
        assert "other" in methods  # (httptools answers 400 itself to one it does not know)


def test_the_series_bound_is_reached_when_every_label_value_is_seen() -> None:
    """Every route, method and status seen (and one of each unknown, counted as
    ``other``) fills the page to exactly ``series_bound()``: the bound is tight, not a
    guess, and the page is then about 0.9 MB."""
    import asyncio

    from engramdb.server_metrics import METHODS, STATUSES, Metrics, routes, series_bound

    metrics = Metrics("a-token", dict)
    for route in routes():
        path = "/no/such" if route == "other" else route.replace("{id}", "m1")
        for method in (*METHODS, "MADE-UP"):
            for status in (*STATUSES, 299):
                metrics.observe(path, method, status, 0.01)
    page = asyncio.run(metrics.exposition(True))
    series = [s for f in text_string_to_metric_families(page.decode()) for s in f.samples]
    assert len(series) == series_bound()
    assert len(page) < 1_000_000
