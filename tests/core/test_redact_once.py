"""A bound view redacts a memory's text once: before its labeler sees it, and not again
when the record is built (a redactor that is not idempotent, or costs a model call,
must run once per write)."""

from __future__ import annotations

import asyncio

from engramdb import AsyncMemory, HashEmbedder, InMemoryStore, Memory, Policy

SAM = ("acme", "user", "sam")


class CountingRedactor:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: str) -> str:
        self.seen.append(text)
        return text.replace("4921", "[PIN]")


def test_a_bound_remember_redacts_its_text_once() -> None:
    redact = CountingRedactor()
    labeled: list[str] = []

    def labeler(text: str) -> dict[str, list[str]]:
        labeled.append(text)
        return {"topic": ["secrets"]}

    memory = Memory(InMemoryStore(), HashEmbedder(), redact=redact)
    sam = memory.bind(SAM, policy=Policy(labeler=labeler))
    record = sam.remember("the vault PIN is 4921")
    assert redact.seen == ["the vault PIN is 4921"]
    assert labeled == ["the vault PIN is [PIN]"]
    assert record.text == "the vault PIN is [PIN]" and record.labels == {"topic": ["secrets"]}
    assert memory.get(record.id).text == "the vault PIN is [PIN]"


def test_an_async_bound_remember_redacts_its_text_once() -> None:
    redact = CountingRedactor()

    async def scenario() -> str:
        memory = AsyncMemory(InMemoryStore(), HashEmbedder(), redact=redact)
        record = await memory.bind(SAM).remember("the vault PIN is 4921")
        return record.text

    assert asyncio.run(scenario()) == "the vault PIN is [PIN]"
    assert redact.seen == ["the vault PIN is 4921"]


def test_remember_outside_a_view_redacts_once_too() -> None:
    redact = CountingRedactor()
    memory = Memory(InMemoryStore(), HashEmbedder(), redact=redact)
    memory.remember("the vault PIN is 4921", SAM)
    assert redact.seen == ["the vault PIN is 4921"]
