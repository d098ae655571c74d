"""The settings every face resolves: option, then environment, then default."""

from __future__ import annotations

from pathlib import Path

import pytest

from engramdb import ConfigurationError, HashEmbedder
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


def test_without_an_embedder_the_default_says_it_is_word_grade(tmp_path: Path) -> None:
    memory, notice = resolve(db=tmp_path / "m.db", environ={}).open()
    with memory:
        if isinstance(memory.embedder, HashEmbedder):
            assert notice is not None and "words, not meaning" in notice
        else:  # the local model is installed here
            assert notice is None
        memory.remember("Sam likes tea", ("default",))
        assert memory.status().items == 1


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
