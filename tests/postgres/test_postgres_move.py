"""Moving a SQLite database's memories into PostgreSQL with the CLI: ``engramdb copy``
(every scope, ids, times, revisions and vectors; resumable) and ``export | import``
(one scope), run for real in subprocesses against the test server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from engramdb import HashEmbedder, Memory
from engramdb.postgres import PostgresStore
from engramdb.sqlite import SqliteStore

EMBEDDER = HashEmbedder(dimensions=64)  # what ENGRAMDB_EMBEDDER=hash:64 builds
SCOPES = {("acme", "user", "sam"): 20, ("acme", "user", "kim"): 10, ("other", "team"): 5}
QUERIES = ["deploy window", "note 3 about kim", "lunch order"]


def url_of(dsn: str) -> str:
    params = conninfo_to_dict(dsn)
    return f"postgresql://{params['user']}@{params['host']}:{params['port']}/{params['dbname']}"


def cli(db: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAMDB_")}
    env["ENGRAMDB_EMBEDDER"] = "hash:64"
    return subprocess.run(
        [sys.executable, "-m", "engramdb.cli", "--db", db, *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        timeout=120,
        check=False,
    )


def cli_json(db: str, *args: str) -> Any:
    done = cli(db, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def sqlite_file(tmp_path: Path) -> Path:
    """Three scopes of memories with metadata, labels, an expiry and a second revision."""
    path = tmp_path / "memories.sqlite3"
    with Memory(SqliteStore(path), EMBEDDER) as memory:
        for scope, count in SCOPES.items():
            for i in range(count):
                memory.remember(
                    f"note {i} about {scope[-1]}: the deploy window and the lunch order {i % 3}",
                    scope=scope,
                    metadata={"n": i, "src": "chat"},
                    labels={"topic": ["deploy" if i % 2 else "lunch"]},
                    expires_at=datetime.now(UTC) + timedelta(days=30) if i == 1 else None,
                )
        first = memory.list(("acme", "user", "sam"), limit=1)[0]
        memory.update(first.id, text="note 0 about sam, revised: the deploy window moved")
    return path


def everything(memory: Memory) -> dict[tuple[str, ...], list[Any]]:
    return {scope: memory.list(scope, limit=100) for scope in SCOPES}


def recalls(memory: Memory) -> list[list[tuple[str, float]]]:
    return [
        [(hit.memory.id, round(hit.score, 6)) for hit in memory.recall(q, list(SCOPES), top_k=8)]
        for q in QUERIES
    ]


def test_copy_moves_every_scope_with_its_vectors_and_resumes(tmp_path: Path, pg_dsn: str) -> None:
    """Every record arrives exactly as it was (id, text, metadata, labels, times,
    revision, expiry), with its vector, so recall answers the same with no embedding;
    running the copy again copies nothing."""
    path = sqlite_file(tmp_path)
    url = url_of(pg_dsn)
    report = cli_json(str(path), "copy", url)
    assert report == {
        "from": str(path),
        "to": url,
        "scopes": 3,
        "copied": 35,
        "skipped": 0,
        "vectors": 35,
    }
    with (
        Memory(SqliteStore(path), EMBEDDER) as before,
        Memory(PostgresStore(pg_dsn), EMBEDDER) as after,
    ):
        assert everything(after) == everything(before)
        assert after.status().pending == 0
        assert recalls(after) == recalls(before)
    again = cli_json(str(path), "copy", url)
    assert (again["copied"], again["skipped"], again["vectors"]) == (0, 35, 0)


def test_copy_with_a_prefix_takes_only_those_scopes(tmp_path: Path, pg_dsn: str) -> None:
    path = sqlite_file(tmp_path)
    report = cli_json(str(path), "copy", url_of(pg_dsn), "--prefix", "acme/user/kim")
    assert (report["scopes"], report["copied"]) == (1, 10)
    with Memory(PostgresStore(pg_dsn), EMBEDDER) as after:
        assert [entry.scope for entry in after.list_scopes()] == [("acme", "user", "kim")]


def test_export_with_vectors_into_import_moves_one_scope(tmp_path: Path, pg_dsn: str) -> None:
    """The pipe of the two commands: the scope's texts and metadata arrive with their
    vectors (nothing pending) in PostgreSQL."""
    path = sqlite_file(tmp_path)
    exported = cli(str(path), "--scope", "acme/user/kim", "export", "--with-vectors")
    assert exported.returncode == 0, exported.stderr
    imported = cli(
        url_of(pg_dsn), "--scope", "acme/user/kim", "--json", "import", "-", stdin=exported.stdout
    )
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["memories"] == 10
    with (
        Memory(SqliteStore(path), EMBEDDER) as before,
        Memory(PostgresStore(pg_dsn), EMBEDDER) as after,
    ):
        scope = ("acme", "user", "kim")
        assert after.status().pending == 0
        pairs = lambda m: sorted((r.text, r.metadata) for r in m.list(scope, limit=100))  # noqa: E731
        assert pairs(after) == pairs(before)


def test_a_password_in_the_url_never_reaches_the_output() -> None:
    done = cli("postgresql://app:s3cret-pw@127.0.0.1:1/none", "status")
    assert done.returncode != 0
    assert "s3cret-pw" not in done.stdout + done.stderr
    assert "***" in done.stderr


def test_serve_keeps_one_tenant_in_one_postgresql_database(pg_dsn: str) -> None:
    """``engramdb serve --db postgresql://…`` serves one tenant from that database
    (through the async face); grants naming two tenants are refused, since tenants get
    separate storage."""
    import asyncio

    import pytest

    from engramdb import ConfigurationError
    from engramdb.http_api import parse_tokens
    from engramdb.server import Tenants
    from engramdb.settings import resolve

    settings = resolve(db=url_of(pg_dsn), environ={})
    grants = parse_tokens(json.dumps({"sam": ["acme", "user", "sam"]}))
    tenants = Tenants(settings, grants, EMBEDDER)

    async def remember_and_recall() -> list[str]:
        memory = tenants.memory(next(iter(grants.values())))
        await memory.remember("the deploy window is Tuesday", scope=("acme", "user", "sam"))
        hits = await memory.recall("deploy window", [("acme", "user", "sam")])
        await tenants.aclose()
        return [hit.memory.text for hit in hits]

    assert asyncio.run(remember_and_recall()) == ["the deploy window is Tuesday"]
    with Memory(PostgresStore(pg_dsn), EMBEDDER) as memory:
        assert len(memory.list(("acme", "user", "sam"))) == 1
    two = parse_tokens(json.dumps({"sam": ["acme", "user", "sam"], "bob": ["globex", "bob"]}))
    with pytest.raises(ConfigurationError, match="run a server per tenant"):
        Tenants(settings, two, EMBEDDER)
