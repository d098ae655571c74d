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
from engramdb.config_file import holds_credential, safe_label
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
    assert status == 0 and json.loads(out) == [{"scope": ["acme", "user", "sam"], "count": 1}]

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


DEEP = 5000
MALFORMED: list[tuple[str, bytes, str]] = [
    # (case, the file's bytes, what the message says)
    ("5,000-deep array", b"db = " + b"[" * DEEP + b"]" * DEEP, "nests arrays or tables too deeply"),
    (
        "5,000-deep inline table",
        b"db = " + b"{a = " * DEEP + b"1" + b"}" * DEEP,
        "nests arrays or tables too deeply",
    ),
    ("5,000-deep dotted key", b"a" + b".a" * DEEP + b" = 1", "unknown key 'a'"),
    ("5,000-digit integer", b"db = " + b"9" * DEEP, "holds a number too long to read"),
    ("float out of range", b"db = 1e99999", "db must be a non-empty string"),
    ("integer for a text", b"scope = 7", "scope must be a non-empty string"),
    ("array for a text", b'embedder = ["hash:64"]', "embedder must be a non-empty string"),
    ("table for a text", b"[db]\npath = 'x'", "db must be a non-empty string"),
    ("date for a text", b"session = 2026-01-01", "session must be a non-empty string"),
    ("number for a switch", b"redact = 2", 'redact must be true (or "secrets"'),
    ("array for a switch", b"maintain = []", 'maintain must be true (or "on"'),
    ("string for allow_secrets", b'allow_secrets = "yes"', "allow_secrets must be true or false"),
    ("not UTF-8", b'scope = "caf\xe9"', "is not UTF-8 text (byte 12)"),
    ("NUL in a string", b'scope = "a\x00b"', "is not TOML"),
    ("binary garbage", bytes(range(256)), "is not UTF-8 text"),
    ("larger than 64 KiB", b"# padding\n" * 7000, "is larger than 64 KiB"),
]


