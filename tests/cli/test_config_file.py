"""The config file: each setting resolves option -> environment -> file -> default; the
file is found at --config, ENGRAMDB_CONFIG, $XDG_CONFIG_HOME or ~/.config; a bad file is
one ConfigurationError naming the key and the fix; a credential is refused unless the
file allows secrets, and is never shown; ``engramdb config`` says where each setting
came from."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from engramdb import ConfigurationError
from engramdb.cli import main
from engramdb.settings import DEFAULT_DB, ENVIRONMENT, Settings, db_label, resolve

FULL = """\
db = "file.db"
embedder = "hash:32"
scope = "acme/file"
session = "file-session"
redact = "off"
maintain = false
reranker = "tei:http://localhost:8080"
"""


def write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def values(settings: Settings) -> dict[str, object]:
    return {name: getattr(settings, name) for name in ENVIRONMENT}


def test_each_setting_resolves_option_then_environment_then_file_then_default(
    tmp_path: Path,
) -> None:
    config = write(tmp_path / "config.toml", FULL)
    from_file = resolve(config=config, environ={})
    assert values(from_file) == {
        "db": str(tmp_path / "file.db"),
        "embedder": "hash:32",
        "scope": ("acme", "file"),
        "session": "file-session",
        "redact": False,
        "maintain": False,
        "reranker": "tei:http://localhost:8080",
    }
    assert from_file.sources == dict.fromkeys(ENVIRONMENT, "file")
    assert from_file.config_file == str(config)

    env = {
        "ENGRAMDB_DB": "env.db",
        "ENGRAMDB_EMBEDDER": "hash:16",
        "ENGRAMDB_SCOPE": "acme/env",
        "ENGRAMDB_SESSION": "env-session",
        "ENGRAMDB_REDACT": "secrets",
        "ENGRAMDB_MAINTAIN": "on",
        "ENGRAMDB_RERANKER": "tei:http://env:8080",
    }
    from_env = resolve(config=config, environ=env)
    assert values(from_env) == {
        "db": "env.db",
        "embedder": "hash:16",
        "scope": ("acme", "env"),
        "session": "env-session",
        "redact": True,
        "maintain": True,
        "reranker": "tei:http://env:8080",
    }
    assert from_env.sources == dict.fromkeys(ENVIRONMENT, "environment")

    options: dict[str, Any] = {
        "db": "option.db",
        "embedder": "hash:8",
        "scope": "acme/option",
        "session": "option-session",
        "redact": False,
        "maintain": True,
        "reranker": "tei:http://option:8080",
    }
    given = resolve(**options, config=config, environ=env)
    assert values(given) == {**options, "scope": ("acme", "option")}
    assert given.sources == dict.fromkeys(ENVIRONMENT, "option")

    nothing = resolve(environ={})
    assert values(nothing) == {
        "db": DEFAULT_DB,
        "embedder": None,
        "scope": ("default",),
        "session": None,
        "redact": True,
        "maintain": True,
        "reranker": None,
    }
    assert nothing.sources == dict.fromkeys(ENVIRONMENT, "default")
    assert nothing.config_file is None


def test_the_documented_example_is_a_valid_config_file(tmp_path: Path) -> None:
    """docs/cli.md's TOML block resolves as it says (nothing is opened or called)."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    example = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    settings = resolve(config=write(tmp_path / "config.toml", example), environ={})
    assert settings.db == str(Path("~/memory.sqlite3").expanduser())
    assert (settings.scope, settings.reranker) == (("acme", "user", "sam"), "cohere:rerank-v3.5")
    assert set(settings.sources.values()) == {"file"}


def test_an_empty_environment_variable_falls_through_to_the_file(tmp_path: Path) -> None:
    config = write(tmp_path / "config.toml", 'scope = "acme/file"\n')
    settings = resolve(config=config, environ={"ENGRAMDB_SCOPE": ""})
    assert (settings.scope, settings.sources["scope"]) == (("acme", "file"), "file")


def test_the_file_is_found_at_config_then_engramdb_config_then_xdg_then_home(
    tmp_path: Path,
) -> None:
    home = write(tmp_path / "home" / ".config" / "engramdb" / "config.toml", 'scope = "home"\n')
    xdg = write(tmp_path / "xdg" / "engramdb" / "config.toml", 'scope = "xdg"\n')
    named = write(tmp_path / "named.toml", 'scope = "named"\n')
    given = write(tmp_path / "given.toml", 'scope = "given"\n')
    env = {"HOME": str(tmp_path / "home")}
    assert resolve(environ=env).config_file == str(home)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    assert resolve(environ=env).config_file == str(xdg)
    env["ENGRAMDB_CONFIG"] = str(named)
    assert resolve(environ=env).scope == ("named",)
    assert resolve(config=given, environ=env).scope == ("given",)


