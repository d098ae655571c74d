"""The differential check: random op sequences on a store and on the reference semantics.

:func:`differential_check` builds random batches from a seeded generator (items in
scopes that are neighbours, parents and children of each other, texts from a small
vocabulary so that lexical searches match, vectors of a deterministic embedder, expiry
around a moving clock, compare-and-set right and wrong, filters from the filter
language) and runs every batch on the store under test and through
:func:`engramdb.store.semantics.resolve` over a fresh ``State`` (the oracle).
Both must answer equal results (scores within 1e-6) or raise errors of the same class; a
difference fails with the seed, the batch number and the ops.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from engramdb import store
from engramdb._base.types import Scope, content_sha256
from engramdb._embedders.hash_embedder import HashEmbedder
from engramdb._vectors.index import unit_f32
from engramdb.store._filter import Filter, parse_filter
from engramdb.store.semantics import State, resolve
from engramdb.testing._harness import NOW, CheckFailed, StoreUnderTest, record

__all__ = ["differential_check"]

_SCOPES: list[Scope] = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("a b",), ("x", "y")]
# Two stop words among them, so that queries of only stop words occur too.
_WORDS = ["apple", "banana", "cherry", "dates", "elder", "fig", "grape", "honey", "running"]
_WORDS += ["the", "what"]
_VALUES: list[object] = [0, 1, 1.0, 2, -0.0, True, False, None, "1", "x", "é", [1], {"n": 1}]
_FILTERS: list[dict[str, Any]] = [
    {"metadata": {"k": 1}},
    {"metadata": {"k": True}},
    {"metadata": {"k": {"$ne": 1}}},
    {"metadata": {"k": {"$in": ["x", None, 2]}}},
    {"metadata": {"k": {"$gte": 1}, "n": {"$lt": 2}}},
    {"metadata": {"k": {"$gt": "1"}}},
    {"metadata": {"k": {"$exists": False}}},
    {"labels": {"tag": "red"}},
    {"labels": {"tag": {"$nin": ["red", "blue"]}}},
    {"$or": [{"labels": {"tag": {"$exists": False}}}, {"metadata": {"n": 0}}]},
    {"$not": {"metadata": {"k": {"$lte": 1}}}},
]
_SPACE_DIMENSIONS = 8
# Scores may differ by rounding: a cosine of float32 vectors computed as a dot product or
# as 1 - |q - v|^2 / 2 agree to about 1e-8.
_SCORE_TOLERANCE = 1e-6


@dataclass
class _World:
    """What the generator knows: the store's capabilities (it sends only ops and fields
    the store declares), ids handed out, the clock, and the embedder."""

    rng: random.Random
    capabilities: store.StoreCapabilities
    now: datetime = NOW
    ids: list[str] = field(default_factory=list)
    revisions: dict[str, int] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    embedder: HashEmbedder = field(default_factory=lambda: HashEmbedder(_SPACE_DIMENSIONS))

    @property
    def space_id(self) -> str:
        return self.embedder.space.id

    def text(self) -> str:
        """Some words; now and then a text given before (identical texts tie exactly)."""
        if self.texts and self.rng.random() < 0.2:
            return self.rng.choice(self.texts)
        text = " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(1, 4)))
        self.texts.append(text)
        return text

    def scopes(self) -> store.ScopeSet:
        rng = self.rng
        exact = tuple(rng.sample(_SCOPES, rng.randint(0, 2)))
        prefixes = tuple(rng.sample([s for s in _SCOPES if len(s) < 3], rng.randint(0, 1)))
        if not exact and not prefixes:
            exact = (rng.choice(_SCOPES),)
        return store.ScopeSet(exact, prefixes)

    def filter(self) -> Filter | None:
        return parse_filter(self.rng.choice(_FILTERS)) if self.rng.random() < 0.4 else None

    def vector(self, text: str, replace_it: bool = False) -> store.PutVector:
        (values,) = self.embedder.embed([text])
        return store.PutVector(
            self.space_id, content_sha256(text), unit_f32(values), self.now, replace_it
        )

    def known(self) -> str:
        return self.rng.choice(self.ids) if self.ids else "missing"

    def keep(self) -> int:
        """keep_revisions of a write: 0 for a store without history, as the flows send."""
        return self.rng.choice([0, 1, 3, 10]) if self.capabilities.supports_history else 0


def _write(world: _World) -> list[store.Op]:
    """One write op (with the vector it may need)."""
    rng = world.rng
    roll = rng.random()
    if roll < 0.45 or not world.ids:
        number = len(world.ids) if rng.random() < 0.7 or not world.ids else int(world.known()[1:])
        text = world.text()
        at = world.now
        if rng.random() < 0.15:  # imported: an earlier text, created before items with
            text = rng.choice(world.texts)  # smaller ids (equal scores: which comes first?)
            at -= timedelta(milliseconds=rng.choice([1, 20, 86_400_000]))
        expires = None
        if rng.random() < 0.3 and world.capabilities.supports_ttl:
            expires = world.now + timedelta(milliseconds=rng.choice([-5, 1, 40, 400]))
        rec = record(
            number,
            text,
            rng.choice(_SCOPES),
            at=at,
            metadata={"k": rng.choice(_VALUES), "n": rng.randint(0, 2)},
            labels={"tag": sorted(rng.sample(["red", "blue", "green"], rng.randint(0, 2)))},
            importance=rng.choice([0.0, 0.5, 1.0]),
            expires_at=expires,
        )
        if rec.id not in world.ids:
            world.ids.append(rec.id)
        expected = None
        if rng.random() < 0.2:
            expected = rng.choice([0, 1, 2, world.revisions.get(rec.id, 0)])
        ops: list[store.Op] = [world.vector(text)] if rng.random() < 0.8 else []
        return [*ops, store.PutItem(rec, world.now, expected, world.keep())]
    if roll < 0.75:
        fields: dict[str, Any] = {}
        if rng.random() < 0.4:
            fields["text"] = world.text()
        if rng.random() < 0.5:
            fields["metadata"] = {"k": rng.choice(_VALUES)}
        if rng.random() < 0.3:
            fields["labels"] = {"tag": ["red"]} if rng.random() < 0.5 else {}
        if rng.random() < 0.2:
            fields["importance"] = rng.random()
        if rng.random() < 0.2 and world.capabilities.supports_ttl:
            fields["expires_at"] = rng.choice([None, world.now + timedelta(milliseconds=30)])
        expected = rng.choice([None, None, 1, 2, 3])
        patch = store.PatchItem(
            world.known(),
            world.now,
            expected_revision=expected,
            keep_revisions=world.keep(),
            scopes=world.scopes() if rng.random() < 0.3 else None,
            **fields,
        )
        ops = [world.vector(fields["text"])] if "text" in fields and rng.random() < 0.8 else []
        return [*ops, patch]
    if roll < 0.85:
        return [store.DeleteItem(world.known(), world.scopes() if rng.random() < 0.3 else None)]
    if roll < 0.92:
        return [store.DeleteItems(world.scopes(), world.filter())]
    if roll < 0.925:  # every vector of the space goes; it is registered again
        return [
            store.DropSpace(world.space_id),
            store.RegisterSpace(world.embedder.space, world.now),
        ]
    if roll < 0.93:  # a vector of the wrong size, or of a space never registered
        space_id, size = rng.choice([(world.space_id, 4), ("other/model@8", _SPACE_DIMENSIONS)])
        return [
            store.PutVector(
                space_id, content_sha256(world.text()), unit_f32([1.0] * size), world.now
            )
        ]
    return [world.vector(world.text(), replace_it=rng.random() < 0.3)]


def _read(world: _World) -> store.Op:
    rng = world.rng
    roll = rng.random()
    now = world.now
    if roll < 0.15:
        return store.GetItems(
            (*tuple(rng.sample(world.ids, min(3, len(world.ids)))), "missing"),
            now,
            world.space_id if rng.random() < 0.5 else None,
        )
    if roll < 0.3:
        before = world.known() if rng.random() < 0.3 else None
        below = None
        if rng.random() < 0.3:  # a position no item need hold
            below = (now - timedelta(milliseconds=rng.choice([0, 10, 100])), world.known())
        return store.ListItems(
            world.scopes(), rng.randint(1, 8), now, before, world.filter(), below=below
        )
    if roll < 0.4:
        prefix = rng.choice([(), ("a",), ("a", "b"), ("x",)])
        after = rng.choice([None, ("a",), ("a", "b"), ("ab",)])
        return store.ListScopes(prefix, rng.randint(1, 5), now, after)
    if roll < 0.5 and world.capabilities.supports_history:
        return store.History(world.known(), rng.randint(1, 4), now)
    if roll < 0.7 and world.capabilities.supports_lexical:
        return store.SearchLexical(
            world.scopes(),
            world.text(),
            rng.randint(1, 8),
            now,
            world.filter(),
            world.space_id if rng.random() < 0.5 else None,
        )
    if roll < 0.75:
        return store.PendingTexts(world.space_id, rng.randint(1, 5))
    if roll < 0.8:
        pairs = tuple((rng.choice(_SCOPES), content_sha256(world.text())) for _ in range(3))
        return store.FindContent(pairs, now)
    if roll < 0.9:
        return store.FindVectors(
            world.space_id, tuple(content_sha256(world.text()) for _ in range(3))
        )
    return store.Stats(world.space_id, now)


def _policy(world: _World) -> store.Op:
    """A receipt, an evaluation, a manual value, a purge or a read of evidence: a few
    selection ids, scopes and contexts, so that receipts are replaced, evicted, expired,
    consumed twice and from the wrong scope, and context summaries are trimmed."""
    rng = world.rng
    roll = rng.random()
    selection, scope = f"s{rng.randint(0, 4)}", rng.choice(_SCOPES[:2])
    if roll < 0.35:
        ids = tuple(rng.choice([*world.ids, "missing"]) for _ in range(rng.randint(0, 4)))
        context = rng.choice(["", "topic=a", "topic=b", "topic=c"])
        expires = world.now + timedelta(milliseconds=rng.choice([1, 40, 400]))
        return store.RecordSelection(
            selection, scope, ids, context, world.now, expires, rng.randint(1, 4)
        )
    if roll < 0.6:
        score = rng.choice([-1.0, -0.3, 0.0, 0.7, 1.0])
        return store.ConsumeSelection(
            selection, scope, score, world.now, rng.randint(1, 3), rng.random() < 0.5
        )
    if roll < 0.75:
        value = rng.choice([None, -0.5, 0.25, 1.0])
        return store.SetManual(world.known(), value, world.now, rng.random() < 0.5, world.scopes())
    if roll < 0.8:
        return store.PurgeExpired(world.now, rng.randint(1, 3))
    if roll < 0.88:
        return store.TrimScope(
            rng.choice(_SCOPES), rng.randint(1, 4), world.now, rng.random() < 0.5
        )
    return store.GetUtility((*rng.sample(world.ids, min(4, len(world.ids))), "missing"))


def _stepped(world: _World, *, repair: bool = False) -> store.Op:
    """A vector search, or a repair scan."""
    rng = world.rng
    if repair:
        return store.RepairVectors(world.space_id, rng.randint(1, 4))
    (values,) = world.embedder.embed([world.text()], "query")
    norm = math.sqrt(sum(v * v for v in values))
    query = tuple(v / norm for v in values)
    return store.SearchVectors(
        world.scopes(),
        world.space_id,
        query,
        rng.randint(1, 8),
        world.now,
        rng.random() < 0.5,
        world.filter(),
    )


def _batch(world: _World) -> list[store.Op]:
    """Mostly 1-5 ops, writes and reads mixed; or reads with a vector search among them;
    or a repair scan alone. Rarely a write with a search, which every store refuses
    (``check_batch``)."""
    rng = world.rng
    roll = rng.random()
    if roll < 0.04:
        if world.capabilities.packs_vectors and rng.random() < 0.5:
            return [store.PackVectors(world.space_id, rng.randint(1, 4))]
        return [_stepped(world, repair=True)]
    if roll < 0.06:
        return [*_write(world), _stepped(world)]
    if roll < 0.4:
        reads = [_read(world) for _ in range(rng.randint(0, 2))]
        reads.insert(rng.randint(0, len(reads)), _stepped(world))
        return reads
    ops: list[store.Op] = []
    policy = world.capabilities.supports_policy
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        if kind < 0.25 and policy:
            ops.append(_policy(world))
        else:
            ops += _write(world) if kind < 0.6 else [_read(world)]
    return ops


def _same(op: store.Op, mine: Any, theirs: Any) -> bool:
    """Whether two answers to ``op`` agree. Each store's search hits must come in its
    own scores' order, exact ties newest first (created_at, then id, descending); across
    stores, hits whose scores are
    within the tolerance of each other are a tie, in any order (the stores' float
    arithmetic differs in the last bits; a tie cut by ``k`` may keep different
    members)."""
    if isinstance(op, store.PackVectors):  # the reference packs nothing: any count will do
        return isinstance(mine, int) and mine >= 0
    if isinstance(mine, store.SearchResult) and isinstance(theirs, store.SearchResult):
        k = op.k if isinstance(op, store.SearchVectors | store.SearchLexical) else len(theirs.hits)
        return (
            mine.skipped == theirs.skipped
            and mine.coverage == theirs.coverage
            and _ranked(mine.hits)
            and _ranked(theirs.hits)
            and _same_hits(mine.hits, theirs.hits, k)
        )
    if isinstance(mine, store.StoreStats) and isinstance(theirs, store.StoreStats):
        return replace(mine, schema_version=None) == replace(theirs, schema_version=None)
    return bool(mine == theirs)


def _ranked(hits: Sequence[store.SearchHit]) -> bool:
    """Score descending, exact ties newest first: by (created_at, id) descending."""
    return list(hits) == store.best_first(hits)


def _same_hits(mine: Sequence[store.SearchHit], theirs: Sequence[store.SearchHit], k: int) -> bool:
    if len(mine) != len(theirs):
        return False
    if any(abs(a.score - b.score) > _SCORE_TOLERANCE for a, b in zip(mine, theirs, strict=True)):
        return False
    start = 0
    while start < len(theirs):  # one tie group at a time
        end = start + 1
        while end < len(theirs) and theirs[end - 1].score - theirs[end].score <= _SCORE_TOLERANCE:
            end += 1
        cut = end == len(theirs) == k  # the last group may continue past k
        if not cut and _members(mine[start:end]) != _members(theirs[start:end]):
            return False
        start = end
    return True


def _members(hits: Sequence[store.SearchHit]) -> list[tuple[str, Any, Any]]:
    return sorted(((h.record.id, h.record, h.embedded_at) for h in hits), key=lambda m: m[0])


async def differential_check(target: StoreUnderTest, *, seed: int, batches: int = 60) -> None:
    """Run ``batches`` random batches on ``target`` and through the reference semantics
    (:func:`engramdb.store.semantics.resolve`); they must answer alike. ``target`` must be
    empty."""
    rng = random.Random(seed)
    world = _World(rng, target.capabilities)
    reference = State()
    setup = [store.RegisterSpace(world.embedder.space, world.now)]
    await target.batch(setup)
    resolve(setup, reference)
    for number in range(batches):
        world.now += timedelta(milliseconds=rng.choice([0, 1, 10, 50]))
        ops = _batch(world)
        try:
            expected: Any = resolve(ops, reference)
        except Exception as exc:
            expected = exc
        try:
            got: Any = await target.batch(ops)
        except Exception as exc:
            got = exc
        where = f"seed {seed}, batch {number}: {ops!r}"
        if isinstance(expected, Exception) or isinstance(got, Exception):
            if type(expected) is not type(got) or str(expected) != str(got):
                raise CheckFailed(f"{where}\nreference: {expected!r}\nstore:     {got!r}")
            continue
        for op, mine, theirs in zip(ops, got, expected, strict=True):
            if not _same(op, mine, theirs):
                raise CheckFailed(
                    f"{where}\n{type(op).__name__} answered differently:\n"
                    f"reference: {theirs!r}\nstore:     {mine!r}"
                )
        for op, result in zip(ops, expected, strict=True):
            if isinstance(op, store.PutItem | store.PatchItem):
                world.revisions[result.id] = result.revision
