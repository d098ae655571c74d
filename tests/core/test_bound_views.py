"""What a bound view offers the faces besides remember and recall: list, history,
update, remember_many, forget_all, list_scopes and status, each within its scopes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engramdb import (
    AsyncMemory,
    BoundStatus,
    HashEmbedder,
    InMemoryStore,
    LabelRules,
    Memory,
    Policy,
    ValidationError,
)

SAM = ("acme", "user", "sam")
KIM = ("acme", "user", "kim")


class Ticking:
    """A clock one second further at each reading: "newest first" is well defined."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def test_list_history_update_see_only_the_views_scope_and_session() -> None:
    """list shows the bound scope and session, newest first; history and update answer
    None for another scope's memory (read scopes: history yes, update no)."""
    memory = Memory(InMemoryStore(), HashEmbedder(), clock=Ticking())
    view = memory.bind(SAM, session="s1", read=[("acme", "shared")])
    shared = memory.remember("office closes at 6", ("acme", "shared"))
    kims = memory.remember("Kim's locker is 12", KIM)
    first = view.remember("Sam likes tea")
    note = view.remember("draft", durability="session")
    assert [r.id for r in view.list()] == [note.id, first.id]
    assert [r.id for r in view.list(limit=1, before=note.id)] == [first.id]
    assert view.update(kims.id, text="stolen") is None
    assert view.update(shared.id, text="never") is None
    assert memory.get(kims.id) == kims and memory.get(shared.id) == shared
    changed = view.update(first.id, text="Sam likes green tea", labels={"Topic": ["Drinks"]})
    assert changed is not None and (changed.revision, changed.labels) == (2, {"topic": ["drinks"]})
    assert [r.text for r in view.history(first.id) or []] == ["Sam likes tea"]
    assert view.history(shared.id) == []  # a read scope: visible, no earlier revision
    assert view.history(kims.id) is None


def test_update_holds_labels_to_the_views_rules() -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    view = memory.bind(SAM, policy=Policy(label_rules=LabelRules(allowed={"topic": []})))
    record = view.remember("Sam likes tea")
    with pytest.raises(ValidationError, match="'secret' is not allowed"):
        view.update(record.id, labels={"secret": ["x"]})
    assert memory.get(record.id) == record


def test_remember_many_redacts_once_labels_and_keeps_capacity() -> None:
    """Each item is redacted once, before the labeler sees it; items choose durability,
    never a scope; the capacity keeps the newest of the scope."""
    calls: list[str] = []

    def redact(text: str) -> str:
        calls.append(text)
        return text.replace("4711", "****")

    memory = Memory(InMemoryStore(), HashEmbedder(), redact=redact)
    seen: list[str] = []

    def labeler(text: str) -> dict[str, list[str]]:
        seen.append(text)
        return {"topic": ["codes"]}

    view = memory.bind(SAM, session="s1", policy=Policy(max_items=2, labeler=labeler))
    items: list[dict[str, Any]] = [
        {"text": "door code 4711"},
        {"text": "gate code 4711", "labels": {"topic": ["gates"]}},
        {"text": "note", "durability": "session"},
        {"text": "bike code 4711"},
    ]
    records = view.remember_many(items)
    assert calls == [item["text"] for item in items]  # once each
    assert seen == ["door code ****", "gate code ****", "note", "bike code ****"]
    assert [r.labels for r in records][:2] == [{"topic": ["codes"]}, {"topic": ["gates"]}]
    assert records[2].scope == (*SAM, "session", "s1")
    assert [r.text for r in memory.list(SAM)] == ["bike code ****", "gate code ****"]
    with pytest.raises(ValidationError, match="item 0"):
        view.remember_many([{"text": "x", "scope": list(KIM)}])
    assert memory.list(KIM) == []


def test_forget_all_list_scopes_and_status_stay_under_the_view() -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    view = memory.bind(SAM, session="s1")
    memory.remember("Kim's", KIM)
    memory.remember("a sub-scope of Sam's", (*SAM, "work"))
    view.remember("one")
    view.remember("two", durability="session")
    assert [(c.scope, c.items) for c in view.list_scopes()] == [
        (SAM, 1),
        ((*SAM, "session", "s1"), 1),
        ((*SAM, "work"), 1),
    ]
    status = view.status()
    assert status == BoundStatus(SAM, "s1", 2, "hash/bow@256", status.schema_version)
    assert memory.status().items == 4  # the view counted only its own two
    assert view.forget_all() == 2
    assert view.status().items == 0
    assert [c.scope for c in memory.list_scopes()] == [KIM, (*SAM, "work")]


async def test_the_async_view_answers_the_same() -> None:
    memory = AsyncMemory(InMemoryStore(), HashEmbedder(), clock=Ticking())
    view = memory.bind(SAM)
    kims = await memory.remember("Kim's", KIM)
    records = await view.remember_many([{"text": "a"}, {"text": "b"}])
    assert [r.id for r in await view.list()] == [records[1].id, records[0].id]
    assert await view.update(kims.id, importance=1.0) is None
    assert (await view.update(records[0].id, importance=1.0)).importance == 1.0
    assert await view.history(kims.id) is None
    assert (await view.status()).items == 2
    assert [c.scope for c in await view.list_scopes()] == [SAM]
    assert await view.forget_all() == 2