def test_a_missing_default_file_is_fine_and_a_missing_named_one_is_an_error(
    tmp_path: Path,
) -> None:
    assert resolve(environ={"HOME": str(tmp_path)}).config_file is None
    missing = str(tmp_path / "missing.toml")
    with pytest.raises(ConfigurationError, match=r"missing.toml' \(from --config\) does not"):
        resolve(config=missing, environ={})
    with pytest.raises(ConfigurationError, match=r"\(from ENGRAMDB_CONFIG\) does not exist"):
        resolve(environ={"ENGRAMDB_CONFIG": missing})


def test_a_relative_db_is_the_files_folders_and_tilde_is_home(tmp_path: Path) -> None:
    config = write(tmp_path / "conf" / "config.toml", 'db = "data/m.db"\n')
    assert resolve(config=config, environ={}).db == str(tmp_path / "conf" / "data" / "m.db")
    write(config, 'db = "~/m.db"\n')
    assert resolve(config=config, environ={}).db == str(Path("~/m.db").expanduser())
    write(config, 'db = ":memory:"\n')
    assert resolve(config=config, environ={}).db == ":memory:"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('scoep = "a"\n', "unknown key 'scoep'; did you mean 'scope'?"),
        ("[engramdb]\ndb = 'x'\n", "unknown key 'engramdb'"),
        ("db = 3\n", 'db must be a non-empty string, e.g. db = "~/memory.sqlite3"'),
        ('scope = ""\n', "scope must be a non-empty string"),
        ("redact = 1\n", 'redact must be true (or "secrets", the default) or false'),
        ('maintain = "sometimes"\n', 'maintain must be true (or "on", the default)'),
        ('allow_secrets = "yes"\n', "allow_secrets must be true or false"),
        ("db = \n", "is not TOML"),
    ],
)
def test_a_bad_file_is_one_error_naming_the_file_the_key_and_the_fix(
    tmp_path: Path, text: str, message: str
) -> None:
    config = write(tmp_path / "config.toml", text)
    with pytest.raises(ConfigurationError) as caught:
        resolve(config=config, environ={})
    assert message in str(caught.value) and str(config) in str(caught.value)


SECRETS = [
    ("db", "postgresql://app:pw-s3cret-value@db.internal/memories"),
    ("db", "postgresql://db.internal/memories?password=pw-s3cret-value"),
    ("embedder", "openai:text-embedding-3-small?api_key=sk-s3cretvalue0123456789abcd"),
    ("reranker", "tei:http://host:8080?token=pw-s3cret-value"),
    ("session", "ghp_" + "s3cretvalue0123456789abcdefghijklmnopq"),  # assembled: no scanner hit
]


@pytest.mark.parametrize(("key", "value"), SECRETS)
def test_a_credential_in_the_file_is_refused_without_showing_it(
    tmp_path: Path, key: str, value: str
) -> None:
    config = write(tmp_path / "config.toml", f"{key} = {json.dumps(value)}\n")
    with pytest.raises(ConfigurationError) as caught:
        resolve(config=config, environ={})
    message = str(caught.value)
    assert f"{key} holds a credential" in message and "allow_secrets = true" in message
    assert "s3cret" not in message


def test_allow_secrets_takes_a_credential_from_a_file_only_its_owner_can_read(
    tmp_path: Path,
) -> None:
    url = "postgresql://app:pw-s3cret-value@db.internal/memories"
    text = f'allow_secrets = true\ndb = "{url}"\n'
    config = write(tmp_path / "config.toml", text, mode=0o600)
    assert resolve(config=config, environ={}).db == url
    if os.name == "posix":
        write(config, text, mode=0o644)
        with pytest.raises(ConfigurationError, match="other users can read it; run chmod 600"):
            resolve(config=config, environ={})


def test_a_variable_name_is_not_a_credential(tmp_path: Path) -> None:
    """api_key_env names the variable holding the key (docs/providers.md): allowed."""
    embedder = "openai-compatible:bge-m3?base_url=http://host/v1&api_key_env=MY_KEY"
    config = write(tmp_path / "config.toml", f'embedder = "{embedder}"\n')
    assert resolve(config=config, environ={}).embedder == embedder


