"""The Worker's upload without the static table fits the free plan (workers/tools/upload.py,
on the source tree as the wheel packs it; ``tox -e wheel`` runs it on the built wheel)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "workers" / "tools" / "upload.py"
_spec = importlib.util.spec_from_file_location("worker_upload", TOOL)
assert _spec is not None and _spec.loader is not None
upload = importlib.util.module_from_spec(_spec)
sys.modules["worker_upload"] = upload
_spec.loader.exec_module(upload)


def test_wrangler_jsonc_parses_with_comments_and_slashes_inside_strings() -> None:
    text = '{\n  // a comment\n  "url": "https://example.com/a", // another\n  "n": [1, 2]\n}'
    assert upload.jsonc(text) == {"url": "https://example.com/a", "n": [1, 2]}
    escaped = '{"quote": "a \\" // not a comment", "slash": "\\\\"} // one'
    assert upload.jsonc(escaped) == {"quote": 'a " // not a comment', "slash": "\\"}


def test_the_shipped_config_leaves_the_static_table_and_bytecode_out() -> None:
    patterns = upload.excluded()
    assert "**/*.pyc" in patterns
    names = upload.upload_files(None, patterns)
    assert not any(name.endswith((".bin", ".pyc")) for name in names)
    assert "python_modules/engramdb/__init__.py" in names
    assert "src/entry.py" in names
    everything = upload.upload_files(None, upload.DEFAULT_EXCLUDE)
    assert "python_modules/engramdb/data/static-minilm-256.bin" in everything


def test_the_upload_fits_the_free_plan_only_without_the_table() -> None:
    """About 0.4 MB of gzip without the table; about 7 MB with it (wrangler's dry run
    said 7,074 KiB on the Worker as shipped before)."""
    raw, packed = upload.upload_size(None)
    assert packed <= upload.FREE_PLAN_GZIP, packed
    assert packed < raw
    _, with_table = upload.upload_size(None, upload.DEFAULT_EXCLUDE)
    assert with_table > 2 * upload.FREE_PLAN_GZIP


@pytest.mark.parametrize(
    ("name", "pattern", "matched"),
    [
        ("engramdb/x/y.pyc", "**/*.pyc", True),
        ("y.pyc", "**/*.pyc", True),
        ("engramdb/data/static-minilm-256.bin", "engramdb/data/static-*.bin", True),
        ("engramdb/data/other.bin", "engramdb/data/static-*.bin", False),
        ("engramdb/data/static.py", "**/*.pyc", False),
    ],
)
def test_patterns_match_as_wranglers_globs_do(name: str, pattern: str, matched: bool) -> None:
    assert upload._matches(name, (pattern,)) is matched
