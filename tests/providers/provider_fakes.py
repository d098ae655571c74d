"""Fakes for the provider tests: scripted MockTransport servers, a recording sleep and
one "good answer" per provider (the real loopback server is in loopback_server.py).
"""

from __future__ import annotations

import base64
import json
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from engramdb.providers import (
    CloudflareEmbedder,
    CohereEmbedder,
    GeminiEmbedder,
    HTTPEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    VoyageEmbedder,
)

# Recognisable, and shaped like no real key so only exact-value redaction can hide it;
# not named after the project, so no checkout's folder can hold it.
FAKE_KEY = "fake-KEY-7f3a9c1e5b2d"

Step = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class Script:
    """A MockTransport handler answering with ``steps`` in order, recording requests."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.steps:
            raise AssertionError(f"unexpected request #{len(self.requests)}: {request!r}")
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        if isinstance(step, httpx.Response):
            return step
        return step(request)

    def bodies(self) -> list[Any]:
        return [json.loads(request.content) for request in self.requests]


@dataclass
class Sleeps:
    """Records the back-off waits instead of waiting."""

    waits: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def texts_of(exc: BaseException) -> list[str]:
    """str and repr of ``exc`` and of every exception chained to it."""
    found: list[str] = []
    seen: BaseException | None = exc
    while seen is not None:
        found += [str(seen), repr(seen), repr(seen.args)]
        found += [str(v) for v in vars(seen).values()] if hasattr(seen, "__dict__") else []
        seen = seen.__cause__ or seen.__context__
    return found


def no_network(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"no request may be sent, got {request!r}")


def vectors_for(count: int, dimensions: int = 3) -> list[list[float]]:
    """Distinct float32-exact vectors: [i+1, 0.5, 0.25, ...]."""
    return [[float(i + 1)] + [0.5**k for k in range(1, dimensions)] for i in range(count)]


def as_f32(vectors: list[list[float]]) -> list[list[float]]:
    return [list(array("f", v)) for v in vectors]


def b64(vector: list[float]) -> str | list[float]:
    """``vector`` as OpenAI's base64 float32 string (left as is if it holds non-numbers)."""
    try:
        return base64.b64encode(array("f", vector).tobytes()).decode()
    except (TypeError, OverflowError):
        return vector


def json_response(payload: Any, status: int = 200, **headers: str) -> httpx.Response:
    return httpx.Response(
        status,
        content=json.dumps(payload).encode(),
        headers={"content-type": "application/json", **headers},
    )


# -- one "good answer" per provider, for the shared behaviour tests -------------------


def openai_answer(vectors: list[list[float]]) -> httpx.Response:
    return json_response(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": b64(v)}
                for i, v in enumerate(vectors)
            ],
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 5, "total_tokens": 5},
        }
    )


def gemini_answer(vectors: list[list[float]]) -> httpx.Response:
    return json_response({"embeddings": [{"values": v} for v in vectors]})


def ollama_answer(vectors: list[list[float]]) -> httpx.Response:
    return json_response(
        {"model": "nomic-embed-text", "embeddings": vectors, "total_duration": 14143917}
    )


def cloudflare_answer(vectors: list[list[float]]) -> httpx.Response:
    shape = [len(vectors), len(vectors[0]) if vectors else 0]
    return json_response(
        {
            "result": {"shape": shape, "data": vectors, "pooling": "mean"},
            "success": True,
            "errors": [],
            "messages": [],
        }
    )


def cohere_answer(vectors: list[list[float]]) -> httpx.Response:
    return json_response(
        {
            "id": "da6e531f-83c4-4e0b-9d77-25d3e1e1d5a9",
            "embeddings": {"float": vectors},
            "texts": ["..."] * len(vectors),
            "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 4}},
            "response_type": "embeddings_by_type",
        }
    )


def voyage_answer(vectors: list[list[float]]) -> httpx.Response:
    return json_response(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)
            ],
            "model": "voyage-3.5",
            "usage": {"total_tokens": 10},
        }
    )


@dataclass(frozen=True)
class ProviderCase:
    name: str
    make: Callable[..., HTTPEmbedder]
    answer: Callable[[list[list[float]]], httpx.Response]


CASES = [
    ProviderCase("openai", lambda **kw: OpenAIEmbedder(api_key=FAKE_KEY, **kw), openai_answer),
    ProviderCase("gemini", lambda **kw: GeminiEmbedder(api_key=FAKE_KEY, **kw), gemini_answer),
    ProviderCase("ollama", lambda **kw: OllamaEmbedder(api_key=FAKE_KEY, **kw), ollama_answer),
    ProviderCase(
        "cloudflare",
        lambda **kw: CloudflareEmbedder(account_id="acc123", api_token=FAKE_KEY, **kw),
        cloudflare_answer,
    ),
    ProviderCase("cohere", lambda **kw: CohereEmbedder(api_key=FAKE_KEY, **kw), cohere_answer),
    ProviderCase("voyage", lambda **kw: VoyageEmbedder(api_key=FAKE_KEY, **kw), voyage_answer),
]


def build(case: ProviderCase, script: Script, sleeps: Sleeps, **kw: Any) -> HTTPEmbedder:
    """An embedder of ``case`` talking to ``script``, with no real waiting."""
    kw.setdefault("random", lambda: 0.0)
    return case.make(
        transport=httpx.MockTransport(script), sleep=sleeps.sleep, asleep=sleeps.asleep, **kw
    )
