"""``engramdb.shards``: a memory's shard follows from its id, and a recall over shards
merges to one store's answer where scores compare (vector mode: exactly), with one
store's ties, one selection id per shard, and the worst status of the shards."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engramdb
from engramdb import AsyncMemory, Hit, Hits, InMemoryStore, Memory, StaticEmbedder, ValidationError
from engramdb.ranking._hits import noise_floor
from engramdb.shards import (
    MAX_SHARDS,
    join_selection,
    merge_hits,
    placement,
    shard_of,
    split_selection,
)

WORDS = "tea coffee train bike garden piano river paris berlin dog cat rain snow book film"


def texts(count: int) -> list[str]:
    words = WORDS.split()
    return [
        f"note {n}: {words[n % len(words)]} and {words[n * 7 % len(words)]} on day {n % 9}"
        for n in range(count)
    ]


def test_a_memory_s_shard_follows_from_its_id_and_doubling_splits_each_shard_in_two() -> None:
    """The same id always names the same shard; ids spread over every shard; with twice
    the shards a memory stays in shard s or moves to s + n (a hash modulo 2n), so growing
    by doubling moves half of each shard to one new shard."""
    ids = [f"conv-{i}-D{i % 7}:{i}" for i in range(4000)]
    for count in (2, 4, 8):
        placed = [shard_of(i, count) for i in ids]
        assert placed == [shard_of(i, count) for i in ids]
        sizes = [placed.count(n) for n in range(count)]
        assert min(sizes) > 0.8 * len(ids) / count
        doubled = [shard_of(i, 2 * count) for i in ids]
        assert all(d in (p, p + count) for p, d in zip(placed, doubled, strict=True))
        assert 0.4 < sum(d != p for p, d in zip(placed, doubled, strict=True)) / len(ids) < 0.6
    assert {shard_of(i, 1) for i in ids} == {0}


@pytest.mark.parametrize("bad", [0, MAX_SHARDS + 1, -2, True, 2.0, "4", None])
def test_a_shard_count_out_of_range_is_refused_by_name(bad: object) -> None:
    says = rf"shards must be an integer from 1 to 64, not {re.escape(repr(bad))}$"
    with pytest.raises(ValidationError, match=says):
        shard_of("some-id", bad)  # type: ignore[arg-type]


@cache
def embedder() -> StaticEmbedder:
    """The shipped static table: a semantic embedder, so hybrid recall fuses two legs."""
    table = Path(engramdb.__file__).parent / StaticEmbedder.SHIPPED_FILE
    return StaticEmbedder.from_bytes(table.read_bytes(), name=StaticEmbedder.SHIPPED_NAME)


class Clock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 6, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_a_shard_measures_the_noise_floor_of_its_whole_tenant() -> None:
    """A store that holds one of N parts takes its DEPTH/N-th cosine as the floor: the
    tenant's DEPTH-th, estimated from its part (shrunk as a small scope's is)."""
    cosines = [1 - n / 1000 for n in range(300)]
    assert noise_floor(cosines) == pytest.approx(cosines[99])
    assert noise_floor(cosines, 4) == pytest.approx(cosines[24])
    assert noise_floor(cosines[:10], 4) == pytest.approx(cosines[9] * 10 / 25)


def test_a_text_is_placed_by_its_scope_and_text_alone() -> None:
    """The same text in the same scope always reaches the same shard (so remember's
    deduplication holds across shards); other scopes or texts spread over all."""
    assert placement(("acme", "sam"), "tea", 4) == placement(["acme", "sam"], "tea", 4)
    spread = {placement(("acme", f"user{n}"), "tea", 4) for n in range(40)}
    spread |= {placement(("acme",), f"tea {n}", 4) for n in range(40)}
    assert spread == {0, 1, 2, 3}


@settings(max_examples=300, deadline=None)
@given(
    scope=st.lists(st.text(min_size=1), min_size=1, max_size=4),
    text=st.text(),
    shards=st.integers(1, MAX_SHARDS),
)
def test_a_text_s_place_is_the_hash_of_the_json_of_its_scope_and_text(
    scope: list[str], text: str, shards: int
) -> None:
    """A place is the first 8 bytes of the SHA-256 of ``json.dumps([scope, text],
    ensure_ascii=False)``, modulo the count, for any text (quotes, control characters,
    line separators, lone surrogates): the ids of stored memories carry it, so it never
    changes."""
    key = json.dumps([scope, text], ensure_ascii=False).encode("utf-8", "surrogatepass")
    if any("\ud800" <= ch <= "\udfff" for ch in text + "".join(scope)):
        with pytest.raises(UnicodeEncodeError):
            placement(tuple(scope), text, shards)
        return
    expected = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % shards
    assert placement(tuple(scope), text, shards) == expected
    assert placement(scope, text, shards) == expected


def test_every_id_carries_its_text_s_place_so_it_names_its_shard_at_every_count() -> None:
    """Every memory's id carries its text's place among 64 (whatever the store), so the
    shard its id names is the one its text is placed in, at every count up to 64: a
    doubling moves a memory with its text and deduplication holds after it. Ids still
    ascend within a write, and deduplication is as before."""
    clock = Clock()
    memory = Memory(InMemoryStore(), embedder(), clock=clock)
    one = memory.remember("Sam drinks tea", ("acme",))
    again = memory.remember("Sam drinks tea", ("acme",))
    batch = memory.remember_many(
        [{"text": f"note {n}", "scope": ("acme",)} for n in range(40)]
        + [{"text": "Sam drinks tea", "scope": ("acme",)}]
    )
    assert again.id == one.id and batch[-1].id == one.id
    for record in [one, *batch[:-1]]:
        for count in (1, 2, 4, 8, 16, 32, 64):
            assert shard_of(record.id, count) == placement(("acme",), record.text, count)
    assert [r.id for r in batch[:-1]] == sorted(r.id for r in batch[:-1])
    assert {shard_of(r.id, 4) for r in batch} == {0, 1, 2, 3}
    clock.now += timedelta(milliseconds=5)
    assert memory.remember("later", ("acme",)).id > max(r.id for r in batch)


@pytest.mark.parametrize("bad", [0, 65, True, "4"])
def test_a_memory_over_a_count_of_shards_that_is_not_one_is_refused(bad: object) -> None:
    with pytest.raises(
        ValidationError, match=f"shards must be an integer from 1 to 64, not {bad!r}"
    ):
        Memory(InMemoryStore(), embedder(), shards=bad)  # type: ignore[arg-type]


def test_an_id_of_another_form_is_placed_by_its_hash() -> None:
    """A caller's id (any string) is placed by its SHA-256: the same every time, spread
    over the shards, and a doubling splits each shard in two."""
    ids = ["my-id", "01j0000000000000000000000a", "x" * 26]  # lowercase: not our form
    assert [shard_of(i, 64) for i in ids] == [shard_of(i, 64) for i in ids]
    assert len({shard_of(f"doc-{n}", 8) for n in range(100)}) == 8


class Tenant:
    """One store with every memory, and the same memories over ``count`` shards (each
    an ``InMemoryStore``; a memory in the shard its id names), on one clock."""

    def __init__(self, count: int, size: int = 240) -> None:
        clock = Clock()
        self.whole = Memory(InMemoryStore(), embedder(), clock=clock)
        self.shards = [
            Memory(InMemoryStore(), embedder(), clock=clock, shards=count) for n in range(count)
        ]
        for n, text in enumerate(texts(size)):
            record = self.whole.remember(text, ("acme",))
            item = {"id": record.id, "text": text, "scope": ("acme",)}
            self.shards[shard_of(record.id, count)].remember_many([item])
            if n % 3 == 0:
                clock.now += timedelta(milliseconds=1)  # some share a millisecond

    def recall(self, query: str, mode: str, top_k: int) -> tuple[Hits, Hits]:
        one = self.whole.recall(query, [("acme",)], mode=mode, top_k=top_k)  # type: ignore[arg-type]
        each = [m.recall(query, [("acme",)], mode=mode, top_k=top_k) for m in self.shards]  # type: ignore[arg-type]
        return one, merge_hits(each, top_k)


def ranked(hits: Sequence[Hit]) -> list[tuple[str, float]]:
    return [(hit.memory.id, hit.score) for hit in hits]


@pytest.mark.parametrize("count", [2, 4])
def test_vector_recall_over_shards_is_one_store_s_ranking(count: int) -> None:
    """A cosine does not depend on the other memories, and each shard's first top_k
    holds every memory of the global first top_k it stores: the merge is exact."""
    tenant = Tenant(count)
    for query in ("tea and the garden", "a train to paris", "rain on day 3", "piano book"):
        one, merged = tenant.recall(query, "vector", 12)
        assert len(one) == 12
        assert ranked(merged) == ranked(one)


@pytest.mark.parametrize("mode", ["vector", "lexical", "hybrid"])
def test_one_shard_merges_to_its_own_answer(mode: str) -> None:
    tenant = Tenant(1)
    for query in ("tea and the garden", "snow in berlin"):
        one = tenant.whole.recall(query, [("acme",)], mode=mode, top_k=10)  # type: ignore[arg-type]
        alone = tenant.shards[0].recall(query, [("acme",)], mode=mode, top_k=10)  # type: ignore[arg-type]
        merged = merge_hits([alone], 10)
        assert ranked(merged) == ranked(alone) == ranked(one)
        assert (merged.status, merged.mode, merged.coverage, merged.error) == (
            alone.status,
            alone.mode,
            alone.coverage,
            alone.error,
        )
        assert merged.selection_id == alone.selection_id


@pytest.mark.parametrize("mode", ["vector", "lexical", "hybrid"])
def test_a_larger_top_k_only_appends_over_shards(mode: str) -> None:
    tenant = Tenant(4)
    for query in ("coffee on day 2", "a dog and a cat"):
        _, five = tenant.recall(query, mode, 5)
        _, twenty = tenant.recall(query, mode, 20)
        assert ranked(twenty)[:5] == ranked(five)


def _hits(*entries: tuple[Hit, float], status: str = "used", **fields: object) -> Hits:
    hits = [replace(hit, score=score) for hit, score in entries]
    selection_id = str(fields.pop("selection_id", "S"))
    return Hits(hits, status=status, selection_id=selection_id, mode="hybrid", **fields)  # type: ignore[arg-type]


def test_equal_scores_come_newest_first_whatever_the_shard_and_an_id_comes_once() -> None:
    tenant = Tenant(1, size=4)
    old, mid, new, newest = sorted(
        tenant.whole.recall("note", [("acme",)], mode="lexical", top_k=4),
        key=lambda hit: (hit.memory.created_at, hit.memory.id),
    )
    first = _hits((old, 0.5), (mid, 0.25))
    second = _hits((new, 0.5), (mid, 0.75), (newest, 0.25 + 1e-12))  # on the grid: a tie
    merged = merge_hits([first, second], 10)
    assert [hit.memory.id for hit in merged] == [
        mid.memory.id,  # 0.75 in the second shard: its better place, once
        new.memory.id,
        old.memory.id,
        newest.memory.id,  # 0.25 + 1e-12 ties 0.25 on the grid, and is newer
    ]
    assert [hit.memory.id for hit in merge_hits([first, second], 2)] == [
        mid.memory.id,
        new.memory.id,
    ]


def test_the_merged_answer_reports_the_worst_status_and_the_least_coverage() -> None:
    used = _hits(selection_id="A", coverage=1.0)
    partial = _hits(status="partial", selection_id="B", coverage=0.5)
    degraded = _hits(status="degraded", selection_id="C", error="ProviderError")
    merged = merge_hits([used, partial], 10)
    assert (merged.status, merged.coverage, merged.error) == ("partial", 0.5, None)
    merged = merge_hits([used, partial, degraded], 10)
    assert (merged.status, merged.coverage, merged.error) == ("degraded", 0.5, "ProviderError")
    assert merged.selection_id == "A.B.C"
    assert merge_hits([_hits(), _hits()], 10).coverage is None
    with pytest.raises(ValidationError, match="at least one shard"):
        merge_hits([], 10)


def test_a_joined_selection_splits_back_into_each_shard_s_own() -> None:
    ids = ["01JEXAMPLE0000000000000001", "01JEXAMPLE0000000000000002"]
    assert join_selection(ids[:1]) == ids[0]
    assert split_selection(join_selection(ids), 2) == ids
    assert split_selection(ids[0], 1) == ids[:1]
    assert split_selection(join_selection(ids), 4) is None  # made over other shards
    assert split_selection("A..B", 3) is None
    assert split_selection("", 1) is None


def test_a_bound_view_lists_below_a_position_that_no_memory_holds() -> None:
    """``list(below=(created_at, id))`` continues a page below a position: its last
    memory forgotten since, or one of another shard (each shard lists below the same
    position, and the pages merge newest first)."""
    clock = Clock()
    memory = Memory(InMemoryStore(), embedder(), clock=clock)
    view = memory.bind(("acme",))
    records = []
    for n in range(6):
        records.append(view.remember(f"note {n}"))
        clock.now += timedelta(milliseconds=1)
    newest_first = [r.id for r in reversed(records)]
    page = view.list(limit=3)
    assert [r.id for r in page] == newest_first[:3]
    last = page[-1]
    assert view.forget(last.id)
    assert view.list(limit=3, before=last.id) == []  # a forgotten id continues nothing
    rest = view.list(limit=3, below=(last.created_at, last.id))
    assert [r.id for r in rest] == newest_first[3:]
    foreign = (last.created_at, "0" * 26)  # another shard's id at the same millisecond
    assert [r.id for r in view.list(limit=3, below=foreign)] == newest_first[3:]


@pytest.mark.parametrize("bad", ["01J", ("2026-12-06", "x"), (datetime(2026, 1, 1), "x")])
def test_a_position_that_is_not_one_is_refused_by_name(bad: object) -> None:
    view = Memory(InMemoryStore(), embedder()).bind(("acme",))
    with pytest.raises(ValidationError, match=r"below=.* must be a position \(created_at, id\)"):
        view.list(below=bad)  # type: ignore[arg-type]


async def test_an_async_view_lists_below_a_position_too() -> None:
    clock = Clock()
    async with AsyncMemory(InMemoryStore(), embedder(), clock=clock) as memory:
        view = memory.bind(("acme",))
        first = await view.remember("older")
        clock.now += timedelta(milliseconds=1)
        second = await view.remember("newer")
        below = await view.list(below=(second.created_at, second.id))
        assert [r.id for r in below] == [first.id]
