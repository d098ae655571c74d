"""A D1 database at schema 1, as engramdb 0.1.0 left it, upgrades with the same answers.

The golden database ``tests/fixtures/release-0.1.0.db`` was written through the 0.1.0
API on SQLite; its JSON twin holds the rows of its tables and what 0.1.0 answered. This
test rebuilds that schema-1 database in D1 (the schema-1 statements with the version
table, then the rows), opens it with today's ``D1Store`` and checks every recall.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from engramdb import AsyncMemory, HashEmbedder
from engramdb.driver import Statement, VersionSource, migration_statements
from engramdb.store._sqlite import schema
from engramdb_workers.d1 import D1Store

FIXTURE = Path("/mnt/project/tests/fixtures/release-0.1.0.json")


def _cell(value: Any) -> Any:
    return base64.b64decode(value["base64"]) if isinstance(value, dict) else value


def _later() -> datetime:
    return datetime.fromisoformat("2026-06-01T00:00:00+00:00")


_NEWER_EVIDENCE = ("rerank_score", "vector_share", "lexical_share")  # than the fixture


def _evidence(evidence: Any) -> dict[str, Any]:
    at = evidence["embedded_at"]
    return {
        **{key: value for key, value in evidence.items() if key not in _NEWER_EVIDENCE},
        "scope": list(evidence["scope"]),
        "embedded_at": None if at is None else at.isoformat(),
    }


async def test_a_schema_1_database_upgrades_on_d1_with_the_same_evidence(d1: Any) -> None:
    """Every memory of the 0.1.0 database is recalled with the evidence 0.1.0 gave, in
    both spaces; the pending item stays pending until reindex()."""
    answers = json.loads(FIXTURE.read_text())
    store = D1Store(d1, migrate=False)
    await store._execute(migration_statements(schema.MIGRATIONS[0], VersionSource.TABLE))
    rows: list[Statement] = []
    for table in ("spaces", "items", "vectors"):
        names = ", ".join(answers["columns"][table])
        for row in answers["rows"][table]:
            values = [_cell(v) for v in row]
            marks = ", ".join("NULL" if v is None else "?" for v in values)  # never bind None
            rows.append(
                Statement(
                    f"INSERT INTO {table} ({names}) VALUES ({marks})",
                    tuple(v for v in values if v is not None),
                )
            )
    await store._execute(rows)
    assert await store.schema_version() == 1
    assert await store.migrate() == len(schema.MIGRATIONS) - 1
    memories = {
        dimensions: AsyncMemory(store, HashEmbedder(dimensions=dimensions), clock=_later)
        for dimensions in (32, 16)
    }
    for record in answers["records"]:
        got = await memories[32].get(record["id"])
        assert got is not None and got.text == record["text"]
        assert (got.revision, got.metadata, got.labels) == (
            record["revision"],
            record["metadata"],
            record["labels"],
        )
    for expected in answers["recalls"]:
        text = next(r["text"] for r in answers["records"] if r["id"] == expected["id"])
        scope = tuple(expected["evidence"]["scope"])
        hits = await memories[expected["dimensions"]].recall(text, scopes=[scope], top_k=10)
        (hit,) = [h for h in hits if h.memory.id == expected["id"]]
        # 0.1.0 said "used" where the vector leg could not score every memory of the
        # scope; it says "partial" now (as tests/sqlite/test_migrations.py).
        assert hits.coverage is not None
        assert hits.status == ("partial" if hits.coverage < 1.0 else expected["status"])
        assert hit.evidence["rerank_score"] is None  # newer than the fixture; no rerank ran
        assert _evidence(hit.evidence) == expected["evidence"]
    status = await memories[32].status()
    assert (status.items, status.pending) == (
        answers["status"]["items"],
        answers["status"]["pending"],
    )
    assert await memories[32].reindex() == 1
    assert (await memories[32].status()).pending == 0
