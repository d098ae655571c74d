"""The settings every face resolves: option, then environment, then default."""

from __future__ import annotations

from pathlib import Path

import pytest

from engramdb import ConfigurationError, StaticEmbedder
from engramdb.settings import DEFAULT_DB, format_scope, parse_scope, resolve


def test_options_win_over_the_environment_which_wins_over_defaults(tmp_path: Path) -> None:
    env = {"ENGRAMDB_DB": "env.db", "ENGRAMDB_SCOPE": "acme/env", "ENGRAMDB_SESSION": "s9"}
    assert resolve(environ={}).db == DEFAULT_DB
    assert resolve(environ={}).scope == ("default",)
    from_env = resolve(environ=env)
    assert (from_env.db, from_env.scope, from_env.session) == ("env.db", ("acme", "env"), "s9")
    given = resolve(db=tmp_path / "x.db", scope="a/b", session="s1", environ=env)
    assert (given.db, given.scope, given.session) == (str(tmp_path / "x.db"), ("a", "b"), "s1")


@pytest.mark.parametrize("bad", ["", "  ", "a//b", "/"])
def test_a_bad_scope_is_one_clear_error(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="acme/user/sam"):
        parse_scope(bad)


def test_scopes_round_trip_through_their_text() -> None:
    assert format_scope(parse_scope("/acme/user/sam/")) == "acme/user/sam"


def test_without_an_embedder_the_default_is_the_shipped_static_table(tmp_path: Path) -> None:
    """No option, no environment: the static table recalls by meaning, silently."""
    memory = resolve(db=tmp_path / "m.db", environ={}).open()
    with memory:
        assert isinstance(memory.embedder, StaticEmbedder) and memory.embedder.semantic
        assert memory.embedder.space.id.startswith("static/minilm-l6-256@256#")
        memory.remember("Sam likes tea", ("default",))
        assert memory.status().items == 1


def test_a_database_of_the_old_default_switches_through_pending_and_reindex(
    tmp_path: Path,
) -> None:
    """A database made with hash:256 (earlier versions' default): opened with the new
    default its memories are pending and recall says partial until reindex embeds them."""
    path = tmp_path / "old.db"
    scope = ("default",)
    with resolve(db=path, embedder="hash:256", environ={}).open() as old:
        old.remember("Sam is vegetarian and loves mushroom risotto", scope)
        old.remember("Sam prefers meetings after 10am", scope)
    memory = resolve(db=path, environ={}).open()
    with memory:
        status = memory.status()
        assert (status.pending, status.semantic) == (2, "pending")
        assert status.embedded == {"hash/bow@256": 2}
        assert memory.recall("a vegetarian dinner", scopes=[scope]).status == "partial"
        assert memory.reindex() == 2
        status = memory.status()
        assert (status.pending, status.semantic) == (0, "ready")
        assert status.embedded[memory.embedder.space.id] == 2
        assert memory.recall("a vegetarian dinner", scopes=[scope]).status == "used"


def test_a_postgresql_url_is_kept_whole_and_shown_without_its_password() -> None:
    """A URL is not a path (``Path`` would fold its ``//``); messages never show its
    password."""
    from engramdb.settings import db_label, is_postgres

    url = "postgresql://app:s3cret@db.internal:5432/memories?sslmode=require"
    settings = resolve(db=url, environ={})
    assert settings.db == url and is_postgres(settings.db)
    assert settings.db_label == "postgresql://app:***@db.internal:5432/memories?sslmode=require"
    assert db_label("postgres://db.internal/memories") == "postgres://db.internal/memories"
    assert not is_postgres("memories.sqlite3")


def test_a_libpq_keyword_string_names_postgresql_not_a_file() -> None:
    """``host=... dbname=...`` (what ``psql`` takes) is a PostgreSQL database, kept
    whole and shown without its password; it never becomes a SQLite file of that name.
    A path that merely holds ``=`` stays a path."""
    from engramdb.settings import db_label, is_postgres

    conninfo = "host=127.0.0.1 port=5432 user=app password=s3cret dbname=memories"
    settings = resolve(db=conninfo, environ={})
    assert settings.db == conninfo and is_postgres(settings.db)
    assert "s3cret" not in db_label(conninfo)
    assert is_postgres("dbname=memories")
    assert is_postgres("host=db port=5432 password='two words' dbname=memories")
    assert not is_postgres("notes=2026.sqlite3")
    assert not is_postgres("data/host=a.db")
    assert not is_postgres("host=a my notes.db")


def test_the_reranker_setting_comes_from_the_option_then_engramdb_reranker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No reranker by default; ``ENGRAMDB_RERANKER`` names one, the option wins; the
    memory ``open()`` builds carries it."""
    monkeypatch.setenv("COHERE_API_KEY", "engramdb-FAKE-KEY")
    assert resolve(environ={}).reranker is None
    db = str(tmp_path / "r.db")
    plain = resolve(db=db, environ={}).open()
    assert plain.reranker is None
    plain.close()
    env = {"ENGRAMDB_RERANKER": "cohere:rerank-v3.5"}
    settings = resolve(db=db, environ=env)
    assert settings.reranker == "cohere:rerank-v3.5"
    memory = settings.open()
    assert memory.reranker is not None and memory.reranker.id == "cohere/rerank-v3.5"
    memory.close()
    assert resolve(reranker="voyage:rerank-2", environ=env).reranker == "voyage:rerank-2"


def test_an_embedder_that_cannot_be_built_opens_no_database(tmp_path: Path) -> None:
    """The embedder is built before the store: a bad one is one ``ConfigurationError``,
    with no database file made and no connection left open."""
    db = tmp_path / "never.db"
    with pytest.raises(ConfigurationError):
        resolve(db=db, embedder="nope:model", environ={}).open()
    assert not db.exists()


def test_a_memory_that_cannot_be_built_closes_its_store(tmp_path: Path) -> None:
    """``on_store`` closes the store it opened when building on it fails."""
    from datetime import UTC, datetime

    from engramdb import StoreError
    from engramdb.settings import on_store
    from engramdb.sqlite import SqliteStore
    from engramdb.store import GetItems

    opened: list[SqliteStore] = []

    def build(store: SqliteStore) -> None:
        opened.append(store)
        raise RuntimeError("the build fails")

    with pytest.raises(RuntimeError, match="the build fails"):
        on_store(str(tmp_path / "m.db"), build)
    with pytest.raises(StoreError, match="is closed"):
        opened[0].batch([GetItems(("any",), datetime.now(UTC))])