def run(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ENGRAMDB_* variable, the working directory and the config home under tmp."""
    for name in [name for name in os.environ if name.startswith("ENGRAMDB_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_cli_reads_the_default_file_and_config_says_where_each_setting_came_from(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(
        home / "xdg" / "engramdb" / "config.toml",
        'db = "memories.db"\nembedder = "hash:64"\nscope = "acme/user/sam"\n',
    )
    monkeypatch.setenv("ENGRAMDB_SESSION", "s9")
    assert run("remember", "Sam is vegetarian", capsys=capsys)[0] == 0
    assert (home / "xdg" / "engramdb" / "memories.db").exists()
    status, out, _ = run("--json", "scopes", capsys=capsys)
    assert status == 0 and json.loads(out) == [{"scope": ["acme", "user", "sam"], "items": 1}]

    status, out, _ = run("config", "--scope", "acme/other", capsys=capsys)
    assert status == 0
    assert out.splitlines() == [
        f"config file: {config}",
        f"         db: {home / 'xdg' / 'engramdb' / 'memories.db'}  (file)",
        "   embedder: hash:64  (file)",
        "      scope: acme/other  (option)",
        "    session: s9  (environment ENGRAMDB_SESSION)",
        "     redact: secrets  (default)",
        "   maintain: on  (default)",
        "   reranker: none  (default)",
    ]
    status, out, _ = run("config", "--json", capsys=capsys)
    report = json.loads(out)
    assert report["config_file"] == str(config)
    assert report["settings"]["scope"] == {"value": ["acme", "user", "sam"], "from": "file"}
    assert report["settings"]["redact"] == {"value": True, "from": "default"}


def test_the_config_option_goes_before_or_after_the_command(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(home / "other.toml", 'scope = "acme/other"\n')
    for args in (["--config", str(config), "config"], ["config", "--config", str(config)]):
        status, out, _ = run(*args, "--json", capsys=capsys)
        assert status == 0 and json.loads(out)["settings"]["scope"]["value"] == ["acme", "other"]
    status, _, err = run("--config", str(home / "missing.toml"), "status", capsys=capsys)
    assert status == 1 and "missing.toml' (from --config) does not exist" in err


def test_config_and_errors_never_show_a_credential(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Allowed in an owner-only file, the password is in use but printed as ***."""
    url = "postgresql://app:pw-s3cret-value@db.internal/memories?sslpassword=pw-s3cret-value"
    config = write(
        home / "secret.toml",
        f'allow_secrets = true\ndb = "{url}"\nembedder = "hash:64"\n',
        mode=0o600,
    )
    status, out, err = run("--config", str(config), "config", capsys=capsys)
    assert status == 0 and "s3cret" not in out + err
    assert "db: postgresql://app:***@db.internal/memories?sslpassword=***  (file)" in out
    status, out, err = run("--config", str(config), "--json", "config", capsys=capsys)
    assert status == 0 and "s3cret" not in out + err
    refused = write(home / "refused.toml", f'db = "{url}"\n')
    status, out, err = run("--config", str(refused), "status", capsys=capsys)
    assert status == 1 and "db holds a credential" in err and "s3cret" not in out + err


def test_status_and_messages_show_a_database_url_without_its_credentials() -> None:
    """db_label (status, doctor, every message naming the database) hides a URL's
    password and its password options."""
    url = "postgresql://app:pw-s3cret@db.internal/memories?sslmode=require&password=pw-s3cret"
    assert db_label(url) == "postgresql://app:***@db.internal/memories?sslmode=require&password=***"


def test_a_bad_config_file_does_not_stop_completion(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(home / "bad.toml", "nonsense = 1\n")
    status, out, _ = run("--config", str(config), "completion", "bash", capsys=capsys)
    assert status == 0 and "complete -o default -F _engramdb engramdb" in out


def test_the_status_of_a_database_named_by_the_file(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """status reports the file's database and scope."""
    config = write(home / "c.toml", 'db = "c.db"\nscope = "acme/c"\nembedder = "hash:64"\n')
    assert run("--config", str(config), "remember", "a fact", capsys=capsys)[0] == 0
    status, out, _ = run("--config", str(config), "--json", "status", capsys=capsys)
    report = json.loads(out)
    assert status == 0
    assert (report["db"], report["scope"], report["items"]) == (
        str(home / "c.db"),
        ["acme", "c"],
        1,
    )
