"""The flow protocol: a provider call stepped by hand, and its two drivers."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from provider_fakes import FAKE_KEY, Script, Sleeps, openai_answer, vectors_for

from engramdb.providers import OpenAIEmbedder, Sleep
from engramdb.providers._flow import adrive, adrive_all, drive


def make(**kw: object) -> OpenAIEmbedder:
    return OpenAIEmbedder(api_key=FAKE_KEY, random=lambda: 0.0, clock=lambda: 0.0, **kw)  # type: ignore[arg-type]


def test_a_batch_flow_is_stepped_by_hand_without_any_io() -> None:
    """The flow yields the request, a Sleep for a 429 with Retry-After, the request again,
    and returns the vectors of the successful answer."""
    flow = make(dimensions=3).batch_flows(["hello"], "query")[0]

    first = next(flow)
    assert isinstance(first, httpx.Request)
    assert first.url == "https://api.openai.com/v1/embeddings"

    wait = flow.send(httpx.Response(429, headers={"retry-after": "7"}, request=first))
    assert wait == Sleep(7.0)

    again = flow.send(None)
    assert again is first

    with pytest.raises(StopIteration) as stop:
        flow.send(openai_answer(vectors_for(1)))
    assert [list(v) for v in stop.value.value] == [[1.0, 0.5, 0.25]]


def test_a_transport_error_thrown_into_the_flow_becomes_a_sleep_then_a_retry() -> None:
    flow = make(dimensions=3).batch_flows(["hello"], "document")[0]
    request = next(flow)
    effect = flow.throw(httpx.ConnectError("refused", request=request))
    assert effect == Sleep(0.25)  # 0.5 s scaled by the jitter factor 0.5 (random()=0)
    assert flow.send(None) is request


def test_texts_are_split_into_batches_of_max_batch_in_order(sleeps: Sleeps) -> None:
    script = Script(
        lambda r: openai_answer(vectors_for(2)),
        lambda r: openai_answer(vectors_for(2)),
        lambda r: openai_answer(vectors_for(1)),
    )
    embedder = make(
        dimensions=3, max_batch=2, transport=httpx.MockTransport(script), sleep=sleeps.sleep
    )
    vectors = embedder.embed(["a", "b", "c", "d", "e"])
    assert [body["input"] for body in script.bodies()] == [["a", "b"], ["c", "d"], ["e"]]
    assert [v[0] for v in vectors] == [1.0, 2.0, 1.0, 2.0, 1.0]


def test_drive_and_adrive_return_the_same_result() -> None:
    def flow():  # type: ignore[no-untyped-def]
        response = yield httpx.Request("GET", "http://x/")
        yield Sleep(1.0)
        return response.status_code

    handler = httpx.MockTransport(lambda r: httpx.Response(204))
    waits: list[float] = []
    with httpx.Client(transport=handler) as client:
        assert drive(flow(), client, waits.append) == 204

    async def main() -> int:
        async def asleep(seconds: float) -> None:
            waits.append(seconds)

        async with httpx.AsyncClient(transport=handler) as client:
            return await adrive(flow(), client, asleep)

    assert asyncio.run(main()) == 204
    assert waits == [1.0, 1.0]


async def test_adrive_all_keeps_input_order_and_limits_concurrency() -> None:
    in_flight = 0
    peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01 if request.url.path == "/0" else 0)
        in_flight -= 1
        return httpx.Response(200, text=request.url.path)

    def flow(i: int):  # type: ignore[no-untyped-def]
        response = yield httpx.Request("GET", f"http://x/{i}")
        return response.text

    async def asleep(seconds: float) -> None:
        raise AssertionError("no sleep expected")

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        results = await adrive_all([flow(i) for i in range(6)], client, asleep, 2)
    assert results == [f"/{i}" for i in range(6)]
    assert peak == 2


async def test_aembed_with_concurrency_returns_vectors_in_input_order(sleeps: Sleeps) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        import json

        texts = json.loads(request.content)["input"]
        return openai_answer([[float(t), 0.0, 1.0] for t in texts])

    script = Script(*[answer] * 5)
    embedder = make(
        dimensions=3,
        max_batch=2,
        max_concurrency=3,
        transport=httpx.MockTransport(script),
        asleep=sleeps.asleep,
    )
    vectors = await embedder.aembed([str(i) for i in range(9)])
    assert [v[0] for v in vectors] == [float(i) for i in range(9)]
    await embedder.aclose()
