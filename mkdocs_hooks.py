"""MkDocs hooks for the documentation site (``mkdocs.yml``): the changelog, which lives
at the repository root, is served as ``changelog.md``, and the docs' links to
``../CHANGELOG.md`` (right on GitHub) point at it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent


def on_files(files: Files, config: Any) -> Files:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "changelog.md", content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return markdown.replace("](../CHANGELOG.md)", "](changelog.md)")
