"""One version: ``engramdb.__version__`` is where it is written; every other place that
must name it is checked against it here (the wheel's own METADATA in ``tox -e wheel``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import engramdb

ROOT = Path(__file__).resolve().parents[2]


def _sources() -> Path:
    if not (ROOT / "pyproject.toml").exists():  # e.g. an installed wheel's tests
        pytest.skip("needs the source tree")
    return ROOT


def test_the_package_reads_its_version_from_init() -> None:
    """pyproject.toml declares the version dynamic, read by hatch from ``__init__.py``:
    no second copy to forget."""
    project = tomllib.loads((_sources() / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "core/engramdb/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", engramdb.__version__)


def test_the_changelog_names_this_version_first() -> None:
    """The first released section of CHANGELOG.md is this version (an ``Unreleased``
    section may sit above it), with upgrade notes."""
    text = (_sources() / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## (\d+\.\d+\.\d+)\b", text, re.MULTILINE)
    assert versions[0] == engramdb.__version__
    section = text.split(f"\n## {versions[0]}", 1)[1].split("\n## ", 1)[0]
    assert "### Upgrading from" in section


def test_the_worker_project_asks_for_this_version() -> None:
    """workers/pyproject.toml depends on this engramdb and vendors the wheel it builds."""
    worker = tomllib.loads((_sources() / "workers" / "pyproject.toml").read_text())
    assert f"engramdb>={engramdb.__version__}" in worker["project"]["dependencies"]
    wheel = worker["tool"]["uv"]["sources"]["engramdb"]["path"]
    assert wheel == f"../dist/engramdb-{engramdb.__version__}-py3-none-any.whl"


def test_the_docs_show_this_version_where_a_sample_names_one() -> None:
    """A sample answer or file name in the docs (``"engramdb": "x.y.z"`` in JSON,
    ``engramdb-x.y.z-py3-none-any.whl``) names this version, not the one it was written
    under; prose about older releases ("engramdb 0.1.0 left ...") is not a sample."""
    pattern = re.compile(r'"engramdb": ?"(\d+\.\d+\.\d+)"|engramdb-(\d+\.\d+\.\d+)-py3-none-any')
    pages = [_sources() / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = {
        f"{page.name}:{text[: match.start()].count(chr(10)) + 1}": match.group(1) or match.group(2)
        for page in pages
        for text in [page.read_text()]
        for match in pattern.finditer(text)
    }
    assert len(found) >= 3  # http.md's probes, workers.md's wheel
    assert {where: engramdb.__version__ for where in found} == found