@pytest.mark.parametrize(("case", "data", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_every_malformed_config_file_is_one_configuration_error(
    home: Path, capsys: pytest.CaptureFixture[str], case: str, data: bytes, message: str
) -> None:
    """Whatever shape the file has (nested 5,000 deep, a 5,000-digit number, a value of
    the wrong type, not UTF-8, too large), reading it is one ConfigurationError naming
    the file and the problem, and the CLI prints one line and exits 1: no traceback."""
    config = home / "bad.toml"
    config.write_bytes(data)
    with pytest.raises(ConfigurationError) as caught:
        resolve(config=config, environ={})
    assert message in str(caught.value) and str(config) in str(caught.value)
    status, out, err = run("--config", str(config), "status", capsys=capsys)
    assert status == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("engramdb: error: ") and message in err


def test_a_config_path_that_is_no_file_is_one_configuration_error(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory, a device that never ends, a path holding a NUL: one error line each."""
    (home / "folder.toml").mkdir()
    paths = {str(home / "folder.toml"): "cannot read the config file"}
    if os.path.exists("/dev/zero"):  # read until 64 KiB, not forever
        paths["/dev/zero"] = "is larger than 64 KiB"
    for path, message in paths.items():
        with pytest.raises(ConfigurationError, match=message):
            resolve(config=path, environ={})
        status, _, err = run("--config", path, "status", capsys=capsys)
        assert status == 1 and err.count("\n") == 1 and message in err and path in err
    with pytest.raises(ConfigurationError, match="is not a path"):
        resolve(config="a\0b.toml", environ={})


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() == 0, reason="root reads a file of mode 000 anyway"
)
def test_an_unreadable_config_file_is_one_configuration_error(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(home / "locked.toml", 'scope = "a"\n', mode=0o000)
    with pytest.raises(ConfigurationError, match="cannot read the config file"):
        resolve(config=config, environ={})


def test_a_config_file_with_a_byte_order_mark_reads_as_utf8(tmp_path: Path) -> None:
    """Editors on Windows start UTF-8 with a BOM: the file reads as without it."""
    config = tmp_path / "bom.toml"
    config.write_bytes(b'\xef\xbb\xbfscope = "acme/bom"\n')
    assert resolve(config=config, environ={}).scope == ("acme", "bom")


# (a value with a credential, the value as engramdb config shows it)
CREDENTIALS = [
    (
        "openai:text-embedding-3-small?x-api-key=s3cretvalue",
        "openai:text-embedding-3-small?x-api-key=***",
    ),
    ("tei:http://host:8080?access-token=s3cretvalue", "tei:http://host:8080?access-token=***"),
    ("tei:http://host:8080?accessToken=s3cretvalue", "tei:http://host:8080?accessToken=***"),
    ("cohere:rerank-v3.5?X-Api-Key=s3cretvalue", "cohere:rerank-v3.5?X-Api-Key=***"),
    ("tei:http://host?x%2Dapi%2Dkey=s3cretvalue", "tei:http://host?x%2Dapi%2Dkey=***"),
    (
        "tei:http://host?a=1&client_secret=s3cretvalue&b=2",
        "tei:http://host?a=1&client_secret=***&b=2",
    ),
    (
        "host=db.internal port=5432 user=app password=s3cretvalue dbname=mem",
        "host=db.internal port=5432 user=app password=*** dbname=mem",
    ),
    ("host=db PASSWORD = 's3cret \\' value' dbname=mem", "host=db PASSWORD = *** dbname=mem"),
    ("password=s3cretvalue", "password=***"),
    (
        "host=db sslpassword=s3cretvalue sslkey=/etc/k.pem",
        "host=db sslpassword=*** sslkey=/etc/k.pem",
    ),
    ("postgresql://app:s3cretvalue@db/mem", "postgresql://app:***@db/mem"),
    (
        "postgresql://app:s3cret@value@db/mem?sslmode=require",
        "postgresql://app:***@db/mem?sslmode=require",
    ),
    (
        "postgresql://db/mem?sslmode=require&sslpassword=s3cretvalue",
        "postgresql://db/mem?sslmode=require&sslpassword=***",
    ),
]
# values that only look like one: the rule is the option's last word (credential_name)
HARMLESS = [
    "openai-compatible:bge-m3?base_url=http://host/v1&api_key_env=MY_KEY",
    "tei:http://host:8080?token_limit=5&keyboard=us&max_tokens=3&key_id=k1",
    "host=db sslkey=/etc/key.pem passfile=/home/app/.pgpass dbname=mem",
    "postgresql://app@db/mem?sslmode=require",
    "acme/user/key=1",
    "tei:http://host?password=",
]


@pytest.mark.parametrize(("value", "shown"), CREDENTIALS, ids=[s for _, s in CREDENTIALS])
def test_a_credential_in_any_option_form_is_refused_and_never_printed(
    home: Path, capsys: pytest.CaptureFixture[str], value: str, shown: str
) -> None:
    """Dash- and underscore-named key/token/secret/password options in any case, in a
    query string (its name %-encoded too) or a libpq key=value string (quoted too), and a
    URL's password: the file is refused without showing the value; allowed in an
    owner-only file, ``engramdb config`` shows it masked."""
    assert holds_credential(value) and safe_label(value) == shown
    refused = write(home / "refused.toml", f"reranker = {json.dumps(value)}\n")
    with pytest.raises(ConfigurationError, match="reranker holds a credential") as caught:
        resolve(config=refused, environ={})
    assert "s3cret" not in str(caught.value)
    allowed = write(
        home / "allowed.toml",
        f"allow_secrets = true\nreranker = {json.dumps(value)}\nsession = {json.dumps(value)}\n",
        mode=0o600,
    )
    for json_option in ([], ["--json"]):
        status, out, err = run("--config", str(allowed), *json_option, "config", capsys=capsys)
        assert status == 0 and "s3cret" not in out + err
        assert shown in (
            out if not json_option else json.loads(out)["settings"]["reranker"]["value"]
        )


@pytest.mark.parametrize("value", HARMLESS)
def test_an_option_that_only_looks_like_a_credential_is_kept(tmp_path: Path, value: str) -> None:
    """``token_limit``, ``keyboard``, ``max_tokens``, ``key_id``, ``sslkey``, ``passfile``,
    ``api_key_env``, an empty ``password=``: accepted and shown as written."""
    assert not holds_credential(value) and safe_label(value) == value
    config = write(tmp_path / "config.toml", f"reranker = {json.dumps(value)}\n")
    assert resolve(config=config, environ={}).reranker == value


def test_a_libpq_string_in_engramdb_db_never_reaches_a_message(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key=value string is no SQLite file; the error naming it hides the password."""
    monkeypatch.setenv("ENGRAMDB_DB", "host=db password=s3cretvalue dbname=mem")
    status, _, err = run("list", capsys=capsys)
    assert status == 1 and "password=***" in err and "s3cret" not in err
