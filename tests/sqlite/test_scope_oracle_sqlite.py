"""No scope oracle in the Python library: what one scope of a SQLite file sees — its
embedding calls, hits, scores and evidence — is the same whether or not another scope of
the file stored the same texts first (docs/concepts.md#embedding-spaces)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engramdb import EmbedKind, HashEmbedder, Memory
from engramdb.sqlite import SqliteStore

SECRETS = ["the vault PIN is 4921", "Alex sees Dr Ito on Friday", "the spare key is under the mat"]
OTHERS = ["Sam plays the cello", "Sam is vegetarian", "Sam lives in Lisbon"]
ALEX, SAM = ("acme", "user", "alex"), ("acme", "user", "sam")


class Counting(HashEmbedder):
    """A HashEmbedder that keeps every text it embeds."""

    def __init__(self) -> None:
        super().__init__(dimensions=64)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        self.texts.extend(texts)
        return super().embed(texts, kind)


class Steps:
    """A clock that moves one second each time it is read, from ``start``."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def alex_session(db: Path, sam_texts: list[str]) -> tuple[list[str], list[Any]]:
    """Sam stores ``sam_texts`` a day earlier; then Alex's sequence, on its own clock.
    Answers the texts Alex's calls embedded and everything they answered, with ids
    named by their first appearance."""
    day = datetime(2026, 1, 1, tzinfo=UTC)
    with Memory(SqliteStore(str(db)), HashEmbedder(64), clock=Steps(day)) as sam:
        for text in sam_texts:
            sam.remember(text, scope=SAM)
    embedder = Counting()
    seen: list[Any] = []
    with Memory(SqliteStore(str(db)), embedder, clock=Steps(day + timedelta(days=1))) as alex:
        first = alex.remember(SECRETS[0], scope=ALEX)
        items = [
            {"text": SECRETS[1], "scope": ALEX},
            {"text": "Alex likes green tea", "scope": ALEX},
        ]
        seen.append(alex.remember_many(items))
        seen.append(alex.update(first.id, text=SECRETS[2]))
        seen.append(alex.update(first.id, metadata={"seen": True}))
        seen.append(alex.remember(SECRETS[0], scope=ALEX, dedupe=False))
        for query in [*SECRETS, "green tea", "an unrelated query"]:
            for mode in ("hybrid", "vector", "lexical"):
                hits = alex.recall(query, scopes=[ALEX], mode=mode)
                seen.append((hits.status, hits.coverage, hits.mode, list(hits)))
        seen.append(first)
        seen.append(alex.bind(ALEX).status())
    names: dict[str, str] = {}
    return embedder.texts, [_named(value, names) for value in seen]


def _named(value: Any, names: dict[str, str]) -> Any:
    """``value`` as plain data, each memory id (and selection id) replaced by a name."""
    text = repr(value)
    for found in sorted(set(_ids(value)), key=text.index):
        names.setdefault(found, f"id{len(names)}")
        text = text.replace(found, names[found])
    return text


def _ids(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        return [i for v in value for i in _ids(v)]
    memory = getattr(value, "memory", value)
    return [memory.id] if hasattr(memory, "id") and hasattr(memory, "scope") else []


def test_what_a_scope_sees_does_not_depend_on_another_scope_holding_its_texts(
    tmp_path: Path,
) -> None:
    embedded_same, seen_same = alex_session(tmp_path / "same.db", SECRETS)
    embedded_other, seen_other = alex_session(tmp_path / "other.db", OTHERS)
    assert embedded_same == embedded_other
    assert seen_same == seen_other
    # a real comparison: Alex embedded each of its texts and found them by vector
    assert set(SECRETS) <= set(embedded_same)
    vector_hits = seen_same[5]  # Alex's vector recall of its first text
    assert "'vector', [Hit(" in vector_hits and f"text={SECRETS[0]!r}" in vector_hits
    assert "similarity=1.0" in vector_hits or "similarity=0.99999" in vector_hits
